//! The agent's loop: register; hold the push socket the server names and
//! claim when nudged (with a slow safety poll), or claim with a long poll
//! while there is no socket; run up to
//! `concurrency` jobs at once; register again when the session token is about
//! to expire or a 401 comes back; stop claiming on shutdown, on
//! `session-exhausted`, or after `--once` / `--max-jobs`; then wait for the
//! running jobs (which a non-draining shutdown has told to stop).

use std::path::PathBuf;
use std::time::Duration;

use baton_api::runners::{RegisterRequest, RegisterResponse, MAX_CLAIM_WAIT_S};
use baton_client::backoff::Backoff;
use baton_client::error::ClientError;
use baton_client::Client;
use chrono::Utc;
use tokio::sync::watch;
use tokio::task::JoinSet;
use uuid::Uuid;

use std::sync::Arc;

use crate::job::{run_job, JobSettings};
use crate::push::{Endpoint, Nudges};
use crate::{JobEnd, Shutdown};

#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub api: String,
    pub registration_token: String,
    pub labels: Vec<String>,
    /// The tools it advertises (`name@version`, `runners::tools`).
    pub tools: Vec<String>,
    pub name: Option<String>,
    pub work_dir: PathBuf,
    /// Stop claiming after this many jobs (`--once` is 1).
    pub max_jobs: Option<u64>,
    pub concurrency: usize,
    /// Long-poll duration of a claim, at most 20 s.
    pub claim_wait_s: u64,
    pub kill_grace: Duration,
    pub json_logs: bool,
    pub keep_work_dirs: bool,
    /// The most a job's stored log may weigh.
    pub log_cap_bytes: u64,
    /// Push (see [`PushSettings`]).
    pub push: PushSettings,
    /// Where actions come from and what runs them.
    pub actions: crate::actions::ActionSettings,
}

/// How the agent uses the server's push socket.
#[derive(Debug, Clone)]
pub struct PushSettings {
    /// Hold the socket when the server offers one (`--no-push`: never).
    pub enabled: bool,
    /// Connect here instead of the URL the server names.
    pub url: Option<String>,
    /// Claim this often anyway while connected (default: the server's).
    pub safety_poll: Option<Duration>,
    /// The keep-alive period (API Gateway closes a socket idle for 10 min).
    pub ping_every: Duration,
}

impl Default for PushSettings {
    fn default() -> Self {
        Self { enabled: true, url: None, safety_poll: None, ping_every: Duration::from_secs(540) }
    }
}

/// Without a figure from the server or the operator, a connected runner
/// claims this often in case a nudge was lost.
const DEFAULT_SAFETY_POLL: Duration = Duration::from_secs(300);

/// How long a starting agent waits for its push socket before it claims.
const PUSH_CONNECT_GRACE: Duration = Duration::from_secs(3);

/// Why the agent stopped claiming, and what its jobs came to.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    pub claimed: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub lost: u64,
    pub abandoned: u64,
    pub unreported: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("cannot register: {0}")]
    Registration(ClientError),
    #[error("cannot claim: {0}")]
    Claim(ClientError),
}

struct Session {
    response: RegisterResponse,
    /// Register again from here on: 80 % into the token's life, so that a
    /// renewal has time to retry before the token expires.
    renew_at: chrono::DateTime<Utc>,
}

impl Session {
    fn new(response: RegisterResponse) -> Self {
        let now = Utc::now();
        let life = (response.session_expires_at - now).max(chrono::Duration::zero());
        Self { renew_at: now + life * 4 / 5, response }
    }

    fn needs_renewal(&self) -> bool {
        self.renew_at <= Utc::now()
    }
}

/// Runs the agent until it stops claiming and its jobs ended.
pub async fn run(config: AgentConfig, mut shutdown: watch::Receiver<Shutdown>) -> Result<Summary, AgentError> {
    let client = Client::new(&config.api).map_err(AgentError::Registration)?;
    let settings = JobSettings {
        client: client.clone(),
        work_root: config.work_dir.clone(),
        kill_grace: config.kill_grace,
        json_output: config.json_logs,
        keep_work_dir: config.keep_work_dirs,
        logs: crate::logs::LogSettings {
            cap_bytes: config.log_cap_bytes,
            queue_bytes: config.log_cap_bytes,
            ..Default::default()
        },
        nudges: Arc::new(Nudges::default()),
        actions: config.actions.clone(),
    };
    let nudges = settings.nudges.clone();
    let (endpoint_tx, endpoint_rx) = watch::channel(None);
    let socket = config.push.enabled.then(|| {
        tokio::spawn(crate::push::hold(endpoint_rx, nudges.clone(), config.push.ping_every, shutdown.clone()))
    });
    let mut summary = Summary::default();
    let mut jobs: JoinSet<JobEnd> = JoinSet::new();
    let mut errors = Backoff::for_errors();
    let Some(mut session) = register(&client, &config, &mut shutdown, &mut errors).await? else {
        return Ok(summary);
    };
    endpoint_tx.send_replace(push_endpoint(&config.push, &session.response));
    if endpoint_tx.borrow().is_some() {
        // The first claim would otherwise be a long poll held open (and
        // billed) while the socket opens beside it.
        nudges.connected_within(PUSH_CONNECT_GRACE).await;
    }
    let mut idle = idle_backoff(&session.response);
    let mut failure = None;
    // The id of the claim being tried (kept while its tries fail transiently).
    let mut claim_request: Option<Uuid> = None;

    loop {
        while let Some(done) = jobs.try_join_next() {
            tally(&mut summary, done);
        }
        if *shutdown.borrow() != Shutdown::Running {
            tracing::info!("shutting down: no more claims");
            break;
        }
        if config.max_jobs.is_some_and(|max| summary.claimed >= max) {
            tracing::info!(claimed = summary.claimed, "job limit reached: no more claims");
            break;
        }
        if jobs.len() >= config.concurrency.max(1) {
            tokio::select! {
                Some(done) = jobs.join_next() => tally(&mut summary, done),
                _ = shutdown.wait_for(|s| *s != Shutdown::Running) => {}
            }
            continue;
        }
        if session.needs_renewal() {
            tracing::info!("session token about to expire: registering again");
            match register(&client, &config, &mut shutdown, &mut errors).await {
                Ok(Some(renewed)) => {
                    session = renewed;
                    endpoint_tx.send_replace(push_endpoint(&config.push, &session.response));
                }
                Ok(None) => break,
                Err(err) => {
                    failure = Some(err);
                    break;
                }
            }
        }
        let token = session.response.session_token.clone();
        // One claim, however many tries it takes: a retry after a transient
        // failure carries the same id, so a claim that was applied but whose
        // answer was lost brings its job instead of stranding it.
        // A kept id is a retry: its first try failed in a way that may have
        // been applied, and may even still be running.
        let retry = claim_request.is_some();
        let request_id = *claim_request.get_or_insert_with(Uuid::now_v7);
        // A drain lets a claim in flight finish (and runs what it brings):
        // dropping it could leave a job leased to nobody until its lease
        // expires. Abandoning does not wait.
        // With the socket open, nudges replace the long poll: a claim that
        // finds nothing answers at once, and costs no held invocation.
        let pushed = nudges.is_connected();
        let wait_s = if pushed { 0 } else { config.claim_wait_s.min(MAX_CLAIM_WAIT_S) };
        let answer = tokio::select! {
            answer = client.claim(&token, wait_s, request_id, retry) => answer,
            _ = shutdown.wait_for(|s| *s == Shutdown::Abandon) => continue,
        };
        if !matches!(&answer, Err(err) if err.is_transient()) {
            claim_request = None;
        }
        let delay = match answer {
            Ok(Some(claim)) => {
                errors.reset();
                idle.reset();
                summary.claimed += 1;
                tracing::info!(job = %claim.job.work.key, execution = %claim.job_execution_id, run = %claim.run_id,
                    epoch = claim.lease.epoch, "job claimed");
                let interval = Duration::from_secs(session.response.heartbeat_interval_s.max(1));
                jobs.spawn(run_job(settings.clone(), claim, interval, shutdown.clone()));
                Duration::ZERO
            }
            Ok(None) if pushed => {
                errors.reset();
                idle.reset();
                let safety = config
                    .push
                    .safety_poll
                    .or(session.response.safety_poll_s.map(Duration::from_secs))
                    .unwrap_or(DEFAULT_SAFETY_POLL);
                tokio::select! {
                    _ = nudges.work() => {}
                    _ = nudges.disconnected() => {}
                    _ = tokio::time::sleep(safety) => tracing::debug!("safety poll"),
                    _ = shutdown.wait_for(|s| *s != Shutdown::Running) => {}
                }
                Duration::ZERO
            }
            Ok(None) => {
                errors.reset();
                idle.next_delay()
            }
            Err(ClientError::Unauthenticated(message)) => {
                tracing::info!(%message, "session token refused (expired or revoked): registering again");
                tokio::time::sleep(errors.next_delay()).await;
                match register(&client, &config, &mut shutdown, &mut errors).await {
                    Ok(Some(renewed)) => {
                        idle = idle_backoff(&renewed.response);
                        endpoint_tx.send_replace(push_endpoint(&config.push, &renewed.response));
                        session = renewed;
                        Duration::ZERO
                    }
                    Ok(None) => break,
                    Err(err) => {
                        failure = Some(err);
                        break;
                    }
                }
            }
            Err(ClientError::SessionExhausted(message)) => {
                tracing::warn!(%message, "session exhausted (its registration token caps the claims): no more claims");
                break;
            }
            Err(err) if err.is_transient() => {
                // The failed claim may have been applied, its job now leased
                // to us and waiting for a first heartbeat: its retry (same
                // request id) must come well within the lease's grace, so the
                // pause is capped at the heartbeat interval (the grace is
                // never shorter than that).
                let heartbeat = Duration::from_secs(session.response.heartbeat_interval_s.max(1));
                let delay = errors.next_delay().min(heartbeat);
                tracing::warn!(error = %err, retry_in_ms = delay.as_millis() as u64, "claim failed");
                delay
            }
            Err(err) => {
                tracing::error!(error = %err, "claim refused: check --api and the runner's labels");
                failure = Some(AgentError::Claim(err));
                break;
            }
        };
        if !delay.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = shutdown.wait_for(|s| *s != Shutdown::Running) => {}
            }
        }
    }

    if !jobs.is_empty() {
        let draining = *shutdown.borrow() != Shutdown::Abandon;
        tracing::info!(
            running = jobs.len(),
            "{}",
            if draining { "waiting for the running jobs" } else { "stopping the running jobs" }
        );
    }
    while let Some(done) = jobs.join_next().await {
        tally(&mut summary, done);
    }
    if let Some(socket) = socket {
        // The socket task ends on shutdown; it ends here otherwise.
        socket.abort();
    }
    tracing::info!(
        claimed = summary.claimed,
        succeeded = summary.succeeded,
        failed = summary.failed,
        lost = summary.lost,
        abandoned = summary.abandoned,
        unreported = summary.unreported,
        "runner stopped"
    );
    match failure {
        Some(err) => Err(err),
        None => Ok(summary),
    }
}

/// Where the session's push socket is, unless push is off or not offered.
fn push_endpoint(push: &PushSettings, session: &RegisterResponse) -> Option<Endpoint> {
    if !push.enabled {
        return None;
    }
    let url = push.url.clone().or_else(|| session.push_url.clone())?;
    Some(Endpoint { url, session_token: session.session_token.clone() })
}

/// Idle polls back off from 250 ms up to the server's suggested interval.
fn idle_backoff(session: &RegisterResponse) -> Backoff {
    Backoff::new(Duration::from_millis(250), Duration::from_secs(session.poll_interval_s.max(1)))
}

/// Registers, retrying transient failures until shutdown (`Ok(None)`).
async fn register(
    client: &Client,
    config: &AgentConfig,
    shutdown: &mut watch::Receiver<Shutdown>,
    errors: &mut Backoff,
) -> Result<Option<Session>, AgentError> {
    // One id for every try of this registration: a try whose answer was
    // lost made the session, and the retry must get it back.
    let body = RegisterRequest {
        labels: config.labels.clone(),
        tools: config.tools.clone(),
        name: config.name.clone(),
        request_id: Some(uuid::Uuid::now_v7()),
    };
    loop {
        let answer = tokio::select! {
            answer = client.register(&config.registration_token, &body) => answer,
            _ = shutdown.wait_for(|s| *s != Shutdown::Running) => return Ok(None),
        };
        match answer {
            Ok(response) => {
                tracing::info!(session = %response.session_id, workspace = %response.workspace_id,
                    labels = %response.labels.join(","), heartbeat_interval_s = response.heartbeat_interval_s,
                    expires_at = %response.session_expires_at, "registered");
                return Ok(Some(Session::new(response)));
            }
            Err(err) if err.is_transient() => {
                let delay = errors.next_delay();
                tracing::warn!(error = %err, retry_in_ms = delay.as_millis() as u64, "registration failed");
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = shutdown.wait_for(|s| *s != Shutdown::Running) => return Ok(None),
                }
            }
            Err(err) => {
                tracing::error!(error = %err, "registration refused: check the registration token and the labels");
                return Err(AgentError::Registration(err));
            }
        }
    }
}

fn tally(summary: &mut Summary, done: Result<JobEnd, tokio::task::JoinError>) {
    match done {
        Ok(JobEnd::Reported(baton_api::facts::JobOutcome::Succeeded)) => summary.succeeded += 1,
        Ok(JobEnd::Reported(baton_api::facts::JobOutcome::Failed)) => summary.failed += 1,
        Ok(JobEnd::LeaseLost) => summary.lost += 1,
        Ok(JobEnd::Abandoned) => summary.abandoned += 1,
        Ok(JobEnd::ReportFailed(_)) => summary.unreported += 1,
        Err(err) => {
            tracing::error!(error = %err, "a job task failed");
            summary.unreported += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registered(expires_in: chrono::Duration) -> RegisterResponse {
        RegisterResponse {
            session_id: uuid::Uuid::nil(),
            session_token: "bst_x".into(),
            session_expires_at: Utc::now() + expires_in,
            workspace_id: "ws1".into(),
            labels: vec!["linux".into()],
            max_claims: None,
            heartbeat_interval_s: 15,
            poll_interval_s: 5,
            push_url: Some("wss://push.example/prod".into()),
            safety_poll_s: Some(300),
        }
    }

    #[test]
    fn a_session_is_renewed_well_before_its_token_expires() {
        let session = Session::new(registered(chrono::Duration::seconds(3600)));
        assert!(!session.needs_renewal());
        let margin = session.response.session_expires_at - session.renew_at;
        assert!(margin >= chrono::Duration::seconds(700), "renewed 80 % into its life: {margin}");
    }

    #[test]
    fn a_short_or_past_session_is_renewed_at_once_without_looping_on_negative_time() {
        assert!(Session::new(registered(chrono::Duration::seconds(-5))).needs_renewal());
        let short = Session::new(registered(chrono::Duration::seconds(60)));
        assert!(!short.needs_renewal(), "a 60 s token is used for 48 s, not renewed on every poll");
    }

    #[test]
    fn the_socket_is_the_servers_unless_push_is_off_or_the_operator_names_another() {
        let session = registered(chrono::Duration::seconds(3600));
        let endpoint = push_endpoint(&PushSettings::default(), &session).expect("offered and on");
        assert_eq!((endpoint.url.as_str(), endpoint.session_token.as_str()), ("wss://push.example/prod", "bst_x"));
        let off = PushSettings { enabled: false, ..PushSettings::default() };
        assert_eq!(push_endpoint(&off, &session), None);
        let other = PushSettings { url: Some("ws://127.0.0.1:1/_push".into()), ..PushSettings::default() };
        assert_eq!(push_endpoint(&other, &session).map(|e| e.url), Some("ws://127.0.0.1:1/_push".into()));
        let not_offered = RegisterResponse { push_url: None, ..session };
        assert_eq!(push_endpoint(&PushSettings::default(), &not_offered), None);
    }

    #[test]
    fn idle_polls_back_off_up_to_the_servers_poll_interval() {
        let mut idle = idle_backoff(&registered(chrono::Duration::seconds(3600)));
        let delays: Vec<Duration> = (0..10).map(|_| idle.next_delay()).collect();
        assert!(delays[0] <= Duration::from_millis(250));
        assert!(delays.iter().all(|d| *d <= Duration::from_secs(5)), "{delays:?}");
        assert!(delays[9] >= Duration::from_millis(2500), "{delays:?}");
    }
}
