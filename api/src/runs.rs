//! The operator API's run routes (api.md "Operators"): the create and rerun
//! requests, the run view and run summaries. Defined once here so the
//! functions and clients share the very types; fields may be added, never
//! removed.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::status::{AttemptStatus, ExecutionStatus, JobStatus, RunStatus, StatusReason, StepStatus};

/// `{mode: "all" | "failed"}` of the rerun request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum RerunMode {
    All,
    Failed,
}

/// `POST /v1/workspaces/{ws}/runs`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateRunRequest {
    pub definition: String,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<std::collections::HashMap<String, serde_json::Value>>))]
    pub inputs: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// `POST …/runs/{run_id}/rerun`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RerunRequest {
    pub mode: RerunMode,
}

/// What both a run's view and its line in a listing open with.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunHeader {
    pub id: Uuid,
    pub workspace_id: String,
    pub name: String,
    /// The workflow's `run-name` as expanded for this run (`deploy 1.4.2 to
    /// production`), shown in its name's place; none without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub number: u64,
    pub status: RunStatus,
    pub current_attempt: u32,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunView {
    /// What a listing says of the run first.
    #[serde(flatten)]
    pub header: RunHeader,
    /// The `inputs` the run was created with.
    #[serde(default)]
    pub inputs: Option<serde_json::Value>,
    /// Who created it: the operator token's name (it may not approve the
    /// run's approval jobs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    /// What started it (behaviour.md §18): a push, a pull request, a
    /// schedule, a dispatch of a pipeline, or a file posted to the API.
    #[serde(default)]
    pub trigger: crate::pipelines::RunTrigger,
    /// The pipeline version it runs, when it came from a pipeline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<crate::pipelines::PipelineVersion>,
    pub attempts: Vec<AttemptView>,
    /// The run's artifacts (behaviour.md §17), by name: what its jobs
    /// uploaded, in every attempt (a rerun's jobs see the ones carried over).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<crate::artifacts::Artifact>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AttemptView {
    pub attempt: u32,
    #[cfg_attr(feature = "openapi", schema(value_type = RunStatus))]
    pub status: AttemptStatus,
    pub status_reason: Option<StatusReason>,
    pub rerun_mode: Option<RerunMode>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// The workflow's concurrency group, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<ConcurrencyView>,
    pub jobs: Vec<JobView>,
}

/// An attempt's place in its workflow's concurrency group, or a job's in
/// its own.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConcurrencyView {
    /// The group's name, as expanded when the run was created.
    pub group: String,
    /// It waits for the group's running attempt (or job) to end: none of
    /// its jobs (or the job) has started.
    pub waiting: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobView {
    pub id: Uuid,
    pub key: String,
    /// Its `name:` when it has one written without expressions; a job of a
    /// called workflow is "caller / job", as GitHub shows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub status: JobStatus,
    pub status_reason: Option<StatusReason>,
    /// What went wrong, in words, when `status_reason` alone cannot say
    /// (`invalid_matrix`: which value of the matrix, and why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// The job failed (`status_reason` says how) and its
    /// `continue-on-error` made it `succeeded`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub soft_failed: bool,
    /// Its `retry:` limit: up to this many executions after the first
    /// (`executions` lists every one, oldest first).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub max_retries: u32,
    pub labels: Vec<String>,
    pub needs: Vec<String>,
    pub carried_over: bool,
    #[serde(default)]
    pub outputs: BTreeMap<String, serde_json::Value>,
    /// From its execution's start to its end (so far, while it runs).
    #[serde(default)]
    pub duration_ms: Option<u64>,
    pub executions: Vec<ExecutionView>,
    /// An approval job (`approval:`): what it waits for and who decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalView>,
    /// A listening job (`listen:`): what it listens for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listening: Option<ListeningView>,
    /// A job with `concurrency:`, once it was due to start: its group and
    /// whether it waits for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<ConcurrencyView>,
    /// The job's `environment:` as written (GitHub's deployment target):
    /// shown, not enforced; Baton's gate for a deploy is an `approval:` job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<JobEnvironment>,
}

/// A job's `environment:` (`name`, or `{name, url}`), as written: an
/// expression in either is kept as text.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobEnvironment {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// What an approval job waits for, and the decisions so far.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApprovalView {
    pub required: u32,
    /// Token names or groups whose approvals count (empty: any operator of
    /// the workspace but the run's creator).
    pub from: Vec<String>,
    pub inputs: BTreeMap<String, ApprovalInput>,
    pub on_timeout: OnTimeout,
    /// While it waits: when its timeout ends the wait.
    pub deadline: Option<DateTime<Utc>>,
    pub decisions: Vec<ApprovalDecision>,
}

/// One typed field an approver fills (`approval.inputs.<name>`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApprovalInput {
    #[serde(rename = "type")]
    pub kind: ApprovalInputKind,
    /// A `choice`'s options.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    /// It must be given by the approvals (when it has no default).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ApprovalInputKind {
    String,
    Boolean,
    Choice,
}

/// What an approval's timeout does.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum OnTimeout {
    /// The job fails `timed_out`.
    Fail,
    /// The job succeeds with the inputs given so far and their defaults.
    Approve,
    /// The job is skipped.
    Skip,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Approve,
    Reject,
}

/// One approver's decision, as recorded.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApprovalDecision {
    /// The deciding operator token's name.
    pub by: String,
    pub decision: Decision,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<String, serde_json::Value>,
    pub at: DateTime<Utc>,
}

/// What a delivered event does to a listening job.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Disposition {
    /// Run the job's steps once for it.
    Fire,
    /// Stop listening (after the running execution).
    Resolve,
}

/// `POST …/runs/{run_id}/jobs/{job_id}/events`.
///
/// Unknown fields are ignored, as on every route (api.md).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventDelivery {
    /// One of the names the job listens for.
    pub name: String,
    pub disposition: Disposition,
    /// The event's own id: a repeat of a `ref` is delivered once.
    #[serde(rename = "ref")]
    pub reference: String,
    /// At most 8 KiB as JSON: `${{ event.payload.<path> }}` reads it.
    #[serde(default)]
    pub payload: serde_json::Value,
}

/// The detail of a `baton.external.job_event` a producer puts on the
/// stack's bus: an event for a listening job, delivered as the events
/// route delivers it (behaviour.md §16).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExternalJobEvent {
    /// The run's workspace: an event naming a run of another workspace is
    /// dropped (and counted).
    pub workspace_id: String,
    pub run_id: Uuid,
    /// The job: its key (e.g. `on-review`) or its id.
    pub job: String,
    pub name: String,
    pub disposition: Disposition,
    #[serde(rename = "ref")]
    pub reference: String,
    #[serde(default)]
    pub payload: serde_json::Value,
}

/// The detail type of [`ExternalJobEvent`].
pub const EXTERNAL_JOB_EVENT: &str = "baton.external.job_event";

/// The events route's answer: whether this delivery changed the job.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventDelivered {
    pub delivered: bool,
}

/// A listening job: what it listens for, until when, what waits.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ListeningView {
    pub events: Vec<String>,
    /// While it listens: when its timeout ends it.
    pub until: Option<DateTime<Utc>>,
    /// Events delivered and not handled yet (they wait for the running
    /// execution), as `name`/`ref`.
    pub pending: Vec<EventRef>,
}

/// Which event an execution of a listening job handles.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventRef {
    pub name: String,
    #[serde(rename = "ref")]
    pub reference: String,
}

/// `POST …/runs/{run_id}/jobs/{job_id}/approval`.
///
/// Unknown fields are ignored, as on every route (api.md).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApprovalRequest {
    pub decision: Decision,
    #[serde(default)]
    pub comment: Option<String>,
    /// Values of the approval's declared inputs.
    #[serde(default)]
    pub inputs: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExecutionView {
    pub id: Uuid,
    pub status: ExecutionStatus,
    pub status_reason: Option<StatusReason>,
    pub queued_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// A retry waiting for its `backoff`: it is queued at this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<DateTime<Utc>>,
    pub runner_session_id: Option<Uuid>,
    /// A listening job's execution: the event it handles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<EventRef>,
    /// Queued with labels no registered runner and no provisioner offers:
    /// what it waits for, and when it fails unless a runner claims it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unschedulable: Option<Unschedulable>,
    /// From `started_at` to `finished_at` (so far, while it runs).
    #[serde(default)]
    pub duration_ms: Option<u64>,
    pub steps: Vec<StepView>,
}

/// Why a queued execution waits for nothing that exists.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Unschedulable {
    /// The labels it requires that nobody offers.
    pub labels: Vec<String>,
    /// It fails `unschedulable` then, unless a runner claims it first.
    pub fails_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StepView {
    pub id: Uuid,
    pub name: Option<String>,
    /// As the runner reports it, live while the job runs.
    pub status: StepStatus,
    /// A `failed` step whose `continue-on-error` let the job go on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub soft_failed: bool,
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub finished_at: Option<DateTime<Utc>>,
    /// From `started_at` to `finished_at` (so far, while it runs).
    #[serde(default)]
    pub duration_ms: Option<u64>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Milliseconds from `start` to `end`, or to `now` while it has not ended.
pub fn duration_ms(start: Option<DateTime<Utc>>, end: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Option<u64> {
    let start = start?;
    let end = end.unwrap_or(now);
    u64::try_from((end - start).num_milliseconds()).ok()
}

/// One item of `GET …/runs`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunSummary {
    /// What a listing says of the run first.
    #[serde(flatten)]
    pub header: RunHeader,
    /// What started it: `push`, `pull_request`, `schedule`, `dispatch` or
    /// `api` (its view has the details).
    #[serde(default)]
    pub trigger: crate::pipelines::TriggerKind,
    /// The pipeline it runs, when it came from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<String>,
}

/// `GET …/runs`: newest first.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunList {
    pub items: Vec<RunSummary>,
    pub next_cursor: Option<String>,
}
