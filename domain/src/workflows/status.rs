//! Status derivation (behaviour.md §9). The statuses themselves and the
//! compare-and-set rule every status write obeys are part of the contract
//! and live in `baton_api::status`.

pub use baton_api::status::{
    transition, AttemptStatus, ExecutionStatus, JobStatus, Lifecycle, RunStatus, StatusReason, StepStatus, Transition,
};

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

    const JOB_STATUSES: [JobStatus; 8] = [
        JobStatus::Pending,
        JobStatus::Queued,
        JobStatus::Waiting,
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
