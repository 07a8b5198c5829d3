//! Adopting how the runners' side ended an execution (a completion, an
//! expired lease, each with the claim's instant) into the attempt,
//! advancing the attempt from it, and waking the orchestration parked on it
//! when it has something to do. Two callers apply the same fact, so the bus
//! is off the critical path without being the only way: the `complete`
//! function adopts its own completion right after the transaction that
//! recorded it (one hop from "needs satisfied" to Step Functions), and the
//! `job-outcomes` subscriber adopts every outcome from the bus (expiries
//! always; a completion when the direct adoption did not happen: a crash, a
//! lost race past its bound, an attempt busy elsewhere).
//!
//! Idempotency: state, not markers. Each adoption is one compare-and-set on
//! the attempt's version (`Store::update_attempt`); a second adoption of
//! the same fact finds the execution already where the fact puts it (or
//! terminal) and changes nothing, emits nothing. It only re-sends a wake-up
//! if the orchestration still waits for progress that has happened (a crash
//! between a commit and its wake-up is healed by the redelivery).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::context::Context;
use crate::facts::subscriber::HandlerError;
use crate::usecases::orchestration::{leave_group_if_done, parked_past_deadline, wake, JOBS_PER_TRANSACTION};
use baton_api::facts::{JobCompleted, JobLeaseExpired, JobOutcome, LeaseRef, StepResult};
use baton_domain::workflows::attempt::{step_statuses, Emitted};
use baton_domain::workflows::execution::failing_exit_code;
use baton_domain::workflows::{ExecutionEvent, StepStatus, WorkflowDefinition};
use baton_store::attempts::{AttemptItem, AttemptStep, AttemptUpdated, AttemptWrite, StepsItem};
use baton_telemetry::metrics::{emit, Unit};

/// What a runner fact says happened to an execution.
///
/// A claim is not one: the attempt is not rewritten when a runner claims a
/// job (one write of the whole attempt a job, for a status the run view
/// reads from the runner record instead, `Store::run_records_live`). The
/// claim's instant comes with the outcome (`claimed_at`) and becomes the
/// execution's `started_at` then.
#[derive(Debug, Clone)]
pub struct RunnerFact {
    pub lease: LeaseRef,
    pub at: DateTime<Utc>,
    pub kind: Kind,
    pub steps: Vec<StepResult>,
    pub outputs: Option<BTreeMap<String, serde_json::Value>>,
    pub claimed_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Completed(JobOutcome),
    LeaseExpired,
}

impl RunnerFact {
    pub fn completed(fact: &JobCompleted) -> Self {
        Self {
            lease: fact.lease.clone(),
            at: fact.completed_at,
            kind: Kind::Completed(fact.status),
            steps: fact.steps.clone(),
            outputs: Some(fact.outputs.clone()),
            claimed_at: fact.claimed_at,
        }
    }

    pub fn lease_expired(fact: &JobLeaseExpired) -> Self {
        Self {
            lease: fact.lease.clone(),
            at: fact.expired_at,
            kind: Kind::LeaseExpired,
            steps: fact.steps.clone(),
            outputs: None,
            claimed_at: fact.claimed_at,
        }
    }
}

/// The status of every step of the job, in order.
fn all_steps(definition: &WorkflowDefinition, job_key: &str, fact: &RunnerFact) -> Vec<StepStatus> {
    step_statuses(definition, job_key, fact.lease.job_execution_id, &fact.steps)
}

/// The most runner facts adopted in one write. Each outcome adds up to
/// three items to the transaction (its result and two facts) and takes a
/// job off what the advance may queue in it (`JOBS_PER_TRANSACTION`), so a
/// write stays under `TransactWriteItems`' 100 items.
pub const FACTS_PER_WRITE: usize = 5;

/// Applies `fact` to its attempt, advances the attempt from it as far as
/// that goes without reads (the jobs it made ready are queued and their
/// runners nudged, the attempt ends with its last job), and wakes the
/// parked orchestration only for what it must do itself
/// (`orchestration`). `via` names the path (logs and metrics).
pub async fn adopt(context: &Context, fact: &RunnerFact, via: &str) -> Result<(), HandlerError> {
    adopt_together(context, std::slice::from_ref(fact), via).await.pop().unwrap_or(Ok(()))
}

/// What the last decision found about one fact, for after the write.
#[derive(Debug, Clone, Copy, Default)]
struct Found {
    /// Its job is in the attempt.
    known: bool,
    changed: bool,
    finished: bool,
    /// Its execution had ended before (a timeout, a cancel, the runner's
    /// record read at a timeout, or this fact adopted directly): the status
    /// stands, and the steps are kept beside it if missing.
    already_ended: bool,
}

/// Adopts runner facts of one attempt (at most [`FACTS_PER_WRITE`]; a batch
/// of the bus, or the complete's own) in one compare-and-set, as [`adopt`]
/// does one. The attempt item holds every job of the run (about 12 KB for
/// 256 jobs) and an outcome's write is a transaction, billed twice: facts
/// that arrive together pay that once.
///
/// The result is per fact, in order: a fact about a job the attempt does
/// not have is refused on its own (it can never succeed); a failed write
/// fails them all (each is retried by its redelivery, and a fact applied
/// twice changes nothing).
pub async fn adopt_together(context: &Context, facts: &[RunnerFact], via: &str) -> Vec<Result<(), HandlerError>> {
    let Some(first) = facts.first() else { return Vec::new() };
    let (run_id, attempt) = (first.lease.run_id, first.lease.attempt);
    let store = &context.store;
    let minute = context.config.orchestration.timeout_minute;
    let mut found = vec![Found::default(); facts.len()];
    let updated = store
        .update_attempt(run_id, attempt, context.config.outbox_ttl_days, |next, definition| {
            let (mut emitted, mut items, mut finished) = (Vec::new(), Vec::new(), 0usize);
            for (fact, found) in facts.iter().zip(found.iter_mut()) {
                *found = Found::default();
                let execution_id = fact.lease.job_execution_id;
                let Some(job) = next.state.jobs.iter().find(|job| job.id == fact.lease.job_id) else { continue };
                if (fact.lease.run_id, fact.lease.attempt) != (run_id, attempt) {
                    continue;
                }
                found.known = true;
                let event = match fact.kind {
                    Kind::Completed(status) => ExecutionEvent::Completed {
                        status,
                        steps: all_steps(definition, &job.key, fact),
                        exit_code: failing_exit_code(&fact.steps),
                    },
                    Kind::LeaseExpired => ExecutionEvent::LeaseExpired { steps: all_steps(definition, &job.key, fact) },
                };
                found.already_ended =
                    job.execution.as_ref().is_some_and(|e| e.id == execution_id && e.status.is_terminal());
                let session = Some(fact.lease.session_id);
                // The claim first (`started_at`, set once), then the outcome.
                let started = fact.claimed_at.is_some_and(|at| {
                    let claimed = ExecutionEvent::Claimed { at };
                    next.state.apply_runner_event(fact.lease.job_id, execution_id, &claimed, session, at).changed
                });
                let effect = next.state.apply_runner_event(fact.lease.job_id, execution_id, &event, session, fact.at);
                (found.changed, found.finished) = (effect.changed || started, effect.finished);
                if !effect.changed {
                    continue;
                }
                let outputs = fact.outputs.clone().unwrap_or_default();
                if effect.finished && (!fact.steps.is_empty() || !outputs.is_empty()) {
                    let result = StepsItem::new(run_id, attempt, execution_id, fact.steps.clone(), outputs);
                    items.push(store.result_put(&result)?);
                }
                emitted.extend(effect.emitted);
                finished += usize::from(effect.finished);
            }
            if !found.iter().any(|f| f.changed) {
                return Ok::<_, HandlerError>(AttemptStep::Done);
            }
            // An outcome is what makes jobs ready or ends the attempt:
            // advance here, in this write, rather than in a Step Functions
            // round trip; the parked Step is woken only for what is left.
            let mut wake = false;
            if finished > 0 {
                // Each outcome past the first takes one job (five items) off
                // what this transaction may queue: it brought three of its own.
                let room = JOBS_PER_TRANSACTION.saturating_sub(finished - 1).max(1);
                let (advanced, woken) = advance_in_write(next, definition, minute, room);
                emitted.extend(advanced);
                wake = woken;
            }
            Ok(AttemptStep::Write(AttemptWrite { emitted, items, progressed: wake, again: false }))
        })
        .await;
    let updated = match updated {
        Ok(Some(updated)) => updated,
        Ok(None) => {
            let missing = HandlerError::Permanent(format!("attempt {run_id}/{attempt} does not exist"));
            return facts.iter().map(|_| Err(missing.clone())).collect();
        }
        Err(err) => return facts.iter().map(|_| Err(err.clone())).collect(),
    };
    let mut results = Vec::with_capacity(facts.len());
    for (fact, found) in facts.iter().zip(&found) {
        let execution_id = fact.lease.job_execution_id;
        if !found.known {
            results
                .push(Err(HandlerError::Permanent(format!("job {} is not in {run_id}/{attempt}", fact.lease.job_id))));
            continue;
        }
        if found.finished {
            tracing::info!(%run_id, attempt, job_id = %fact.lease.job_id, job_execution_id = %execution_id, via, "execution finished");
            results.push(Ok(()));
            continue;
        }
        tracing::debug!(%run_id, attempt, %execution_id, via, changed = found.changed, "runner fact did not finish its execution");
        let late = if found.already_ended && !fact.steps.is_empty() {
            let outputs = fact.outputs.clone().unwrap_or_default();
            store
                .record_late_results(&StepsItem::new(run_id, attempt, execution_id, fact.steps.clone(), outputs))
                .await
                .map_err(HandlerError::from)
        } else {
            Ok(())
        };
        results.push(late);
    }
    let count = |pred: fn(&Found) -> bool| found.iter().filter(|f| pred(f)).count() as f64;
    emit(
        "job-outcomes",
        &[
            ("executions_finished", count(|f| f.changed && f.finished), Unit::Count),
            ("facts_without_effect", count(|f| f.known && !f.changed), Unit::Count),
            ("attempt_writes", f64::from(updated.writes), Unit::Count),
            ("attempt_conflicts", f64::from(updated.lost_races), Unit::Count),
        ],
    );
    if let Err(err) = after_adoption(context, &updated).await {
        return facts.iter().map(|_| Err(err.clone())).collect();
    }
    results
}

/// Advances the attempt in the write that made progress (an outcome, an
/// approval's decision, an event for a listening job), as far as it goes
/// without reading anything: the jobs it made ready are queued and an
/// attempt it ended ends, with no Step Functions round trip. The facts to
/// add to the write, and whether the parked orchestration must be woken
/// for what is left (expressions to read, more than `room` jobs, the
/// attempt done, a deadline it would miss).
pub fn advance_in_write(
    next: &mut AttemptItem,
    definition: &WorkflowDefinition,
    minute: std::time::Duration,
    room: usize,
) -> (Vec<Emitted>, bool) {
    match next.state.advance_inline(definition, Utc::now(), minute, room) {
        Some(inline) => {
            let wake = next.state.is_done()
                || !inline.complete
                || parked_past_deadline(next.state.next_deadline(), next.wait_until);
            (inline.change.emitted, wake)
        }
        None => (Vec::new(), true),
    }
}

/// What follows every adoption's write: the fitting runners of the jobs it
/// queued are nudged (they are claimable already: a lost nudge costs a
/// poll's wait, not a job), and an orchestration parked waiting for progress
/// that has happened is woken (again, if a crash came between a commit and
/// its wake-up: the redelivery heals it).
async fn after_adoption(context: &Context, updated: &AttemptUpdated) -> Result<(), HandlerError> {
    after_progress(context, updated).await.map_err(HandlerError::from)
}

/// [`after_adoption`], for any writer of progress (`advance_in_write`).
pub async fn after_progress(context: &Context, updated: &AttemptUpdated) -> Result<(), baton_store::StoreError> {
    let item = &updated.item;
    context.push().nudge_work(&context.store, &item.state.workspace_id, &updated.queued_label_sets).await;
    // The wake tells a done attempt's orchestration to end: its group is
    // handed on first (a failure leaves the wake to the redelivery).
    leave_group_if_done(context, item).await?;
    wake(context.clients.sfn(), item, context.config.orchestration.max_wait).await?;
    Ok(())
}
