//! The attempt as its item stores it (the run, the attempt, its jobs and
//! their executions), what a new attempt is made of, and which executions
//! a change took back from the queue.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::workflows::approval::ApprovalDecision;
use crate::workflows::concurrency::GroupHold;
use crate::workflows::definition::WorkflowDefinition;
use crate::workflows::listening::ListenState;
use crate::workflows::rerun::RerunMode;
use crate::workflows::retry::RetryPolicy;
use crate::workflows::status::{AttemptStatus, ExecutionStatus, JobStatus, RunStatus, StatusReason};

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
    /// Its title: the definition's `run-name` as expanded when it was
    /// created (`workflows::run_name`); none without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The workspace variables its expressions read, as they were when it
    /// was created (JSON object text; unset ones left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vars: Option<String>,
    /// The identity of the operator token that created it: it may not
    /// approve the run's approval jobs (`workflows::approval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    /// What started it (none for a run stored before triggers: the API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<baton_api::pipelines::RunTrigger>,
    /// The pipeline version it runs, when it came from a pipeline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<baton_api::pipelines::PipelineVersion>,
    /// The `github` context's trigger fields (`workflows::github`), as JSON
    /// text: read with the inputs when a job's expressions want them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github: Option<String>,
}

impl RunState {
    /// What started it, by name (`api` for a run stored before triggers).
    pub fn trigger_name(&self) -> String {
        let kind = self.trigger.as_ref().map_or(baton_api::pipelines::TriggerKind::Api, |t| t.kind);
        crate::workflows::github::trigger_name(kind)
    }
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
    /// The matrices decided when their jobs were due (job key → what its
    /// `strategy:` came to, JSON text): the definition it runs is the
    /// frozen one with these jobs as their legs
    /// ([`AttemptState::definition`]), whose states replaced the job's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub matrices: BTreeMap<String, String>,
}

/// One job of an attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobState {
    pub id: Uuid,
    pub key: String,
    pub status: JobStatus,
    pub reason: Option<StatusReason>,
    /// What went wrong, in words, where the reason cannot say it
    /// (`invalid_matrix`: which value, and why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
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
    pub decisions: Vec<ApprovalDecision>,
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
    /// A job that has not started, with a pending execution.
    pub fn pending(key: &str) -> Self {
        JobState {
            id: crate::ids::new_id(),
            key: key.to_string(),
            status: JobStatus::Pending,
            reason: None,
            message: None,
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
        }
    }

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
    /// The matrices it takes as the previous attempt decided them (those
    /// with a leg carried over: their needs are carried, so the same data
    /// would decide them the same), by job key.
    pub decided: &'a BTreeMap<String, String>,
    pub now: DateTime<Utc>,
}

/// What a first attempt carries over: nothing.
static NOTHING_CARRIED: BTreeMap<String, JobState> = BTreeMap::new();
/// What a first attempt takes decided: nothing.
static NOTHING_DECIDED: BTreeMap<String, String> = BTreeMap::new();

impl<'a> NewAttempt<'a> {
    /// A run's first attempt, created at `now`: number 1, its own snapshot,
    /// no rerun mode, nothing carried over.
    pub fn first(run_id: Uuid, workspace_id: &'a str, definition: &'a WorkflowDefinition, now: DateTime<Utc>) -> Self {
        Self {
            run_id,
            workspace_id,
            attempt: 1,
            definition,
            snapshot_attempt: 1,
            rerun_mode: None,
            carried: &NOTHING_CARRIED,
            decided: &NOTHING_DECIDED,
            now,
        }
    }
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

impl AttemptState {
    /// A new attempt whose jobs are all pending with a pending execution,
    /// except `carried` ones (key → the previous attempt's job), which are
    /// copied with `carried_over: true` and no execution.
    pub fn new(new: NewAttempt<'_>) -> Self {
        let NewAttempt {
            run_id,
            workspace_id,
            attempt,
            definition,
            snapshot_attempt,
            rerun_mode,
            carried,
            decided,
            now,
        } = new;
        let definition = crate::workflows::definition_reader::with_decided(definition, decided);
        let jobs = definition
            .jobs
            .iter()
            .map(|job| match carried.get(&job.key) {
                Some(previous) => JobState {
                    id: crate::ids::new_id(),
                    key: job.key.clone(),
                    status: previous.status,
                    reason: previous.reason,
                    message: previous.message.clone(),
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
                None => JobState::pending(&job.key),
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
            matrices: decided.clone(),
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

    /// Where job `job_id` is among the jobs.
    pub(super) fn job_index(&self, job_id: Uuid) -> Option<usize> {
        self.jobs.iter().position(|job| job.id == job_id)
    }

    /// Job `index`'s current execution (nil for a carried-over job, which
    /// has none).
    pub(super) fn execution_id(&self, index: usize) -> Uuid {
        self.jobs[index].execution.as_ref().map_or(Uuid::nil(), |e| e.id)
    }
}
