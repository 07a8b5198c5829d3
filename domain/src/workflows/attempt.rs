//! The state of one attempt of a run, and every change made to it: started,
//! advanced by the orchestrator, moved by a runner's fact, cancelled (pure:
//! each change mutates the state and returns the facts it must publish, in
//! the same transaction, by the caller).
//!
//! Why one state for the whole attempt: an attempt's jobs and their
//! executions live on **one** item (the attempt item). A run of 256 jobs
//! would need 512 job and execution items, past the 100 items a
//! `TransactWriteItems` holds, so creating a run could not be atomic; one
//! item keeps creation at a handful of items and lets the orchestrator read
//! the whole attempt with one `GetItem`. The item stays small (ids, statuses and
//! timestamps, 400 to 600 bytes a job; the definition lives in its own frozen
//! snapshot item, step results and outputs in one item per finished
//! execution): 148 KB for 256 finished jobs with 99-character keys (a unit
//! test measures it), under DynamoDB's 400 KB. The cost is contention:
//! every change of the attempt is a compare-and-set on its `version`, so
//! outcomes of jobs finishing together retry against each other (writers
//! in one process take an in-process lock first, see `store::serialize`),
//! and every write is billed for the whole item (1 KB a unit, twice in a
//! transaction): a 10-job attempt is about 5 KB; a 256-job one pays more per
//! outcome, the price of atomic creation and a one-read orchestrator.
//!
//! Changes that publish facts are bounded (`budget` jobs a call) so that one
//! transaction never exceeds 100 items; the caller loops until nothing
//! changes.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::approval::{self, ApprovalSpec, Approver, TimedOut, Verdict};
use super::concurrency::{self, GroupHold, HoldStatus, Member};
use super::dag::{plan_advance, JobSnapshot};
use super::definition::{JobDefinition, WorkflowDefinition};
use super::execution::{apply_execution_event, ExecutionEvent, ExecutionState, ExecutionUpdate};
use super::expressions;
use super::listening::{self, DeliveryError, JobEvent, ListenSpec, ListenState};
use super::matrix;
use super::references::{self, ExpressionData, JobScope, NeedState};
use super::rerun::RerunMode;
use super::retry::{self, RetryPolicy};
use super::status::derive_attempt_status;
use super::status::{AttemptStatus, ExecutionStatus, JobStatus, RunStatus, StatusReason, StepStatus};
use baton_api::facts::{
    ApprovalDecided, JobExecutionQueued, JobExecutionTerminated, JobSpec, JobTerminated, JobWaiting, OutputFrom,
    QueuedJob, RunCancelled, RunTerminated, StepResult, StepSpec, WaitingFor,
};
use baton_api::runs::ApprovalRequest;
use baton_api::runs::EventRef;

/// The run, as its item holds it (the run mirrors its current attempt).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    pub id: Uuid,
    pub workspace_id: String,
    pub name: String,
    pub number: u64,
    pub status: RunStatus,
    pub current_attempt: u32,
    #[serde(with = "crate::time::stored")]
    pub created_at: DateTime<Utc>,
    #[serde(default, with = "crate::time::stored_option")]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(default, with = "crate::time::stored_option")]
    pub finished_at: Option<DateTime<Utc>>,
    /// The `inputs` of the create request, as JSON text.
    #[serde(default)]
    pub inputs: Option<String>,
    /// The identity of the operator token that created it: it may not
    /// approve the run's approval jobs (`workflows::approval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
}

/// One attempt: its status and every job's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptState {
    pub run_id: Uuid,
    pub workspace_id: String,
    pub attempt: u32,
    pub status: AttemptStatus,
    pub reason: Option<StatusReason>,
    pub rerun_mode: Option<RerunMode>,
    /// The attempt whose snapshot item holds this attempt's definition
    /// (a rerun points at its predecessor's: snapshots never change).
    pub snapshot_attempt: u32,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// The run timeout, set when the attempt starts.
    pub deadline: Option<DateTime<Utc>>,
    pub jobs: Vec<JobState>,
    /// Its place in the workflow's concurrency group, if it has one: no
    /// job starts while it waits (`workflows::concurrency`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<GroupHold>,
}

/// One job of an attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobState {
    pub id: Uuid,
    pub key: String,
    pub status: JobStatus,
    pub reason: Option<StatusReason>,
    /// Copied from the previous attempt by a `failed` rerun; never executed.
    pub carried_over: bool,
    /// For a carried-over job: the execution (of an earlier attempt) whose
    /// result item holds the job's steps and outputs. Outputs live in result
    /// items, never here, so the attempt item stays small whatever the jobs
    /// output.
    #[serde(default)]
    pub carried_from: Option<Uuid>,
    /// `None` only for carried-over jobs.
    pub execution: Option<ExecutionRecord>,
    /// Its `continue-on-error`, decided when it was queued.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub continue_on_error: bool,
    /// It failed (`reason` says how) and `continue-on-error` made it
    /// `succeeded`: the run is not failed by it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub soft_failed: bool,
    /// Its `retry:`, copied when it is queued: what decides, when an
    /// execution fails, whether another is started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryPolicy>,
    /// Executions that failed and were retried, in order (`execution` is
    /// the latest): their own steps, logs and leases, kept for the view.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier_executions: Vec<ExecutionRecord>,
    /// An approval job's decisions, in order: each approver once, at most
    /// `required` approvals and one rejection (`workflows::approval`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<super::approval::ApprovalDecision>,
    /// A listening job, once it listens: its deadline, its waiting events,
    /// the refs delivered (`workflows::listening`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<ListenState>,
    /// Its place in its `concurrency:` group, once it was due to start: it
    /// is queued only holding it, and leaves it when it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<GroupHold>,
}

impl JobState {
    /// Every execution of the job in this attempt, oldest first.
    pub fn executions(&self) -> impl Iterator<Item = &ExecutionRecord> {
        self.earlier_executions.iter().chain(self.execution.as_ref())
    }
}

impl ExecutionRecord {
    /// A new execution that has not been queued yet.
    pub fn pending() -> Self {
        Self {
            id: crate::ids::new_id(),
            status: ExecutionStatus::Pending,
            reason: None,
            queued_at: None,
            started_at: None,
            finished_at: None,
            deadline: None,
            runner_session_id: None,
            not_before: None,
            avoid_session: None,
            event: None,
            unschedulable: None,
        }
    }
}

/// The job's execution in this attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionRecord {
    pub id: Uuid,
    pub status: ExecutionStatus,
    pub reason: Option<StatusReason>,
    pub queued_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// The job timeout, counted from queueing (a claim does not move it).
    pub deadline: Option<DateTime<Utc>>,
    pub runner_session_id: Option<Uuid>,
    /// A retry's backoff: the pending execution is not queued before this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<DateTime<Utc>>,
    /// A `runner_lost` retry: the session that lost it, which other
    /// runners go before (`QueuedJob::avoid_session`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avoid_session: Option<Uuid>,
    /// A listening job's execution: the event it handles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<baton_api::runs::EventRef>,
    /// Queued with labels nobody offers (`runners.job.unschedulable`): it
    /// fails `unschedulable` at its `fails_at` unless a runner claims it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unschedulable: Option<baton_api::runs::Unschedulable>,
}

/// A fact a change must publish, in the transaction that writes the change.
// The queued variant carries the job's spec: these live for one change, a
// few dozen at most, so a box would cost an allocation each for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Emitted {
    /// A job queued: its fact, and its spec (written to the table with it).
    Queued {
        fact: JobExecutionQueued,
        spec: JobSpec,
    },
    ExecutionTerminated(JobExecutionTerminated),
    JobTerminated(JobTerminated),
    RunTerminated(RunTerminated),
    RunCancelled(RunCancelled),
    /// An approval or a listening job started waiting.
    JobWaiting(JobWaiting),
    /// An approver's decision (`workflows::approval`).
    ApprovalDecided(ApprovalDecided),
    /// An execution that ran on no runner ended with these outputs (an
    /// approval's inputs): its result item, as a runner's outcome writes.
    Results {
        run_id: Uuid,
        attempt: u32,
        execution_id: Uuid,
        outputs: BTreeMap<String, serde_json::Value>,
    },
}

/// The executions `before` had queued (claimable, or claimed without the
/// attempt knowing: claims do not write it) that `after` ended for the
/// workflow's own reasons, a timeout or a cancel. Until their terminated
/// fact reaches the runners' side, their pending items are still in the
/// queue: the write that ends them flags their runners' records too, and a
/// claim of a flagged record fails (`store::queue::try_claim`), so no runner
/// starts a job that was already cancelled. An end the runner brought (its
/// outcome) needs no flag: its record is not pending any more.
pub fn withdrawn_executions(before: &AttemptState, after: &AttemptState) -> Vec<Uuid> {
    let was_queued = |id: Uuid| {
        before
            .jobs
            .iter()
            .filter_map(|job| job.execution.as_ref())
            .any(|e| e.id == id && matches!(e.status, ExecutionStatus::Queued | ExecutionStatus::Running))
    };
    // A timed-out execution that was retried is among the earlier ones.
    after
        .jobs
        .iter()
        .flat_map(JobState::executions)
        .filter(|e| e.status.is_terminal())
        .filter(|e| {
            matches!(
                e.reason,
                Some(
                    StatusReason::TimedOut
                        | StatusReason::RunCancelled
                        | StatusReason::FailFast
                        | StatusReason::ConcurrencyReplaced
                        | StatusReason::Unschedulable
                )
            )
        })
        .filter(|e| was_queued(e.id))
        .map(|e| e.id)
        .collect()
}

pub use crate::ids::step_id;

/// The status of every step of job `job_key`'s execution `execution_id`, in
/// order: what its runner reported, `pending` for steps never reported on.
pub fn step_statuses(
    definition: &WorkflowDefinition,
    job_key: &str,
    execution_id: Uuid,
    reported: &[StepResult],
) -> Vec<StepStatus> {
    let count = definition.job(job_key).map_or(0, |job| job.steps.len());
    (0..count)
        .map(|index| {
            let id = step_id(execution_id, index);
            // A soft-failed step ended without failing the job: for the
            // job's outcome it counts as a step that went well.
            reported.iter().find(|step| step.id == id).map_or(StepStatus::Pending, |step| match step.soft_failed {
                true => StepStatus::Succeeded,
                false => step.status,
            })
        })
        .collect()
}

/// What a runner needs to execute `job`: its steps and env with every
/// `${{ … }}` resolved in `scope` (left as written without one, to measure
/// the spec), and where its outputs come from.
pub fn job_spec(
    definition: &WorkflowDefinition,
    job: &JobDefinition,
    execution_id: Uuid,
    minute: Duration,
    scope: Option<&JobScope<'_>>,
) -> JobSpec {
    let minutes = |m: u32| u64::from(m) * minute.as_secs();
    let mut budget = EXPANSION_BUDGET;
    let mut resolve = |text: &str, scope: Option<&JobScope<'_>>| match scope {
        Some(scope) => expand(text, scope, &mut budget),
        None => text.to_string(),
    };
    let mut env = BTreeMap::new();
    for (name, value) in definition.env.iter().chain(&job.env) {
        env.insert(name.clone(), resolve(value, scope));
    }
    // `env.X` in the steps reads the job's env as resolved above.
    let job_scope = scope.map(|scope| JobScope { env: env.clone(), needs: scope.needs.clone(), ..*scope });
    let scope = job_scope.as_ref();
    let step_ids: Vec<Uuid> = (0..job.steps.len()).map(|index| step_id(execution_id, index)).collect();
    let steps = job
        .steps
        .iter()
        .enumerate()
        .map(|(index, step)| {
            // A step's expressions also see the step's own env.
            let step_scope = scope.map(|scope| {
                let mut env = scope.env.clone();
                env.extend(step.env.iter().map(|(k, v)| (k.clone(), expressions::interpolate(v, scope))));
                JobScope { env, needs: scope.needs.clone(), ..*scope }
            });
            StepSpec {
                id: step_ids[index],
                name: step.name.clone(),
                run: resolve(&step.run, step_scope.as_ref()),
                env: step.env.iter().map(|(k, v)| (k.clone(), resolve(v, step_scope.as_ref()))).collect(),
                timeout_s: step.timeout_minutes.map(minutes),
                continue_on_error: decided(step.continue_on_error.as_deref(), step_scope.as_ref()),
            }
        })
        .collect();
    let outputs = job
        .outputs
        .iter()
        .map(|(name, source)| {
            let step = source
                .step
                .as_ref()
                .and_then(|id| job.steps.iter().position(|s| s.id.as_ref() == Some(id)))
                .map(|index| step_ids[index]);
            (name.clone(), OutputFrom { step, key: source.key.clone() })
        })
        .collect();
    let mut mask_env: Vec<String> = definition.mask_env.iter().chain(&job.mask_env).cloned().collect();
    mask_env.sort();
    mask_env.dedup();
    JobSpec {
        key: job.key.clone(),
        labels: job.labels.clone(),
        timeout_s: minutes(job.timeout_minutes),
        env,
        steps,
        outputs,
        mask_env,
        continue_on_error: decided(job.continue_on_error.as_deref(), scope),
        priority: priority_of(job.priority.as_deref(), scope),
        secrets: references::secrets_used(definition, job),
    }
}

/// A `priority` as decided in `scope`: a whole number (clamped to
/// `PRIORITY_RANGE`), 0 when it is not one or there is no scope to decide it.
fn priority_of(priority: Option<&str>, scope: Option<&JobScope<'_>>) -> i32 {
    let text = match (priority, scope) {
        (None, _) => return 0,
        (Some(text), Some(scope)) => expressions::interpolate(text, scope),
        (Some(text), None) => text.to_string(),
    };
    let range = baton_api::facts::PRIORITY_RANGE;
    text.trim().parse::<i64>().map_or(0, |p| p.clamp(i64::from(*range.start()), i64::from(*range.end())) as i32)
}

/// A `continue-on-error` as decided in `scope`: it holds when it comes to
/// `true` (a literal `true`, or an expression whose value is `true`).
/// Without a scope (measuring a spec) only a literal `true` holds.
fn decided(continue_on_error: Option<&str>, scope: Option<&JobScope<'_>>) -> bool {
    match (continue_on_error, scope) {
        (None, _) => false,
        (Some(text), Some(scope)) => expressions::interpolate(text, scope).trim() == "true",
        (Some(text), None) => text == "true",
    }
}

/// How many bytes the expressions of one job may expand to: outputs are
/// bounded, but a job may refer to them many times, and its spec must stay
/// storable (64 KiB, `MAX_JOB_SPEC_BYTES`, less what it was written with).
pub const EXPANSION_BUDGET: usize = 32 * 1024;

/// `text` interpolated, its expansions charged to `budget`; past the budget
/// a value is replaced by a note saying so (the job runs, visibly short of
/// it, rather than a spec too large to store stalling the orchestration).
fn expand(text: &str, scope: &JobScope<'_>, budget: &mut usize) -> String {
    let expanded = expressions::interpolate(text, scope);
    let grown = expanded.len().saturating_sub(text.len());
    if grown <= *budget {
        *budget -= grown;
        expanded
    } else {
        format!("{text} [not expanded: the job's expressions expand past {EXPANSION_BUDGET} bytes]")
    }
}

/// A leg of a matrix job another job needs, as its expressions see it.
struct LegNeed<'a> {
    key: &'a str,
    status: JobStatus,
    soft_failed: bool,
    outputs: Option<&'a BTreeMap<String, String>>,
}

/// A matrix job's outputs as its dependants read them: each output name's
/// value is a JSON object of leg → that leg's value (legs that did not set
/// it are left out), where GitHub keeps only the last leg's.
fn matrix_outputs(legs: &[LegNeed<'_>]) -> BTreeMap<String, String> {
    let mut by_name: BTreeMap<String, serde_json::Map<String, serde_json::Value>> = BTreeMap::new();
    for leg in legs {
        for (name, value) in leg.outputs.iter().flat_map(|outputs| outputs.iter()) {
            by_name
                .entry(name.clone())
                .or_default()
                .insert(leg.key.to_string(), serde_json::Value::String(value.clone()));
        }
    }
    by_name.into_iter().map(|(name, values)| (name, serde_json::Value::Object(values).to_string())).collect()
}

/// The exit code a runner's completion carries, if any.
fn exit_code_of(event: &ExecutionEvent) -> Option<i32> {
    match event {
        ExecutionEvent::Completed { exit_code, .. } => *exit_code,
        _ => None,
    }
}

fn scaled(minutes: u32, minute: Duration) -> chrono::Duration {
    chrono::Duration::seconds(i64::from(minutes).saturating_mul(minute.as_secs() as i64))
}

fn job_status_of(status: ExecutionStatus) -> JobStatus {
    match status {
        ExecutionStatus::Pending => JobStatus::Pending,
        ExecutionStatus::Queued => JobStatus::Queued,
        ExecutionStatus::Waiting => JobStatus::Waiting,
        ExecutionStatus::Running => JobStatus::Running,
        ExecutionStatus::Succeeded => JobStatus::Succeeded,
        ExecutionStatus::Failed => JobStatus::Failed,
        ExecutionStatus::Cancelled => JobStatus::Cancelled,
    }
}

/// The result of one bounded change.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Change {
    /// Whether the state changed (and so must be written).
    pub changed: bool,
    pub emitted: Vec<Emitted>,
    /// Executions this change timed out. The caller writes the change only
    /// if their runners' records still hold no finish: a complete that
    /// landed on the runners' side first wins (finished beats timeout).
    pub timed_out: Vec<Uuid>,
    /// Executions this change failed as unschedulable. The caller writes
    /// the change only if their runners' records still show no claim (a
    /// claim that landed first wins).
    pub unschedulable: Vec<Uuid>,
    /// What jobs due to start need for their expressions and the caller
    /// has not read yet; those jobs wait (the change is not complete).
    pub missing: MissingData,
}

/// What [`AttemptState::advance_inline`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct InlineAdvance {
    pub change: Change,
    /// Nothing is left for the orchestrator: another step would change
    /// nothing and no job waits for data.
    pub complete: bool,
}

/// Data the expressions of jobs due to start read, not given to `advance`,
/// and the concurrency groups jobs must join or leave first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MissingData {
    /// The run's inputs.
    pub inputs: bool,
    /// The outputs of these (finished) executions.
    pub outputs: Vec<Uuid>,
    /// Groups to join (jobs due to start) or leave (jobs that ended); the
    /// answers go in [`ExpressionData::joined`] and [`ExpressionData::left`].
    pub groups: Vec<GroupRequest>,
}

impl MissingData {
    pub fn is_empty(&self) -> bool {
        !self.inputs && self.outputs.is_empty() && self.groups.is_empty()
    }
}

/// A job's business with its concurrency group, for the orchestrator (the
/// group item is its own write: `store::concurrency`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupRequest {
    /// The job is due to start: it joins (idempotent: joining again tells
    /// whether it holds the group now).
    Join { hold: GroupHold, member: Member },
    /// The job ended: it leaves, and whoever holds the group in its place
    /// is woken.
    Leave { group: String, member: Member },
}

/// How executions past a deadline ended on the runners' side, as their
/// runners' records say (a `Completed` or `LeaseExpired` event), by
/// execution id. The facts saying so may still be crossing the pipeline;
/// the timeout path applies these instead of a timeout, so behaviour.md
/// §9's "finished > lease expired > timeout" holds whatever the pipeline's
/// latency. An execution its runner claimed and still runs maps to its
/// `Claimed` event: not an ending (a timeout still ends it), but it keeps
/// an unschedulable execution from failing.
pub type RunnerEndings = std::collections::HashMap<Uuid, ExecutionEvent>;

/// What a runner's fact did to an execution.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunnerEffect {
    pub changed: bool,
    /// The execution (and its job) just became terminal: an outcome that
    /// wakes the orchestration.
    pub finished: bool,
    pub emitted: Vec<Emitted>,
}

/// What a new attempt is made of.
#[derive(Debug, Clone, Copy)]
pub struct NewAttempt<'a> {
    pub run_id: Uuid,
    pub workspace_id: &'a str,
    /// Its number: 1 on creation, n+1 on a rerun.
    pub attempt: u32,
    /// The frozen definition it runs.
    pub definition: &'a WorkflowDefinition,
    /// The attempt whose snapshot item holds `definition`.
    pub snapshot_attempt: u32,
    pub rerun_mode: Option<RerunMode>,
    /// Jobs carried over from the previous attempt, by key.
    pub carried: &'a BTreeMap<String, JobState>,
    pub now: DateTime<Utc>,
}

/// Why an attempt cannot be cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlreadyFinished;

impl AttemptState {
    /// A new attempt whose jobs are all pending with a pending execution,
    /// except `carried` ones (key → the previous attempt's job), which are
    /// copied with `carried_over: true` and no execution.
    pub fn new(new: NewAttempt<'_>) -> Self {
        let NewAttempt { run_id, workspace_id, attempt, definition, snapshot_attempt, rerun_mode, carried, now } = new;
        let jobs = definition
            .jobs
            .iter()
            .map(|job| match carried.get(&job.key) {
                Some(previous) => JobState {
                    id: crate::ids::new_id(),
                    key: job.key.clone(),
                    status: previous.status,
                    reason: previous.reason,
                    carried_over: true,
                    carried_from: previous.carried_from.or(previous.execution.as_ref().map(|e| e.id)),
                    execution: None,
                    continue_on_error: previous.continue_on_error,
                    soft_failed: previous.soft_failed,
                    retry: None,
                    earlier_executions: Vec::new(),
                    decisions: Vec::new(),
                    listen: None,
                    concurrency: None,
                },
                None => JobState {
                    id: crate::ids::new_id(),
                    key: job.key.clone(),
                    status: JobStatus::Pending,
                    reason: None,
                    carried_over: false,
                    carried_from: None,
                    execution: Some(ExecutionRecord::pending()),
                    continue_on_error: false,
                    soft_failed: false,
                    retry: None,
                    earlier_executions: Vec::new(),
                    decisions: Vec::new(),
                    listen: None,
                    concurrency: None,
                },
            })
            .collect();
        Self {
            run_id,
            workspace_id: workspace_id.to_string(),
            attempt,
            status: AttemptStatus::Pending,
            reason: None,
            rerun_mode,
            snapshot_attempt,
            created_at: now,
            started_at: None,
            finished_at: None,
            deadline: None,
            jobs,
            concurrency: None,
        }
    }

    /// This attempt as its concurrency group lists it.
    pub fn member(&self) -> Member {
        Member { run_id: self.run_id, attempt: self.attempt, job: None }
    }

    /// Job `index` as its concurrency group lists it.
    fn job_member(&self, index: usize) -> Member {
        Member { run_id: self.run_id, attempt: self.attempt, job: Some(self.jobs[index].id) }
    }

    /// Where job `index`, due to start, stands with its concurrency group:
    /// free to start (no group, or holding it), holding it now (the group
    /// said so), waiting (the group said so), or not asked yet.
    fn job_group_turn(
        &self,
        index: usize,
        defined: &JobDefinition,
        scope: &JobScope<'_>,
        data: &ExpressionData,
    ) -> GroupTurn {
        let Some(spec) = &defined.concurrency else { return GroupTurn::Free };
        let job = &self.jobs[index];
        if job.concurrency.as_ref().is_some_and(|hold| hold.status == HoldStatus::Holding) {
            return GroupTurn::Free;
        }
        // The name was checked when the run was created, from the same
        // inputs, matrix values and ids: it cannot come out bad here. Were
        // it to, the job's key stands in (the job still takes turns).
        let hold = concurrency::hold_of(spec, scope).unwrap_or_else(|_| GroupHold {
            group: defined.key.clone(),
            cancel_in_progress: false,
            queue: spec.queue,
            limit: spec.limit,
            status: HoldStatus::Waiting,
        });
        match data.joined.get(&job.id) {
            Some(true) => GroupTurn::Holds(GroupHold { status: HoldStatus::Holding, ..hold }),
            Some(false) => GroupTurn::Waits(hold),
            None => GroupTurn::Ask(GroupRequest::Join { hold, member: self.job_member(index) }),
        }
    }

    /// Jobs that ended in a group they have not left yet leave it (asked of
    /// the orchestrator; once it says they have, their holds are marked
    /// left). How many holds it marked.
    fn leave_job_groups(&mut self, data: &ExpressionData, change: &mut Change) -> usize {
        let mut marked = 0;
        for index in 0..self.jobs.len() {
            let job = &self.jobs[index];
            let Some(hold) = job.concurrency.as_ref().filter(|h| h.status != HoldStatus::Left) else { continue };
            if !job.status.is_terminal() {
                continue;
            }
            if data.left.contains(&job.id) {
                if let Some(hold) = self.jobs[index].concurrency.as_mut() {
                    hold.status = HoldStatus::Left;
                }
                change.changed = true;
                marked += 1;
            } else {
                let group = hold.group.clone();
                change.missing.groups.push(GroupRequest::Leave { group, member: self.job_member(index) });
            }
        }
        marked
    }

    /// The concurrency groups held (or waited for) by jobs that have not
    /// left them: what a done attempt leaves on its way out.
    pub fn job_groups(&self) -> Vec<(String, Member)> {
        (0..self.jobs.len())
            .filter_map(|index| {
                let hold = self.jobs[index].concurrency.as_ref().filter(|h| h.status != HoldStatus::Left)?;
                Some((hold.group.clone(), self.job_member(index)))
            })
            .collect()
    }

    /// Job `job_id` is replaced in its concurrency group by a newer job:
    /// it ends `cancelled` (reason `concurrency_replaced`; its runner is
    /// told as on any cancel) unless it has ended already (`None`).
    pub fn replace_job(&mut self, job_id: Uuid, now: DateTime<Utc>) -> Option<Vec<Emitted>> {
        let index = self.jobs.iter().position(|job| job.id == job_id)?;
        if self.jobs[index].status.is_terminal() {
            return None;
        }
        let reason = Some(StatusReason::ConcurrencyReplaced);
        Some(self.end_job(index, JobStatus::Cancelled, ExecutionStatus::Cancelled, reason, now))
    }

    /// Whether it waits for its concurrency group (no job may start).
    pub fn waits_for_group(&self) -> bool {
        self.concurrency.as_ref().is_some_and(|hold| hold.status == HoldStatus::Waiting)
    }

    /// It holds its group now: its jobs may start. `false` when it already
    /// did, has no group, or has ended (nothing will start any more).
    pub fn hold_group(&mut self) -> bool {
        match &mut self.concurrency {
            Some(hold) if hold.status == HoldStatus::Waiting && !self.status.is_terminal() => {
                hold.status = HoldStatus::Holding;
                true
            }
            _ => false,
        }
    }

    /// Whether every job is terminal (nothing will run any more).
    pub fn all_jobs_terminal(&self) -> bool {
        self.jobs.iter().all(|job| job.status.is_terminal())
    }

    /// Whether the attempt is over: its status is terminal and so is every
    /// job (an `always()` job may still run after a cancel).
    pub fn is_done(&self) -> bool {
        self.status.is_terminal() && self.all_jobs_terminal()
    }

    /// The earliest deadline still ahead of the orchestration: a running
    /// execution's job timeout or the run timeout.
    pub fn next_deadline(&self) -> Option<DateTime<Utc>> {
        let executions = self
            .jobs
            .iter()
            .filter_map(|job| job.execution.as_ref())
            .filter(|e| !e.status.is_terminal())
            .filter_map(|e| e.deadline);
        let run = if self.status.is_terminal() { None } else { self.deadline };
        // A retry waiting for its backoff is queued then.
        let retries = self
            .jobs
            .iter()
            .filter(|job| job.status == JobStatus::Pending)
            .filter_map(|job| job.execution.as_ref()?.not_before);
        // A listening job's timeout.
        let listening = self
            .jobs
            .iter()
            .filter(|job| !job.status.is_terminal())
            .filter_map(|job| job.listen.as_ref().map(|listen| listen.until));
        // An unschedulable execution's failure.
        let unschedulable = self.unschedulable_deadlines();
        executions.chain(run).chain(retries).chain(listening).chain(unschedulable).min()
    }

    /// When each queued execution flagged unschedulable fails.
    fn unschedulable_deadlines(&self) -> impl Iterator<Item = DateTime<Utc>> + '_ {
        self.jobs
            .iter()
            .filter_map(|job| job.execution.as_ref())
            .filter(|e| e.status == ExecutionStatus::Queued)
            .filter_map(|e| e.unschedulable.as_ref().map(|u| u.fails_at))
    }

    /// Flags job `job_id`'s execution `execution_id` unschedulable (from
    /// the runners' fact): `false` when it is no longer that job's queued
    /// execution or is flagged already (a replayed fact changes nothing).
    pub fn mark_unschedulable(
        &mut self,
        job_id: Uuid,
        execution_id: Uuid,
        mark: baton_api::runs::Unschedulable,
    ) -> bool {
        let Some(index) = self.job_index(job_id) else { return false };
        match self.jobs[index].execution.as_mut() {
            Some(e) if e.id == execution_id && e.status == ExecutionStatus::Queued && e.unschedulable.is_none() => {
                e.unschedulable = Some(mark);
                true
            }
            _ => false,
        }
    }

    /// The executions a timeout would end at `now`: every unfinished one once
    /// the run timeout passed, else those past their job timeout. Their
    /// runners' records are what [`AttemptState::advance`] needs to know.
    pub fn overdue_executions(&self, now: DateTime<Utc>) -> Vec<Uuid> {
        let run_timed_out = !self.status.is_terminal() && self.deadline.is_some_and(|d| d <= now);
        self.jobs
            .iter()
            .filter_map(|job| job.execution.as_ref())
            .filter(|e| !e.status.is_terminal() && e.status != ExecutionStatus::Pending)
            .filter(|e| {
                run_timed_out
                    || e.deadline.is_some_and(|d| d <= now)
                    || (e.status == ExecutionStatus::Queued
                        && e.unschedulable.as_ref().is_some_and(|u| u.fails_at <= now))
            })
            .map(|e| e.id)
            .collect()
    }

    fn job_index(&self, job_id: Uuid) -> Option<usize> {
        self.jobs.iter().position(|job| job.id == job_id)
    }

    /// Ends job `index` as its runner did, if `ended` knows how (finished
    /// or lease expired, by the precedence of [`apply_execution_event`]);
    /// `None` when the runners' side holds no ending for its execution.
    fn end_as_the_runner_did(
        &mut self,
        index: usize,
        ended: &RunnerEndings,
        may_retry: bool,
        now: DateTime<Utc>,
    ) -> Option<Vec<Emitted>> {
        let execution = self.jobs[index].execution.as_ref()?;
        let event = ended.get(&execution.id)?;
        let state =
            ExecutionState { status: execution.status, reason: execution.reason, started_at: execution.started_at };
        match apply_execution_event(&state, event) {
            ExecutionUpdate::Apply(next) if next.status.is_terminal() => {
                Some(self.conclude(index, &next, exit_code_of(event), may_retry, now))
            }
            _ => None,
        }
    }

    /// What an execution's end (`next`) does to job `index`: a listening
    /// job listens again; otherwise a retry, or the job's end.
    fn conclude(
        &mut self,
        index: usize,
        next: &ExecutionState,
        exit_code: Option<i32>,
        may_retry: bool,
        now: DateTime<Utc>,
    ) -> Vec<Emitted> {
        if self.jobs[index].listen.is_some() && !self.jobs[index].status.is_terminal() {
            return self.listen_again(index, next, now);
        }
        if may_retry {
            if let Some(emitted) = self.retry(index, next, exit_code, now) {
                return emitted;
            }
        }
        self.end_job(index, job_status_of(next.status), next.status, next.reason, now)
    }

    /// Job `index`, listening, starts listening: no runner until an event
    /// fires; its listening timeout counts from now.
    fn start_listening(
        &mut self,
        index: usize,
        spec: &ListenSpec,
        now: DateTime<Utc>,
        minute: Duration,
    ) -> Option<Emitted> {
        let until = now + scaled(spec.timeout_minutes, minute);
        let emitted = self.start_waiting(index, WaitingFor::Events, until)?;
        self.jobs[index].listen = Some(ListenState { until, pending: Vec::new(), refs: Vec::new() });
        Some(emitted)
    }

    /// Job `index` and its execution wait (for events or for people) until
    /// `until`, with no runner and no queue: the `job.waiting` fact is what
    /// a notifier subscribes to. `None` when the job has no execution.
    fn start_waiting(&mut self, index: usize, waiting_for: WaitingFor, until: DateTime<Utc>) -> Option<Emitted> {
        let (run_id, attempt) = (self.run_id, self.attempt);
        let job = &mut self.jobs[index];
        let execution = job.execution.as_mut()?;
        job.status = JobStatus::Waiting;
        execution.status = ExecutionStatus::Waiting;
        Some(Emitted::JobWaiting(JobWaiting {
            run_id,
            attempt,
            job_id: job.id,
            job_key: job.key.clone(),
            waiting_for,
            until,
        }))
    }

    /// The execution of listening job `index` ended (`next`): it is kept
    /// with the job's earlier ones, and a fresh one waits for the next
    /// event. The job listens on, whatever the execution's outcome.
    fn listen_again(&mut self, index: usize, next: &ExecutionState, now: DateTime<Utc>) -> Vec<Emitted> {
        let (run_id, attempt) = (self.run_id, self.attempt);
        let job = &mut self.jobs[index];
        let Some(mut ended) = job.execution.take() else { return Vec::new() };
        ended.status = next.status;
        ended.reason = next.reason;
        ended.started_at = next.started_at.or(ended.started_at);
        ended.finished_at = Some(now);
        let fact = JobExecutionTerminated {
            run_id,
            attempt,
            job_id: job.id,
            job_execution_id: ended.id,
            status: ended.status.as_str().into(),
            reason: ended.reason.map(|r| r.as_str().into()),
        };
        job.earlier_executions.push(ended);
        job.execution = Some(ExecutionRecord { status: ExecutionStatus::Waiting, ..ExecutionRecord::pending() });
        job.status = JobStatus::Waiting;
        job.reason = None;
        vec![Emitted::ExecutionTerminated(fact)]
    }

    /// Listening job `index` stops listening: its last execution's outcome
    /// and outputs become the job's (`succeeded` if it never fired).
    fn stop_listening(
        &mut self,
        index: usize,
        reason: Option<StatusReason>,
        now: DateTime<Utc>,
    ) -> (Vec<Emitted>, Option<Uuid>) {
        let job = &mut self.jobs[index];
        if let Some(listen) = job.listen.as_mut() {
            listen.pending.clear();
        }
        let idle = job.execution.as_ref().is_some_and(|e| e.status == ExecutionStatus::Waiting);
        if idle {
            if let Some(last) = job.earlier_executions.pop() {
                job.execution = Some(last);
            }
        }
        let current = job.execution.as_ref();
        // A running execution the timeout stops: its runner is told.
        let stopped = current.filter(|e| !e.status.is_terminal() && e.status != ExecutionStatus::Waiting).map(|e| e.id);
        let emitted = match (reason, current.map(|e| (e.status, e.reason))) {
            (Some(reason), _) => self.end_job(index, JobStatus::Failed, ExecutionStatus::Failed, Some(reason), now),
            (None, Some((ExecutionStatus::Failed, failed))) => {
                self.end_job(index, JobStatus::Failed, ExecutionStatus::Failed, failed, now)
            }
            (None, Some((ExecutionStatus::Cancelled, why))) => {
                self.end_job(index, JobStatus::Failed, ExecutionStatus::Cancelled, why, now)
            }
            _ => self.end_job(index, JobStatus::Succeeded, ExecutionStatus::Succeeded, None, now),
        };
        (emitted, stopped)
    }

    /// Delivers `event` to listening job `job_id` (behaviour.md §16): it
    /// waits its turn (the orchestration starts it), `Ok(true)`; `Ok(false)`
    /// when it changes nothing (a repeated `ref`, a job that ended or
    /// resolves already).
    pub fn deliver_event(
        &mut self,
        definition: &WorkflowDefinition,
        job_id: Uuid,
        event: JobEvent,
    ) -> Result<bool, EventError> {
        let index = self.job_index(job_id).ok_or(EventError::NoSuchJob)?;
        let job = &mut self.jobs[index];
        let spec = definition.job(&job.key).and_then(|d| d.listen.as_ref()).ok_or(EventError::NotListening)?;
        listening::check_event(spec, &event.name, &event.reference, &event.payload).map_err(EventError::Refused)?;
        if job.status.is_terminal() {
            return Ok(false);
        }
        let Some(listen) = job.listen.as_mut() else { return Err(EventError::NotListening) };
        // It resolves already: what comes after changes nothing.
        if listen.pending.iter().any(|e| e.disposition == listening::Disposition::Resolve) {
            return Ok(false);
        }
        listening::take(listen, event).map_err(EventError::Refused)
    }

    /// Listening jobs, one bounded step: the listening timeout ends one; an
    /// idle one takes its next event (a fire queues an execution with the
    /// event in its expressions, a resolve ends the job).
    fn advance_listening(
        &mut self,
        definition: &WorkflowDefinition,
        now: DateTime<Utc>,
        minute: Duration,
        data: &ExpressionData,
        change: &mut Change,
        budget: usize,
    ) -> usize {
        let mut touched = 0;
        for index in 0..self.jobs.len() {
            if touched >= budget {
                break;
            }
            let job = &self.jobs[index];
            let Some(listen) = job.listen.as_ref() else { continue };
            if job.status.is_terminal() {
                continue;
            }
            if listen.until <= now {
                let (emitted, stopped) = self.stop_listening(index, Some(StatusReason::TimedOut), now);
                change.emitted.extend(emitted);
                change.timed_out.extend(stopped);
                change.changed = true;
                touched += 1;
                continue;
            }
            let idle = job.execution.as_ref().is_some_and(|e| e.status == ExecutionStatus::Waiting);
            let Some(next) = listen.pending.first().cloned().filter(|_| idle) else { continue };
            let Some(defined) = definition.job(&job.key) else { continue };
            match next.disposition {
                listening::Disposition::Resolve => {
                    let (emitted, _) = self.stop_listening(index, None, now);
                    change.emitted.extend(emitted);
                }
                listening::Disposition::Fire => {
                    let Some(mut scope) = self.scope_for(definition, defined, data, &mut change.missing) else {
                        continue;
                    };
                    scope.event = Some(&next);
                    let admitted = defined
                        .listen
                        .as_ref()
                        .and_then(|l| l.when.as_deref())
                        .is_none_or(|when| expressions::parse(when).is_ok_and(|e| expressions::holds(&e, &scope)));
                    if !admitted {
                        // `listen.if` rejects it: recorded, nothing runs, the
                        // job listens on for the next.
                        let job = &mut self.jobs[index];
                        if let Some(listen) = job.listen.as_mut() {
                            listen.pending.remove(0);
                        }
                        if let Some(execution) = job.execution.as_mut() {
                            execution.event =
                                Some(EventRef { name: next.name.clone(), reference: next.reference.clone() });
                        }
                        let rejected = ExecutionState {
                            status: ExecutionStatus::Cancelled,
                            reason: Some(StatusReason::ConditionRejected),
                            started_at: None,
                        };
                        change.emitted.extend(self.listen_again(index, &rejected, now));
                        change.changed = true;
                        touched += 1;
                        continue;
                    }
                    let spec = job_spec(definition, defined, self.execution_id(index), minute, Some(&scope));
                    let job = &mut self.jobs[index];
                    if let Some(listen) = job.listen.as_mut() {
                        listen.pending.remove(0);
                    }
                    if let Some(execution) = job.execution.as_mut() {
                        execution.event = Some(EventRef { name: next.name.clone(), reference: next.reference.clone() });
                    }
                    change.emitted.extend(self.start_job(index, defined, spec, now, minute));
                }
            }
            change.changed = true;
            touched += 1;
        }
        touched
    }

    /// Tries job `index` again if its `retry:` asks for how its execution
    /// ended (`ended`, a failure): the failed execution ends and is kept in
    /// `earlier_executions` (its terminated fact lets the runners' side end
    /// its records), and a new pending execution takes its place. The job is
    /// pending again, its needs still done: the next advance queues it as
    /// any ready job, its expressions resolved as before, its timeout
    /// counted from that queueing. `None` when it is not retried.
    fn retry(
        &mut self,
        index: usize,
        ended: &ExecutionState,
        exit_code: Option<i32>,
        now: DateTime<Utc>,
    ) -> Option<Vec<Emitted>> {
        let (run_id, attempt) = (self.run_id, self.attempt);
        let job = &mut self.jobs[index];
        let reason = ended.reason.filter(|_| ended.status == ExecutionStatus::Failed)?;
        let failure = retry::Failure { reason, exit_code };
        if !retry::retries(job.retry.as_ref(), failure, job.earlier_executions.len() as u32) {
            return None;
        }
        let wait = job.retry.as_ref().map(|policy| retry::delay(policy, job.earlier_executions.len() as u32));
        let lost_by = job.execution.as_ref().and_then(|e| e.runner_session_id);
        let next = ExecutionRecord {
            not_before: wait.filter(|w| !w.is_zero()).map(|w| now + w),
            avoid_session: lost_by.filter(|_| reason == StatusReason::RunnerLost),
            ..ExecutionRecord::pending()
        };
        let mut failed = job.execution.replace(next)?;
        failed.status = ExecutionStatus::Failed;
        failed.reason = Some(reason);
        failed.started_at = ended.started_at.or(failed.started_at);
        failed.finished_at = Some(now);
        let fact = JobExecutionTerminated {
            run_id,
            attempt,
            job_id: job.id,
            job_execution_id: failed.id,
            status: ExecutionStatus::Failed.as_str().into(),
            reason: Some(reason.as_str().into()),
        };
        job.earlier_executions.push(failed);
        job.status = JobStatus::Pending;
        job.reason = None;
        Some(vec![Emitted::ExecutionTerminated(fact)])
    }

    /// Ends job `index` (and its execution, if not terminal yet) with
    /// `status`/`reason`, returning the facts to publish.
    fn end_job(
        &mut self,
        index: usize,
        job_status: JobStatus,
        execution_status: ExecutionStatus,
        reason: Option<StatusReason>,
        now: DateTime<Utc>,
    ) -> Vec<Emitted> {
        let mut emitted = Vec::new();
        let (run_id, attempt) = (self.run_id, self.attempt);
        let job = &mut self.jobs[index];
        // `continue-on-error`: the execution failed and says so; the job
        // succeeds, marked, so neither its run nor its dependants fail.
        // A cancel is not a failure and stays one.
        let soft_failed = job_status == JobStatus::Failed && job.continue_on_error;
        let job_status = if soft_failed { JobStatus::Succeeded } else { job_status };
        if let Some(execution) = job.execution.as_mut() {
            if !execution.status.is_terminal() {
                execution.status = execution_status;
                execution.reason = reason;
                execution.finished_at = Some(now);
                emitted.push(Emitted::ExecutionTerminated(JobExecutionTerminated {
                    run_id,
                    attempt,
                    job_id: job.id,
                    job_execution_id: execution.id,
                    status: execution_status.as_str().into(),
                    reason: reason.map(|r| r.as_str().into()),
                }));
            }
        }
        if !job.status.is_terminal() {
            job.status = job_status;
            job.reason = reason;
            job.soft_failed = soft_failed;
            emitted.push(Emitted::JobTerminated(JobTerminated {
                run_id,
                attempt,
                job_id: job.id,
                job_key: job.key.clone(),
                status: job_status.as_str().into(),
                reason: reason.map(|r| r.as_str().into()),
                soft_failed,
            }));
        }
        emitted
    }

    fn finish(&mut self, status: AttemptStatus, reason: Option<StatusReason>, now: DateTime<Utc>) -> Vec<Emitted> {
        if self.status.is_terminal() {
            return Vec::new();
        }
        self.status = status;
        self.reason = reason;
        self.finished_at = Some(now);
        vec![Emitted::RunTerminated(RunTerminated {
            run_id: self.run_id,
            attempt: self.attempt,
            status: status.as_str().into(),
            reason: reason.map(|r| r.as_str().into()),
        })]
    }

    /// One bounded step of the orchestrator (behaviour.md §9): start the
    /// attempt, apply the run timeout and job timeouts, then start, skip and
    /// cancel what [`plan_advance`] says, touching at most `budget` jobs.
    /// Finalises the attempt once every job is terminal. Call again until
    /// nothing changes.
    ///
    /// An overdue execution that `ended` on the runners' side takes that
    /// ending instead of the timeout; every other one it times out is listed
    /// in [`Change::timed_out`].
    pub fn advance(
        &mut self,
        definition: &WorkflowDefinition,
        now: DateTime<Utc>,
        minute: Duration,
        budget: usize,
        ended: &RunnerEndings,
    ) -> Change {
        self.advance_with(definition, now, minute, budget, ended, &ExpressionData::default())
    }

    /// [`Self::advance`] where a job outcome was adopted, as far as it goes
    /// without reading anything: `None`, the state untouched, when the
    /// advance needs the runners' records of overdue executions or data for
    /// the expressions of jobs due to start (the orchestrator reads those).
    /// [`InlineAdvance::complete`]: a further step would change nothing.
    pub fn advance_inline(
        &mut self,
        definition: &WorkflowDefinition,
        now: DateTime<Utc>,
        minute: Duration,
        budget: usize,
    ) -> Option<InlineAdvance> {
        let no_endings = RunnerEndings::new();
        if !self.overdue_executions(now).is_empty() {
            return None;
        }
        let mut next = self.clone();
        let change = next.advance(definition, now, minute, budget, &no_endings);
        if !change.missing.is_empty() || !change.timed_out.is_empty() || !change.unschedulable.is_empty() {
            return None;
        }
        let probe = next.clone().advance(definition, now, minute, budget, &no_endings);
        let complete = !probe.changed && probe.missing.is_empty();
        *self = next;
        Some(InlineAdvance { change, complete })
    }

    /// [`Self::advance`], with what has been read for the expressions of
    /// jobs due to start (`data`): a job whose data is missing waits, and
    /// [`Change::missing`] says what to read.
    pub fn advance_with(
        &mut self,
        definition: &WorkflowDefinition,
        now: DateTime<Utc>,
        minute: Duration,
        budget: usize,
        ended: &RunnerEndings,
        data: &ExpressionData,
    ) -> Change {
        let mut change = Change::default();
        if self.waits_for_group() {
            // Nothing starts (nor does its run timeout count) before it
            // holds its group; a cancel is the only change meanwhile, and
            // what one cancel could not hold is cancelled here, `always()`
            // jobs too (they would run outside the group).
            if self.status.is_terminal() {
                let left: Vec<usize> =
                    (0..self.jobs.len()).filter(|i| !self.jobs[*i].status.is_terminal()).take(budget).collect();
                for index in left {
                    change.emitted.extend(self.end_job(
                        index,
                        JobStatus::Cancelled,
                        ExecutionStatus::Cancelled,
                        Some(StatusReason::RunCancelled),
                        now,
                    ));
                    change.changed = true;
                }
            }
            return change;
        }
        if self.status == AttemptStatus::Pending {
            self.status = AttemptStatus::Running;
            self.started_at = Some(now);
            self.deadline = Some(now + scaled(definition.timeout_minutes, minute));
            change.changed = true;
        }
        let mut touched = self.leave_job_groups(data, &mut change);

        // The run timeout: everything still going ends as timed out.
        let run_timed_out = !self.status.is_terminal() && self.deadline.is_some_and(|d| d <= now);
        if run_timed_out {
            for index in 0..self.jobs.len() {
                if touched >= budget {
                    break;
                }
                if self.jobs[index].status.is_terminal() {
                    continue;
                }
                if let Some(emitted) = self.end_as_the_runner_did(index, ended, false, now) {
                    change.emitted.extend(emitted);
                } else {
                    let job = &self.jobs[index];
                    let pending = job.status == JobStatus::Pending;
                    let job_status = if pending { JobStatus::Skipped } else { JobStatus::Failed };
                    let execution_status = if pending { ExecutionStatus::Cancelled } else { ExecutionStatus::Failed };
                    if let Some(execution) = job.execution.as_ref().filter(|_| !pending) {
                        change.timed_out.push(execution.id);
                    }
                    change.emitted.extend(self.end_job(
                        index,
                        job_status,
                        execution_status,
                        Some(StatusReason::TimedOut),
                        now,
                    ));
                }
                change.changed = true;
                touched += 1;
            }
            if self.all_jobs_terminal() {
                change.emitted.extend(self.finish(AttemptStatus::Failed, Some(StatusReason::TimedOut), now));
                change.changed = true;
            }
            return change;
        }

        // Job timeouts, counted from queueing.
        let mut outputs_written = false;
        for index in 0..self.jobs.len() {
            if touched >= budget {
                return change;
            }
            let Some(execution) = self.jobs[index].execution.as_ref() else { continue };
            // Flagged unschedulable and still nobody's: it fails now, unless
            // its record shows a claim (then it runs, whatever the flag).
            let unschedulable_due = execution.status == ExecutionStatus::Queued
                && execution.unschedulable.as_ref().is_some_and(|u| u.fails_at <= now);
            if unschedulable_due && !ended.contains_key(&execution.id) {
                let id = execution.id;
                let reason = Some(StatusReason::Unschedulable);
                change.emitted.extend(self.end_job(index, JobStatus::Failed, ExecutionStatus::Failed, reason, now));
                change.unschedulable.push(id);
                change.changed = true;
                touched += 1;
                continue;
            }
            if execution.status.is_terminal() || execution.deadline.is_none_or(|d| d > now) {
                continue;
            }
            if let Some(spec) = definition.job(&self.jobs[index].key).and_then(|d| d.approval.as_ref()) {
                // Nobody decided in time: its `on-timeout` says how it ends.
                let emitted = self.time_out_approval(index, spec, now);
                // Approved, its outputs are written by this change: what
                // needs them starts on the next advance, which reads them.
                outputs_written |= emitted.iter().any(|e| matches!(e, Emitted::Results { .. }));
                change.emitted.extend(emitted);
                change.changed = true;
                touched += 1;
                continue;
            }
            let (id, state) = (
                execution.id,
                ExecutionState { status: execution.status, reason: execution.reason, started_at: execution.started_at },
            );
            if let Some(emitted) = self.end_as_the_runner_did(index, ended, true, now) {
                change.emitted.extend(emitted);
                change.changed = true;
                touched += 1;
                continue;
            }
            if let ExecutionUpdate::Apply(next) = apply_execution_event(&state, &ExecutionEvent::TimedOut) {
                let emitted = self.conclude(index, &next, None, true, now);
                change.emitted.extend(emitted);
                change.timed_out.push(id);
                change.changed = true;
                touched += 1;
            }
        }

        if outputs_written {
            return change;
        }
        touched += self.advance_listening(definition, now, minute, data, &mut change, budget.saturating_sub(touched));
        if touched >= budget {
            return change;
        }

        // `fail-fast`: a failed leg cancels its siblings that have not ended
        // (a soft-failed leg succeeded and cancels nothing).
        for group in definition.matrices.iter().filter(|group| group.fail_fast) {
            let failed = self.jobs.iter().any(|job| job.status == JobStatus::Failed && group.legs.contains(&job.key));
            if !failed {
                continue;
            }
            for leg in &group.legs {
                let Some(index) = self.jobs.iter().position(|job| &job.key == leg) else { continue };
                if self.jobs[index].status.is_terminal() {
                    continue;
                }
                if touched >= budget {
                    return change;
                }
                change.emitted.extend(self.end_job(
                    index,
                    JobStatus::Cancelled,
                    ExecutionStatus::Cancelled,
                    Some(StatusReason::FailFast),
                    now,
                ));
                change.changed = true;
                touched += 1;
            }
        }

        // What the scheduler decides now.
        let snapshots: Vec<JobSnapshot> = self
            .jobs
            .iter()
            .map(|job| {
                let defined = definition.job(&job.key);
                JobSnapshot {
                    key: job.key.clone(),
                    needs: defined.map(|d| d.needs.clone()).unwrap_or_default(),
                    condition: defined.map(|d| d.condition).unwrap_or_default(),
                    status: job.status,
                }
            })
            .collect();
        let plan = plan_advance(&snapshots, self.status == AttemptStatus::Cancelled);
        let decisions = plan
            .cancel
            .iter()
            .map(|key| (key, Decision::Cancel))
            .chain(plan.skip.iter().map(|key| (key, Decision::Skip)))
            .chain(plan.start.iter().map(|key| (key, Decision::Start)));
        let mut complete = true;
        for (key, decision) in decisions {
            if touched >= budget {
                complete = false;
                break;
            }
            let Some(index) = self.jobs.iter().position(|job| &job.key == key) else { continue };
            match decision {
                Decision::Cancel => {
                    change.emitted.extend(self.end_job(
                        index,
                        JobStatus::Cancelled,
                        ExecutionStatus::Cancelled,
                        Some(StatusReason::RunCancelled),
                        now,
                    ));
                }
                Decision::Skip => {
                    change.emitted.extend(self.end_job(
                        index,
                        JobStatus::Skipped,
                        ExecutionStatus::Cancelled,
                        Some(StatusReason::ConditionRejected),
                        now,
                    ));
                }
                Decision::Start => {
                    // A job without an execution (carried over) is terminal
                    // and never planned; nothing to start if it were.
                    let Some(defined) = definition.job(key) else { continue };
                    // A retry waits for its backoff (the attempt's next
                    // deadline brings the orchestration back then).
                    let waits = self.jobs[index].execution.as_ref().and_then(|e| e.not_before);
                    if waits.is_some_and(|at| at > now) {
                        continue;
                    }
                    // `max-parallel`: the leg waits while its siblings fill
                    // the limit; the next advance after one ends starts it.
                    if let Some(limit) = definition.group_of_leg(key).and_then(|group| group.max_parallel) {
                        let group = definition.group_of_leg(key).map(|g| g.legs.as_slice()).unwrap_or_default();
                        let active = self
                            .jobs
                            .iter()
                            .filter(|job| group.contains(&job.key))
                            .filter(|job| matches!(job.status, JobStatus::Queued | JobStatus::Running))
                            .count();
                        if active >= limit as usize {
                            continue;
                        }
                    }
                    let Some(scope) = self.scope_for(definition, defined, data, &mut change.missing) else {
                        complete = false;
                        continue;
                    };
                    let admitted = defined
                        .when
                        .as_deref()
                        .is_none_or(|when| expressions::parse(when).is_ok_and(|e| expressions::holds(&e, &scope)));
                    // A job in a concurrency group starts only holding it.
                    let turn =
                        if admitted { self.job_group_turn(index, defined, &scope, data) } else { GroupTurn::Free };
                    let holds = match turn {
                        GroupTurn::Free => None,
                        GroupTurn::Holds(hold) => Some(hold),
                        GroupTurn::Waits(hold) => {
                            complete = false;
                            if self.jobs[index].concurrency.is_none() {
                                self.jobs[index].concurrency = Some(hold);
                                change.changed = true;
                                touched += 1;
                            }
                            continue;
                        }
                        GroupTurn::Ask(request) => {
                            complete = false;
                            change.missing.groups.push(request);
                            continue;
                        }
                    };
                    let emitted = if admitted && defined.approval.is_some() {
                        self.await_approval(index, defined, now, minute).into_iter().collect()
                    } else if let (true, Some(listen)) = (admitted, defined.listen.as_ref()) {
                        self.start_listening(index, listen, now, minute).into_iter().collect()
                    } else if admitted {
                        let spec = job_spec(definition, defined, self.execution_id(index), minute, Some(&scope));
                        let Some(emitted) = self.start_job(index, defined, spec, now, minute) else { continue };
                        vec![emitted]
                    } else {
                        self.end_job(
                            index,
                            JobStatus::Skipped,
                            ExecutionStatus::Cancelled,
                            Some(StatusReason::ConditionRejected),
                            now,
                        )
                    };
                    if let Some(hold) = holds {
                        self.jobs[index].concurrency = Some(hold);
                    }
                    change.emitted.extend(emitted);
                }
            }
            change.changed = true;
            touched += 1;
        }
        if complete && self.all_jobs_terminal() {
            // From the statuses as they are now: a job this pass decided
            // itself (an `if:` over outputs skipping it) is not in the plan.
            let statuses: Vec<JobStatus> = self.jobs.iter().map(|job| job.status).collect();
            let outcome = derive_attempt_status(&statuses, self.status == AttemptStatus::Cancelled);
            let emitted = self.finish(outcome, None, now);
            change.changed |= !emitted.is_empty();
            change.emitted.extend(emitted);
        }
        change
    }

    fn execution_id(&self, index: usize) -> Uuid {
        self.jobs[index].execution.as_ref().map_or(Uuid::nil(), |e| e.id)
    }

    /// The values `job`'s expressions see, or `None` (noting what to read in
    /// `missing`) while the run's inputs or a need's outputs are unread.
    fn scope_for<'a>(
        &'a self,
        definition: &WorkflowDefinition,
        job: &'a JobDefinition,
        data: &'a ExpressionData,
        missing: &mut MissingData,
    ) -> Option<JobScope<'a>> {
        let (wants_inputs, outputs_of) = references::data_needed(definition, job);
        let mut complete = true;
        if wants_inputs && data.inputs.is_none() {
            missing.inputs = true;
            complete = false;
        }
        let mut needs = HashMap::new();
        // The legs of the matrix jobs this job needs, gathered under their name.
        let mut legs: BTreeMap<&str, Vec<LegNeed<'_>>> = BTreeMap::new();
        for need in &job.needs {
            let Some(state) = self.jobs.iter().find(|j| &j.key == need) else { continue };
            let group = definition.job(need).and_then(|d| d.matrix.as_ref()).map(|leg| leg.job.as_str());
            let mut outputs = None;
            if outputs_of.contains(need) || group.is_some_and(|g| outputs_of.contains(g)) {
                // A carried-over need's outputs are its earlier execution's.
                if let Some(execution) = state.carried_from.or(state.execution.as_ref().map(|e| e.id)) {
                    match data.outputs.get(&execution) {
                        Some(found) => outputs = Some(found),
                        None => {
                            missing.outputs.push(execution);
                            complete = false;
                        }
                    }
                }
            }
            match group {
                Some(group) => legs.entry(group).or_default().push(LegNeed {
                    key: need,
                    status: state.status,
                    soft_failed: state.soft_failed,
                    outputs,
                }),
                None => {
                    let outputs = outputs.map(Cow::Borrowed);
                    needs.insert(
                        need.clone(),
                        NeedState { status: state.status, soft_failed: state.soft_failed, outputs },
                    );
                }
            }
        }
        if !complete {
            return None;
        }
        for (group, legs) in legs {
            let statuses: Vec<JobStatus> = legs.iter().map(|leg| leg.status).collect();
            let outputs = outputs_of.contains(group).then(|| matrix_outputs(&legs));
            needs.insert(
                group.to_string(),
                NeedState {
                    status: matrix::aggregate_status(&statuses),
                    soft_failed: legs.iter().any(|leg| leg.soft_failed),
                    outputs: outputs.map(Cow::Owned),
                },
            );
        }
        let mut env = definition.env.clone();
        env.extend(job.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        Some(JobScope {
            run_id: self.run_id,
            attempt: self.attempt,
            workspace_id: &self.workspace_id,
            job: &job.key,
            matrix: job.matrix.as_ref(),
            env,
            inputs: data.inputs.as_ref(),
            needs,
            event: None,
        })
    }

    fn start_job(
        &mut self,
        index: usize,
        defined: &JobDefinition,
        spec: JobSpec,
        now: DateTime<Utc>,
        minute: Duration,
    ) -> Option<Emitted> {
        let (run_id, attempt) = (self.run_id, self.attempt);
        let job = &mut self.jobs[index];
        let execution = job.execution.as_mut()?;
        job.status = JobStatus::Queued;
        job.continue_on_error = spec.continue_on_error;
        job.retry = defined.retry.clone();
        let retry = job.earlier_executions.len() as u32;
        execution.status = ExecutionStatus::Queued;
        let queued_at = *execution.queued_at.get_or_insert(now);
        execution.deadline = Some(queued_at + scaled(defined.timeout_minutes, minute));
        let fact = JobExecutionQueued {
            run_id,
            attempt,
            job_id: job.id,
            job_execution_id: execution.id,
            queued_at,
            job: QueuedJob { avoid_session: execution.avoid_session, ..QueuedJob::from(&spec) },
            retry,
        };
        Some(Emitted::Queued { fact, spec })
    }

    /// Job `index`, an approval, starts waiting for its approvers: no
    /// runner, no queue; its timeout counts from now.
    fn await_approval(
        &mut self,
        index: usize,
        defined: &JobDefinition,
        now: DateTime<Utc>,
        minute: Duration,
    ) -> Option<Emitted> {
        let job = &mut self.jobs[index];
        let execution = job.execution.as_mut()?;
        job.continue_on_error = defined.continue_on_error.as_deref() == Some("true");
        let since = *execution.queued_at.get_or_insert(now);
        execution.started_at.get_or_insert(now);
        let until = since + scaled(defined.timeout_minutes, minute);
        execution.deadline = Some(until);
        self.start_waiting(index, WaitingFor::Approval, until)
    }

    /// Ends the waiting approval `index` as its `on-timeout` says.
    fn time_out_approval(&mut self, index: usize, spec: &ApprovalSpec, now: DateTime<Utc>) -> Vec<Emitted> {
        match approval::on_timeout(spec, &self.jobs[index].decisions) {
            TimedOut::Fail => {
                self.end_job(index, JobStatus::Failed, ExecutionStatus::Failed, Some(StatusReason::TimedOut), now)
            }
            TimedOut::Skip => {
                self.end_job(index, JobStatus::Skipped, ExecutionStatus::Cancelled, Some(StatusReason::TimedOut), now)
            }
            TimedOut::Approve { outputs } => self.approve(index, outputs, now),
        }
    }

    /// Ends approval `index` approved: succeeded, its outputs written.
    fn approve(
        &mut self,
        index: usize,
        outputs: BTreeMap<String, serde_json::Value>,
        now: DateTime<Utc>,
    ) -> Vec<Emitted> {
        let results = Emitted::Results {
            run_id: self.run_id,
            attempt: self.attempt,
            execution_id: self.execution_id(index),
            outputs,
        };
        let mut emitted = self.end_job(index, JobStatus::Succeeded, ExecutionStatus::Succeeded, None, now);
        emitted.push(results);
        emitted
    }

    /// Records an approver's decision on approval job `job_id`
    /// (behaviour.md §16): refused unless the job waits and the approver
    /// may decide; a repeat by the same approver changes nothing
    /// (`Ok(None)`). Enough approvals end the job `succeeded` with the
    /// inputs as its outputs; a rejection ends it `failed`/`rejected`. The
    /// orchestration then starts (or skips) what follows.
    pub fn decide_approval(
        &mut self,
        definition: &WorkflowDefinition,
        job_id: Uuid,
        approver: &Approver,
        creator: Option<&str>,
        request: ApprovalRequest,
        now: DateTime<Utc>,
    ) -> Result<Option<Change>, ApprovalError> {
        let index = self.job_index(job_id).ok_or(ApprovalError::NoSuchJob)?;
        let key = self.jobs[index].key.clone();
        let spec = definition.job(&key).and_then(|d| d.approval.as_ref()).ok_or(ApprovalError::NotWaiting)?;
        if self.jobs[index].status != JobStatus::Waiting {
            return Err(ApprovalError::NotWaiting);
        }
        approval::may_decide(spec, approver, creator).map_err(ApprovalError::Refused)?;
        let decision = approval::recorded(approver, request.decision, request.comment, request.inputs, now);
        let Some(verdict) =
            approval::decide(spec, &self.jobs[index].decisions, &decision).map_err(ApprovalError::Refused)?
        else {
            return Ok(None);
        };
        let approvals = self.jobs[index]
            .decisions
            .iter()
            .chain([&decision])
            .filter(|d| d.decision == approval::Decision::Approve)
            .count();
        let outcome = match verdict {
            Verdict::Waiting { .. } => "waiting",
            Verdict::Approved { .. } => "approved",
            Verdict::Rejected => "rejected",
        };
        let fact = ApprovalDecided {
            run_id: self.run_id,
            attempt: self.attempt,
            job_id,
            job_key: key,
            by: decision.by.clone(),
            decision: decision.decision,
            comment: decision.comment.clone(),
            inputs: decision.inputs.clone(),
            decided_at: now,
            outcome: outcome.to_string(),
            approvals: approvals as u32,
            required: spec.required,
        };
        self.jobs[index].decisions.push(decision);
        let mut change = Change { changed: true, ..Change::default() };
        change.emitted.push(Emitted::ApprovalDecided(fact));
        match verdict {
            Verdict::Waiting { .. } => {}
            Verdict::Approved { outputs } => change.emitted.extend(self.approve(index, outputs, now)),
            Verdict::Rejected => change.emitted.extend(self.end_job(
                index,
                JobStatus::Failed,
                ExecutionStatus::Failed,
                Some(StatusReason::Rejected),
                now,
            )),
        }
        Ok(Some(change))
    }

    /// Applies a runner's fact (claimed, completed, lease expired) to the
    /// execution `execution_id` of job `job_id`, by the precedence rules of
    /// [`apply_execution_event`]. A fact about an execution this attempt
    /// does not have changes nothing.
    pub fn apply_runner_event(
        &mut self,
        job_id: Uuid,
        execution_id: Uuid,
        event: &ExecutionEvent,
        session_id: Option<Uuid>,
        at: DateTime<Utc>,
    ) -> RunnerEffect {
        let mut effect = RunnerEffect::default();
        let Some(index) = self.job_index(job_id) else { return effect };
        let Some(execution) = self.jobs[index].execution.as_mut() else { return effect };
        if execution.id != execution_id {
            return effect;
        }
        let state =
            ExecutionState { status: execution.status, reason: execution.reason, started_at: execution.started_at };
        let ExecutionUpdate::Apply(next) = apply_execution_event(&state, event) else { return effect };
        effect.changed = true;
        let was_terminal = execution.status.is_terminal();
        execution.started_at = next.started_at;
        if execution.runner_session_id.is_none() {
            execution.runner_session_id = session_id;
        }
        if next.status.is_terminal() && !was_terminal {
            effect.emitted = self.conclude(index, &next, exit_code_of(event), true, at);
            effect.finished = true;
        } else if !was_terminal {
            let job = &mut self.jobs[index];
            if let Some(execution) = job.execution.as_mut() {
                execution.status = next.status;
                execution.reason = next.reason;
            }
            if super::status::transition(job.status, job_status_of(next.status)) == super::status::Transition::Apply {
                job.status = job_status_of(next.status);
            }
        }
        effect
    }

    /// Cancels the attempt (behaviour.md §10): the attempt becomes
    /// `cancelled` at once, and at most `budget` of its non-terminal jobs
    /// that do not run after a cancel are cancelled in this change; the
    /// orchestrator's next [`AttemptState::advance`] cancels any rest, and
    /// `always()`/`cancelled()` jobs still run.
    pub fn cancel(
        &mut self,
        definition: &WorkflowDefinition,
        now: DateTime<Utc>,
        budget: usize,
    ) -> Result<Change, AlreadyFinished> {
        self.cancel_because(definition, now, budget, StatusReason::RunCancelled)
    }

    /// [`AttemptState::cancel`], the attempt ending with `reason` (its jobs
    /// with `run_cancelled`, as any cancel's).
    pub fn cancel_because(
        &mut self,
        definition: &WorkflowDefinition,
        now: DateTime<Utc>,
        budget: usize,
        reason: StatusReason,
    ) -> Result<Change, AlreadyFinished> {
        if self.status.is_terminal() {
            return Err(AlreadyFinished);
        }
        // An attempt still waiting for its group ran nothing: its
        // `always()` jobs do not run either (they would run outside the
        // group).
        let waiting = self.waits_for_group();
        let mut change = Change { changed: true, ..Change::default() };
        change.emitted.push(Emitted::RunCancelled(RunCancelled { run_id: self.run_id, attempt: self.attempt }));
        change.emitted.extend(self.finish(AttemptStatus::Cancelled, Some(reason), now));
        let mut touched = 0;
        for index in 0..self.jobs.len() {
            if touched >= budget {
                break;
            }
            let job = &self.jobs[index];
            let runs_after_cancel =
                !waiting && definition.job(&job.key).is_some_and(|d| d.condition.runs_after_cancel());
            if job.status.is_terminal() || runs_after_cancel {
                continue;
            }
            change.emitted.extend(self.end_job(
                index,
                JobStatus::Cancelled,
                ExecutionStatus::Cancelled,
                Some(StatusReason::RunCancelled),
                now,
            ));
            touched += 1;
        }
        Ok(change)
    }
}

/// Where a job due to start stands with its concurrency group.
enum GroupTurn {
    /// It has no group, or holds it already: it starts.
    Free,
    /// The group just said it holds it: it starts, holding.
    Holds(GroupHold),
    /// The group said it waits: it waits, its hold recorded.
    Waits(GroupHold),
    /// The group must be asked first.
    Ask(GroupRequest),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decision {
    Start,
    Skip,
    Cancel,
}

/// Why an event was not delivered to a listening job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventError {
    /// The attempt has no such job (404).
    NoSuchJob,
    /// The job is not a listening job, or does not listen yet (its needs
    /// are not met): 409 `not-listening`.
    NotListening,
    /// A bad delivery (400) or one too many (409).
    Refused(DeliveryError),
}

/// Why a decision on an approval job was not recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalError {
    /// The attempt has no such job (404).
    NoSuchJob,
    /// The job is not an approval, or does not wait (yet, or any more):
    /// 409 `not-waiting`.
    NotWaiting,
    /// The approver may not decide, or the inputs are wrong.
    Refused(approval::Refusal),
}

#[cfg(test)]
mod tests;
