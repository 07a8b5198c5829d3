use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::*;
use crate::workflows::approval::{self, Approver};
use crate::workflows::concurrency::{HoldStatus, Member};
use crate::workflows::definition::WorkflowDefinition;
use crate::workflows::execution::ExecutionEvent;
use crate::workflows::listening::{self, DeliveryError, JobEvent};
use crate::workflows::references::ExpressionData;
use crate::workflows::status::{AttemptStatus, ExecutionStatus, JobStatus, StatusReason};
use crate::workflows::{parse_definition, StepStatus};
use baton_api::facts::{JobOutcome, JobSpec};
use baton_api::runs::ApprovalRequest;
use serde_json::json;

mod runtime_matrices;

const MINUTE: Duration = Duration::from_secs(60);

fn definition() -> WorkflowDefinition {
    parse_definition(
        r#"
name: ci
jobs:
  build:
    runs-on: linux
    timeout-minutes: 5
    steps: [{run: make}]
  test:
    needs: build
    runs-on: linux
    steps: [{run: make test}]
  report:
    needs: test
    if: always()
    runs-on: linux
    steps: [{run: ./report}]
"#,
    )
    .unwrap()
}

fn attempt(definition: &WorkflowDefinition) -> AttemptState {
    AttemptState::new(NewAttempt::first(Uuid::now_v7(), "ws", definition, Utc::now()))
}

/// One advance at `now` as the orchestrator makes it: a transaction's
/// budget of jobs, nothing ended on the runners' side.
fn advance(state: &mut AttemptState, definition: &WorkflowDefinition, now: DateTime<Utc>) -> Change {
    state.advance(definition, now, MINUTE, 40, &RunnerEndings::new(), &ExpressionData::default())
}

/// [`advance`] now, the expressions given `data`.
fn advance_with(state: &mut AttemptState, definition: &WorkflowDefinition, data: &ExpressionData) -> Change {
    state.advance(definition, Utc::now(), MINUTE, 40, &RunnerEndings::new(), data)
}

/// A new attempt after its first advance at `now`: running, its roots
/// queued.
fn started(definition: &WorkflowDefinition, now: DateTime<Utc>) -> AttemptState {
    let mut state = attempt(definition);
    advance(&mut state, definition, now);
    state
}

/// A new attempt advanced once (its expressions given `data`) and its
/// `build` job succeeded: nothing has advanced since.
fn after_build(definition: &WorkflowDefinition, data: &ExpressionData) -> AttemptState {
    let mut state = attempt(definition);
    advance_with(&mut state, definition, data);
    finish(&mut state, "build", JobOutcome::Succeeded);
    state
}

fn job<'a>(state: &'a AttemptState, key: &str) -> &'a JobState {
    state.jobs.iter().find(|j| j.key == key).unwrap()
}

fn status_of(state: &AttemptState, key: &str) -> JobStatus {
    job(state, key).status
}

/// A runner's completion with `status`, no steps reported.
fn completion(status: JobOutcome) -> ExecutionEvent {
    ExecutionEvent::Completed { status, steps: vec![], exit_code: None }
}

fn finish(state: &mut AttemptState, key: &str, status: JobOutcome) -> RunnerEffect {
    let job = job(state, key).clone();
    let execution = job.execution.unwrap().id;
    state.apply_runner_event(job.id, execution, &completion(status), None, Utc::now())
}

/// `state` written as its item stores it and read back.
fn stored(state: &AttemptState) -> AttemptState {
    serde_json::from_value(serde_json::to_value(state).unwrap()).unwrap()
}

#[test]
fn the_first_advance_starts_the_attempt_and_queues_the_roots_only() {
    let definition = definition();
    let mut state = attempt(&definition);
    let change = advance(&mut state, &definition, Utc::now());
    assert!(change.changed);
    assert_eq!(state.status, AttemptStatus::Running);
    assert_eq!(status_of(&state, "build"), JobStatus::Queued);
    assert_eq!(status_of(&state, "test"), JobStatus::Pending);
    assert!(matches!(change.emitted.as_slice(), [Emitted::Queued { fact, spec }]
            if fact.job.key == "build" && fact.job.timeout_s == 300 && spec.work.steps.len() == 1));
    assert!(!advance(&mut state, &definition, Utc::now()).changed, "a second advance changes nothing");
}

#[test]
fn a_failed_build_skips_test_runs_report_and_fails_the_attempt() {
    let definition = definition();
    let mut state = started(&definition, Utc::now());
    let effect = finish(&mut state, "build", JobOutcome::Failed);
    assert!(effect.finished && effect.emitted.len() == 2);
    let change = advance(&mut state, &definition, Utc::now());
    assert_eq!(status_of(&state, "test"), JobStatus::Skipped);
    assert_eq!(status_of(&state, "report"), JobStatus::Queued);
    assert!(change.emitted.iter().any(|e| matches!(e, Emitted::JobTerminated(t) if t.status == "skipped")));
    finish(&mut state, "report", JobOutcome::Succeeded);
    let change = advance(&mut state, &definition, Utc::now());
    assert_eq!(state.status, AttemptStatus::Failed);
    assert!(change.emitted.iter().any(|e| matches!(e, Emitted::RunTerminated(t) if t.status == "failed")));
}

#[test]
fn a_job_past_its_deadline_times_out_even_when_claimed() {
    let definition = definition();
    let start = Utc::now();
    let mut state = started(&definition, start);
    let build = state.jobs[0].clone();
    let claimed = ExecutionEvent::Claimed { at: start + chrono::Duration::minutes(4) };
    state.apply_runner_event(build.id, build.execution.as_ref().unwrap().id, &claimed, None, start);
    assert_eq!(status_of(&state, "build"), JobStatus::Running);
    advance(&mut state, &definition, start + chrono::Duration::minutes(5));
    assert_eq!(status_of(&state, "build"), JobStatus::Failed);
    assert_eq!(state.jobs[0].execution.as_ref().unwrap().reason, Some(StatusReason::TimedOut));
}

#[test]
fn a_timeout_lists_what_it_timed_out_and_an_ending_on_the_runners_side_beats_it() {
    let definition = definition();
    let start = Utc::now();
    let late = start + chrono::Duration::minutes(5);
    let mut timed_out = started(&definition, start);
    let build = timed_out.jobs[0].execution.as_ref().unwrap().id;
    assert_eq!(timed_out.overdue_executions(start), Vec::<Uuid>::new());
    assert_eq!(timed_out.overdue_executions(late), vec![build]);
    let change = advance(&mut timed_out, &definition, late);
    assert_eq!(change.timed_out, vec![build], "the caller fences what was timed out");

    // The runner completed before the deadline; its fact has not arrived.
    let mut completed = attempt(&definition);
    completed.jobs[0].execution.as_mut().unwrap().id = build;
    advance(&mut completed, &definition, start);
    let ended = RunnerEndings::from([(build, completion(JobOutcome::Succeeded))]);
    let change = completed.advance(&definition, late, MINUTE, 40, &ended, &ExpressionData::default());
    assert!(change.timed_out.is_empty());
    assert_eq!(status_of(&completed, "build"), JobStatus::Succeeded);
    assert_eq!(status_of(&completed, "test"), JobStatus::Queued, "the success counts at once");

    // The lease expired before the deadline: runner_lost, not timed_out.
    let mut lost = attempt(&definition);
    lost.jobs[0].execution.as_mut().unwrap().id = build;
    advance(&mut lost, &definition, start);
    let ended = RunnerEndings::from([(build, ExecutionEvent::LeaseExpired { steps: vec![StepStatus::Running] })]);
    let change = lost.advance(&definition, late, MINUTE, 40, &ended, &ExpressionData::default());
    assert!(change.timed_out.is_empty());
    assert_eq!(lost.jobs[0].execution.as_ref().unwrap().reason, Some(StatusReason::RunnerLost));
}

#[test]
fn at_the_run_timeout_a_job_its_runner_finished_keeps_its_success() {
    let definition = definition();
    let start = Utc::now();
    let mut state = started(&definition, start);
    let build = state.jobs[0].execution.as_ref().unwrap().id;
    let after_run_timeout = state.deadline.unwrap() + chrono::Duration::seconds(1);
    // The job's own timeout is later than the run's in this check.
    state.jobs[0].execution.as_mut().unwrap().deadline = Some(after_run_timeout + chrono::Duration::hours(1));
    assert_eq!(state.overdue_executions(after_run_timeout), vec![build]);
    let ended = RunnerEndings::from([(build, completion(JobOutcome::Succeeded))]);
    let change = state.advance(&definition, after_run_timeout, MINUTE, 40, &ended, &ExpressionData::default());
    assert!(change.timed_out.is_empty());
    assert_eq!(status_of(&state, "build"), JobStatus::Succeeded);
    assert_eq!(status_of(&state, "test"), JobStatus::Skipped);
    assert_eq!((state.status, state.reason), (AttemptStatus::Failed, Some(StatusReason::TimedOut)));
}

#[test]
fn cancel_spares_always_jobs_and_refuses_a_finished_attempt() {
    let definition = definition();
    let mut state = started(&definition, Utc::now());
    let change = state.cancel(&definition, Utc::now(), 40).unwrap();
    assert_eq!(state.status, AttemptStatus::Cancelled);
    assert_eq!(status_of(&state, "build"), JobStatus::Cancelled);
    assert_eq!(status_of(&state, "report"), JobStatus::Pending);
    assert!(change.emitted.iter().any(|e| matches!(e, Emitted::RunCancelled(_))));
    advance(&mut state, &definition, Utc::now());
    assert_eq!(status_of(&state, "report"), JobStatus::Queued, "always() still runs after a cancel");
    assert_eq!(state.cancel(&definition, Utc::now(), 40), Err(AlreadyFinished));
}

fn waiting_for(state: &mut AttemptState, group: &str) {
    state.concurrency = Some(crate::workflows::concurrency::GroupHold {
        group: group.into(),
        cancel_in_progress: false,
        queue: 1,
        limit: 1,
        status: crate::workflows::concurrency::HoldStatus::Waiting,
    });
}

#[test]
fn an_attempt_waiting_for_its_group_starts_nothing_until_it_holds_it() {
    let definition = definition();
    let mut state = attempt(&definition);
    waiting_for(&mut state, "deploy");
    let change = advance(&mut state, &definition, Utc::now());
    assert!(!change.changed && change.emitted.is_empty());
    assert_eq!((state.status, state.deadline), (AttemptStatus::Pending, None), "its timeout has not started");
    assert!(state.hold_group());
    assert!(!state.hold_group(), "held once");
    advance(&mut state, &definition, Utc::now());
    assert_eq!(state.status, AttemptStatus::Running);
    assert_eq!(status_of(&state, "build"), JobStatus::Queued);
}

#[test]
fn a_cancel_while_waiting_for_the_group_ends_every_job_always_ones_too() {
    let definition = definition();
    let mut state = attempt(&definition);
    waiting_for(&mut state, "deploy");
    let change = state.cancel_because(&definition, Utc::now(), 40, StatusReason::ConcurrencyReplaced).unwrap();
    assert!(change.emitted.iter().any(|e| matches!(e, Emitted::RunCancelled(_))));
    assert_eq!((state.status, state.reason), (AttemptStatus::Cancelled, Some(StatusReason::ConcurrencyReplaced)));
    assert!(state.is_done(), "the always() job does not run outside the group");
    assert_eq!(status_of(&state, "report"), JobStatus::Cancelled);
    assert!(!state.hold_group(), "a cancelled attempt never takes the group");
    // With a budget too small for one transaction, the advance ends the rest.
    let mut state = attempt(&definition);
    waiting_for(&mut state, "deploy");
    state.cancel_because(&definition, Utc::now(), 1, StatusReason::ConcurrencyReplaced).unwrap();
    assert!(!state.is_done());
    while state.advance(&definition, Utc::now(), MINUTE, 1, &RunnerEndings::new(), &ExpressionData::default()).changed {
    }
    assert!(state.is_done());
    assert!(state.jobs.iter().all(|j| j.status == JobStatus::Cancelled));
}

#[test]
fn a_replayed_outcome_changes_nothing() {
    let definition = definition();
    let mut state = started(&definition, Utc::now());
    assert!(finish(&mut state, "build", JobOutcome::Succeeded).finished);
    let again = finish(&mut state, "build", JobOutcome::Failed);
    assert!(!again.changed && again.emitted.is_empty());
}

#[test]
fn an_attempt_of_256_jobs_stays_far_under_the_400_kb_item_limit() {
    let jobs: String =
        (0..256).map(|i| format!("  job-{i:0>95}:\n    runs-on: [linux, x64]\n    steps: [{{run: make}}]\n")).collect();
    let definition = parse_definition(&format!("name: wide\njobs:\n{jobs}")).unwrap();
    let mut state = attempt(&definition);
    let start = Utc::now();
    while advance(&mut state, &definition, start).changed {}
    for job in state.jobs.clone() {
        let execution = job.execution.as_ref().unwrap().id;
        let claimed = ExecutionEvent::Claimed { at: start };
        state.apply_runner_event(job.id, execution, &claimed, Some(Uuid::now_v7()), start);
        let failed = ExecutionEvent::LeaseExpired { steps: vec![crate::workflows::StepStatus::Running] };
        state.apply_runner_event(job.id, execution, &failed, None, start);
    }
    assert!(state.all_jobs_terminal());
    let size = serde_json::to_vec(&state).unwrap().len();
    eprintln!("attempt of 256 finished jobs: {size} bytes as JSON");
    assert!(size < 200_000, "{size} bytes");
}

#[test]
fn one_advance_touches_at_most_its_budget_of_jobs() {
    let jobs: String = (0..100).map(|i| format!("  j{i}: {{runs-on: linux, steps: [{{run: x}}]}}\n")).collect();
    let definition = parse_definition(&format!("jobs:\n{jobs}")).unwrap();
    let mut state = attempt(&definition);
    let mut rounds = Vec::new();
    loop {
        let change = advance(&mut state, &definition, Utc::now());
        if !change.changed {
            break;
        }
        rounds.push(change.emitted.len());
    }
    assert_eq!(rounds, [40, 40, 20], "facts a transaction carries: within 100 items with the attempt");
    let cancel = state.cancel(&definition, Utc::now(), 40).unwrap();
    assert_eq!(cancel.emitted.len(), 2 + 2 * 40);
}

#[test]
fn an_outcome_advances_inline_queueing_what_it_made_ready_and_ending_the_attempt_with_the_last() {
    let definition = definition();
    let mut state = after_build(&definition, &ExpressionData::default());
    let inline = state.advance_inline(&definition, Utc::now(), MINUTE, 40).expect("no reads needed");
    assert!(inline.complete && inline.change.changed);
    assert_eq!(status_of(&state, "test"), JobStatus::Queued);
    finish(&mut state, "test", JobOutcome::Succeeded);
    state.advance_inline(&definition, Utc::now(), MINUTE, 40).expect("no reads needed");
    finish(&mut state, "report", JobOutcome::Succeeded);
    let inline = state.advance_inline(&definition, Utc::now(), MINUTE, 40).expect("no reads needed");
    assert!(inline.complete);
    assert_eq!(state.status, AttemptStatus::Succeeded);
    assert!(inline.change.emitted.iter().any(|e| matches!(e, Emitted::RunTerminated(_))), "{inline:?}");
}

#[test]
fn an_inline_advance_leaves_overdue_executions_and_a_budgets_rest_to_the_orchestrator() {
    let definition = definition();
    let mut state = started(&definition, Utc::now());
    // build has a five-minute timeout: six minutes on, it is overdue and
    // only its runners' record can say whether it finished first.
    let later = Utc::now() + chrono::Duration::minutes(6);
    let before = state.clone();
    assert_eq!(state.advance_inline(&definition, later, MINUTE, 40), None);
    assert_eq!(state, before, "untouched");

    let wide = parse_definition("name: w\njobs:\n  a: {runs-on: l, steps: [{run: x}]}\n  b: {runs-on: l, steps: [{run: x}]}\n  c: {runs-on: l, steps: [{run: x}]}\n").unwrap();
    let mut state = attempt(&wide);
    let inline = state.advance_inline(&wide, Utc::now(), MINUTE, 2).expect("no reads needed");
    assert!(!inline.complete, "a third job is left for the next step");
}

#[test]
fn a_cancel_or_a_timeout_withdraws_what_was_queued_and_an_outcome_or_a_skip_does_not() {
    let definition = definition();
    let start = Utc::now();
    let queued = started(&definition, start);
    let build = queued.jobs[0].execution.as_ref().unwrap().id;

    // A cancel ends the queued build and the pending test: only the build
    // was ever claimable.
    let mut cancelled = queued.clone();
    cancelled.cancel(&definition, start, 40).unwrap();
    assert_eq!(withdrawn_executions(&queued, &cancelled), vec![build]);

    // A timeout likewise.
    let mut timed_out = queued.clone();
    advance(&mut timed_out, &definition, start + chrono::Duration::minutes(5));
    assert_eq!(withdrawn_executions(&queued, &timed_out), vec![build]);

    // The runner's own outcome needs no flag: its record is not pending.
    let mut finished = queued.clone();
    finish(&mut finished, "build", JobOutcome::Failed);
    assert_eq!(withdrawn_executions(&queued, &finished), Vec::<Uuid>::new());

    // A job skipped before it was ever queued had nothing to withdraw.
    let mut skipped = finished.clone();
    advance(&mut skipped, &definition, start);
    assert_eq!(status_of(&skipped, "test"), JobStatus::Skipped);
    assert_eq!(withdrawn_executions(&finished, &skipped), Vec::<Uuid>::new());
}

/// `continue-on-error`: a job that fails with it succeeds, marked; the run
/// succeeds; its dependants run and read `result` 'success', `outcome`
/// 'failure'. Without it the same failure fails the run (the first test).
#[test]
fn a_job_failing_under_continue_on_error_succeeds_soft_failed_and_its_run_succeeds() {
    let definition = parse_definition(
        r#"
jobs:
  flaky:
    runs-on: linux
    continue-on-error: ${{ inputs.tolerate == 'yes' }}
    steps: [{run: exit 1}]
  report:
    needs: flaky
    runs-on: linux
    env:
      SEEN: ${{ needs.flaky.result }}/${{ needs.flaky.outcome }}
    steps: [{run: echo "$SEEN", continue-on-error: true}, {run: done}]
"#,
    )
    .unwrap();
    let data = |tolerate: &str| ExpressionData {
        inputs: serde_json::json!({"tolerate": tolerate}).as_object().cloned(),
        github: Some(Default::default()),
        ..ExpressionData::default()
    };
    let mut state = attempt(&definition);
    let now = Utc::now();
    state.advance(&definition, now, MINUTE, 40, &RunnerEndings::new(), &data("yes"));
    let effect = finish(&mut state, "flaky", JobOutcome::Failed);
    let flaky = job(&state, "flaky");
    assert_eq!(
        (flaky.status, flaky.reason, flaky.soft_failed),
        (JobStatus::Succeeded, Some(StatusReason::StepFailed), true)
    );
    let execution = flaky.execution.as_ref().unwrap();
    assert_eq!(execution.status, ExecutionStatus::Failed, "the execution's own record says it failed");
    assert!(effect.emitted.iter().any(|e| matches!(e, Emitted::JobTerminated(fact)
            if fact.status == "succeeded" && fact.soft_failed && fact.reason.as_deref() == Some("step_failed"))));
    let change = state.advance(&definition, now, MINUTE, 40, &RunnerEndings::new(), &data("yes"));
    let spec = queued_spec(&change, "report").expect("report is queued");
    assert_eq!(spec.work.env["SEEN"], "success/failure");
    assert!(spec.work.steps[0].continue_on_error && !spec.work.steps[1].continue_on_error);
    finish(&mut state, "report", JobOutcome::Succeeded);
    advance(&mut state, &definition, now);
    assert_eq!(state.status, AttemptStatus::Succeeded);

    // The expression decides: given 'no', the same failure fails the run.
    let mut strict = attempt(&definition);
    strict.advance(&definition, now, MINUTE, 40, &RunnerEndings::new(), &data("no"));
    finish(&mut strict, "flaky", JobOutcome::Failed);
    advance(&mut strict, &definition, now);
    assert_eq!((status_of(&strict, "flaky"), status_of(&strict, "report")), (JobStatus::Failed, JobStatus::Skipped));
    assert_eq!(strict.status, AttemptStatus::Failed);
}

/// A timeout is a failure `continue-on-error` forgives; a cancel is not.
#[test]
fn continue_on_error_forgives_a_timeout_but_a_cancel_stays_a_cancel() {
    let definition = parse_definition(
        "jobs:\n  a:\n    runs-on: l\n    timeout-minutes: 1\n    continue-on-error: true\n    steps: [{run: x}]\n  b:\n    runs-on: l\n    continue-on-error: true\n    steps: [{run: x}]\n",
    )
    .unwrap();
    let now = Utc::now();
    let mut state = started(&definition, now);
    advance(&mut state, &definition, now + chrono::Duration::minutes(2));
    let a = job(&state, "a");
    assert_eq!((a.status, a.reason, a.soft_failed), (JobStatus::Succeeded, Some(StatusReason::TimedOut), true));
    state.cancel(&definition, now, 40).unwrap();
    let b = job(&state, "b");
    assert_eq!((b.status, b.soft_failed), (JobStatus::Cancelled, false));
}

/// The queued facts of `change` for job `key`, as (execution, retry).
fn queued_of(change: &Change, key: &str) -> Vec<(Uuid, u32)> {
    change
        .emitted
        .iter()
        .filter_map(|e| match e {
            Emitted::Queued { fact, .. } if fact.job.key == key => Some((fact.job_execution_id, fact.retry)),
            _ => None,
        })
        .collect()
}

/// `retry:` on runner_lost: the lost execution ends (its terminated fact
/// for the runners' side), a new one of the same job is queued with its own
/// id, and when it succeeds so do the job and the attempt; the view's
/// history keeps both.
#[test]
fn a_job_whose_runner_was_lost_is_retried_as_a_new_execution_and_can_succeed() {
    let definition = parse_definition(
        "jobs:\n  build:\n    runs-on: l\n    retry: {max: 2, when: [runner_lost]}\n    steps: [{run: make}]\n  test:\n    needs: build\n    runs-on: l\n    steps: [{run: t}]\n",
    )
    .unwrap();
    let mut state = attempt(&definition);
    let now = Utc::now();
    let first = queued_of(&advance(&mut state, &definition, now), "build");
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].1, 0, "the first execution is retry 0");
    let lost = ExecutionEvent::LeaseExpired { steps: vec![StepStatus::Running] };
    let build_id = job(&state, "build").id;
    let effect = state.apply_runner_event(build_id, first[0].0, &lost, None, now);
    assert!(effect.finished);
    assert!(
        matches!(effect.emitted.as_slice(), [Emitted::ExecutionTerminated(fact)]
            if fact.job_execution_id == first[0].0 && fact.reason.as_deref() == Some("runner_lost")),
        "only the execution ends, not the job: {:?}",
        effect.emitted
    );
    assert_eq!(job(&state, "build").status, JobStatus::Pending);
    let second = queued_of(&advance(&mut state, &definition, now), "build");
    assert_eq!(second.len(), 1);
    assert_ne!(second[0].0, first[0].0, "a new execution");
    assert_eq!(second[0].1, 1, "retry 1");
    finish(&mut state, "build", JobOutcome::Succeeded);
    advance(&mut state, &definition, now);
    finish(&mut state, "test", JobOutcome::Succeeded);
    advance(&mut state, &definition, now);
    assert_eq!(state.status, AttemptStatus::Succeeded);
    let build = job(&state, "build");
    let history: Vec<(Uuid, ExecutionStatus, Option<StatusReason>)> =
        build.executions().map(|e| (e.id, e.status, e.reason)).collect();
    assert_eq!(
        history,
        vec![
            (first[0].0, ExecutionStatus::Failed, Some(StatusReason::RunnerLost)),
            (second[0].0, ExecutionStatus::Succeeded, None)
        ]
    );
    // The stored form keeps the history.
    assert_eq!(stored(&state), state);
}

/// A `runner_lost` retry names the session that lost the job, so other
/// runners take it first; a retry of a failed step does not.
#[test]
fn a_runner_lost_retry_names_the_session_that_lost_it() {
    let definition = parse_definition(
        "jobs:\n  build:\n    runs-on: l\n    retry: {max: 2, when: [runner_lost, step_failed]}\n    steps: [{run: make}]\n",
    )
    .unwrap();
    let mut state = attempt(&definition);
    let now = Utc::now();
    let session = Uuid::now_v7();
    let first = queued_of(&advance(&mut state, &definition, now), "build");
    let build_id = job(&state, "build").id;
    let claimed = ExecutionEvent::Claimed { at: now };
    state.apply_runner_event(build_id, first[0].0, &claimed, Some(session), now);
    let lost = ExecutionEvent::LeaseExpired { steps: vec![StepStatus::Running] };
    state.apply_runner_event(build_id, first[0].0, &lost, Some(session), now);
    let change = advance(&mut state, &definition, now);
    let avoided: Vec<Option<Uuid>> = change
        .emitted
        .iter()
        .filter_map(|e| match e {
            Emitted::Queued { fact, .. } => Some(fact.job.avoid_session),
            _ => None,
        })
        .collect();
    assert_eq!(avoided, [Some(session)]);
    // The retry fails a step: the next one avoids nobody.
    let second = job(&state, "build").execution.clone().unwrap().id;
    state.apply_runner_event(build_id, second, &ExecutionEvent::Claimed { at: now }, Some(session), now);
    let failed =
        ExecutionEvent::Completed { status: JobOutcome::Failed, steps: vec![StepStatus::Failed], exit_code: Some(1) };
    state.apply_runner_event(build_id, second, &failed, Some(session), now);
    let change = advance(&mut state, &definition, now);
    assert!(change
        .emitted
        .iter()
        .any(|e| matches!(e, Emitted::Queued { fact, .. } if fact.job.avoid_session.is_none())));
}

/// Exit codes narrow `step_failed`; a retry that is not asked for fails
/// the job as before; `max` bounds the executions.
#[test]
fn a_step_failure_is_retried_only_on_its_exit_codes_and_at_most_max_times() {
    let definition = parse_definition(
        "jobs:\n  flaky:\n    runs-on: l\n    retry: {max: 2, when: [step_failed], exit-codes: [75]}\n    steps: [{run: x}]\n",
    )
    .unwrap();
    let now = Utc::now();
    let fail = |state: &mut AttemptState, code: i32| {
        let flaky = job(state, "flaky").clone();
        let execution = flaky.execution.unwrap().id;
        let event = ExecutionEvent::Completed {
            status: JobOutcome::Failed,
            steps: vec![StepStatus::Failed],
            exit_code: Some(code),
        };
        state.apply_runner_event(flaky.id, execution, &event, None, now)
    };
    let mut other_code = started(&definition, now);
    fail(&mut other_code, 1);
    assert_eq!(job(&other_code, "flaky").status, JobStatus::Failed, "exit 1 is not retried");

    let mut state = attempt(&definition);
    for _ in 0..2 {
        advance(&mut state, &definition, now);
        fail(&mut state, 75);
        assert_eq!(job(&state, "flaky").status, JobStatus::Pending, "retried");
    }
    advance(&mut state, &definition, now);
    fail(&mut state, 75);
    advance(&mut state, &definition, now);
    assert_eq!(job(&state, "flaky").status, JobStatus::Failed, "the third failure ends it: max 2 retries");
    assert_eq!(job(&state, "flaky").executions().count(), 3);
    assert_eq!(state.status, AttemptStatus::Failed);
}

/// `backoff`: a retry is queued no sooner than its delay after the failure
/// (doubling), and the attempt's next deadline is then, so the
/// orchestration comes back for it.
#[test]
fn a_retry_waits_for_its_backoff_and_the_attempt_comes_back_for_it() {
    let definition = parse_definition(
        "jobs:
  flaky:
    runs-on: l
    retry: {max: 2, when: [runner_lost], backoff: 30}
    steps: [{run: x}]
",
    )
    .unwrap();
    let mut state = attempt(&definition);
    let start = Utc::now();
    let lose = |state: &mut AttemptState, at: DateTime<Utc>| {
        let flaky = job(state, "flaky").clone();
        let lost = ExecutionEvent::LeaseExpired { steps: vec![StepStatus::Running] };
        state.apply_runner_event(flaky.id, flaky.execution.unwrap().id, &lost, None, at);
    };
    advance(&mut state, &definition, start);
    lose(&mut state, start);
    assert_eq!(state.next_deadline(), Some(start + chrono::Duration::seconds(30)), "the retry's time");
    let early = advance(&mut state, &definition, start + chrono::Duration::seconds(29));
    assert!(queued_of(&early, "flaky").is_empty(), "not before its backoff");
    let due = start + chrono::Duration::seconds(30);
    assert_eq!(queued_of(&advance(&mut state, &definition, due), "flaky").len(), 1);
    // The second retry waits twice as long.
    lose(&mut state, due);
    let pending = job(&state, "flaky").execution.clone().unwrap();
    assert_eq!(pending.not_before, Some(due + chrono::Duration::seconds(60)));
    assert_eq!(stored(&state), state, "the stored form keeps the wait");
}

/// A job timeout is retried with its timeout counted from the new
/// queueing; the run's timeout and a cancel are never retried.
#[test]
fn a_timed_out_job_is_retried_but_not_past_the_run_timeout_nor_a_cancel() {
    let definition = parse_definition(
        "timeout-minutes: 10\njobs:\n  slow:\n    runs-on: l\n    timeout-minutes: 3\n    retry: 5\n    steps: [{run: x}]\n",
    )
    .unwrap();
    let start = Utc::now();
    let at = |minutes: i64| start + chrono::Duration::minutes(minutes);
    let mut state = started(&definition, at(0));
    let change = advance(&mut state, &definition, at(4));
    assert_eq!(change.timed_out.len(), 1);
    assert_eq!(queued_of(&change, "slow").len(), 1, "queued again in the same pass");
    let deadline = job(&state, "slow").execution.as_ref().unwrap().deadline;
    assert_eq!(deadline, Some(at(7)), "counted from the new queueing");
    // Past the run's timeout everything ends, retries or not.
    advance(&mut state, &definition, at(11));
    assert_eq!(job(&state, "slow").status, JobStatus::Failed);
    assert_eq!(state.status, AttemptStatus::Failed);
    assert_eq!(state.reason, Some(StatusReason::TimedOut));

    let mut cancelled = started(&definition, at(0));
    cancelled.cancel(&definition, at(1), 40).unwrap();
    assert_eq!(job(&cancelled, "slow").status, JobStatus::Cancelled);
    assert_eq!(job(&cancelled, "slow").executions().count(), 1, "a cancel is never retried");
}

fn matrix_definition(fail_fast: bool, max_parallel: &str) -> WorkflowDefinition {
    parse_definition(&format!(
        r#"
jobs:
  test:
    runs-on: linux
    strategy:
      matrix: {{os: [a, b, c]}}
      fail-fast: {fail_fast}
      {max_parallel}
    outputs: [v]
    steps: [{{run: x}}]
  report:
    needs: test
    if: always()
    runs-on: linux
    env:
      V: ${{{{ needs.test.outputs.v }}}}
      R: ${{{{ needs.test.result }}}}
    steps: [{{run: x}}]
"#
    ))
    .unwrap()
}

/// `max-parallel: 2`: never more than two legs queued or running.
#[test]
fn max_parallel_keeps_at_most_that_many_legs_going() {
    let definition = matrix_definition(false, "max-parallel: 2");
    let mut state = attempt(&definition);
    let now = Utc::now();
    let active = |state: &AttemptState| {
        state
            .jobs
            .iter()
            .filter(|j| j.key.starts_with("test") && matches!(j.status, JobStatus::Queued | JobStatus::Running))
            .count()
    };
    advance(&mut state, &definition, now);
    assert_eq!(active(&state), 2);
    assert_eq!(status_of(&state, "test (c)"), JobStatus::Pending);
    finish(&mut state, "test (a)", JobOutcome::Succeeded);
    advance(&mut state, &definition, now);
    assert_eq!(active(&state), 2);
    assert_eq!(status_of(&state, "test (c)"), JobStatus::Queued, "started once a leg ended");
}

/// `fail-fast`: a failed leg cancels the legs still going, as `fail_fast`;
/// the matrix job's result is `failure` for its dependants.
#[test]
fn a_failed_leg_cancels_its_siblings_under_fail_fast_and_not_without_it() {
    let now = Utc::now();
    let definition = matrix_definition(true, "");
    let mut state = started(&definition, now);
    finish(&mut state, "test (a)", JobOutcome::Succeeded);
    finish(&mut state, "test (b)", JobOutcome::Failed);
    advance(&mut state, &definition, now);
    let c = job(&state, "test (c)");
    assert_eq!((c.status, c.reason), (JobStatus::Cancelled, Some(StatusReason::FailFast)));
    // The report reads the legs' outputs (none were written).
    let mut data = ExpressionData::default();
    for leg in ["test (a)", "test (b)", "test (c)"] {
        data.outputs.insert(job(&state, leg).execution.as_ref().unwrap().id, BTreeMap::new());
    }
    let change = state.advance(&definition, now, MINUTE, 40, &RunnerEndings::new(), &data);
    let report = queued_spec(&change, "report").expect("the always() report runs");
    assert_eq!(report.work.env["R"], "failure");

    let calm = matrix_definition(false, "");
    let mut state = started(&calm, now);
    finish(&mut state, "test (b)", JobOutcome::Failed);
    advance(&mut state, &calm, now);
    assert_eq!(status_of(&state, "test (c)"), JobStatus::Queued, "without fail-fast the others go on");
}

/// Every leg's outputs reach the dependant, keyed by leg.
#[test]
fn a_dependant_reads_each_legs_outputs_keyed_by_leg() {
    let definition = matrix_definition(false, "");
    let now = Utc::now();
    let mut state = started(&definition, now);
    let mut data = ExpressionData::default();
    for (leg, v) in [("test (a)", "1"), ("test (b)", "2"), ("test (c)", "3")] {
        finish(&mut state, leg, JobOutcome::Succeeded);
        let execution = job(&state, leg).execution.as_ref().unwrap().id;
        data.outputs.insert(execution, BTreeMap::from([("v".to_string(), v.to_string())]));
    }
    let change = state.advance(&definition, now, MINUTE, 40, &RunnerEndings::new(), &data);
    let spec = queued_spec(&change, "report").expect("report queued");
    let by_leg: serde_json::Value = serde_json::from_str(&spec.work.env["V"]).unwrap();
    assert_eq!(by_leg, serde_json::json!({"test (a)": "1", "test (b)": "2", "test (c)": "3"}));
    assert_eq!(spec.work.env["R"], "success");
}

fn approval_definition(on_timeout: &str) -> WorkflowDefinition {
    parse_definition(&format!(
        r#"
name: release
jobs:
  build:
    runs-on: linux
    steps: [{{run: make}}]
  sign-off:
    needs: build
    approval:
      required: 2
      from: [alice, release-managers]
      timeout-minutes: 30
      on-timeout: {on_timeout}
      inputs:
        channel: {{type: choice, options: [stable, beta], default: beta}}
  deploy:
    needs: sign-off
    runs-on: linux
    steps: [{{run: ./deploy}}]
"#
    ))
    .unwrap()
}

fn approver(name: &str, groups: &[&str]) -> Approver {
    Approver { name: name.into(), groups: groups.iter().map(|g| g.to_string()).collect() }
}

fn request(decision: approval::Decision, inputs: serde_json::Value) -> ApprovalRequest {
    ApprovalRequest { decision, comment: Some("ok".into()), inputs: serde_json::from_value(inputs).unwrap() }
}

/// The attempt with `build` succeeded and `sign-off` waiting.
fn waiting_for_sign_off(definition: &WorkflowDefinition) -> (AttemptState, Uuid) {
    let mut state = after_build(definition, &ExpressionData::default());
    let change = advance(&mut state, definition, Utc::now());
    assert!(change.emitted.iter().all(|e| !matches!(e, Emitted::Queued { .. })), "an approval is queued to no runner");
    assert!(
        change.emitted.iter().any(|e| matches!(e, Emitted::JobWaiting(w) if w.job_key == "sign-off"
            && w.waiting_for == baton_api::facts::WaitingFor::Approval)),
        "its wait is a fact a notifier can take"
    );
    assert_eq!(status_of(&state, "sign-off"), JobStatus::Waiting);
    // The next advance leaves its dependant waiting too (a waiting job is
    // live: nothing is stuck).
    advance(&mut state, definition, Utc::now());
    assert_eq!(status_of(&state, "deploy"), JobStatus::Pending);
    let job = job(&state, "sign-off");
    assert_eq!(job.execution.as_ref().unwrap().status, ExecutionStatus::Waiting);
    (state.clone(), job.id)
}

#[test]
fn an_approval_needs_two_distinct_approvers_then_hands_its_inputs_on() {
    let definition = approval_definition("fail");
    let (mut state, job) = waiting_for_sign_off(&definition);
    let now = Utc::now();
    let approve = |inputs| request(approval::Decision::Approve, inputs);
    // The creator, and a token neither named nor grouped, are refused.
    assert_eq!(
        state.decide_approval(&definition, job, &approver("alice", &[]), Some("alice"), approve(json!({})), now),
        Err(ApprovalError::Refused(approval::Refusal::SelfApproval))
    );
    assert_eq!(
        state.decide_approval(&definition, job, &approver("mallory", &["ops"]), None, approve(json!({})), now),
        Err(ApprovalError::Refused(approval::Refusal::NotAnApprover))
    );
    let first = state.decide_approval(&definition, job, &approver("alice", &[]), Some("bob"), approve(json!({})), now);
    let first = first.unwrap().unwrap();
    assert!(
        matches!(first.emitted.as_slice(), [Emitted::ApprovalDecided(f)] if f.outcome == "waiting" && f.approvals == 1)
    );
    // Alice again counts nothing and records nothing.
    let again = state.decide_approval(&definition, job, &approver("alice", &[]), Some("bob"), approve(json!({})), now);
    assert_eq!(again, Ok(None));
    assert_eq!(status_of(&state, "sign-off"), JobStatus::Waiting);
    let second = state
        .decide_approval(
            &definition,
            job,
            &approver("carol", &["release-managers"]),
            Some("bob"),
            approve(json!({"channel": "stable"})),
            now,
        )
        .unwrap()
        .unwrap();
    assert_eq!(status_of(&state, "sign-off"), JobStatus::Succeeded);
    assert!(second
        .emitted
        .iter()
        .any(|e| matches!(e, Emitted::Results { outputs, .. } if outputs["channel"] == "stable")));
    assert!(second.emitted.iter().any(|e| matches!(e, Emitted::JobTerminated(t) if t.status == "succeeded")));
    let decisions: Vec<&str> =
        state.jobs.iter().find(|j| j.id == job).unwrap().decisions.iter().map(|d| d.by.as_str()).collect();
    assert_eq!(decisions, ["alice", "carol"]);
    // A decision after the end is refused: the job does not wait any more.
    assert_eq!(
        state.decide_approval(
            &definition,
            job,
            &approver("dave", &["release-managers"]),
            None,
            approve(json!({})),
            now
        ),
        Err(ApprovalError::NotWaiting)
    );
    advance(&mut state, &definition, Utc::now());
    assert_eq!(status_of(&state, "deploy"), JobStatus::Queued);
}

#[test]
fn a_rejection_fails_the_approval_and_skips_what_needs_it() {
    let definition = approval_definition("fail");
    let (mut state, job) = waiting_for_sign_off(&definition);
    let reject = request(approval::Decision::Reject, json!({}));
    state.decide_approval(&definition, job, &approver("alice", &[]), None, reject, Utc::now()).unwrap().unwrap();
    let sign_off = state.jobs.iter().find(|j| j.id == job).unwrap();
    assert_eq!((sign_off.status, sign_off.reason), (JobStatus::Failed, Some(StatusReason::Rejected)));
    advance(&mut state, &definition, Utc::now());
    assert_eq!(status_of(&state, "deploy"), JobStatus::Skipped);
    assert_eq!(state.status, AttemptStatus::Failed);
}

#[test]
fn an_approval_nobody_decides_ends_as_its_on_timeout_says() {
    for (on_timeout, status, reason, deploy) in [
        ("fail", JobStatus::Failed, Some(StatusReason::TimedOut), JobStatus::Skipped),
        ("skip", JobStatus::Skipped, Some(StatusReason::TimedOut), JobStatus::Skipped),
        ("approve", JobStatus::Succeeded, None, JobStatus::Queued),
    ] {
        let definition = approval_definition(on_timeout);
        let (mut state, job) = waiting_for_sign_off(&definition);
        let deadline = state.next_deadline().unwrap();
        assert!(
            deadline > Utc::now() + chrono::Duration::minutes(29),
            "{on_timeout}: its timeout is the next deadline"
        );
        let change = advance(&mut state, &definition, deadline);
        let sign_off = state.jobs.iter().find(|j| j.id == job).unwrap();
        assert_eq!((sign_off.status, sign_off.reason), (status, reason), "{on_timeout}");
        if on_timeout == "approve" {
            assert!(
                change
                    .emitted
                    .iter()
                    .any(|e| matches!(e, Emitted::Results { outputs, .. } if outputs["channel"] == "beta")),
                "the defaults are its outputs"
            );
        }
        advance(&mut state, &definition, deadline);
        assert_eq!(status_of(&state, "deploy"), deploy, "{on_timeout}");
    }
}

/// The workflow of the integration tests of listening: `on-review` listens
/// for `review` events for two minutes once `build` is done.
fn listening_definition() -> WorkflowDefinition {
    parse_definition(include_str!("../../../tests/fixtures/workflows/listening_reviews.yml")).unwrap()
}

fn review(reference: &str, disposition: listening::Disposition, state: &str) -> JobEvent {
    JobEvent {
        name: "review".into(),
        reference: reference.into(),
        disposition,
        payload: json!({"review": {"state": state}}),
        delivered_at: Utc::now(),
    }
}

fn queued_specs(change: &Change) -> Vec<JobSpec> {
    change
        .emitted
        .iter()
        .filter_map(|e| if let Emitted::Queued { spec, .. } = e { Some(spec.clone()) } else { None })
        .collect()
}

/// The spec `change` queued for job `key`, if it queued it.
fn queued_spec(change: &Change, key: &str) -> Option<JobSpec> {
    queued_specs(change).into_iter().find(|spec| spec.work.key == key)
}

#[test]
fn a_listening_job_runs_once_per_fired_event_in_order_and_ends_on_resolve() {
    let definition = listening_definition();
    let mut state = attempt(&definition);
    advance(&mut state, &definition, Utc::now());
    let key = |s: &AttemptState| job(s, "on-review").clone();
    let job_id = key(&state).id;
    // Not listening before its needs are met.
    assert_eq!(
        state.deliver_event(&definition, job_id, review("r0", listening::Disposition::Fire, "x")),
        Err(EventError::NotListening)
    );
    finish(&mut state, "build", JobOutcome::Succeeded);
    let change = advance(&mut state, &definition, Utc::now());
    assert!(queued_specs(&change).is_empty(), "it listens: nothing runs yet");
    assert!(change
        .emitted
        .iter()
        .any(|e| matches!(e, Emitted::JobWaiting(w) if w.waiting_for == baton_api::facts::WaitingFor::Events)));
    assert_eq!(status_of(&state, "on-review"), JobStatus::Waiting);
    // Its listening timeout (two minutes) is the next deadline.
    let deadline = state.next_deadline().unwrap() - Utc::now();
    assert!(deadline > chrono::Duration::minutes(1) && deadline <= chrono::Duration::minutes(2), "{deadline}");

    assert_eq!(
        state.deliver_event(&definition, job_id, review("r1", listening::Disposition::Fire, "approved")),
        Ok(true)
    );
    assert_eq!(
        state.deliver_event(&definition, job_id, review("r2", listening::Disposition::Fire, "changes")),
        Ok(true)
    );
    assert_eq!(
        state.deliver_event(&definition, job_id, review("r1", listening::Disposition::Fire, "again")),
        Ok(false)
    );
    let bad = JobEvent { name: "push".into(), ..review("r9", listening::Disposition::Fire, "x") };
    assert!(matches!(
        state.deliver_event(&definition, job_id, bad),
        Err(EventError::Refused(DeliveryError::Invalid(_)))
    ));

    // One at a time, in order, each with its event.
    let change = advance(&mut state, &definition, Utc::now());
    let specs = queued_specs(&change);
    assert_eq!(specs.len(), 1, "one execution at a time");
    assert_eq!(specs[0].work.steps[0].run, "echo review r1 $STATE");
    assert_eq!(specs[0].work.env["STATE"], "approved");
    assert!(queued_specs(&advance(&mut state, &definition, Utc::now())).is_empty());
    finish(&mut state, "on-review", JobOutcome::Failed);
    assert_eq!(status_of(&state, "on-review"), JobStatus::Waiting, "a failed execution does not end the listening");
    let specs = queued_specs(&advance(&mut state, &definition, Utc::now()));
    assert_eq!(specs[0].work.env["STATE"], "changes");
    assert_eq!(state.deliver_event(&definition, job_id, review("r3", listening::Disposition::Resolve, "")), Ok(true));
    assert_eq!(state.deliver_event(&definition, job_id, review("r4", listening::Disposition::Fire, "late")), Ok(false));
    finish(&mut state, "on-review", JobOutcome::Succeeded);
    advance(&mut state, &definition, Utc::now());
    let job = key(&state);
    assert_eq!(job.status, JobStatus::Succeeded, "resolved after its last execution, which succeeded");
    let events: Vec<_> = job.executions().map(|e| e.event.as_ref().map(|e| e.reference.clone())).collect();
    assert_eq!(events, [Some("r1".to_string()), Some("r2".to_string())], "each execution kept with its event");
    assert_eq!(status_of(&state, "after"), JobStatus::Queued, "its dependant runs");
    assert_eq!(state.deliver_event(&definition, job_id, review("r5", listening::Disposition::Fire, "x")), Ok(false));
}

#[test]
fn a_listening_job_times_out_and_a_resolve_before_any_event_succeeds() {
    let definition = listening_definition();
    let listening = |definition: &WorkflowDefinition| {
        let mut state = after_build(definition, &ExpressionData::default());
        advance(&mut state, definition, Utc::now());
        let id = job(&state, "on-review").id;
        (state, id)
    };
    let (mut state, _) = listening(&definition);
    let until = state.next_deadline().unwrap();
    advance(&mut state, &definition, until);
    let job = job(&state, "on-review");
    assert_eq!((job.status, job.reason), (JobStatus::Failed, Some(StatusReason::TimedOut)));
    advance(&mut state, &definition, until);
    assert_eq!(status_of(&state, "after"), JobStatus::Skipped);

    let (mut state, id) = listening(&definition);
    state.deliver_event(&definition, id, review("done", listening::Disposition::Resolve, "")).unwrap();
    advance(&mut state, &definition, Utc::now());
    assert_eq!(status_of(&state, "on-review"), JobStatus::Succeeded);
}

fn deploy_definition() -> WorkflowDefinition {
    parse_definition(
        r#"
jobs:
  build:
    runs-on: linux
    steps: [{run: make}]
  deploy:
    needs: build
    runs-on: linux
    concurrency: {group: "deploy-${{ inputs.env }}", queue: 2}
    steps: [{run: ./deploy}]
  notify:
    needs: deploy
    runs-on: linux
    steps: [{run: ./notify}]
"#,
    )
    .unwrap()
}

fn with_inputs(inputs: serde_json::Value) -> ExpressionData {
    ExpressionData {
        inputs: inputs.as_object().cloned(),
        github: Some(Default::default()),
        ..ExpressionData::default()
    }
}

#[test]
fn a_job_in_a_group_is_queued_only_once_the_group_says_it_holds_it_and_leaves_when_it_ends() {
    let definition = deploy_definition();
    let mut data = with_inputs(json!({"env": "prod"}));
    let mut state = after_build(&definition, &data);

    // Due: the join is asked of the orchestrator, nothing is queued.
    let change = advance_with(&mut state, &definition, &data);
    let deploy_id = job(&state, "deploy").id;
    let [GroupRequest::Join { hold, member }] = change.missing.groups.as_slice() else {
        panic!("one join asked: {:?}", change.missing)
    };
    assert_eq!((hold.group.as_str(), hold.queue, hold.status), ("deploy-prod", 2, HoldStatus::Waiting));
    assert_eq!(*member, Member { run_id: state.run_id, attempt: 1, job: Some(deploy_id) });
    assert_eq!(status_of(&state, "deploy"), JobStatus::Pending);

    // The group says wait: the hold is recorded, the job stays pending.
    data.joined.insert(deploy_id, false);
    let change = advance_with(&mut state, &definition, &data);
    assert!(change.changed && change.missing.is_empty() && queued_of(&change, "deploy").is_empty());
    assert_eq!(job(&state, "deploy").concurrency.as_ref().map(|h| h.status), Some(HoldStatus::Waiting));
    assert!(!advance_with(&mut state, &definition, &data).changed, "waiting again changes nothing");

    // It holds the group now: queued, holding.
    data.joined.insert(deploy_id, true);
    let change = advance_with(&mut state, &definition, &data);
    assert_eq!(queued_of(&change, "deploy").len(), 1);
    assert_eq!(job(&state, "deploy").concurrency.as_ref().map(|h| h.status), Some(HoldStatus::Holding));

    // Ended: it must leave before anything else is decided over it, and
    // the leave is marked once the orchestrator says it has left.
    finish(&mut state, "deploy", JobOutcome::Succeeded);
    // (The orchestrator drops a change that asks for more: a copy shows it.)
    let change = advance_with(&mut state.clone(), &definition, &data);
    assert!(change.missing.groups.iter().any(|r| matches!(r,
        GroupRequest::Leave { group, member } if group == "deploy-prod" && member.job == Some(deploy_id))));
    assert_eq!(state.job_groups().len(), 1, "a done attempt would still leave it");
    data.left.insert(deploy_id);
    let change = advance_with(&mut state, &definition, &data);
    assert!(change.missing.groups.is_empty());
    assert_eq!(job(&state, "deploy").concurrency.as_ref().map(|h| h.status), Some(HoldStatus::Left));
    assert_eq!(queued_of(&change, "notify").len(), 1, "its dependant goes on");
    assert!(state.job_groups().is_empty());
}

#[test]
fn a_job_replaced_in_its_group_is_cancelled_and_its_run_goes_on_as_after_any_cancelled_job() {
    let definition = deploy_definition();
    let mut data = with_inputs(json!({"env": "prod"}));
    let mut state = after_build(&definition, &data);
    let deploy_id = job(&state, "deploy").id;
    data.joined.insert(deploy_id, false);
    advance_with(&mut state, &definition, &data);

    // A queued one, replaced, is withdrawn from the queue (no runner may
    // claim it any more).
    let mut holding = state.clone();
    data.joined.insert(deploy_id, true);
    advance_with(&mut holding, &definition, &data);
    let queued_id = job(&holding, "deploy").execution.as_ref().unwrap().id;
    let before = holding.clone();
    holding.replace_job(deploy_id, Utc::now()).expect("a queued job is replaced");
    assert_eq!(withdrawn_executions(&before, &holding), vec![queued_id]);

    let emitted = state.replace_job(deploy_id, Utc::now()).expect("a waiting job is replaced");
    assert!(emitted.iter().any(|e| matches!(e, Emitted::JobTerminated(t)
        if t.job_key == "deploy" && t.reason.as_deref() == Some("concurrency_replaced"))));
    assert!(state.replace_job(deploy_id, Utc::now()).is_none(), "replacing it again is a no-op");
    data.left.insert(deploy_id);
    advance_with(&mut state, &definition, &data);
    // As after any cancelled job (§9): what needs it is skipped, and a
    // cancel is not a failure.
    assert_eq!(status_of(&state, "notify"), JobStatus::Skipped);
    assert_eq!(state.status, AttemptStatus::Succeeded);
}

#[test]
fn a_flagged_job_fails_unschedulable_at_its_time_unless_its_record_shows_a_claim() {
    let definition = definition();
    let now = Utc::now();
    let mut state = started(&definition, now);
    let build = job(&state, "build").clone();
    let execution = build.execution.as_ref().unwrap().id;
    let fails_at = now + chrono::Duration::minutes(2);
    let mark = baton_api::runs::Unschedulable { labels: vec!["linux".into()], fails_at };
    assert!(state.mark_unschedulable(build.id, execution, mark.clone()));
    assert!(!state.mark_unschedulable(build.id, execution, mark), "a replayed flag changes nothing");
    assert_eq!(state.next_deadline(), Some(fails_at), "the orchestration comes back then");
    assert!(state.overdue_executions(fails_at - chrono::Duration::seconds(1)).is_empty());
    assert_eq!(state.overdue_executions(fails_at), vec![execution], "its record is read then");

    // Claimed meanwhile (the record says so): it runs, whatever the flag.
    let claimed = RunnerEndings::from([(execution, ExecutionEvent::Claimed { at: now })]);
    let mut running = state.clone();
    let change = running.advance(&definition, fails_at, MINUTE, 40, &claimed, &ExpressionData::default());
    assert!(change.unschedulable.is_empty());
    assert_eq!(status_of(&running, "build"), JobStatus::Queued);

    // Nobody's: it fails, is withdrawn from the queue, and is not retried.
    let before = state.clone();
    let change = advance(&mut state, &definition, fails_at);
    assert_eq!(change.unschedulable, vec![execution]);
    let build = job(&state, "build");
    assert_eq!((build.status, build.reason), (JobStatus::Failed, Some(StatusReason::Unschedulable)));
    assert_eq!(withdrawn_executions(&before, &state), vec![execution]);
    advance(&mut state, &definition, fails_at);
    assert_eq!(status_of(&state, "test"), JobStatus::Skipped, "as after any failure");
    assert_eq!(status_of(&state, "report"), JobStatus::Queued);
}
