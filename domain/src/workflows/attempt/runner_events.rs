//! What the runners' facts do to the attempt: an execution claimed,
//! completed, its lease expired, flagged unschedulable; and how an
//! execution's end concludes its job (listening on, a retry, or the end).

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::changes::Emitted;
use super::state::AttemptState;
use crate::ids::step_id;
use crate::workflows::definition::WorkflowDefinition;
use crate::workflows::execution::{apply_execution_event, ExecutionEvent, ExecutionState, ExecutionUpdate};
use crate::workflows::status::{self, ExecutionStatus, JobStatus, StepStatus, Transition};
use baton_api::facts::StepResult;

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

/// The exit code a runner's completion carries, if any.
fn exit_code_of(event: &ExecutionEvent) -> Option<i32> {
    match event {
        ExecutionEvent::Completed { exit_code, .. } => *exit_code,
        _ => None,
    }
}

/// The job status an execution status makes.
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

impl AttemptState {
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

    /// Ends job `index` as its runner did, if `ended` knows how (finished
    /// or lease expired, by the precedence of [`apply_execution_event`]);
    /// `None` when the runners' side holds no ending for its execution.
    pub(super) fn end_as_the_runner_did(
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
    pub(super) fn conclude(
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
            if status::transition(job.status, job_status_of(next.status)) == Transition::Apply {
                job.status = job_status_of(next.status);
            }
        }
        effect
    }
}
