//! The `step` task of the `run-attempt` state machine (and the previous
//! definition's `advance` and `wait`), delivered through the `orchestrate`
//! task queue; the `orchestrator` function hands each message here.
//!
//! - `step`: applies [`AttemptState::advance`] until nothing changes:
//!   marks the attempt (and run) running, applies the run timeout and job
//!   timeouts (an overdue execution is first looked up in its runners'
//!   record: one its runner completed, or whose lease expired, takes that
//!   end even if the fact saying so has not arrived, and a timeout is
//!   written only with a check that no such end was recorded since, so
//!   finished beats timeout across the two contexts), starts, skips and
//!   cancels jobs (each start writes the execution `queued` with the
//!   `job_execution.queued` fact and the job's spec item), finalises the
//!   attempt once every job is terminal; each step is one transaction of at
//!   most [`JOBS_PER_TRANSACTION`] jobs, compare-and-set on the attempt's
//!   version (`Store::update_attempt`). Then, in the same compare-and-set,
//!   it parks its task token on the attempt: whoever next changes the
//!   attempt reads the token, and no change can slip between the look and
//!   the park. It reports at once instead (`{done, wait_s, progress}`:
//!   success ends the execution, `Baton.Continue` has the state machine
//!   send the next `Step`) when the attempt is done or its next deadline
//!   comes before this task would time out.
//! - `advance` and `wait`: the previous definition's two tasks, kept for
//!   executions that started before a deploy: `advance` is a `step` that
//!   always reports; `wait` parks the token conditioned on the progress
//!   `advance` saw (if it moved, the task is completed at once).
//!
//! Idempotency: a redelivered `step` recomputes from the stored state (a
//! second advance changes nothing) and parks the same token again or
//! reports the same; a message older than the token parked now belongs to
//! a task that ended and does nothing; completing a used token is "nothing
//! to resume".

use std::collections::HashMap;

use baton_domain::workflows::attempt::{AttemptState, Emitted, GroupRequest, MissingData, RunnerEndings};
use baton_domain::workflows::concurrency::{GroupHold, Member};
use baton_domain::workflows::github::GithubData;
use baton_domain::workflows::references::ExpressionData;
use baton_domain::workflows::WorkflowDefinition;
use baton_store::attempts::{AttemptItem, AttemptStep, AttemptWrite, Parked, StepsItem};
use baton_store::contention;
use baton_store::records::RunnerRecord;
use baton_store::StoreError;
use uuid::Uuid;

use super::{
    complete_task, fail_task, leave_group, leave_group_if_done, parked_past_deadline, replace_in_group, report,
    AdvanceOutput, TaskMessage, JOBS_PER_TRANSACTION,
};
use crate::context::Context;
use baton_telemetry::metrics::{emit, Unit};

/// Runs one task of the state machine; `sent_at` is when SQS took its
/// message (ms, kept on redelivery).
pub async fn run_task(context: &Context, task: TaskMessage, sent_at: i64) -> Result<(), StoreError> {
    match task {
        TaskMessage::Step { run_id, attempt, token, wait_s, .. } => {
            let park = Park { sent_at, until: sent_at.saturating_add(wait_s.saturating_mul(1000) as i64) };
            step(context, run_id, attempt, &token, Some(park)).await
        }
        TaskMessage::Advance { run_id, attempt, token, .. } => step(context, run_id, attempt, &token, None).await,
        TaskMessage::Wait { run_id, attempt, token, progress, .. } => {
            let parked = context.store.park_wait_token(run_id, attempt, &token, progress, sent_at).await?;
            tracing::debug!(%run_id, attempt, progress, ?parked, "wait for progress");
            if parked == Parked::ProgressMoved {
                let report = serde_json::json!({"woke": true});
                complete_task(context.clients.sfn(), &token, &report).await?;
            }
            Ok(())
        }
    }
}

/// How the overdue executions of `state` ended on the runners' side (or
/// that they were claimed), from their records (a record of another
/// attempt's execution never matches).
fn runner_endings(
    state: &AttemptState,
    definition: &WorkflowDefinition,
    records: &HashMap<Uuid, Option<RunnerRecord>>,
) -> RunnerEndings {
    state
        .jobs
        .iter()
        .filter_map(|job| {
            let execution = job.execution.as_ref()?;
            let record = records.get(&execution.id)?.as_ref()?;
            Some((execution.id, record.ending_or_claim(definition, &job.key)?))
        })
        .collect()
}

/// A `Step` task's terms for parking its token: when SQS took its message
/// (ms) and when the task times out (ms).
#[derive(Debug, Clone, Copy)]
pub struct Park {
    pub sent_at: i64,
    pub until: i64,
}

/// How a step ended, after its last write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// The token is parked on the attempt.
    Parked,
    /// Report to the state machine now.
    Report,
    /// A newer task parked its token: this message's task ended long ago.
    Stale,
}

/// Why a decision of `step` stopped without writing.
enum Stopped {
    Store(StoreError),
    /// Executions are past a deadline: their runners' records must be read
    /// (again) before the timeout can be decided.
    ReadRunnerRecords(Vec<Uuid>),
    /// Jobs due to start read the run's inputs or their needs' outputs in
    /// expressions: these are read, then the decision is taken again.
    ReadExpressionData(MissingData, String),
    /// The attempt waits for its concurrency group: it joins it (or sees
    /// whether it holds it now), then the decision is taken again.
    JoinGroup(GroupHold, Member, String),
}

impl From<StoreError> for Stopped {
    fn from(err: StoreError) -> Self {
        Stopped::Store(err)
    }
}

pub async fn step(
    context: &Context,
    run_id: Uuid,
    attempt: u32,
    token: &str,
    park: Option<Park>,
) -> Result<(), StoreError> {
    let minute = context.config.orchestration.timeout_minute;
    let store = &context.store;
    let mut started = 0usize;
    // The runners' records of overdue executions, as last read.
    let mut records: HashMap<Uuid, Option<RunnerRecord>> = HashMap::new();
    let mut reads = 0;
    // The run's inputs and needs' outputs that jobs due to start read, as
    // read so far (only when such a job is due).
    let mut data = ExpressionData::default();
    let mut outcome = Ended::Report;
    let mut woken = false;
    // Whether the attempt holds its concurrency group, once asked.
    let mut holds_group: Option<bool> = None;
    let updated = loop {
        // Records are fresh for one decision: after a lost race (maybe a
        // complete failed this decision's check) they are read again.
        let mut records_used = false;
        let result = store
            .update_attempt(run_id, attempt, context.config.outbox_ttl_days, |next, definition| {
                let now = chrono::Utc::now();
                let overdue = next.state.overdue_executions(now);
                if !overdue.is_empty() {
                    if records_used || overdue.iter().any(|id| !records.contains_key(id)) {
                        return Err(Stopped::ReadRunnerRecords(overdue));
                    }
                    records_used = true;
                }
                let ended = runner_endings(&next.state, definition, &records);
                let unfinished: Vec<Uuid> = next
                    .state
                    .jobs
                    .iter()
                    .filter_map(|job| job.execution.as_ref())
                    .filter(|e| !e.status.is_terminal())
                    .map(|e| e.id)
                    .collect();
                let mut took_group = false;
                if next.state.waits_for_group() && !next.state.status.is_terminal() {
                    match (holds_group, next.state.concurrency.clone()) {
                        (None, Some(hold)) => {
                            let workspace_id = next.state.workspace_id.clone();
                            return Err(Stopped::JoinGroup(hold, next.state.member(), workspace_id));
                        }
                        (Some(true), _) => took_group = next.state.hold_group(),
                        // Still waiting: nothing starts, the token parks.
                        _ => {}
                    }
                }
                let mut change = next.state.advance(definition, now, minute, JOBS_PER_TRANSACTION, &ended, &data);
                change.changed |= took_group;
                if !change.missing.is_empty() {
                    return Err(Stopped::ReadExpressionData(change.missing, next.state.workspace_id.clone()));
                }
                // A token that progress woke has been used: forget it. A token
                // still waiting for progress stays: this may be a redelivered
                // step (or Advance) of the task that parked it.
                let to_wake = next.token_to_wake();
                let token_used = to_wake.is_some();
                // Woken already: this is a redelivery of a task that ended
                // (sticky: the write below forgets the token).
                woken |= to_wake == Some(token);
                if token_used {
                    next.wait_token = None;
                    next.wait_progress = None;
                    next.wait_until = None;
                }
                if !change.changed {
                    outcome = if woken { Ended::Stale } else { park_or_report(next, token, park) };
                    // Parked is only ever a Step's answer (it has `park`).
                    let parks = match park {
                        Some(park) if outcome == Ended::Parked && next.wait_token.as_deref() != Some(token) => {
                            next.wait_token = Some(token.to_string());
                            next.wait_progress = Some(next.progress);
                            next.wait_sent_at = Some(park.sent_at);
                            next.wait_until = Some(park.until);
                            true
                        }
                        _ => false,
                    };
                    if !parks && !token_used {
                        return Ok(AttemptStep::Done);
                    }
                    return Ok(AttemptStep::Write(AttemptWrite::default()));
                }
                if !change.emitted.is_empty() {
                    tracing::info!(%run_id, attempt, status = %next.state.status, facts = change.emitted.len(), "attempt advanced");
                }
                started += change.emitted.iter().filter(|e| matches!(e, Emitted::Queued { .. })).count();
                // Finished beats timeout across the two contexts: a timeout
                // is written only while no runner's end is recorded.
                let mut items = change
                    .timed_out
                    .iter()
                    .map(|id| store.not_ended_by_runner_check(*id, now))
                    .collect::<Result<Vec<_>, _>>()?;
                // Unschedulable beats nothing: written only while unclaimed.
                for id in &change.unschedulable {
                    items.push(store.unclaimed_check(*id, now)?);
                }
                // An outcome adopted from its record (its fact still on the
                // way) brings its outputs and steps where dependants and the
                // view read them, in the same write (the late fact's own
                // adoption then finds them there and keeps them).
                for id in unfinished.iter().filter(|id| ended.contains_key(*id)) {
                    let record = records.get(id).and_then(Option::as_ref);
                    if let Some((steps, outputs)) = record.and_then(RunnerRecord::completed_results) {
                        items.push(store.result_put(&StepsItem::new(run_id, attempt, *id, steps, outputs.clone()))?);
                    }
                }
                // Advance in bounded steps (one transaction each) until nothing changes.
                Ok(AttemptStep::Write(AttemptWrite { emitted: change.emitted, items, again: true, ..AttemptWrite::default() }))
            })
            .await;
        match result {
            Ok(updated) => break updated,
            Err(Stopped::Store(err)) => return Err(err),
            Err(Stopped::ReadRunnerRecords(overdue)) => {
                reads += 1;
                if reads > contention::MAX_LOST_RACES {
                    return Err(contention::too_contended(format!("timeouts of attempt {run_id}/{attempt}")));
                }
                // A run timeout makes every unfinished execution overdue at
                // once: read their records side by side, not one by one.
                let read = futures::future::try_join_all(overdue.iter().map(|id| store.runner_record(*id))).await?;
                // A completion's outputs are the ones dependants queued by
                // this timeout read (`${{ needs.<job>.outputs.* }}`, `if:`).
                for record in read.iter().flatten() {
                    if let Some((_, outputs)) = record.completed_results() {
                        data.outputs.insert(record.execution.id, baton_store::runs::output_texts(outputs));
                    }
                }
                records.extend(overdue.into_iter().zip(read));
            }
            Err(Stopped::JoinGroup(hold, me, workspace_id)) => {
                reads += 1;
                if reads > contention::MAX_LOST_RACES {
                    return Err(contention::too_contended(format!("group of {run_id}/{attempt}")));
                }
                let joined = store.join_concurrency_group(&workspace_id, &hold, me).await?;
                tracing::info!(%run_id, attempt, group = %hold.group, holding = joined.holding, replaced = joined.to_cancel.len(), "joined its concurrency group");
                for other in joined.to_cancel {
                    replace_in_group(context, other, &hold.group).await?;
                }
                holds_group = Some(joined.holding);
            }
            Err(Stopped::ReadExpressionData(missing, workspace_id)) => {
                reads += 1;
                if reads > contention::MAX_LOST_RACES {
                    return Err(contention::too_contended(format!("expression data of {run_id}/{attempt}")));
                }
                if missing.run {
                    let run = store.get_run(&workspace_id, run_id).await?;
                    let inputs = run
                        .as_ref()
                        .and_then(|run| run.inputs.as_deref())
                        .and_then(|raw| serde_json::from_str(raw).ok());
                    data.inputs = Some(inputs.unwrap_or_default());
                    let vars =
                        run.as_ref().and_then(|run| run.vars.as_deref()).and_then(|raw| serde_json::from_str(raw).ok());
                    data.vars = Some(vars.unwrap_or_default());
                    data.github = Some(run.as_ref().map(GithubData::of_run).unwrap_or_default());
                }
                if !missing.outputs.is_empty() {
                    let found = store.execution_outputs(run_id, &missing.outputs).await?;
                    // A need that reported nothing (skipped, cancelled) has no
                    // outputs. Jobs due together may want the same need's.
                    for id in missing.outputs {
                        data.outputs.insert(id, found.get(&id).cloned().unwrap_or_default());
                    }
                }
                for request in missing.groups {
                    match request {
                        GroupRequest::Join { hold, member } => {
                            let Some(job) = member.job else { continue };
                            let joined = store.join_concurrency_group(&workspace_id, &hold, member).await?;
                            tracing::info!(%run_id, attempt, %job, group = %hold.group, holding = joined.holding, replaced = joined.to_cancel.len(), "a job joined its concurrency group");
                            for other in joined.to_cancel {
                                replace_in_group(context, other, &hold.group).await?;
                            }
                            data.joined.insert(job, joined.holding);
                        }
                        GroupRequest::Leave { group, member } => {
                            let Some(job) = member.job else { continue };
                            leave_group(context, &workspace_id, &group, member).await?;
                            data.left.insert(job);
                        }
                    }
                }
            }
        }
    };
    let Some(updated) = updated else {
        tracing::error!(%run_id, attempt, "advance of an attempt that does not exist");
        return fail_task(context.clients.sfn(), token, "AttemptNotFound", &format!("{run_id}/{attempt}")).await;
    };
    let item = updated.item;
    // Before the report that ends the execution: a failure here is retried
    // with the message, and leaving twice is a no-op.
    leave_group_if_done(context, &item).await?;
    // The jobs are claimable already; the nudge only saves the fitting
    // runners their wait for a poll (lost, it costs latency, not a job).
    context.push().nudge_work(store, &item.state.workspace_id, &updated.queued_label_sets).await;
    let output = AdvanceOutput::of(&item, chrono::Utc::now(), context.config.orchestration.max_wait);
    emit(
        "orchestrator",
        &[
            ("advances", 1.0, Unit::Count),
            ("jobs_started", started as f64, Unit::Count),
            ("attempt_conflicts", f64::from(updated.lost_races), Unit::Count),
        ],
    );
    let token_tail = &token[token.len().saturating_sub(12)..];
    tracing::debug!(%run_id, attempt, done = output.done, wait_s = output.wait_s, progress = item.progress, ?outcome, token_tail, "step ended");
    match (outcome, park) {
        (Ended::Report, Some(_)) => report(context.clients.sfn(), token, &output).await,
        // The previous definition's `Advance` reads the report with a Choice.
        (Ended::Report, None) => complete_task(context.clients.sfn(), token, &output).await,
        (Ended::Parked | Ended::Stale, _) => Ok(()),
    }
}

/// What a step that found nothing (more) to change does with its token:
/// reports when the attempt is done, when this is the previous definition's
/// `Advance` (no `park`), or when the attempt's next deadline comes before
/// the task would time out (the next `Step` is sent with the shorter
/// timeout); does nothing for a message older than the token parked now
/// (its task ended); parks otherwise.
fn park_or_report(item: &AttemptItem, token: &str, park: Option<Park>) -> Ended {
    let Some(park) = park else { return Ended::Report };
    if item.wait_token.as_deref() != Some(token) && item.wait_sent_at.is_some_and(|parked| parked > park.sent_at) {
        return Ended::Stale;
    }
    if item.state.is_done() || parked_past_deadline(item.state.next_deadline(), Some(park.until)) {
        return Ended::Report;
    }
    Ended::Parked
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_api::facts::JobOutcome;
    use baton_domain::workflows::attempt::NewAttempt;
    use baton_domain::workflows::{parse_definition, ExecutionEvent};
    use chrono::{DateTime, Utc};

    const MINUTE: std::time::Duration = std::time::Duration::from_secs(60);

    /// An attempt whose one job (a five-minute timeout) was queued at `now`.
    fn queued(now: DateTime<Utc>) -> (AttemptItem, WorkflowDefinition) {
        let definition =
            parse_definition("name: one\njobs:\n  a:\n    runs-on: l\n    timeout-minutes: 5\n    steps: [{run: x}]\n")
                .unwrap();
        let mut state = AttemptState::new(NewAttempt::first(Uuid::now_v7(), "ws", &definition, now));
        state.advance(&definition, now, MINUTE, 15, &RunnerEndings::new(), &ExpressionData::default());
        (AttemptItem::new(state), definition)
    }

    fn park(sent_at: DateTime<Utc>, timeout_s: i64) -> Option<Park> {
        let sent_at = sent_at.timestamp_millis();
        Some(Park { sent_at, until: sent_at + timeout_s * 1000 })
    }

    #[test]
    fn a_step_parks_when_its_timeout_comes_before_the_next_deadline() {
        let now = Utc::now();
        let (item, _) = queued(now);
        assert_eq!(park_or_report(&item, "t", park(now, 300)), Ended::Parked, "the job's deadline is in 300 s");
    }

    #[test]
    fn a_step_whose_timeout_would_miss_a_deadline_reports_to_be_sent_again_with_a_shorter_one() {
        let now = Utc::now();
        let (item, _) = queued(now);
        assert_eq!(park_or_report(&item, "t", park(now, 3600)), Ended::Report);
    }

    #[test]
    fn a_done_attempt_and_the_previous_definitions_advance_report() {
        let now = Utc::now();
        let (mut item, definition) = queued(now);
        assert_eq!(park_or_report(&item, "t", None), Ended::Report, "Advance always reports");
        let job = item.state.jobs[0].clone();
        let execution = job.execution.as_ref().unwrap().id;
        let done = ExecutionEvent::Completed { status: JobOutcome::Succeeded, steps: vec![], exit_code: None };
        item.state.apply_runner_event(job.id, execution, &done, None, now);
        item.state.advance(&definition, now, MINUTE, 15, &RunnerEndings::new(), &ExpressionData::default());
        assert_eq!(park_or_report(&item, "t", park(now, 300)), Ended::Report, "done");
    }

    #[test]
    fn a_step_message_older_than_the_parked_token_does_nothing() {
        let now = Utc::now();
        let (mut item, _) = queued(now);
        let later = now + chrono::Duration::seconds(5);
        item.wait_token = Some("newer".into());
        item.wait_sent_at = Some(later.timestamp_millis());
        assert_eq!(park_or_report(&item, "older", park(now, 300)), Ended::Stale);
        assert_eq!(park_or_report(&item, "newer", park(later, 300)), Ended::Parked, "its own redelivery");
    }
}
