//! The local reference provisioner (behaviour.md §15): its instances are
//! `baton-runner` processes on this machine. It long-polls demand, reserves
//! what queued jobs need ([`decide::instances_to_reserve`]), starts a runner
//! per reservation with its ephemeral token, reports each instance's states,
//! stops the instances Baton wants gone, and on its own shutdown stops them
//! all. The decisions are `decide` and `ledger`'s; this is the shell that
//! does the I/O.
//!
//! Run one local provisioner per provisioner token: instances Baton lists
//! that this process did not start are taken for an earlier run's (which
//! died, and its runners with it) and reported `terminated`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use baton_api::provisioners::{Demand, InstanceState, LabelSetDemand, ReserveRequest, MAX_DEMAND_WAIT_S};
use baton_client::backoff::Backoff;
use baton_client::error::ClientError;
use baton_client::provisioners::{next_report_size, report_batches, ProvisionerClient};
use baton_client::Client;
use chrono::Utc;
use tokio::sync::{mpsc, watch};
use uuid::Uuid;

use crate::provisioner::child::{self, ChildEvent, ChildSpec, Running};
use crate::provisioner::decide::{exit_state, headroom, instances_to_reserve};
use crate::provisioner::ledger::{Ledger, StopCause};

#[derive(Debug, Clone)]
pub struct LocalConfig {
    pub api: String,
    /// The provisioner token (`bpt_…`).
    pub token: String,
    /// The `baton-runner` executable each instance runs.
    pub runner_bin: PathBuf,
    /// Each instance works in `<work_dir>/<provider_runner_id>`.
    pub work_dir: PathBuf,
    /// More arguments for every runner (after the ones this process sets).
    pub runner_args: Vec<String>,
    /// Between SIGTERM and SIGKILL when an instance is stopped; longer than
    /// the runner's own `--kill-grace-s` (10 s), so that a stopped runner
    /// can stop its steps before it is killed.
    pub kill_grace: Duration,
    /// How often the instances Baton wants gone are read.
    pub intent_poll: Duration,
    /// At most this many live instances on this machine (`None`: only the
    /// provisioner's `max_instances`, which the server enforces).
    pub max_instances: Option<u32>,
    /// Reservation expiry asked for (`None`: the server's default, 900 s;
    /// `baton-provisioner local` asks for 60 s: see its `--reservation-expiry-s`).
    pub reservation_expiry_s: Option<u32>,
}

impl LocalConfig {
    /// A configuration with the defaults of `baton-provisioner local`.
    pub fn new(api: &str, token: &str, runner_bin: PathBuf, work_dir: PathBuf) -> Self {
        Self {
            api: api.to_string(),
            token: token.to_string(),
            runner_bin,
            work_dir,
            runner_args: Vec::new(),
            kill_grace: Duration::from_secs(20),
            intent_poll: Duration::from_secs(2),
            max_instances: None,
            reservation_expiry_s: Some(60),
        }
    }
}

/// What the provisioner did, for its last log line (and tests).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    pub reserved: u64,
    pub started: u64,
    pub terminated: u64,
    pub failed: u64,
    /// Stopped because Baton asked (a terminate intent).
    pub stopped_on_intent: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("cannot start: {0}")]
    Start(ClientError),
    /// 401: the provisioner was removed or its token revoked.
    #[error("the API no longer takes this provisioner token (removed or revoked?): {0}")]
    Revoked(ClientError),
    #[error("demand cannot be read: {0}")]
    Demand(ClientError),
}

/// After a shutdown asked the children to stop, how much longer than the
/// kill grace to wait for their exits before reporting them anyway (they
/// have been sent SIGKILL by then).
const EXIT_SLACK: Duration = Duration::from_secs(5);

/// How many times one reserve is sent (with its `request_id`) in a row;
/// the next demand answer sends it again, with the same id, until it is
/// answered.
const RESERVE_TRIES: u32 = 4;

/// How long the last report (the instances' ends) may retry at shutdown.
const LAST_REPORT_BUDGET: Duration = Duration::from_secs(10);

/// Runs the provisioner until `shutdown` turns true (or its token is
/// refused); then stops every instance and reports them `terminated`.
pub async fn run(config: LocalConfig, mut shutdown: watch::Receiver<bool>) -> Result<Summary, LocalError> {
    let client = ProvisionerClient::new(Client::new(&config.api).map_err(LocalError::Start)?, &config.token);
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let (demand_tx, mut demands) = mpsc::channel(1);
    let poller = tokio::spawn(watch_demand(client.clone(), demand_tx));
    let mut fleet = Fleet {
        config,
        client,
        ledger: Ledger::default(),
        children: HashMap::new(),
        events_tx,
        summary: Summary::default(),
        intents_read: false,
        unanswered: HashMap::new(),
        report_size: baton_api::provisioners::MAX_INSTANCE_EVENTS,
    };
    let mut intents = tokio::time::interval(fleet.config.intent_poll.max(Duration::from_millis(100)));
    intents.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tracing::info!(api = %fleet.config.api, runner_bin = %fleet.config.runner_bin.display(), "local provisioner started");

    let outcome = loop {
        let step = tokio::select! {
            Some(answer) = demands.recv() => match answer {
                Ok(demand) => fleet.meet(&demand).await,
                Err(err) => Err(err),
            },
            Some(event) = events.recv() => {
                fleet.on_child(event);
                Ok(())
            }
            // With nothing running, only the first read is needed (it finds
            // an earlier run's instances): each read is a paid invocation.
            _ = intents.tick() => if fleet.ledger.live().next().is_some() || !fleet.intents_read {
                fleet.honour_intents().await
            } else {
                Ok(())
            },
            () = stopped(&mut shutdown) => break Ok(()),
        };
        // A burst of exits is one report, not one each.
        while let Ok(event) = events.try_recv() {
            fleet.on_child(event);
        }
        if let Err(err) = step.and(fleet.flush().await) {
            break Err(err);
        }
    };
    poller.abort();
    fleet.stop_all(&mut events).await;
    tracing::info!(
        reserved = fleet.summary.reserved,
        started = fleet.summary.started,
        terminated = fleet.summary.terminated,
        failed = fleet.summary.failed,
        stopped_on_intent = fleet.summary.stopped_on_intent,
        "local provisioner stopped"
    );
    outcome.map(|()| fleet.summary)
}

/// Resolves once `shutdown` turns true; never if its sender is gone (no
/// one can ask any more). The watch's guard stays in here: held in the
/// loop's `select!` it would make the provisioner's future not `Send`.
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    if shutdown.wait_for(|stop| *stop).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Reads demand for ever (a long poll, `since` the last version) and hands
/// every answer to the loop; stops after a refusal, which it hands over.
async fn watch_demand(client: ProvisionerClient, answers: mpsc::Sender<Result<Demand, LocalError>>) {
    let mut since: Option<String> = None;
    let mut errors = Backoff::for_errors();
    loop {
        match client.demand(since.as_deref(), MAX_DEMAND_WAIT_S).await {
            Ok(demand) => {
                errors.reset();
                since = Some(demand.version.clone());
                // Even an unchanged demand goes on: the loop retries what a
                // failed reservation left undone.
                if answers.send(Ok(demand)).await.is_err() {
                    return;
                }
            }
            Err(err) if err.is_transient() => {
                let delay = errors.next_delay();
                tracing::warn!(error = %err, retry_in_ms = delay.as_millis() as u64, "demand read failed");
                tokio::time::sleep(delay).await;
            }
            Err(err) => {
                let err = match err {
                    ClientError::Unauthenticated(_) => LocalError::Revoked(err),
                    other => LocalError::Demand(other),
                };
                let _ = answers.send(Err(err)).await;
                return;
            }
        }
    }
}

struct Fleet {
    config: LocalConfig,
    client: ProvisionerClient,
    ledger: Ledger,
    children: HashMap<String, Running>,
    events_tx: mpsc::UnboundedSender<ChildEvent>,
    summary: Summary,
    /// The instances Baton wants gone were read once (strangers closed).
    intents_read: bool,
    /// Reserves no try of which was answered, by label set. Any try may
    /// have reserved (its answer lost): those reservations already took
    /// their jobs off the demand, so a reserve under a new id would find
    /// none to take and leave them unstarted until they expire, again and
    /// again while answers keep being lost. The same request goes again
    /// instead, and gets them back.
    unanswered: HashMap<Vec<String>, ReserveRequest>,
    /// Events the next instance report carries at most (`next_report_size`).
    report_size: usize,
}

impl Fleet {
    /// Reserves and starts what each label set's demand needs.
    async fn meet(&mut self, demand: &Demand) -> Result<(), LocalError> {
        for set in &demand.label_sets {
            if let Some(body) = self.unanswered.remove(&set.labels) {
                self.reserve(set, body).await?;
                continue;
            }
            let room = headroom(self.config.max_instances, self.ledger.live().count());
            let count = instances_to_reserve(set.queued, set.idle_sessions, room);
            if count == 0 {
                continue;
            }
            // One id for every try of this reserve: a try whose answer was
            // lost reserved, and its retry gets those reservations back.
            let body = ReserveRequest {
                labels: set.labels.clone(),
                count,
                expires_in_s: self.config.reservation_expiry_s,
                request_id: Some(Uuid::now_v7()),
            };
            self.reserve(set, body).await?;
        }
        Ok(())
    }

    async fn reserve(&mut self, set: &LabelSetDemand, body: ReserveRequest) -> Result<(), LocalError> {
        let labels = set.labels.join(",");
        let count = body.count;
        let mut tries = 0;
        let reserved = loop {
            tries += 1;
            match self.client.reserve(&body).await {
                Ok(reserved) => break reserved,
                Err(ClientError::Unauthenticated(message)) => {
                    return Err(LocalError::Revoked(ClientError::Unauthenticated(message)))
                }
                Err(err) if err.is_transient() && tries < RESERVE_TRIES => {
                    tracing::warn!(%labels, count, error = %err, tries, "reservation failed; trying it again");
                    tokio::time::sleep(Duration::from_millis(500 * u64::from(tries))).await;
                }
                Err(err) if err.is_transient() => {
                    // The next demand answer (20 s at most) sends it again.
                    tracing::warn!(%labels, count, error = %err, "reservation not answered; sending it again later");
                    self.unanswered.insert(set.labels.clone(), body);
                    return Ok(());
                }
                Err(err) => {
                    // Refused: nothing was reserved; the next demand answer asks afresh.
                    tracing::warn!(%labels, count, error = %err, "reservation failed");
                    return Ok(());
                }
            }
        };
        tracing::info!(%labels, asked = count, granted = reserved.reservations.len(), queued = set.queued,
            idle_sessions = set.idle_sessions, "reserved");
        for reservation in reserved.reservations {
            self.summary.reserved += 1;
            let id = format!("local-{}", Uuid::now_v7().simple());
            self.ledger.open(&id, reservation.id, &set.labels, Utc::now());
            let spec = ChildSpec {
                provider_runner_id: id.clone(),
                reservation_id: reservation.id,
                runner_bin: self.config.runner_bin.clone(),
                api: self.config.api.clone(),
                registration_token: reservation.registration_token,
                labels: set.labels.clone(),
                work_dir: self.config.work_dir.join(&id),
                extra_args: self.config.runner_args.clone(),
                kill_grace: self.config.kill_grace,
            };
            match child::start(spec, self.events_tx.clone()) {
                Ok(running) => {
                    self.summary.started += 1;
                    self.children.insert(id.clone(), running);
                    self.ledger.advance(&id, InstanceState::Booting, None, Utc::now());
                    tracing::info!(provider_runner_id = %id, reservation = %reservation.id, %labels,
                        expires_at = %reservation.expires_at, "instance started");
                }
                Err(err) => {
                    self.summary.failed += 1;
                    self.ledger.advance(&id, InstanceState::Failed, None, Utc::now());
                    tracing::error!(provider_runner_id = %id, reservation = %reservation.id, error = %err,
                        runner_bin = %self.config.runner_bin.display(), "cannot start the runner");
                }
            }
        }
        Ok(())
    }

    fn on_child(&mut self, event: ChildEvent) {
        match event {
            ChildEvent::Registered { provider_runner_id: id, session } => {
                let reservation = self.reservation_of(&id);
                if self.ledger.advance(&id, InstanceState::Running, Some(session), Utc::now()) {
                    tracing::info!(provider_runner_id = %id, %reservation, %session, "instance running");
                }
            }
            ChildEvent::Exited { provider_runner_id: id, code } => {
                self.children.remove(&id);
                let reservation = self.reservation_of(&id);
                let stopping = self.ledger.get(&id).and_then(|i| i.stopping);
                let state = exit_state(code, stopping.is_some());
                if state == InstanceState::Failed {
                    self.summary.failed += 1;
                    tracing::warn!(provider_runner_id = %id, %reservation, code, "instance failed");
                } else {
                    self.summary.terminated += 1;
                    tracing::info!(provider_runner_id = %id, %reservation, code, "instance terminated");
                }
                self.ledger.advance(&id, state, None, Utc::now());
                // Best effort: the runner removed its jobs' directories already.
                let _ = std::fs::remove_dir_all(self.config.work_dir.join(&id));
            }
        }
    }

    /// Reads the instances Baton wants gone and stops those of this process
    /// (closing the ones of an earlier run).
    async fn honour_intents(&mut self) -> Result<(), LocalError> {
        let list = match self.client.instances(true).await {
            Ok(list) => list,
            Err(ClientError::Unauthenticated(message)) => {
                return Err(LocalError::Revoked(ClientError::Unauthenticated(message)))
            }
            Err(err) => {
                tracing::warn!(error = %err, "terminate intents cannot be read");
                return Ok(());
            }
        };
        self.intents_read = true;
        for (id, reason) in self.ledger.stops_due(&list.items) {
            self.stop(&id, StopCause::Intent(reason));
        }
        for view in self.ledger.strangers(&list.items) {
            tracing::info!(provider_runner_id = %view.provider_runner_id, state = view.state.as_str(),
                "an instance this process did not start (an earlier run's): reporting it terminated");
            self.ledger.close_stranger(&view, Utc::now());
        }
        Ok(())
    }

    fn stop(&mut self, id: &str, cause: StopCause) {
        if !self.ledger.begin_stop(id, cause, Utc::now()) {
            return;
        }
        let reservation = self.reservation_of(id);
        match cause {
            StopCause::Intent(reason) => {
                self.summary.stopped_on_intent += 1;
                tracing::info!(provider_runner_id = %id, %reservation, reason = reason.as_str(), "stopping the instance");
            }
            StopCause::Shutdown => {
                tracing::info!(provider_runner_id = %id, %reservation, "stopping the instance (shutdown)")
            }
        }
        match self.children.get_mut(id) {
            Some(child) => child.stop(),
            // Booked but never started, or already reaped: nothing to signal.
            None => {
                self.ledger.advance(id, InstanceState::Terminated, None, Utc::now());
            }
        }
    }

    /// Sends what happened to the API, in reports of at most 100 events,
    /// fewer after a failure (`next_report_size`). What fails transiently
    /// waits for the next pass; what is refused is logged and dropped (it
    /// would be refused again).
    async fn flush(&mut self) -> Result<(), LocalError> {
        if !self.ledger.has_events() {
            return Ok(());
        }
        let events = self.ledger.take_events();
        let mut sent = 0;
        while sent < events.len() {
            let Some(batch) = report_batches(&events[sent..], self.report_size).next() else { break };
            let outcome = self.client.report(batch).await;
            let delivered = !matches!(&outcome, Err(err) if err.is_transient());
            self.report_size = next_report_size(self.report_size, delivered);
            match outcome {
                Ok(answer) => {
                    sent += batch.len();
                    for honored in &answer.terminate_intents_honored {
                        tracing::info!(provider_runner_id = %honored.provider_runner_id,
                            reason = honored.reason.as_str(), "terminate intent honoured");
                    }
                    tracing::debug!(
                        events = batch.len(),
                        accepted = answer.accepted,
                        reservations_released = answer.reservations_released,
                        "instances reported"
                    );
                }
                Err(err) if err.is_transient() => {
                    tracing::warn!(error = %err, pending = events.len() - sent, "instance report failed; retrying");
                    break;
                }
                Err(ClientError::Unauthenticated(message)) => {
                    self.ledger.restore_events(events[sent..].to_vec());
                    return Err(LocalError::Revoked(ClientError::Unauthenticated(message)));
                }
                Err(err) => {
                    sent += batch.len();
                    let ids: Vec<&str> = batch.iter().map(|e| e.provider_runner_id.as_str()).collect();
                    tracing::error!(error = %err, instances = %ids.join(","), "instance report refused; dropped");
                }
            }
        }
        self.ledger.restore_events(events[sent..].to_vec());
        self.ledger.prune();
        Ok(())
    }

    /// Stops every live instance, waits for their exits (SIGKILL follows
    /// the grace), and reports them all, retrying for a while.
    async fn stop_all(&mut self, events: &mut mpsc::UnboundedReceiver<ChildEvent>) {
        let live: Vec<String> = self.ledger.live().map(|i| i.provider_runner_id.clone()).collect();
        for id in &live {
            self.stop(id, StopCause::Shutdown);
        }
        // Instances already stopping on an intent are waited for too.
        let deadline = tokio::time::Instant::now() + self.config.kill_grace + EXIT_SLACK;
        while !self.children.is_empty() {
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(Some(event)) => self.on_child(event),
                Ok(None) | Err(_) => break,
            }
        }
        for id in self.children.keys().cloned().collect::<Vec<_>>() {
            tracing::warn!(provider_runner_id = %id, "no exit seen after SIGKILL; reporting it terminated");
            self.ledger.advance(&id, InstanceState::Terminated, None, Utc::now());
        }
        self.children.clear();
        let deadline = tokio::time::Instant::now() + LAST_REPORT_BUDGET;
        let mut errors = Backoff::new(Duration::from_millis(250), Duration::from_secs(2));
        while self.ledger.has_events() && tokio::time::Instant::now() < deadline {
            if self.flush().await.is_err() {
                break;
            }
            if self.ledger.has_events() {
                tokio::time::sleep(errors.next_delay()).await;
            }
        }
        if self.ledger.has_events() {
            tracing::error!("the instances' last states could not be reported; Baton's reapers will close them");
        }
    }

    fn reservation_of(&self, id: &str) -> String {
        self.ledger.get(id).and_then(|i| i.reservation_id).map_or_else(|| "-".to_string(), |r| r.to_string())
    }
}
