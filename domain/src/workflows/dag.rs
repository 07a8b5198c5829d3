//! The attempt scheduler (behaviour.md §9 step 2, §10): given where every
//! job of an attempt stands, decide what to start, skip and cancel now, and
//! whether the attempt is done.
//!
//! One call settles everything that can be settled at once, so the
//! orchestrator needs one wake-up per batch of finished jobs, not one per
//! cascade level: a job skipped or cancelled in this call counts as
//! terminal for its dependents in the same call (a skipped `build` skips
//! `test` and `deploy` together, and a `report: always()` after them starts
//! at once). Started jobs are not terminal, so nothing waits on them here.
//!
//! Conditions, as in GitHub Actions, once every need is terminal:
//! - `success()`: attempt not cancelled, every need succeeded, and no job
//!   upstream failed (a failure behind an `always()` job still counts);
//! - `failure()`: attempt not cancelled and some job upstream failed;
//! - `always()`: always;
//! - `cancelled()`: the attempt was cancelled;
//! - `!cancelled()`: the attempt was not cancelled, whatever failed.
//!
//! Cancellation is expressed by the scheduler too, so the cancel route and
//! the orchestrator apply one rule: in a cancelled attempt every
//! non-terminal job whose condition is not `always()`/`cancelled()` is in
//! [`AdvancePlan::cancel`] (reason `run_cancelled`); `always()` and
//! `cancelled()` jobs keep running or start once their needs are terminal.
//! Repeating the call after applying a plan returns an empty plan.

use super::condition::JobCondition;
use super::graph::NeedsGraph;
use super::status::{derive_attempt_status, AttemptStatus, JobStatus};

/// Where one job of the attempt stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSnapshot {
    pub key: String,
    pub needs: Vec<String>,
    pub condition: JobCondition,
    pub status: JobStatus,
}

/// What to do now. Keys are listed in the attempt's job order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdvancePlan {
    /// Pending jobs to start: mark queued and enqueue their execution.
    pub start: Vec<String>,
    /// Pending jobs whose condition does not hold: mark `skipped`, reason
    /// `condition_rejected`.
    pub skip: Vec<String>,
    /// Non-terminal jobs of a cancelled attempt that do not run after a
    /// cancel: mark `cancelled`, reason `run_cancelled`, and cancel their
    /// execution.
    pub cancel: Vec<String>,
    /// `Some` when the attempt is done once this plan is applied: every job
    /// is terminal. The status is the attempt's final one.
    pub outcome: Option<AttemptStatus>,
}

impl AdvancePlan {
    /// Whether the plan changes nothing and the attempt is not done: the
    /// orchestrator can wait for the next job to finish.
    pub fn is_idle(&self) -> bool {
        self.start.is_empty() && self.skip.is_empty() && self.cancel.is_empty() && self.outcome.is_none()
    }
}

/// Decides what to start, skip and cancel; see the module doc.
///
/// A need naming no job of the attempt counts as terminal and not
/// succeeded, and jobs that can never become ready (a cycle) are skipped
/// once nothing else runs: validation refuses both, but the scheduler must
/// still end every attempt rather than wait forever.
pub fn plan_advance(jobs: &[JobSnapshot], attempt_cancelled: bool) -> AdvancePlan {
    let graph = NeedsGraph::new(jobs.iter().map(|job| (job.key.as_str(), &job.needs)));
    let mut status: Vec<JobStatus> = jobs.iter().map(|job| job.status).collect();
    let mut decision: Vec<Option<Decision>> = vec![None; jobs.len()];

    if attempt_cancelled {
        for (job, snapshot) in jobs.iter().enumerate() {
            if !status[job].is_terminal() && !snapshot.condition.runs_after_cancel() {
                status[job] = JobStatus::Cancelled;
                decision[job] = Some(Decision::Cancel);
            }
        }
    }

    // Failures are only ever inputs (nothing decided here fails), so which
    // jobs have a failed job upstream is fixed for the whole call.
    let failed: Vec<bool> = status.iter().map(|s| *s == JobStatus::Failed).collect();
    let upstream_failed = graph.has_marked_upstream(&failed);

    loop {
        let mut changed = false;
        for job in 0..jobs.len() {
            if status[job] != JobStatus::Pending || decision[job].is_some() {
                continue;
            }
            let needs = graph.needs(job);
            if !needs.iter().all(|&need| status[need].is_terminal()) {
                continue;
            }
            let needs_succeeded =
                !graph.has_unknown_needs(job) && needs.iter().all(|&need| status[need] == JobStatus::Succeeded);
            let holds = match jobs[job].condition {
                JobCondition::Success => !attempt_cancelled && needs_succeeded && !upstream_failed[job],
                JobCondition::Failure => !attempt_cancelled && upstream_failed[job],
                JobCondition::Always => true,
                JobCondition::Cancelled => attempt_cancelled,
                JobCondition::NotCancelled => !attempt_cancelled,
                JobCondition::NoFailure => !attempt_cancelled && !upstream_failed[job],
            };
            (status[job], decision[job]) = if holds {
                (JobStatus::Queued, Some(Decision::Start))
            } else {
                (JobStatus::Skipped, Some(Decision::Skip))
            };
            changed = true;
        }
        if changed {
            continue;
        }
        // Nothing is decidable. If nothing runs either, what is still
        // pending can never become ready: skip it so the attempt ends.
        // A waiting approval is as live as a running job: it will end.
        let anything_runs =
            status.iter().any(|s| matches!(s, JobStatus::Queued | JobStatus::Waiting | JobStatus::Running));
        let stuck: Vec<usize> = (0..jobs.len()).filter(|&job| status[job] == JobStatus::Pending).collect();
        if anything_runs || stuck.is_empty() {
            break;
        }
        for job in stuck {
            (status[job], decision[job]) = (JobStatus::Skipped, Some(Decision::Skip));
        }
    }

    let keys_deciding = |wanted: Decision| -> Vec<String> {
        (0..jobs.len()).filter(|&job| decision[job] == Some(wanted)).map(|job| jobs[job].key.clone()).collect()
    };
    let done = status.iter().all(|s| s.is_terminal());
    AdvancePlan {
        start: keys_deciding(Decision::Start),
        skip: keys_deciding(Decision::Skip),
        cancel: keys_deciding(Decision::Cancel),
        outcome: done.then(|| derive_attempt_status(&status, attempt_cancelled)),
    }
}

/// What the scheduler decides for a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    Start,
    Skip,
    Cancel,
}

#[cfg(test)]
mod tests;
