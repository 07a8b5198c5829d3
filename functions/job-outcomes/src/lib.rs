//! Subscriber of the runners context's job outcomes:
//! `runners.job.completed` (terminal per the runner's status and steps) and
//! `runners.job.lease_expired` (`failed`/`runner_lost` unless every step
//! had finished, then the steps' outcome); each sets `started_at` from the
//! claim's instant it carries (first write wins). Precedence and replays
//! are decided by `apply_execution_event` (finished > lease expired >
//! claimed > timeout; terminal states absorb).
//!
//! `runners.job.unschedulable` flags a queued execution (the view shows
//! it; the orchestration, woken, fails it at its `fails_at` unless a
//! runner claimed it meanwhile): one compare-and-set, a no-op on a replay.
//!
//! `runners.job.claimed` is not subscribed: a claim does not rewrite the
//! attempt (the run view reads `running` from the runner record). One
//! still delivered (queued before the subscription changed) is
//! acknowledged and changes nothing.
//!
//! Each fact is one compare-and-set on the attempt's version
//! (`baton_service::usecases::outcomes::adopt`), but the facts of one attempt in a
//! batch share one, a few at a time (`adopt_together`): each
//! compare-and-set rewrites the whole attempt item. An outcome
//! also bumps the attempt's progress, writes the reported steps and the
//! `job_execution.terminated` and `job.terminated` facts in the same
//! transaction, then wakes the orchestration through its parked token. A
//! completion was usually adopted already by the `complete` function itself
//! (the direct path); here it then finds nothing to change.
//!
//! Idempotency: state, not markers. A redelivered or late fact finds the
//! execution already where the fact would put it (or terminal) and changes
//! nothing, emits nothing; it only re-sends a wake-up if the orchestration
//! still waits for progress that has happened (a crash between a commit
//! and its wake-up is healed by the redelivery).

use std::collections::BTreeMap;

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use baton_api::facts::{Fact, FactDetail, JobClaimed, JobCompleted, JobLeaseExpired, JobUnschedulable};
use baton_api::runs::Unschedulable;
use baton_service::context::Context;
use baton_service::facts::subscriber::{delivered, Delivered, HandlerError};
use baton_service::sqs::report_failures;
use baton_service::usecases::orchestration::wake;
use baton_service::usecases::outcomes::{adopt_together, RunnerFact, FACTS_PER_WRITE};
use baton_store::attempts::{AttemptStep, AttemptWrite};
use baton_store::StoreError;
use uuid::Uuid;

/// A message of the batch (its id) and what it carries.
type Message<T> = (Option<String>, T);

pub async fn handle(context: &Context, event: SqsEvent) -> SqsBatchResponse {
    // The facts grouped by attempt, in arrival order; what cannot be read
    // fails on its own.
    let mut by_attempt: BTreeMap<(Uuid, u32), Vec<Message<RunnerFact>>> = BTreeMap::new();
    let mut unreadable = Vec::new();
    let mut flags = Vec::new();
    for message in &event.records {
        let read = delivered(message);
        // A flag is no outcome: it is marked on its own, beside the batch.
        if read.as_ref().is_ok_and(|d| d.detail_type == JobUnschedulable::DETAIL_TYPE) {
            flags.push((message.message_id.clone(), read.and_then(|d| d.parse::<JobUnschedulable>())));
            continue;
        }
        match read.and_then(|delivered| read_fact(&delivered)) {
            Ok(None) => {}
            Ok(Some(fact)) => {
                let attempt = (fact.lease.run_id, fact.lease.attempt);
                by_attempt.entry(attempt).or_default().push((message.message_id.clone(), fact));
            }
            Err(err) => unreadable.push((message.message_id.clone(), Err(err))),
        }
    }
    // Attempts side by side; one attempt's writes one after the other (they
    // would only race each other for its item).
    let adopted = futures::future::join_all(by_attempt.into_values().map(|messages| async move {
        let mut results = Vec::with_capacity(messages.len());
        for chunk in messages.chunks(FACTS_PER_WRITE) {
            let facts: Vec<RunnerFact> = chunk.iter().map(|(_, fact)| fact.clone()).collect();
            let outcomes = adopt_together(context, &facts, "bus").await;
            results.extend(chunk.iter().map(|(id, _)| id.clone()).zip(outcomes));
        }
        results
    }))
    .await;
    let flagged = futures::future::join_all(flags.into_iter().map(|(id, fact)| async move {
        (
            id,
            match fact {
                Ok(fact) => flag_unschedulable(context, &fact).await,
                Err(err) => Err(err),
            },
        )
    }))
    .await;
    report_failures(adopted.into_iter().flatten().chain(unreadable).chain(flagged))
}

/// Marks the execution unschedulable on its attempt (a no-op once marked,
/// claimed into another state or ended), and wakes the orchestration so it
/// parks again with the failure's deadline.
async fn flag_unschedulable(context: &Context, fact: &Fact<JobUnschedulable>) -> Result<(), HandlerError> {
    let detail = &fact.detail;
    let mark = Unschedulable { labels: detail.labels.clone(), fails_at: detail.fails_at };
    let updated = context
        .store
        .update_attempt(detail.run_id, detail.attempt, context.config.outbox_ttl_days, |next, _| {
            Ok::<_, StoreError>(
                if next.state.mark_unschedulable(detail.job_id, detail.job_execution_id, mark.clone()) {
                    AttemptStep::Write(AttemptWrite { progressed: true, ..AttemptWrite::default() })
                } else {
                    AttemptStep::Done
                },
            )
        })
        .await?;
    let Some(updated) = updated else { return Ok(()) };
    tracing::info!(run_id = %detail.run_id, job_execution_id = %detail.job_execution_id, marked = updated.writes > 0, event_id = %fact.header.event_id, "flagged unschedulable");
    // A replay wakes again only if the orchestration still waits for it.
    wake(context.clients.sfn(), &updated.item, context.config.orchestration.max_wait).await?;
    Ok(())
}

/// The outcome a message carries; `None` for a claim (nothing to adopt).
fn read_fact(delivered: &Delivered) -> Result<Option<RunnerFact>, HandlerError> {
    match delivered.detail_type.as_str() {
        JobClaimed::DETAIL_TYPE => Ok(None),
        JobCompleted::DETAIL_TYPE => Ok(Some(RunnerFact::completed(&delivered.parse::<JobCompleted>()?.detail))),
        JobLeaseExpired::DETAIL_TYPE => {
            Ok(Some(RunnerFact::lease_expired(&delivered.parse::<JobLeaseExpired>()?.detail)))
        }
        other => Err(HandlerError::Permanent(format!("unexpected fact {other}"))),
    }
}
