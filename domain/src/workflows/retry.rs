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
/// The longest wait before a retry, in seconds: a backoff doubles up to it.
pub const MAX_BACKOFF_S: u32 = 3_600;

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
    /// `backoff`: seconds before the first retry is queued, doubled for
    /// each one after (at most [`MAX_BACKOFF_S`]); 0 retries at once.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub backoff_s: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// How long retry number `retries_so_far + 1` waits before it is queued:
/// `backoff`, doubled for each retry before it, at most [`MAX_BACKOFF_S`].
pub fn delay(policy: &RetryPolicy, retries_so_far: u32) -> std::time::Duration {
    let doubled = u64::from(policy.backoff_s).saturating_mul(1u64 << retries_so_far.min(20));
    std::time::Duration::from_secs(doubled.min(u64::from(MAX_BACKOFF_S)))
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
            | StatusReason::ConcurrencyReplaced
            | StatusReason::Rejected
            // Nothing would serve a retry either, nor change the matrix.
            | StatusReason::Unschedulable
            | StatusReason::InvalidMatrix => None,
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
        RetryPolicy { max, when: when.to_vec(), exit_codes: exit_codes.to_vec(), backoff_s: 0 }
    }

    #[test]
    fn a_backoff_doubles_for_each_retry_up_to_an_hour() {
        let mut flaky = policy(10, &RetryWhen::ALL, &[]);
        assert_eq!(delay(&flaky, 0), std::time::Duration::ZERO, "no backoff: at once");
        flaky.backoff_s = 30;
        let waits: Vec<u64> = (0..9).map(|n| delay(&flaky, n).as_secs()).collect();
        assert_eq!(waits, [30, 60, 120, 240, 480, 960, 1920, 3600, 3600]);
        flaky.backoff_s = MAX_BACKOFF_S;
        assert_eq!(delay(&flaky, 63).as_secs(), u64::from(MAX_BACKOFF_S), "no overflow");
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
