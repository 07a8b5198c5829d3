//! Cancelling an attempt (behaviour.md §10).

use chrono::{DateTime, Utc};

use super::changes::{Change, Emitted};
use super::state::AttemptState;
use crate::workflows::definition::WorkflowDefinition;
use crate::workflows::status::{AttemptStatus, StatusReason};
use baton_api::facts::RunCancelled;

/// Why an attempt cannot be cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlreadyFinished;

impl AttemptState {
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
            change.emitted.extend(self.cancel_job(index, StatusReason::RunCancelled, now));
            touched += 1;
        }
        Ok(change)
    }
}
