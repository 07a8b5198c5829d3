//! Automatic retry (behaviour.md §17): whether a job's failed execution is
//! tried again, as a new execution of the same job, instead of failing it.
//!
//! A retry is decided by failure class (`runner_lost`, `timed_out`,
//! `step_failed`), optionally narrowed to exit codes for `step_failed`, up
//! to `max` retries. A cancel is never a failure and so never retried; the
//! run's own timeout ends everything and is not retried either (the caller
//! does not ask).

use serde::{Deserialize, Serialize};

use super::status::StatusReason;

/// The most retries a job may ask for (Buildkite's limit).
pub const MAX_RETRIES: u32 = 10;

/// A job's `retry:`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Retries after the first execution: at most `max + 1` executions.
    pub max: u32,
    /// The failure classes retried.
    pub when: Vec<RetryWhen>,
    /// For `step_failed`: only these exit codes of the failed step (empty:
    /// any). A step that failed without an exit (killed, not started) has
    /// none and matches only an empty list.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exit_codes: Vec<i32>,
}

/// A failure class a retry may be asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryWhen {
    /// The runner was lost (its lease expired before the job ended).
    RunnerLost,
    /// The job's own timeout passed.
    TimedOut,
    /// A step failed (non-zero exit, its own timeout, a bad output file).
    StepFailed,
}

impl RetryWhen {
    pub const ALL: [RetryWhen; 3] = [RetryWhen::RunnerLost, RetryWhen::TimedOut, RetryWhen::StepFailed];

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|when| when.as_str() == text)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RetryWhen::RunnerLost => "runner_lost",
            RetryWhen::TimedOut => "timed_out",
            RetryWhen::StepFailed => "step_failed",
        }
    }

    fn of(reason: StatusReason) -> Option<Self> {
        match reason {
            StatusReason::RunnerLost => Some(RetryWhen::RunnerLost),
            StatusReason::TimedOut => Some(RetryWhen::TimedOut),
            StatusReason::StepFailed => Some(RetryWhen::StepFailed),
            StatusReason::RunCancelled
            | StatusReason::ConditionRejected
            | StatusReason::FailFast
            | StatusReason::ConcurrencyReplaced => None,
        }
    }
}

/// How an execution failed, as far as a retry cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    pub reason: StatusReason,
    /// The exit code of the step that failed the job, if it exited.
    pub exit_code: Option<i32>,
}

/// Whether a job whose execution failed as `failure`, after `retries_so_far`
/// retries, is tried again under `policy`.
pub fn retries(policy: Option<&RetryPolicy>, failure: Failure, retries_so_far: u32) -> bool {
    let Some(policy) = policy else { return false };
    let Some(class) = RetryWhen::of(failure.reason) else { return false };
    if retries_so_far >= policy.max || !policy.when.contains(&class) {
        return false;
    }
    class != RetryWhen::StepFailed
        || policy.exit_codes.is_empty()
        || failure.exit_code.is_some_and(|code| policy.exit_codes.contains(&code))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(max: u32, when: &[RetryWhen], exit_codes: &[i32]) -> RetryPolicy {
        RetryPolicy { max, when: when.to_vec(), exit_codes: exit_codes.to_vec() }
    }

    fn failed(reason: StatusReason, exit_code: Option<i32>) -> Failure {
        Failure { reason, exit_code }
    }

    #[test]
    fn a_failure_of_a_class_asked_for_is_retried_up_to_max() {
        let lost = policy(2, &[RetryWhen::RunnerLost], &[]);
        assert!(retries(Some(&lost), failed(StatusReason::RunnerLost, None), 0));
        assert!(retries(Some(&lost), failed(StatusReason::RunnerLost, None), 1));
        assert!(!retries(Some(&lost), failed(StatusReason::RunnerLost, None), 2), "max reached");
        assert!(!retries(Some(&lost), failed(StatusReason::StepFailed, Some(1)), 0), "not asked for");
        assert!(!retries(Some(&lost), failed(StatusReason::TimedOut, None), 0));
        assert!(!retries(None, failed(StatusReason::RunnerLost, None), 0), "no policy, no retry");
    }

    #[test]
    fn exit_codes_narrow_step_failures_only() {
        let flaky = policy(3, &RetryWhen::ALL, &[75]);
        assert!(retries(Some(&flaky), failed(StatusReason::StepFailed, Some(75)), 0));
        assert!(!retries(Some(&flaky), failed(StatusReason::StepFailed, Some(1)), 0));
        assert!(!retries(Some(&flaky), failed(StatusReason::StepFailed, None), 0), "no exit, no match");
        assert!(retries(Some(&flaky), failed(StatusReason::RunnerLost, None), 0), "other classes unaffected");
        assert!(retries(Some(&flaky), failed(StatusReason::TimedOut, None), 0));
    }

    #[test]
    fn a_cancel_or_a_skip_is_never_retried() {
        let any = policy(10, &RetryWhen::ALL, &[]);
        assert!(!retries(Some(&any), failed(StatusReason::RunCancelled, None), 0));
        assert!(!retries(Some(&any), failed(StatusReason::ConditionRejected, None), 0));
    }
}
