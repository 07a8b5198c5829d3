//! Statuses of runs, attempts, jobs, executions and steps (behaviour.md §9),
//! and the compare-and-set rule every status write obeys. They are part of
//! the contract (the run view shows them), so they live here, once, for the
//! server and its clients alike.
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Pending,
    Queued,
    /// An approval job waiting for its approvers.
    Waiting,
    Running,
    Succeeded,
    Failed,
    Cancelled,
    Skipped,
}

/// Status of one execution of a job (what a runner claims and leases).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ExecutionStatus {
    Pending,
    Queued,
    /// An approval's execution: waiting for people, not a runner.
    Waiting,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

/// Status of one step as reported by the runner (api.md: step progress and
/// complete). Steps nobody reported on yet are `pending`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
    /// A sibling leg of its matrix failed and `fail-fast` cancelled it.
    FailFast,
    /// A newer run of its concurrency group replaced it (the attempt's
    /// reason: `cancel-in-progress`, or the group's queue was full).
    ConcurrencyReplaced,
    /// An approver rejected the approval job.
    Rejected,
    /// No registered runner and no provisioner offered the job's labels
    /// before its unschedulable time ran out.
    Unschedulable,
    /// Its `strategy.matrix`, decided when the job was due from what earlier
    /// jobs output, made no valid matrix (`status_message` says why).
    InvalidMatrix,
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

/// Each status's table, one line a variant (its spelling, its stage):
/// `Lifecycle`, and `is_terminal()` and `as_str()` without importing the
/// trait, plus Display. A status with a restricted entry names the rule.
macro_rules! status_helpers {
    ($($ty:ident { $($variant:ident => $text:literal @ $stage:literal),+ $(,)? $(; enterable_from: $enter:expr)? })+) => {$(
        impl Lifecycle for $ty {
            fn stage(self) -> u8 {
                match self {
                    $($ty::$variant => $stage),+
                }
            }

            $(fn enterable_from(self, current: Self) -> bool {
                let enter: fn(Self, Self) -> bool = $enter;
                enter(self, current)
            })?
        }

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
        Pending => "pending" @ 0, Running => "running" @ 2,
        Succeeded => "succeeded" @ 3, Failed => "failed" @ 3, Cancelled => "cancelled" @ 3,
    }
    JobStatus {
        Pending => "pending" @ 0, Queued => "queued" @ 1, Waiting => "waiting" @ 1, Running => "running" @ 2,
        Succeeded => "succeeded" @ 3, Failed => "failed" @ 3, Cancelled => "cancelled" @ 3, Skipped => "skipped" @ 3;
        // Only a pending job is skipped: one that was queued has started.
        enterable_from: |target, current| target != JobStatus::Skipped || current == JobStatus::Pending
    }
    ExecutionStatus {
        Pending => "pending" @ 0, Queued => "queued" @ 1, Waiting => "waiting" @ 1, Running => "running" @ 2,
        Succeeded => "succeeded" @ 3, Failed => "failed" @ 3, Cancelled => "cancelled" @ 3,
    }
    StepStatus {
        Pending => "pending" @ 0, Running => "running" @ 2,
        Succeeded => "succeeded" @ 3, Failed => "failed" @ 3, Skipped => "skipped" @ 3,
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
            StatusReason::FailFast => "fail_fast",
            StatusReason::ConcurrencyReplaced => "concurrency_replaced",
            StatusReason::Rejected => "rejected",
            StatusReason::Unschedulable => "unschedulable",
            StatusReason::InvalidMatrix => "invalid_matrix",
        }
    }
}

impl fmt::Display for StatusReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
