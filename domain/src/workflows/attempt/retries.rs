//! A failed execution tried again, as its job's `retry:` asks.

use chrono::{DateTime, Utc};

use super::changes::Emitted;
use super::state::{AttemptState, ExecutionRecord};
use crate::workflows::execution::ExecutionState;
use crate::workflows::retry;
use crate::workflows::status::{ExecutionStatus, JobStatus, StatusReason};

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
        let job = &self.jobs[index];
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
        // `ended` is a failure with its reason, as the failed execution keeps.
        self.replace_execution(index, ended, next, JobStatus::Pending, now).map(|fact| vec![fact])
    }
}
