//! Facts: past-tense domain events (behaviour.md §12). Every fact's
//! `detail` is a [`Fact`]: a common header (`schema_version`, `event_id`,
//! `occurred_at`, `workspace_id`) flattened with the fact's own fields.
//! Field names are part of the contract with outside consumers; each detail
//! type has a JSON Schema in `events/schemas/<detail-type>.json` and a sample
//! in `events/samples/`.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use crate::status::StepStatus;

/// Version of every fact's schema; bumped (with a new schema) on a breaking change.
pub const SCHEMA_VERSION: u32 = 1;

/// The bounded context a fact comes from; it is also the EventBridge `source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    Workflows,
    Runners,
}

impl Context {
    pub fn source(self) -> &'static str {
        match self {
            Context::Workflows => "baton.workflows",
            Context::Runners => "baton.runners",
        }
    }
}

/// A fact's own fields, with its stable `detail-type`.
pub trait FactDetail: Serialize + DeserializeOwned + Clone + std::fmt::Debug + Send + Sync {
    /// `baton.<context>.<entity>.<fact>`.
    const DETAIL_TYPE: &'static str;
    const CONTEXT: Context;
}

/// The common header of every fact.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FactHeader {
    pub schema_version: u32,
    /// Unique, and stable across redelivery: it is the outbox item's id.
    pub event_id: Uuid,
    pub occurred_at: DateTime<Utc>,
    pub workspace_id: String,
}

/// A whole fact: header plus detail, as it travels in an EventBridge `detail`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Fact<D> {
    #[serde(flatten)]
    pub header: FactHeader,
    #[serde(flatten)]
    pub detail: D,
}

impl<D: FactDetail> Fact<D> {
    /// A new fact about `workspace_id`, with a fresh id.
    pub fn new(workspace_id: impl Into<String>, occurred_at: DateTime<Utc>, detail: D) -> Self {
        Self {
            header: FactHeader {
                schema_version: SCHEMA_VERSION,
                event_id: uuid::Uuid::now_v7(),
                occurred_at,
                workspace_id: workspace_id.into(),
            },
            detail,
        }
    }

    pub fn detail_type(&self) -> &'static str {
        D::DETAIL_TYPE
    }
}

/// The source (context) named by a detail type, if it is one of Baton's.
pub fn source_of(detail_type: &str) -> Option<&'static str> {
    match detail_type.split('.').nth(1)? {
        "workflows" => Some(Context::Workflows.source()),
        "runners" => Some(Context::Runners.source()),
        _ => None,
    }
}

/// What a runner needs to execute a job. The orchestrator writes it to the
/// table (`EXEC#<execution>` / `SPEC`) in the transaction that queues the
/// job, and the claim hands it to the runner: it never travels on the bus,
/// so facts stay small whatever the job's scripts, and the job's env (often
/// secrets) never reaches a fact or the bus's archive.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct JobSpec {
    /// What the claim hands to the runner.
    #[serde(flatten)]
    pub work: JobWork,
    /// The job's `continue-on-error`, decided when it was queued: a failure
    /// ends it `succeeded`, marked `soft_failed`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub continue_on_error: bool,
    /// The job's `priority`, decided when it was queued (see [`dispatch_at`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: i32,
    /// The workspace secrets its definition reads (names only): the claim
    /// puts their values in, the spec keeps `${{ secrets.NAME }}`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
}

/// What a runner runs of a job: its spec as the claim hands it over.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobWork {
    pub key: String,
    pub labels: Vec<String>,
    pub timeout_s: u64,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub steps: Vec<StepSpec>,
    /// The job's declared outputs: where the runner takes each from, to
    /// send each with complete.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub outputs: BTreeMap<String, OutputFrom>,
    /// Env variables (the job's or a step's) whose values are secret: the
    /// runner masks them in everything it stores or shows (the log, the
    /// terminal, the outputs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mask_env: Vec<String>,
}

/// Where the runner takes a job output from: the value a step wrote for
/// `key` to `$BATON_OUTPUT` (step `step`'s, or the last step's that wrote it).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OutputFrom {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<Uuid>,
    pub key: String,
}

/// What the queue needs of a queued job, as its fact carries it: which
/// runners fit it and how long it may take. No steps, no env.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct QueuedJob {
    pub key: String,
    pub labels: Vec<String>,
    pub timeout_s: u64,
    /// Its `priority` (0 when absent): claims take it as if it had been
    /// queued `priority` × `PRIORITY_STEP_S` seconds earlier.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: i32,
    /// A `runner_lost` retry: the session that lost the job. Another
    /// fitting runner takes it first; that session only once it has waited
    /// `LOST_RUNNER_GRACE_S` in the queue (absent: anyone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avoid_session: Option<Uuid>,
    /// How many steps the job has: the claim writes it on the lease, so the
    /// step route knows which report is the last one and settles the job
    /// on it (behaviour.md §16). 0 (absent) on jobs queued before.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub step_count: u32,
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

/// How long a `runner_lost` retry is left to the other runners before the
/// session that lost it may take it again (when none other fits or polls).
pub const LOST_RUNNER_GRACE_S: i64 = 30;

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// How many seconds of waiting one point of priority is worth: a job of
/// priority `p` is dispatched as if queued `p` minutes earlier, so a
/// higher priority goes first and a lower one ages past it (it cannot
/// starve: after `p` minutes it is level with a job `p` points above it).
pub const PRIORITY_STEP_S: i64 = 60;

/// The lowest and highest `priority` a job may have.
pub const PRIORITY_RANGE: std::ops::RangeInclusive<i32> = -100..=100;

/// The instant a job queued at `queued_at` with `priority` is dispatched
/// as: the queue's order (oldest first) is the order of these.
pub fn dispatch_at(queued_at: DateTime<Utc>, priority: i32) -> DateTime<Utc> {
    let priority = priority.clamp(*PRIORITY_RANGE.start(), *PRIORITY_RANGE.end());
    queued_at - chrono::Duration::seconds(i64::from(priority) * PRIORITY_STEP_S)
}

impl From<&JobSpec> for QueuedJob {
    fn from(spec: &JobSpec) -> Self {
        Self {
            key: spec.work.key.clone(),
            labels: spec.work.labels.clone(),
            timeout_s: spec.work.timeout_s,
            priority: spec.priority,
            avoid_session: None,
            step_count: u32::try_from(spec.work.steps.len()).unwrap_or(u32::MAX),
        }
    }
}

// Default: a nil id and an empty run, for building one field by field.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StepSpec {
    pub id: Uuid,
    #[serde(default)]
    pub name: Option<String>,
    /// The step's `id:` as written, by which a later step's `if:` reads it
    /// (`steps.<id>.outcome`, `steps.<id>.outputs.<name>`). Absent for a
    /// step without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The shell command. For a step that runs an action (`uses`), a
    /// command that fails saying the runner is too old to run actions: a
    /// runner that reads `uses` never runs it, one from before actions does.
    pub run: String,
    /// The action the step runs, as written (`owner/repo[/path]@ref`, a git
    /// URL with `@ref`, or `./path` in the job's directory); the runner
    /// fetches and runs it. Absent for a shell step, so that a spec without
    /// actions reads as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uses: Option<String>,
    /// The action's inputs (`with:`), expressions resolved.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub with: BTreeMap<String, String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub timeout_s: Option<u64>,
    /// The step's `continue-on-error`, decided when the job was queued: if
    /// it fails, the runner marks it `soft_failed` and runs the next steps.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub continue_on_error: bool,
    /// The `shell:` the `run` runs under (`bash`, `sh`, `python`, `pwsh`,
    /// `cmd`, `powershell`, or a command with `{0}`, the script's file), the
    /// definition's defaults applied. Absent: `sh -c`, as before shells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<String>,
    /// Where the `run` runs, relative to the job's work directory,
    /// expressions resolved and defaults applied. Absent: the job's work
    /// directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_directory: Option<String>,
    /// The step's `if:` as written (`${{ }}` optional), decided by the
    /// runner just before the step would run: what only it knows (the
    /// earlier steps' outcomes and outputs, the status functions,
    /// `github.*`, `runner.*`) it reads itself, the rest from `if_values`.
    /// Absent: GitHub's default, `success()`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub if_condition: Option<String>,
    /// The values, resolved when the job was queued, of the workflow's
    /// references `if_condition` and the `deferred` fields read (`needs.*`, `inputs.*`, `matrix.*`,
    /// `env.*`, `baton.*`), keyed by the reference as written in its
    /// canonical form (`needs.build.outputs.version`). A reference that had
    /// no value is absent (it reads as null); secrets are never here.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub if_values: BTreeMap<String, String>,
    /// The fields whose `${{ … }}` the runner resolves just before the step
    /// runs, because they read what only it knows (an earlier step's
    /// `steps.<id>.outputs.<name>`, `runner.*`, the `github.*` of the
    /// machine): `run`, `working_directory`, `env.<NAME>`, `with.<name>`.
    /// Such a field is left as written; the workflow's references it reads
    /// are in `if_values`, so each expression is evaluated once, on the
    /// runner (a value the queue put in is never read as an expression).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deferred: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StepResult {
    pub id: Uuid,
    pub status: StepStatus,
    /// A `failed` step whose `continue-on-error` let the job go on: it
    /// does not fail the job (GitHub's outcome `failure`, conclusion
    /// `success`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub soft_failed: bool,
    #[serde(default)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub finished_at: Option<DateTime<Utc>>,
}

/// The outcome a runner reports for a whole job.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum JobOutcome {
    Succeeded,
    Failed,
}

/// A run was created or rerun: attempt `attempt` is ready to be orchestrated.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RunAttemptCreated {
    pub run_id: Uuid,
    pub attempt: u32,
    pub workflow_name: String,
    pub run_number: u64,
    pub rerun_mode: Option<String>,
    /// What started the run: `push`, `pull_request`, `schedule`,
    /// `dispatch` or `api`.
    #[serde(default)]
    pub trigger: Option<String>,
    /// The forge's delivery that started it, for a run a webhook started.
    #[serde(default)]
    pub delivery: Option<String>,
    /// The pipeline it runs, when it came from one.
    #[serde(default)]
    pub pipeline: Option<String>,
}

impl FactDetail for RunAttemptCreated {
    const DETAIL_TYPE: &'static str = "baton.workflows.run.attempt_created";
    const CONTEXT: Context = Context::Workflows;
}

/// The orchestrator started a job: its execution may now be claimed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct JobExecutionQueued {
    pub run_id: Uuid,
    pub attempt: u32,
    pub job_id: Uuid,
    pub job_execution_id: Uuid,
    /// The orchestrator's instant: the queue orders by it, not by delivery time.
    pub queued_at: DateTime<Utc>,
    /// The job's key, labels and timeout; its steps and env are in the table.
    pub job: QueuedJob,
    /// 0 for the job's first execution in its attempt; n for its n-th
    /// automatic retry (`retry:`). Added to version 1 (absent reads as 0).
    #[serde(default)]
    pub retry: u32,
}

impl FactDetail for JobExecutionQueued {
    const DETAIL_TYPE: &'static str = "baton.workflows.job_execution.queued";
    const CONTEXT: Context = Context::Workflows;
}

/// An execution reached a terminal status (any cause).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct JobExecutionTerminated {
    pub run_id: Uuid,
    pub attempt: u32,
    pub job_id: Uuid,
    pub job_execution_id: Uuid,
    pub status: String,
    pub reason: Option<String>,
}

impl FactDetail for JobExecutionTerminated {
    const DETAIL_TYPE: &'static str = "baton.workflows.job_execution.terminated";
    const CONTEXT: Context = Context::Workflows;
}

/// A job reached a terminal status (skipped included).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct JobTerminated {
    pub run_id: Uuid,
    pub attempt: u32,
    pub job_id: Uuid,
    pub job_key: String,
    pub status: String,
    pub reason: Option<String>,
    /// It failed (`reason` says how) and its `continue-on-error` made it
    /// `succeeded`. Added to version 1 (so facts from before it parse as
    /// `false`).
    #[serde(default)]
    pub soft_failed: bool,
}

impl FactDetail for JobTerminated {
    const DETAIL_TYPE: &'static str = "baton.workflows.job.terminated";
    const CONTEXT: Context = Context::Workflows;
}

/// A job started waiting for people or events (behaviour.md §16): an
/// approval job whose needs were met, or a listening job that listens.
/// What a notifier subscribes to ("sign-off needs you").
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct JobWaiting {
    pub run_id: Uuid,
    pub attempt: u32,
    pub job_id: Uuid,
    pub job_key: String,
    pub waiting_for: WaitingFor,
    /// When its timeout ends the wait.
    pub until: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum WaitingFor {
    /// Approvals (`approval:`).
    Approval,
    /// Events (`listen:`).
    Events,
}

impl FactDetail for JobWaiting {
    const DETAIL_TYPE: &'static str = "baton.workflows.job.waiting";
    const CONTEXT: Context = Context::Workflows;
}

/// An approver decided on an approval job (behaviour.md §16): who, what,
/// when, with which comment and inputs, and where the approval stands.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ApprovalDecided {
    pub run_id: Uuid,
    pub attempt: u32,
    pub job_id: Uuid,
    pub job_key: String,
    /// The deciding operator token's name.
    pub by: String,
    pub decision: crate::runs::Decision,
    pub comment: Option<String>,
    pub inputs: BTreeMap<String, serde_json::Value>,
    pub decided_at: DateTime<Utc>,
    /// `waiting` (more approvals needed), `approved` or `rejected`.
    pub outcome: String,
    /// Approvals counted so far, of `required`.
    pub approvals: u32,
    pub required: u32,
}

impl FactDetail for ApprovalDecided {
    const DETAIL_TYPE: &'static str = "baton.workflows.job.approval_decided";
    const CONTEXT: Context = Context::Workflows;
}

/// An attempt (and so its run) reached a terminal status.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RunTerminated {
    pub run_id: Uuid,
    pub attempt: u32,
    pub status: String,
    pub reason: Option<String>,
}

impl FactDetail for RunTerminated {
    const DETAIL_TYPE: &'static str = "baton.workflows.run.terminated";
    const CONTEXT: Context = Context::Workflows;
}

/// An operator cancelled a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RunCancelled {
    pub run_id: Uuid,
    pub attempt: u32,
}

impl FactDetail for RunCancelled {
    const DETAIL_TYPE: &'static str = "baton.workflows.run.cancelled";
    const CONTEXT: Context = Context::Workflows;
}

/// Something asked for a run of a pipeline that is not created yet (a
/// forge's delivery matched it): the run request `run_id` names, kept in
/// the table, is to be created as that run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RunRequested {
    pub run_id: Uuid,
    pub pipeline: String,
    /// `push`, `pull_request`, `schedule`.
    pub trigger: String,
    /// The forge's delivery id, for a run a webhook asked for.
    pub delivery: Option<String>,
}

impl FactDetail for RunRequested {
    const DETAIL_TYPE: &'static str = "baton.workflows.run.requested";
    const CONTEXT: Context = Context::Workflows;
}

/// A pipeline was created, changed or deleted: what depends on its
/// definition outside the table (its schedules) is brought in line with it.
/// Consumers read the pipeline as it is now, not as the fact says, so an
/// older fact delivered late changes nothing back.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PipelineChanged {
    pub pipeline: String,
    /// The revision written; `None` when the pipeline was deleted.
    pub revision: Option<u64>,
}

impl FactDetail for PipelineChanged {
    const DETAIL_TYPE: &'static str = "baton.workflows.pipeline.changed";
    const CONTEXT: Context = Context::Workflows;
}

/// The identity of a lease: which execution, held by which session, under which epoch.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LeaseRef {
    pub run_id: Uuid,
    pub attempt: u32,
    pub job_id: Uuid,
    pub job_execution_id: Uuid,
    pub session_id: Uuid,
    pub epoch: u64,
}

/// A runner claimed an execution.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct JobClaimed {
    #[serde(flatten)]
    pub lease: LeaseRef,
    pub claimed_at: DateTime<Utc>,
}

impl FactDetail for JobClaimed {
    const DETAIL_TYPE: &'static str = "baton.runners.job.claimed";
    const CONTEXT: Context = Context::Runners;
}

/// A runner reported the result of an execution; its lease ended.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct JobCompleted {
    #[serde(flatten)]
    pub lease: LeaseRef,
    pub status: JobOutcome,
    pub steps: Vec<StepResult>,
    #[serde(default)]
    pub outputs: BTreeMap<String, serde_json::Value>,
    pub message: Option<String>,
    pub completed_at: DateTime<Utc>,
    /// When the lease was claimed: the workflows side takes the execution's
    /// `started_at` from here (it does not rewrite the attempt for a
    /// claim). `null` when unknown (a fact of an earlier version).
    #[serde(default)]
    pub claimed_at: Option<DateTime<Utc>>,
    /// What ended the lease: the runner's complete, or the step report
    /// that made every step terminal (behaviour.md §16, the seed's
    /// `steps_settled`). Consumers treat both alike.
    /// `complete` on facts of an earlier version, which lack it.
    #[serde(default)]
    pub settled_by: SettledBy,
}

/// What recorded a job's outcome on the runners' side.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SettledBy {
    /// `POST …/complete`.
    #[default]
    Complete,
    /// The step report that made every step of the job terminal.
    Steps,
}

impl FactDetail for JobCompleted {
    const DETAIL_TYPE: &'static str = "baton.runners.job.completed";
    const CONTEXT: Context = Context::Runners;
}

/// The reaper expired a lease whose runner stopped heartbeating.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct JobLeaseExpired {
    #[serde(flatten)]
    pub lease: LeaseRef,
    pub expired_at: DateTime<Utc>,
    /// The steps as last reported by the runner, so the orchestrator can
    /// adopt their outcome when all of them had finished.
    pub steps: Vec<StepResult>,
    /// When the lease was claimed (as in `JobCompleted`).
    #[serde(default)]
    pub claimed_at: Option<DateTime<Utc>>,
}

impl FactDetail for JobLeaseExpired {
    const DETAIL_TYPE: &'static str = "baton.runners.job.lease_expired";
    const CONTEXT: Context = Context::Runners;
}

/// No registered runner session and no provisioner of the workspace offers
/// the labels a queued execution requires: it would wait for ever. Flagged
/// when it is queued; unless a runner claims it first, it fails
/// `unschedulable` at `fails_at`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct JobUnschedulable {
    pub run_id: Uuid,
    pub attempt: u32,
    pub job_id: Uuid,
    pub job_execution_id: Uuid,
    /// The labels nobody offers (canonical).
    pub labels: Vec<String>,
    pub fails_at: DateTime<Utc>,
}

impl FactDetail for JobUnschedulable {
    const DETAIL_TYPE: &'static str = "baton.runners.job.unschedulable";
    const CONTEXT: Context = Context::Runners;
}

/// A provisioner reserved an instance's capacity (behaviour.md §15). The
/// registration token it got is never in a fact.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReservationCreated {
    pub provisioner_id: Uuid,
    pub reservation_id: Uuid,
    /// The label set the instance serves.
    pub labels: Vec<String>,
    pub expires_at: DateTime<Utc>,
}

impl FactDetail for ReservationCreated {
    const DETAIL_TYPE: &'static str = "baton.runners.reservation.created";
    const CONTEXT: Context = Context::Runners;
}

/// A reservation stopped holding its instance slot: its instance ended with
/// no uncancelled lease on it (`instance-ended`), it expired unused
/// (`expired-unused`, its demand back in the queue's count), or its
/// provisioner was removed (`provisioner-removed`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReservationReleased {
    pub provisioner_id: Uuid,
    pub reservation_id: Uuid,
    pub reason: String,
    pub released_at: DateTime<Utc>,
}

impl FactDetail for ReservationReleased {
    const DETAIL_TYPE: &'static str = "baton.runners.reservation.released";
    const CONTEXT: Context = Context::Runners;
}

/// Baton asked a provisioner to stop an instance, and why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct InstanceTerminateRequested {
    pub provisioner_id: Uuid,
    pub provider_runner_id: String,
    pub reservation_id: Option<Uuid>,
    pub runner_session_id: Option<Uuid>,
    pub reason: crate::provisioners::TerminateReason,
    pub requested_at: DateTime<Utc>,
}

impl FactDetail for InstanceTerminateRequested {
    const DETAIL_TYPE: &'static str = "baton.runners.instance.terminate_requested";
    const CONTEXT: Context = Context::Runners;
}

/// Every detail type Baton publishes.
pub const ALL_DETAIL_TYPES: &[&str] = &[
    PipelineChanged::DETAIL_TYPE,
    RunRequested::DETAIL_TYPE,
    RunAttemptCreated::DETAIL_TYPE,
    JobExecutionQueued::DETAIL_TYPE,
    JobExecutionTerminated::DETAIL_TYPE,
    JobTerminated::DETAIL_TYPE,
    JobWaiting::DETAIL_TYPE,
    ApprovalDecided::DETAIL_TYPE,
    RunTerminated::DETAIL_TYPE,
    RunCancelled::DETAIL_TYPE,
    JobClaimed::DETAIL_TYPE,
    JobCompleted::DETAIL_TYPE,
    JobLeaseExpired::DETAIL_TYPE,
    JobUnschedulable::DETAIL_TYPE,
    ReservationCreated::DETAIL_TYPE,
    ReservationReleased::DETAIL_TYPE,
    InstanceTerminateRequested::DETAIL_TYPE,
];
