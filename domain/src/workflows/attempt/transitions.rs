//! The elementary moves every change is made of: a job queued, a job
//! waiting with no runner, a job ended, the attempt ended. Each returns the
//! facts to publish.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::changes::Emitted;
use super::state::{AttemptState, ExecutionRecord};
use crate::workflows::definition::JobDefinition;
use crate::workflows::execution::ExecutionState;
use crate::workflows::status::{AttemptStatus, ExecutionStatus, JobStatus, StatusReason};
use baton_api::facts::{
    JobExecutionQueued, JobExecutionTerminated, JobSpec, JobTerminated, JobWaiting, QueuedJob, RunTerminated,
    WaitingFor,
};

/// `minutes` of the definition as a duration, each `minute` long (the
/// service may configure a shorter minute, so timeouts can be tested).
pub(super) fn scaled(minutes: u32, minute: Duration) -> chrono::Duration {
    chrono::Duration::seconds(i64::from(minutes).saturating_mul(minute.as_secs() as i64))
}

impl AttemptState {
    /// Job `index` is queued for a runner with `spec`; its timeout counts
    /// from its queueing.
    pub(super) fn start_job(
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

    /// Job `index` and its execution wait (for events or for people) until
    /// `until`, with no runner and no queue: the `job.waiting` fact is what
    /// a notifier subscribes to. `None` when the job has no execution.
    pub(super) fn start_waiting(
        &mut self,
        index: usize,
        waiting_for: WaitingFor,
        until: DateTime<Utc>,
    ) -> Option<Emitted> {
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

    /// Ends job `index` (and its execution, if not terminal yet) with
    /// `status`/`reason`, returning the facts to publish.
    pub(super) fn end_job(
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

    /// Job `index`'s execution ends as `ended` says (its start kept when
    /// `ended` has none) and joins the job's earlier ones; `next` takes its
    /// place and the job is `job_status` again, with no reason. The ended
    /// execution's terminated fact lets the runners' side end its records;
    /// `None`, the job untouched, when it has no execution.
    pub(super) fn replace_execution(
        &mut self,
        index: usize,
        ended: &ExecutionState,
        next: ExecutionRecord,
        job_status: JobStatus,
        now: DateTime<Utc>,
    ) -> Option<Emitted> {
        let (run_id, attempt) = (self.run_id, self.attempt);
        let job = &mut self.jobs[index];
        let mut done = std::mem::replace(job.execution.as_mut()?, next);
        done.status = ended.status;
        done.reason = ended.reason;
        done.started_at = ended.started_at.or(done.started_at);
        done.finished_at = Some(now);
        let fact = JobExecutionTerminated {
            run_id,
            attempt,
            job_id: job.id,
            job_execution_id: done.id,
            status: done.status.as_str().into(),
            reason: done.reason.map(|r| r.as_str().into()),
        };
        job.earlier_executions.push(done);
        job.status = job_status;
        job.reason = None;
        Some(Emitted::ExecutionTerminated(fact))
    }

    /// Cancels job `index` (and its execution) for `reason`.
    pub(super) fn cancel_job(&mut self, index: usize, reason: StatusReason, now: DateTime<Utc>) -> Vec<Emitted> {
        self.end_job(index, JobStatus::Cancelled, ExecutionStatus::Cancelled, Some(reason), now)
    }

    /// Ends the attempt with `status`, unless it has ended already.
    pub(super) fn finish(
        &mut self,
        status: AttemptStatus,
        reason: Option<StatusReason>,
        now: DateTime<Utc>,
    ) -> Vec<Emitted> {
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
}
