//! A job execution's life after it was queued (behaviour.md §9, §6, §18):
//! how each incoming event changes it, and which one wins when they race.
//!
//! Precedence is **finished > lease expired > claimed > timeout**; a cancel
//! ranks between the claim and the timeout (both interrupt from outside, and
//! the operator's explicit cancel is the better account). It is realised by
//! two rules rather than by overwriting terminal states:
//!
//! - terminal states are absorbing, so the first terminal outcome recorded
//!   stands; fencing guarantees a complete can never follow its lease's
//!   expiry, and a lease expiry or timeout that arrives after a finish
//!   changes nothing;
//! - when several events are at hand at once, [`apply_execution_events`]
//!   applies them highest precedence first.
//!
//! A claim never reopens a terminal execution, but it still records
//! `started_at` if it is unset: facts are unordered, and a complete
//! processed before its claim must not leave the run view without a start.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::status::{ExecutionStatus, StatusReason, StepStatus};
pub use baton_api::facts::JobOutcome;

/// Attempts of at most this many jobs get the direct path. The attempt item
/// grows with its jobs and every adoption reads it and the definition's
/// snapshot and rewrites it; in a Lambda of its own each complete races the
/// others on that one item (job-outcomes serialises a batch in-process), and
/// a refused write is billed by the item's size. Past a few dozen jobs the
/// bus's fixed cost is the cheaper way, and its latency matters less in a
/// run that long.
pub const DIRECT_ADOPTION_MAX_JOBS: usize = 32;

/// The part of an execution these decisions read and write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutionState {
    pub status: ExecutionStatus,
    pub reason: Option<StatusReason>,
    /// Set once, from the first claim's instant.
    pub started_at: Option<DateTime<Utc>>,
}

/// Something that happened to an execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecutionEvent {
    /// A runner claimed it (`runners.job.claimed`), at the claim's instant.
    Claimed { at: DateTime<Utc> },
    /// Its runner completed it (`runners.job.completed`). `steps` holds the
    /// status of every step of the job, in order; `exit_code` is the exit
    /// of the step that failed it, if one did and exited (a retry narrowed
    /// to exit codes decides on it).
    Completed { status: JobOutcome, steps: Vec<StepStatus>, exit_code: Option<i32> },
    /// Its lease expired (`runners.job.lease_expired`). `steps` holds the
    /// status of every step of the job as last reported; steps never
    /// reported on are `pending`.
    LeaseExpired { steps: Vec<StepStatus> },
    /// Its job timeout passed (counted from queueing).
    TimedOut,
    /// Its run was cancelled.
    Cancelled,
}

impl ExecutionEvent {
    /// Rank in "finished > lease expired > claimed > timeout"; higher wins.
    pub fn precedence(&self) -> u8 {
        match self {
            ExecutionEvent::Completed { .. } => 4,
            ExecutionEvent::LeaseExpired { .. } => 3,
            ExecutionEvent::Claimed { .. } => 2,
            ExecutionEvent::Cancelled => 1,
            ExecutionEvent::TimedOut => 0,
        }
    }
}

/// What to write for an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecutionUpdate {
    /// Write this state (compare-and-set on the version that was read). If
    /// its status is terminal and the old one was not, the execution just
    /// finished: set `finished_at` and emit `job_execution.terminated`.
    Apply(ExecutionState),
    /// Nothing changes; succeed without writing or emitting.
    NoOp,
}

/// Decides how `event` changes `current`; see the module doc.
pub fn apply_execution_event(current: &ExecutionState, event: &ExecutionEvent) -> ExecutionUpdate {
    if let ExecutionEvent::Claimed { at } = event {
        return apply_claim(current, *at);
    }
    if current.status.is_terminal() {
        return ExecutionUpdate::NoOp;
    }
    let (status, reason) = match event {
        ExecutionEvent::Completed { status, steps, .. } => outcome_of_completion(*status, steps),
        ExecutionEvent::LeaseExpired { steps } => outcome_of_lost_lease(steps),
        ExecutionEvent::TimedOut => (ExecutionStatus::Failed, Some(StatusReason::TimedOut)),
        ExecutionEvent::Cancelled => (ExecutionStatus::Cancelled, Some(StatusReason::RunCancelled)),
        ExecutionEvent::Claimed { .. } => return ExecutionUpdate::NoOp,
    };
    ExecutionUpdate::Apply(ExecutionState { status, reason, started_at: current.started_at })
}

/// Applies events that are at hand together, highest precedence first
/// (the earliest of several claims first; other ties keep their order).
pub fn apply_execution_events(current: &ExecutionState, events: &[ExecutionEvent]) -> ExecutionUpdate {
    let claimed_at = |event: &ExecutionEvent| match event {
        ExecutionEvent::Claimed { at } => Some(*at),
        _ => None,
    };
    let mut ordered: Vec<&ExecutionEvent> = events.iter().collect();
    ordered.sort_by(|a, b| b.precedence().cmp(&a.precedence()).then_with(|| claimed_at(a).cmp(&claimed_at(b))));
    let mut state = current.clone();
    for event in ordered {
        if let ExecutionUpdate::Apply(next) = apply_execution_event(&state, event) {
            state = next;
        }
    }
    if state == *current {
        ExecutionUpdate::NoOp
    } else {
        ExecutionUpdate::Apply(state)
    }
}

/// A claim moves a not-yet-running execution to `running`, and sets
/// `started_at` once; it never reopens a terminal execution.
fn apply_claim(current: &ExecutionState, at: DateTime<Utc>) -> ExecutionUpdate {
    let status = match current.status {
        ExecutionStatus::Pending | ExecutionStatus::Queued => ExecutionStatus::Running,
        other => other,
    };
    let next = ExecutionState { status, reason: current.reason, started_at: current.started_at.or(Some(at)) };
    if next == *current {
        ExecutionUpdate::NoOp
    } else {
        ExecutionUpdate::Apply(next)
    }
}

/// What a complete records as the job's outcome: the runner's word, unless
/// a step it reported failed (a job "succeeded" with a failed step failed).
/// Recording it so on the runners' side lets the workflows side adopt the
/// outcome from the record alone.
pub fn recorded_outcome(status: JobOutcome, steps: &[baton_api::facts::StepResult]) -> JobOutcome {
    // A soft-failed step (`continue-on-error`) does not fail its job.
    if steps.iter().any(|step| step.status == StepStatus::Failed && !step.soft_failed) {
        JobOutcome::Failed
    } else {
        status
    }
}

/// The exit code of the step that failed a job (the first failed step that
/// `continue-on-error` did not forgive), if it exited.
pub fn failing_exit_code<'a>(steps: impl IntoIterator<Item = &'a baton_api::facts::StepResult>) -> Option<i32> {
    steps
        .into_iter()
        .find(|step| step.status == StepStatus::Failed && !step.soft_failed)
        .and_then(|step| step.exit_code)
}

/// The runner's word, unless a step it reported failed: a job "succeeded"
/// with a failed step is recorded as failed.
fn outcome_of_completion(status: JobOutcome, steps: &[StepStatus]) -> (ExecutionStatus, Option<StatusReason>) {
    if status == JobOutcome::Failed || steps.contains(&StepStatus::Failed) {
        (ExecutionStatus::Failed, Some(StatusReason::StepFailed))
    } else {
        (ExecutionStatus::Succeeded, None)
    }
}

/// §6: a lost runner fails the execution as `runner_lost`, unless every step
/// had already finished, in which case the steps' outcome stands.
fn outcome_of_lost_lease(steps: &[StepStatus]) -> (ExecutionStatus, Option<StatusReason>) {
    let all_finished = !steps.is_empty() && steps.iter().all(|step| step.is_terminal());
    if !all_finished {
        (ExecutionStatus::Failed, Some(StatusReason::RunnerLost))
    } else if steps.contains(&StepStatus::Failed) {
        (ExecutionStatus::Failed, Some(StatusReason::StepFailed))
    } else {
        (ExecutionStatus::Succeeded, None)
    }
}

#[cfg(test)]
mod tests;
