//! The AWS reference provisioner (behaviour.md §15; docs/provisioners.md):
//! a scheduled function that is a provisioner like any other (it calls the
//! API with its `bpt_` token), whose machines are EC2 instances launched
//! from the operator's launch template. Each tick:
//!
//! 1. lists this provisioner's instances (EC2, by tags) and what Baton holds
//!    of them (the instances list, with terminate intents);
//! 2. terminates the instances Baton wants gone, and stopped ones;
//! 3. sends again the reserves earlier ticks had no answer to, then reads
//!    demand and reserves what queued jobs need (`instances_to_reserve`, the
//!    local provisioner's decision too); for each reservation it writes the
//!    ephemeral token to a SecureString parameter, then launches one
//!    instance whose boot script reads and deletes it
//!    (`infra/boot/runner-boot.sh`);
//! 4. reports every state Baton does not hold yet (and `failed` for a
//!    launch that failed, which releases its reservation);
//! 5. deletes the token parameters of instances that ended unread;
//! 6. emits its counts as EMF metrics (failed launches and orphans have
//!    alarms).
//!
//! EC2's tags and Baton's list are the books, so a tick that dies half-way
//! is finished by the next one. The one thing kept between ticks is a
//! reserve not answered yet (`plan::kept_reserve_parameter`, written before
//! it is sent): a reserve whose answer was lost has reserved all the same,
//! and only sending it again under its `request_id` gets those reservations
//! (and their tokens) back; asked anew, Baton would grant nothing while they
//! hold the demand, unstarted until they expire.
//! Idempotent: reports only move Baton's states forward; a launch's client
//! token is its reservation id; deleting a parameter already gone is a
//! success.

pub mod cloud;
pub mod plan;
pub mod settings;

use std::time::{Duration, SystemTime};

use baton_api::provisioners::{
    headroom, instances_to_reserve, InstanceEvent, ReserveRequest, Reserved, TerminateReason, MAX_INSTANCE_EVENTS,
};
use baton_client::error::ClientError;
use baton_client::provisioners::{report_batches, ProvisionerClient};
use baton_client::Client;
use baton_telemetry::metrics::{emit_for_stage, Unit};
use chrono::Utc;
use tracing::Instrument;
use uuid::Uuid;

use crate::cloud::{CloudError, Ec2, Ssm};
use crate::plan::{Ec2State, Launcher, Why};
use crate::settings::Settings;

/// The EMF metrics of a tick (dimension `stage`); the CDK stack alarms on
/// the first two.
pub const METRIC_LAUNCH_FAILURES: &str = "ProvisionerLaunchFailures";
pub const METRIC_ORPHANS: &str = "ProvisionerOrphansTerminated";
pub const METRIC_LAUNCHED: &str = "ProvisionerInstancesLaunched";

/// A tick stops reserving this long before the invocation's deadline: a
/// reservation it could not launch would hold demand until it expires.
const DEADLINE_MARGIN: Duration = Duration::from_secs(10);

/// How long one request to the API may take: a tick has a deadline, and an
/// answer slower than this is met by the next tick instead.
const API_TIMEOUT: Duration = Duration::from_secs(10);

/// Tries of one reserve within a tick, and the pause after the first (doubled
/// after each): a lost answer or a moment's 5xx is met within the tick, and
/// one that outlasts them is kept for the next tick.
const RESERVE_TRIES: u32 = 3;
const RESERVE_FIRST_PAUSE: Duration = Duration::from_millis(500);

/// What one cold start holds: settings, clients, and the provisioner token
/// (read once).
#[derive(Debug, Clone)]
pub struct AwsProvisioner {
    pub settings: Settings,
    pub provisioner_id: Uuid,
    api: ProvisionerClient,
    ec2: Ec2,
    ssm: Ssm,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("the provisioner token cannot be read: {0}")]
    Token(CloudError),
    #[error("{0} does not hold a provisioner token (bpt_<id>.<secret>)")]
    NotAToken(String),
}

#[derive(Debug, thiserror::Error)]
pub enum TickError {
    #[error(transparent)]
    Cloud(#[from] CloudError),
    /// 401: the provisioner was removed or its token revoked.
    #[error("the API refused the provisioner token (removed or revoked?): {0}")]
    Revoked(String),
    #[error("API failure: {0}")]
    Api(ClientError),
}

impl From<ClientError> for TickError {
    fn from(err: ClientError) -> Self {
        match err {
            ClientError::Unauthenticated(message) => TickError::Revoked(message),
            other => TickError::Api(other),
        }
    }
}

/// What a tick did (its answer, its last log line and its metrics).
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Tick {
    pub reserved: u32,
    pub launched: u32,
    pub launch_failures: u32,
    pub terminated: u32,
    pub orphans_terminated: u32,
    pub reported: u32,
    pub reservations_released: u32,
    pub tokens_deleted: u32,
    /// Reserves sent without an answer, kept for the next tick.
    pub reserves_unanswered: u32,
    /// Reservations the deadline left unlaunched: their reserve is kept,
    /// and the next tick sends it again and launches them.
    pub launches_deferred: u32,
}

impl AwsProvisioner {
    /// The cold start: reads the provisioner token from SSM once.
    pub async fn start(
        settings: Settings,
        ec2: aws_sdk_ec2::Client,
        ssm: aws_sdk_ssm::Client,
        http: reqwest::Client,
    ) -> Result<Self, StartError> {
        let ssm = Ssm { client: ssm };
        let token = ssm.secret(&settings.token_parameter).await.map_err(StartError::Token)?;
        let provisioner_id = baton_domain::tokens::provisioner_token_id(&token)
            .ok_or_else(|| StartError::NotAToken(settings.token_parameter.clone()))?;
        let ec2 = Ec2 {
            client: ec2,
            launch_template: settings.launch_template.clone(),
            launch_template_version: settings.launch_template_version.clone(),
        };
        // The provisioner's own token: it calls the API like any other
        // provisioner, and needs no access to Baton's table.
        let api = ProvisionerClient::new(
            Client::with_http(http, &settings.api_url).with_request_timeout(API_TIMEOUT),
            &token,
        );
        Ok(Self { settings, provisioner_id, api, ec2, ssm })
    }

    /// One tick (see the module's comment); `deadline` is the invocation's.
    pub async fn tick(&self, deadline: SystemTime) -> Result<Tick, TickError> {
        let span = tracing::info_span!("tick", stage = %self.settings.stage, provisioner = %self.provisioner_id);
        async move {
            let outcome = self.tick_in_span(deadline).await;
            match &outcome {
                Ok(tick) => {
                    self.emit_metrics(tick);
                    tracing::info!(
                        reserved = tick.reserved,
                        launched = tick.launched,
                        launch_failures = tick.launch_failures,
                        terminated = tick.terminated,
                        orphans_terminated = tick.orphans_terminated,
                        reported = tick.reported,
                        reservations_released = tick.reservations_released,
                        tokens_deleted = tick.tokens_deleted,
                        reserves_unanswered = tick.reserves_unanswered,
                        "tick done"
                    );
                }
                Err(err) => tracing::error!(error = %err, "tick failed; the next one starts over"),
            }
            outcome
        }
        .instrument(span)
        .await
    }

    async fn tick_in_span(&self, deadline: SystemTime) -> Result<Tick, TickError> {
        let mut tick = Tick::default();
        let stage = self.settings.stage.as_str();
        let mut machines = self.ec2.machines(stage, self.provisioner_id).await?;
        // Every instance Baton knows of, with its terminate intent: the
        // intents to honour, and the states Baton holds (only news is reported).
        let known = self.api.instances(false).await?.items;

        // Terminate what Baton wants gone. A failure is logged: the intent
        // stays, so the next tick tries again.
        let doomed = plan::terminations(&machines, &known);
        if !doomed.is_empty() {
            let ids: Vec<String> = doomed.iter().map(|(id, _)| id.clone()).collect();
            match self.ec2.terminate(&ids).await {
                Ok(()) => {
                    for (id, why) in &doomed {
                        let reservation = reservation_of(&machines, id);
                        match why {
                            Why::Intent(reason) => tracing::info!(instance_id = %id, %reservation,
                                reason = reason.as_str(), "terminated on Baton's intent"),
                            Why::Stopped => tracing::info!(instance_id = %id, %reservation,
                                "terminated: it had stopped"),
                        }
                        if *why == Why::Intent(TerminateReason::Orphan) {
                            tick.orphans_terminated += 1;
                        }
                    }
                    tick.terminated = ids.len() as u32;
                    for machine in machines.iter_mut().filter(|m| ids.contains(&m.instance_id)) {
                        machine.state = Ec2State::ShuttingDown;
                    }
                }
                Err(err) => tracing::error!(error = %err, instances = %ids.join(","), "terminate failed"),
            }
        }

        let mut events: Vec<InstanceEvent> = Vec::new();
        self.meet_demand(deadline, &mut machines, &mut events, &mut tick).await?;

        events.extend(plan::reports(&machines, &known, Utc::now()));
        self.report(&events, &machines, &mut tick).await;
        self.sweep_tokens(&machines, &mut tick).await;
        Ok(tick)
    }

    /// Reserves what each label set's demand needs and launches one
    /// instance per reservation, appending the launches' failures to `events`.
    /// Reserves an earlier tick sent without an answer go first: their
    /// reservations already took demand off what is read after them.
    async fn meet_demand(
        &self,
        deadline: SystemTime,
        machines: &mut Vec<plan::Machine>,
        events: &mut Vec<InstanceEvent>,
        tick: &mut Tick,
    ) -> Result<(), TickError> {
        let stage = self.settings.stage.as_str();
        let launcher = Launcher {
            stage,
            provisioner_id: self.provisioner_id,
            api_url: &self.settings.api_url,
            runner_args: &self.settings.runner_args,
        };
        let mut turn = Turn { deadline, launcher: &launcher, machines, events, tick };
        self.send_kept_reserves(&mut turn).await?;

        // Read at once, without a long poll: a tick meets what is needed now,
        // and waiting would bill the function for the wait.
        let demand = self.api.demand(None, 0).await?;
        for set in &demand.label_sets {
            let live = turn.machines.iter().filter(|m| !m.state.is_ending()).count();
            let count =
                instances_to_reserve(set.queued, set.idle_sessions, headroom(self.settings.max_instances, live));
            if count == 0 {
                continue;
            }
            let labels = set.labels.join(",");
            if turn.too_late() {
                tracing::warn!(%labels, count, "too close to the deadline to reserve; the next tick will");
                break;
            }
            tracing::info!(%labels, count, queued = set.queued, idle_sessions = set.idle_sessions, "reserving");
            // Named, so that a retry of it (this tick's, or the next tick's
            // after a lost answer) gets the same reservations back.
            let request_id = uuid::Uuid::now_v7();
            let body = ReserveRequest {
                labels: set.labels.clone(),
                count,
                expires_in_s: self.settings.reservation_expiry_s,
                request_id: Some(request_id),
            };
            // Kept before it is sent: a reserve whose answer is lost has
            // reserved all the same, and only its id gets those back.
            let kept = plan::kept_reserve_parameter(stage, self.provisioner_id, request_id);
            if let Err(err) = self.ssm.keep_reserve(&kept, &body).await {
                tracing::warn!(%labels, count, error = %err, "the reserve cannot be kept until answered; the next tick reserves");
                continue;
            }
            self.reserve_and_launch(&kept, &body, &mut turn).await?;
        }
        Ok(())
    }

    /// Sends again, under their ids, the reserves earlier ticks kept
    /// unanswered, and launches what they reserved.
    async fn send_kept_reserves(&self, turn: &mut Turn<'_>) -> Result<(), TickError> {
        let stage = self.settings.stage.as_str();
        let parameters = match self.ssm.tokens(&plan::token_path(stage)).await {
            Ok(parameters) => parameters,
            Err(err) => {
                tracing::warn!(error = %err, "kept reserves cannot be listed; the next tick sends them");
                return Ok(());
            }
        };
        for kept in plan::kept_reserves(stage, self.provisioner_id, &parameters) {
            if turn.too_late() {
                tracing::warn!(kept_reserve = %kept.parameter, "too close to the deadline to send a kept reserve; the next tick will");
                break;
            }
            let Some(body) = kept.reserve else {
                tracing::warn!(kept_reserve = %kept.parameter, "not a reserve this function wrote; deleted");
                self.forget_reserve(&kept.parameter).await;
                continue;
            };
            let kept = kept.parameter;
            tracing::info!(kept_reserve = %kept, labels = %body.labels.join(","), count = body.count,
                "sending again a reserve an earlier tick had no answer to");
            self.reserve_and_launch(&kept, &body, turn).await?;
        }
        Ok(())
    }

    /// Sends `body` (kept as `kept`) and launches one instance per
    /// reservation of its answer; then the kept reserve goes. Unanswered,
    /// it stays for the next tick.
    async fn reserve_and_launch(
        &self,
        kept: &str,
        body: &ReserveRequest,
        turn: &mut Turn<'_>,
    ) -> Result<(), TickError> {
        let labels = body.labels.join(",");
        let request_id = body.request_id.map_or_else(|| "-".to_string(), |id| id.to_string());
        let reserved = match self.reserve(body, turn.deadline).await {
            Ok(reserved) => reserved,
            Err(ClientError::Unauthenticated(message)) => return Err(TickError::Revoked(message)),
            Err(ClientError::Transient(err)) => {
                turn.tick.reserves_unanswered += 1;
                tracing::warn!(%labels, count = body.count, %request_id, error = %err,
                    "reserve not answered; the next tick sends it again under its request_id");
                return Ok(());
            }
            Err(err) => {
                tracing::warn!(%labels, count = body.count, %request_id, error = %err, "reserve refused");
                self.forget_reserve(kept).await;
                return Ok(());
            }
        };
        tracing::info!(%labels, asked = body.count, granted = reserved.reservations.len(), %request_id, "reserved");
        let granted = reserved.reservations.len();
        for (done, reservation) in reserved.reservations.into_iter().enumerate() {
            // A launch takes up to seconds on AWS: a burst launched past the
            // deadline would be killed mid-loop, nothing reported. The rest
            // waits for the next tick, which sends the kept reserve again
            // (its request_id gets these same reservations back).
            if turn.too_late() {
                let left = (granted - done) as u32;
                turn.tick.launches_deferred += left;
                tracing::warn!(%labels, left, %request_id, "too close to the deadline to launch; the next tick will");
                return Ok(());
            }
            // Launched by the tick that was sent this reserve before.
            if turn.machines.iter().any(|m| m.reservation_id == Some(reservation.id)) {
                continue;
            }
            turn.tick.reserved += 1;
            let launch = plan::launch(turn.launcher, reservation.id, &body.labels);
            // The token first: an instance must find it when it boots.
            let launched = match self
                .ssm
                .put_token(&launch.token_parameter, &reservation.registration_token, reservation.id)
                .await
            {
                // A launch's client token is its reservation id: a reserve
                // sent again after a tick died here launches nothing twice.
                Ok(()) => self.ec2.launch(&launch).await,
                Err(err) => Err(err),
            };
            match launched {
                Ok(machine) => {
                    turn.tick.launched += 1;
                    tracing::info!(instance_id = %machine.instance_id, reservation = %reservation.id, %labels,
                        token_parameter = %launch.token_parameter, expires_at = %reservation.expires_at,
                        "instance launched");
                    turn.machines.push(machine);
                }
                Err(err) => {
                    turn.tick.launch_failures += 1;
                    tracing::error!(reservation = %reservation.id, %labels, error = %err,
                        launch_template = %self.settings.launch_template, "launch failed");
                    // No instance will read it; the sweep deletes it if this fails.
                    if let Err(err) = self.ssm.delete_parameter(&launch.token_parameter).await {
                        tracing::warn!(reservation = %reservation.id, error = %err, "token parameter left for the sweep");
                    }
                    turn.events.push(plan::launch_failed(reservation.id));
                }
            }
        }
        self.forget_reserve(kept).await;
        Ok(())
    }

    /// `body`, tried up to `RESERVE_TRIES` times while the deadline allows:
    /// every try under the same `request_id`, so one whose answer was lost
    /// is answered by the next with what it reserved.
    async fn reserve(&self, body: &ReserveRequest, deadline: SystemTime) -> Result<Reserved, ClientError> {
        let mut pause = RESERVE_FIRST_PAUSE;
        let mut tries = 1;
        loop {
            match self.api.reserve(body).await {
                Err(ClientError::Transient(err))
                    if tries < RESERVE_TRIES && time_left(deadline) > DEADLINE_MARGIN + pause =>
                {
                    tracing::warn!(labels = %body.labels.join(","), tries, error = %err, "reserve not answered; trying again");
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                    tries += 1;
                }
                answered => return answered,
            }
        }
    }

    /// Deletes a kept reserve that was answered (or refused). If the delete
    /// fails, the next tick sends it again and gets the same reservations,
    /// whose launches are already made (same client token): nothing doubles.
    async fn forget_reserve(&self, kept: &str) {
        if let Err(err) = self.ssm.delete_parameter(kept).await {
            tracing::warn!(kept_reserve = %kept, error = %err, "answered reserve left kept; the next tick sends it again");
        }
    }

    /// Sends `events` in reports of at most 100. A failed report is logged:
    /// the next tick derives the same states from EC2 again (only a launch
    /// failure's event is lost, and its reservation then expires).
    async fn report(&self, events: &[InstanceEvent], machines: &[plan::Machine], tick: &mut Tick) {
        for batch in report_batches(events, MAX_INSTANCE_EVENTS) {
            match self.api.report(batch).await {
                Ok(answer) => {
                    tick.reported += batch.len() as u32;
                    tick.reservations_released += answer.reservations_released;
                    for event in batch {
                        tracing::info!(instance_id = %event.provider_runner_id,
                            reservation = %event.reservation_id.map_or_else(|| reservation_of(machines, &event.provider_runner_id), |r| r.to_string()),
                            state = event.state.as_str(), "instance reported");
                    }
                    for honored in &answer.terminate_intents_honored {
                        tracing::info!(instance_id = %honored.provider_runner_id, reason = honored.reason.as_str(),
                            "terminate intent honoured");
                    }
                }
                Err(err) => {
                    let ids: Vec<&str> = batch.iter().map(|e| e.provider_runner_id.as_str()).collect();
                    tracing::error!(error = %err, instances = %ids.join(","), "instance report failed");
                }
            }
        }
    }

    /// Deletes the token parameters no instance will read (see
    /// `plan::tokens_to_delete`). Best effort: the next tick sweeps again.
    async fn sweep_tokens(&self, machines: &[plan::Machine], tick: &mut Tick) {
        let stage = self.settings.stage.as_str();
        let parameters = match self.ssm.tokens(&plan::token_path(stage)).await {
            Ok(parameters) => parameters,
            Err(err) => {
                tracing::warn!(error = %err, "token parameters cannot be listed");
                return;
            }
        };
        for name in plan::tokens_to_delete(stage, &parameters, machines, Utc::now()) {
            let reservation =
                plan::reservation_of_parameter(stage, &name).map_or_else(|| "-".into(), |r| r.to_string());
            match self.ssm.delete_parameter(&name).await {
                Ok(()) => {
                    tick.tokens_deleted += 1;
                    tracing::info!(token_parameter = %name, %reservation, "unread token deleted");
                }
                Err(err) => tracing::warn!(token_parameter = %name, %reservation, error = %err, "token delete failed"),
            }
        }
    }

    fn emit_metrics(&self, tick: &Tick) {
        // Every tick, zeros included: a dashboard sees the function alive.
        for (name, value) in [
            (METRIC_LAUNCH_FAILURES, tick.launch_failures),
            (METRIC_ORPHANS, tick.orphans_terminated),
            (METRIC_LAUNCHED, tick.launched),
        ] {
            emit_for_stage(&self.settings.stage, name, f64::from(value), Unit::Count);
        }
    }
}

fn reservation_of(machines: &[plan::Machine], id: &str) -> String {
    machines
        .iter()
        .find(|m| m.instance_id == id)
        .and_then(|m| m.reservation_id)
        .map_or_else(|| "-".to_string(), |r| r.to_string())
}

/// What the reserves of one tick share: its deadline and launcher, and what
/// they add to the tick's books.
struct Turn<'a> {
    deadline: SystemTime,
    launcher: &'a Launcher<'a>,
    machines: &'a mut Vec<plan::Machine>,
    events: &'a mut Vec<InstanceEvent>,
    tick: &'a mut Tick,
}

impl Turn<'_> {
    /// Too close to the deadline to reserve: a reservation it could not
    /// launch would hold demand until it expires.
    fn too_late(&self) -> bool {
        time_left(self.deadline) < DEADLINE_MARGIN
    }
}

fn time_left(deadline: SystemTime) -> Duration {
    deadline.duration_since(SystemTime::now()).unwrap_or_default()
}
