//! A failed execution tried again, as its job's `retry:` asks.

use chrono::{DateTime, Utc};

use super::changes::Emitted;
use super::state::{AttemptState, ExecutionRecord};
use crate::workflows::execution::ExecutionState;
use crate::workflows::retry;
use crate::workflows::status::{ExecutionStatus, JobStatus, StatusReason};
use baton_api::facts::JobExecutionTerminated;

impl AttemptState {
    /// Tries job `index` again if its `retry:` asks for how its execution
    /// ended (`ended`, a failure): the failed execution ends and is kept in
    /// `earlier_executions` (its terminated fact lets the runners' side end
    /// its records), and a new pending execution takes its place. The job is
    /// pending again, its needs still done: the next advance queues it as
    /// any ready job, its expressions resolved as before, its timeout
    /// counted from that queueing. `None` when it is not retried.
    pub(super) fn retry(
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
}
