use chrono::TimeZone;
use proptest::prelude::*;

use super::*;

fn at(second: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, second).unwrap()
}

fn state(status: ExecutionStatus) -> ExecutionState {
    ExecutionState { status, reason: None, started_at: None }
}

fn running_since(second: u32) -> ExecutionState {
    ExecutionState { status: ExecutionStatus::Running, reason: None, started_at: Some(at(second)) }
}

fn applied(update: ExecutionUpdate) -> ExecutionState {
    match update {
        ExecutionUpdate::Apply(next) => next,
        ExecutionUpdate::NoOp => panic!("expected a change, got a no-op"),
    }
}

fn completed(status: JobOutcome) -> ExecutionEvent {
    ExecutionEvent::Completed { status, steps: vec![StepStatus::Succeeded], exit_code: None }
}

use ExecutionStatus as S;
use StepStatus::{Failed as StepFailed, Pending as StepPending, Running as StepRunning, Succeeded as StepOk};

#[test]
fn a_claim_moves_a_queued_execution_to_running_and_sets_started_at() {
    let next = applied(apply_execution_event(&state(S::Queued), &ExecutionEvent::Claimed { at: at(5) }));
    assert_eq!(next, running_since(5));
}

#[test]
fn a_replayed_claim_is_a_no_op_and_keeps_the_first_started_at() {
    let update = apply_execution_event(&running_since(5), &ExecutionEvent::Claimed { at: at(9) });
    assert_eq!(update, ExecutionUpdate::NoOp);
}

#[test]
fn a_claim_after_a_terminal_state_never_reopens_the_execution() {
    let done = ExecutionState { status: S::Succeeded, reason: None, started_at: Some(at(1)) };
    assert_eq!(apply_execution_event(&done, &ExecutionEvent::Claimed { at: at(2) }), ExecutionUpdate::NoOp);
}

#[test]
fn a_claim_processed_after_the_finish_still_records_started_at() {
    let finished_first = state(S::Succeeded);
    let next = applied(apply_execution_event(&finished_first, &ExecutionEvent::Claimed { at: at(3) }));
    assert_eq!(next.status, S::Succeeded);
    assert_eq!(next.started_at, Some(at(3)));
}

#[test]
fn a_successful_complete_succeeds_the_execution() {
    let next = applied(apply_execution_event(&running_since(1), &completed(JobOutcome::Succeeded)));
    assert_eq!((next.status, next.reason, next.started_at), (S::Succeeded, None, Some(at(1))));
}

#[test]
fn a_failed_complete_fails_the_execution_as_step_failed() {
    let next = applied(apply_execution_event(&running_since(1), &completed(JobOutcome::Failed)));
    assert_eq!((next.status, next.reason), (S::Failed, Some(StatusReason::StepFailed)));
}

#[test]
fn a_complete_claiming_success_with_a_failed_step_is_recorded_as_failed() {
    let event =
        ExecutionEvent::Completed { status: JobOutcome::Succeeded, steps: vec![StepOk, StepFailed], exit_code: None };
    assert_eq!(applied(apply_execution_event(&running_since(1), &event)).status, S::Failed);
}

#[test]
fn a_repeated_complete_is_a_no_op() {
    let done = applied(apply_execution_event(&running_since(1), &completed(JobOutcome::Succeeded)));
    assert_eq!(apply_execution_event(&done, &completed(JobOutcome::Failed)), ExecutionUpdate::NoOp);
}

#[test]
fn finished_beats_a_lease_expiry_that_arrives_later() {
    let done = applied(apply_execution_event(&running_since(1), &completed(JobOutcome::Succeeded)));
    let late = ExecutionEvent::LeaseExpired { steps: vec![StepRunning] };
    assert_eq!(apply_execution_event(&done, &late), ExecutionUpdate::NoOp);
}

#[test]
fn a_lease_expiry_with_unfinished_steps_fails_as_runner_lost() {
    let event = ExecutionEvent::LeaseExpired { steps: vec![StepOk, StepRunning, StepPending] };
    let next = applied(apply_execution_event(&running_since(1), &event));
    assert_eq!((next.status, next.reason), (S::Failed, Some(StatusReason::RunnerLost)));
}

#[test]
fn a_lease_expiry_with_all_steps_succeeded_adopts_success() {
    let event = ExecutionEvent::LeaseExpired { steps: vec![StepOk, StepStatus::Skipped] };
    let next = applied(apply_execution_event(&running_since(1), &event));
    assert_eq!((next.status, next.reason), (S::Succeeded, None));
}

#[test]
fn a_lease_expiry_with_all_steps_finished_and_one_failed_adopts_the_failure() {
    let event = ExecutionEvent::LeaseExpired { steps: vec![StepOk, StepFailed, StepStatus::Skipped] };
    let next = applied(apply_execution_event(&running_since(1), &event));
    assert_eq!((next.status, next.reason), (S::Failed, Some(StatusReason::StepFailed)));
}

#[test]
fn a_lease_expiry_without_step_reports_is_runner_lost() {
    let next = applied(apply_execution_event(&running_since(1), &ExecutionEvent::LeaseExpired { steps: vec![] }));
    assert_eq!(next.reason, Some(StatusReason::RunnerLost));
}

#[test]
fn a_timeout_fails_a_queued_or_running_execution_as_timed_out() {
    for current in [state(S::Queued), running_since(1)] {
        let next = applied(apply_execution_event(&current, &ExecutionEvent::TimedOut));
        assert_eq!((next.status, next.reason), (S::Failed, Some(StatusReason::TimedOut)));
        assert_eq!(next.started_at, current.started_at);
    }
}

#[test]
fn a_timeout_that_loses_the_race_to_a_finish_changes_nothing() {
    let done = applied(apply_execution_event(&running_since(1), &completed(JobOutcome::Succeeded)));
    assert_eq!(apply_execution_event(&done, &ExecutionEvent::TimedOut), ExecutionUpdate::NoOp);
}

#[test]
fn a_cancel_cancels_a_non_terminal_execution_as_run_cancelled() {
    let next = applied(apply_execution_event(&state(S::Queued), &ExecutionEvent::Cancelled));
    assert_eq!((next.status, next.reason), (S::Cancelled, Some(StatusReason::RunCancelled)));
}

#[test]
fn a_complete_after_a_cancel_does_not_downgrade_it() {
    let cancelled = applied(apply_execution_event(&running_since(1), &ExecutionEvent::Cancelled));
    assert_eq!(apply_execution_event(&cancelled, &completed(JobOutcome::Failed)), ExecutionUpdate::NoOp);
}

#[test]
fn events_at_hand_together_apply_in_precedence_order() {
    let events = [
        ExecutionEvent::TimedOut,
        ExecutionEvent::LeaseExpired { steps: vec![StepRunning] },
        ExecutionEvent::Claimed { at: at(4) },
        completed(JobOutcome::Succeeded),
    ];
    let next = applied(apply_execution_events(&state(S::Queued), &events));
    assert_eq!(next, ExecutionState { status: S::Succeeded, reason: None, started_at: Some(at(4)) });
}

#[test]
fn a_claim_and_a_timeout_together_end_timed_out_with_a_start() {
    let events = [ExecutionEvent::TimedOut, ExecutionEvent::Claimed { at: at(4) }];
    let next = applied(apply_execution_events(&state(S::Queued), &events));
    assert_eq!((next.status, next.reason, next.started_at), (S::Failed, Some(StatusReason::TimedOut), Some(at(4))));
}

fn any_event() -> impl Strategy<Value = ExecutionEvent> {
    let step = prop_oneof![Just(StepPending), Just(StepRunning), Just(StepOk), Just(StepFailed)];
    let completion = prop_oneof![Just(JobOutcome::Succeeded), Just(JobOutcome::Failed)];
    prop_oneof![
        (0u32..60).prop_map(|second| ExecutionEvent::Claimed { at: at(second) }),
        (completion, proptest::collection::vec(step.clone(), 0..4))
            .prop_map(|(status, steps)| ExecutionEvent::Completed { status, steps, exit_code: None }),
        proptest::collection::vec(step, 0..4).prop_map(|steps| ExecutionEvent::LeaseExpired { steps }),
        Just(ExecutionEvent::TimedOut),
        Just(ExecutionEvent::Cancelled),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    /// Terminal states are absorbing and `started_at`, once set, never moves,
    /// whatever sequence of events arrives.
    #[test]
    fn terminal_status_and_started_at_never_change_once_set(events in proptest::collection::vec(any_event(), 0..12)) {
        let mut current = state(S::Queued);
        for event in &events {
            let before = current.clone();
            if let ExecutionUpdate::Apply(next) = apply_execution_event(&current, event) {
                prop_assert_ne!(&next, &before, "an Apply always changes something");
                current = next;
            }
            if before.status.is_terminal() {
                prop_assert_eq!((current.status, current.reason), (before.status, before.reason));
            }
            if before.started_at.is_some() {
                prop_assert_eq!(current.started_at, before.started_at);
            }
        }
    }

    /// Events at hand together give the same state in whatever order they
    /// are listed (one event of each kind).
    #[test]
    fn applying_events_together_does_not_depend_on_their_order(
        events in proptest::collection::vec(any_event(), 0..6).prop_shuffle(),
        rotation in 0usize..6,
    ) {
        let mut kinds_seen = Vec::new();
        let distinct: Vec<ExecutionEvent> = events
            .into_iter()
            .filter(|event| {
                let kind = std::mem::discriminant(event);
                !kinds_seen.contains(&kind) && { kinds_seen.push(kind); true }
            })
            .collect();
        let mut rotated = distinct.clone();
        if !rotated.is_empty() {
            let by = rotation % rotated.len();
            rotated.rotate_left(by);
        }
        let start = state(S::Queued);
        prop_assert_eq!(apply_execution_events(&start, &distinct), apply_execution_events(&start, &rotated));
    }
}
