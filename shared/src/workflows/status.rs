//! Statuses of runs, attempts, jobs, executions and steps (behaviour.md §9),
//! and the compare-and-set rule every status write obeys.
//!
//! Facts arrive at least once and out of order, so a status write must be
//! safe to replay: writing a status an item already has, writing to a
//! terminal item (terminal states are absorbing) or writing a stage the item
//! has already moved past is a successful no-op that emits nothing. Only a
//! move that no lifecycle allows (back to `pending`, `running → skipped`) is
//! a bug worth reporting.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Status of a run and of each of its attempts. The run mirrors its
/// **current** attempt: a rerun does not move the run's status backwards, it
/// points the run at a new attempt whose status starts at `pending`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Pending,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

/// An attempt moves through the same lifecycle as the run that mirrors it.
pub type AttemptStatus = RunStatus;

/// Status of a job within an attempt. `skipped` is only reachable from
/// `pending`: a job is skipped when its `if` is evaluated, before it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Pending,
    Queued,
    Running,
    Succeeded,
    Failed,
    Cancelled,
    Skipped,
}

/// Status of one execution of a job (what a runner claims and leases).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionStatus {
    Pending,
    Queued,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

/// Status of one step as reported by the runner (api.md: step progress and
/// complete). Steps nobody reported on yet are `pending`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Pending,
    Running,
    Succeeded,
    Failed,
    Skipped,
}

/// Why a job or an execution ended the way it did (`status_reason` in the
/// run view). A success has no reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StatusReason {
    /// A step exited non-zero, or the runner reported the job failed.
    StepFailed,
    /// The lease expired before every step had finished.
    RunnerLost,
    /// The job's or the run's timeout passed.
    TimedOut,
    /// The run was cancelled while the item was not terminal.
    RunCancelled,
    /// The job's `if` did not hold once its needs were terminal.
    ConditionRejected,
}

/// The decision of a compare-and-set status write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Write the new status (conditioned on the version that was read).
    Apply,
    /// Succeed without writing or emitting anything: the item already has the
    /// status, is terminal, or has already moved past it (a stale replay).
    NoOp,
    /// No lifecycle allows this move; the caller has a bug.
    Invalid,
}

/// What the compare-and-set rule needs to know about a status type.
pub trait Lifecycle: Copy + Eq {
    /// Position in `pending (0) → queued (1) → running (2) → terminal (3)`.
    fn stage(self) -> u8;

    /// Whether the status is final (absorbing).
    fn is_terminal(self) -> bool {
        self.stage() == 3
    }

    /// Whether `self` may be entered from the non-terminal `current` at all;
    /// only statuses with a restricted entry (job `skipped`) override this.
    fn enterable_from(self, _current: Self) -> bool {
        true
    }
}

/// Decides a status write: see the module doc for the rule.
pub fn transition<S: Lifecycle>(current: S, target: S) -> Transition {
    if current == target || current.is_terminal() {
        Transition::NoOp
    } else if !target.enterable_from(current) {
        Transition::Invalid
    } else if target.stage() > current.stage() {
        Transition::Apply
    } else if target.stage() == 0 {
        // Only creation writes `pending`; moving an item back to it is a bug.
        Transition::Invalid
    } else {
        Transition::NoOp
    }
}

impl Lifecycle for RunStatus {
    fn stage(self) -> u8 {
        match self {
            RunStatus::Pending => 0,
            RunStatus::Running => 2,
            RunStatus::Succeeded | RunStatus::Failed | RunStatus::Cancelled => 3,
        }
    }
}

impl Lifecycle for JobStatus {
    fn stage(self) -> u8 {
        match self {
            JobStatus::Pending => 0,
            JobStatus::Queued => 1,
            JobStatus::Running => 2,
            JobStatus::Succeeded | JobStatus::Failed | JobStatus::Cancelled | JobStatus::Skipped => 3,
        }
    }

    fn enterable_from(self, current: Self) -> bool {
        self != JobStatus::Skipped || current == JobStatus::Pending
    }
}

impl Lifecycle for ExecutionStatus {
    fn stage(self) -> u8 {
        match self {
            ExecutionStatus::Pending => 0,
            ExecutionStatus::Queued => 1,
            ExecutionStatus::Running => 2,
            ExecutionStatus::Succeeded | ExecutionStatus::Failed | ExecutionStatus::Cancelled => 3,
        }
    }
}

impl Lifecycle for StepStatus {
    fn stage(self) -> u8 {
        match self {
            StepStatus::Pending => 0,
            StepStatus::Running => 2,
            StepStatus::Succeeded | StepStatus::Failed | StepStatus::Skipped => 3,
        }
    }
}

/// `is_terminal()` and `as_str()` without importing the trait, plus Display.
macro_rules! status_helpers {
    ($($ty:ident { $($variant:ident => $text:literal),+ $(,)? })+) => {$(
        impl $ty {
            /// Whether the status is final (absorbing).
            pub fn is_terminal(self) -> bool {
                Lifecycle::is_terminal(self)
            }

            /// The stored and serialised spelling.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $text),+
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    )+};
}

status_helpers! {
    RunStatus {
        Pending => "pending", Running => "running", Succeeded => "succeeded",
        Failed => "failed", Cancelled => "cancelled",
    }
    JobStatus {
        Pending => "pending", Queued => "queued", Running => "running", Succeeded => "succeeded",
        Failed => "failed", Cancelled => "cancelled", Skipped => "skipped",
    }
    ExecutionStatus {
        Pending => "pending", Queued => "queued", Running => "running", Succeeded => "succeeded",
        Failed => "failed", Cancelled => "cancelled",
    }
    StepStatus {
        Pending => "pending", Running => "running", Succeeded => "succeeded",
        Failed => "failed", Skipped => "skipped",
    }
}

impl StatusReason {
    /// The stored and serialised spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusReason::StepFailed => "step_failed",
            StatusReason::RunnerLost => "runner_lost",
            StatusReason::TimedOut => "timed_out",
            StatusReason::RunCancelled => "run_cancelled",
            StatusReason::ConditionRejected => "condition_rejected",
        }
    }
}

impl fmt::Display for StatusReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The status an attempt has given its jobs' statuses (§9 step 2, §10).
///
/// A cancelled attempt is `cancelled`, whatever its jobs did: the cancel
/// route already wrote it so, and `always()` jobs that still run afterwards
/// do not change it. Otherwise the attempt is `running` while any job is not
/// terminal, then `failed` if any job failed, else `succeeded`: skipped and
/// cancelled jobs do not fail an attempt.
pub fn derive_attempt_status(jobs: &[JobStatus], attempt_cancelled: bool) -> AttemptStatus {
    if attempt_cancelled {
        AttemptStatus::Cancelled
    } else if jobs.iter().any(|job| !job.is_terminal()) {
        AttemptStatus::Running
    } else if jobs.contains(&JobStatus::Failed) {
        AttemptStatus::Failed
    } else {
        AttemptStatus::Succeeded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JOB_STATUSES: [JobStatus; 7] = [
        JobStatus::Pending,
        JobStatus::Queued,
        JobStatus::Running,
        JobStatus::Succeeded,
        JobStatus::Failed,
        JobStatus::Cancelled,
        JobStatus::Skipped,
    ];

    #[test]
    fn forward_moves_along_the_lifecycle_are_applied() {
        assert_eq!(transition(JobStatus::Pending, JobStatus::Queued), Transition::Apply);
        assert_eq!(transition(JobStatus::Queued, JobStatus::Running), Transition::Apply);
        assert_eq!(transition(JobStatus::Running, JobStatus::Succeeded), Transition::Apply);
        assert_eq!(transition(ExecutionStatus::Queued, ExecutionStatus::Failed), Transition::Apply);
        assert_eq!(transition(RunStatus::Pending, RunStatus::Running), Transition::Apply);
    }

    #[test]
    fn a_pending_run_can_be_cancelled_directly() {
        assert_eq!(transition(RunStatus::Pending, RunStatus::Cancelled), Transition::Apply);
    }

    #[test]
    fn a_queued_execution_can_finish_before_its_claim_is_recorded() {
        assert_eq!(transition(ExecutionStatus::Queued, ExecutionStatus::Succeeded), Transition::Apply);
    }

    #[test]
    fn writing_the_status_an_item_already_has_is_a_no_op() {
        for status in JOB_STATUSES {
            assert_eq!(transition(status, status), Transition::NoOp, "{status}");
        }
    }

    #[test]
    fn terminal_statuses_are_absorbing() {
        for current in JOB_STATUSES.into_iter().filter(|s| s.is_terminal()) {
            for target in JOB_STATUSES {
                assert_eq!(transition(current, target), Transition::NoOp, "{current} → {target}");
            }
        }
        assert_eq!(transition(RunStatus::Failed, RunStatus::Running), Transition::NoOp);
        assert_eq!(transition(ExecutionStatus::Cancelled, ExecutionStatus::Succeeded), Transition::NoOp);
    }

    #[test]
    fn a_replayed_queued_after_running_is_a_stale_no_op() {
        assert_eq!(transition(JobStatus::Running, JobStatus::Queued), Transition::NoOp);
        assert_eq!(transition(ExecutionStatus::Running, ExecutionStatus::Queued), Transition::NoOp);
    }

    #[test]
    fn moving_an_item_back_to_pending_is_invalid() {
        assert_eq!(transition(JobStatus::Queued, JobStatus::Pending), Transition::Invalid);
        assert_eq!(transition(RunStatus::Running, RunStatus::Pending), Transition::Invalid);
        assert_eq!(transition(StepStatus::Running, StepStatus::Pending), Transition::Invalid);
    }

    #[test]
    fn only_a_pending_job_can_be_skipped() {
        assert_eq!(transition(JobStatus::Pending, JobStatus::Skipped), Transition::Apply);
        assert_eq!(transition(JobStatus::Queued, JobStatus::Skipped), Transition::Invalid);
        assert_eq!(transition(JobStatus::Running, JobStatus::Skipped), Transition::Invalid);
    }

    #[test]
    fn terminal_statuses_are_exactly_the_final_ones() {
        let terminal: Vec<JobStatus> = JOB_STATUSES.into_iter().filter(|s| s.is_terminal()).collect();
        assert_eq!(terminal, [JobStatus::Succeeded, JobStatus::Failed, JobStatus::Cancelled, JobStatus::Skipped]);
        assert!(!ExecutionStatus::Running.is_terminal());
        assert!(StepStatus::Skipped.is_terminal());
        assert!(RunStatus::Cancelled.is_terminal());
    }

    #[test]
    fn statuses_and_reasons_serialise_in_snake_case_matching_as_str() {
        for status in JOB_STATUSES {
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        }
        assert_eq!(serde_json::to_value(StatusReason::ConditionRejected).unwrap(), "condition_rejected");
        assert_eq!(serde_json::to_value(StatusReason::RunnerLost).unwrap(), "runner_lost");
        let parsed: StatusReason = serde_json::from_str("\"timed_out\"").unwrap();
        assert_eq!(parsed, StatusReason::TimedOut);
        assert_eq!(StatusReason::RunCancelled.to_string(), "run_cancelled");
    }

    #[test]
    fn attempt_with_a_failed_job_fails() {
        let jobs = [JobStatus::Succeeded, JobStatus::Failed, JobStatus::Skipped];
        assert_eq!(derive_attempt_status(&jobs, false), AttemptStatus::Failed);
    }

    #[test]
    fn skipped_and_cancelled_jobs_do_not_fail_an_attempt() {
        let jobs = [JobStatus::Succeeded, JobStatus::Skipped, JobStatus::Cancelled];
        assert_eq!(derive_attempt_status(&jobs, false), AttemptStatus::Succeeded);
    }

    #[test]
    fn an_all_skipped_attempt_succeeds() {
        assert_eq!(derive_attempt_status(&[JobStatus::Skipped; 3], false), AttemptStatus::Succeeded);
    }

    #[test]
    fn attempt_with_unfinished_jobs_is_running() {
        let jobs = [JobStatus::Failed, JobStatus::Queued];
        assert_eq!(derive_attempt_status(&jobs, false), AttemptStatus::Running);
    }

    #[test]
    fn a_cancelled_attempt_is_cancelled_even_with_failed_jobs() {
        let jobs = [JobStatus::Failed, JobStatus::Cancelled];
        assert_eq!(derive_attempt_status(&jobs, true), AttemptStatus::Cancelled);
    }
}
