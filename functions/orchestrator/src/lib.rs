//! The tasks of the `run-attempt` state machine (infra/statemachines/
//! run-attempt.asl.json), delivered through the `orchestrate` task queue.
//!
//! - `advance`: applies [`AttemptState::advance`] until nothing changes:
//!   marks the attempt (and run) running, applies the run timeout and job
//!   timeouts, starts, skips and cancels jobs (each start writes the
//!   execution `queued` with the `job_execution.queued` fact carrying the
//!   job spec), finalises the attempt once every job is terminal; each
//!   step is one transaction of at most [`JOBS_PER_TRANSACTION`] jobs,
//!   compare-and-set on the attempt's version (`Store::update_attempt`). Then it completes the task
//!   with `{done, wait_s, progress}`: `wait_s` runs to the next deadline.
//! - `wait`: parks the task token on the attempt, conditioned on the
//!   attempt's progress still being what `advance` saw; if it moved, the
//!   task is completed at once, so no outcome is ever missed.
//!
//! Idempotency: a redelivered `advance` recomputes from the stored state
//! (a second advance changes nothing and reports the same), a redelivered
//! `wait` parks the same token again or completes it; completing a used
//! token is "nothing to resume".

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use baton_shared::context::Context;
use baton_shared::error::StoreError;
use baton_shared::metrics::{emit, Unit};
use baton_shared::orchestration::{complete_task, fail_task, wake, AdvanceOutput, TaskMessage, JOBS_PER_TRANSACTION};
use baton_shared::sqs::partial_batch;
use baton_shared::store::attempts::{AttemptStep, AttemptWrite, Parked};
use baton_shared::workflows::attempt::Emitted;
use uuid::Uuid;

/// Handles a batch of task messages; failed ones are retried by SQS.
pub async fn handle(context: &Context, event: SqsEvent) -> SqsBatchResponse {
    partial_batch(event, |message| handle_message(context, message)).await
}

async fn handle_message(context: &Context, message: SqsMessage) -> Result<(), StoreError> {
    let body = message.body.as_deref().unwrap_or_default();
    let task: TaskMessage = match serde_json::from_str(body) {
        Ok(task) => task,
        Err(err) => {
            // Not from the state machine: nothing can ever handle it.
            tracing::error!(error = %err, body, "malformed orchestration task dropped");
            return Ok(());
        }
    };
    match task {
        TaskMessage::Advance { run_id, attempt, token, .. } => advance(context, run_id, attempt, &token).await,
        TaskMessage::Wait { run_id, attempt, token, progress, .. } => {
            let parked = context.store.park_wait_token(run_id, attempt, &token, progress, sent_at(&message)).await?;
            tracing::debug!(%run_id, attempt, progress, ?parked, "wait for progress");
            if parked == Parked::ProgressMoved {
                wake(&context.clients.sfn, &token).await?;
            }
            Ok(())
        }
    }
}

/// When SQS took the message (`SentTimestamp`, ms; kept on redelivery).
fn sent_at(message: &SqsMessage) -> i64 {
    message.attributes.get("SentTimestamp").and_then(|t| t.parse().ok()).unwrap_or(0)
}

async fn advance(context: &Context, run_id: Uuid, attempt: u32, token: &str) -> Result<(), StoreError> {
    let minute = context.config.orchestration.timeout_minute;
    let mut started = 0usize;
    let updated = context
        .store
        .update_attempt(run_id, attempt, context.config.outbox_ttl_days, |next, definition| {
            let change = next.state.advance(definition, chrono::Utc::now(), minute, JOBS_PER_TRANSACTION);
            // A token that progress woke has been used: forget it. A token
            // still waiting for progress stays: this may be a redelivered
            // Advance, and the Wait after it parked that token.
            let token_used = next.token_to_wake().is_some();
            if token_used {
                next.wait_token = None;
                next.wait_progress = None;
            }
            if !change.changed && !token_used {
                return Ok::<_, StoreError>(AttemptStep::Done);
            }
            if !change.emitted.is_empty() {
                tracing::info!(%run_id, attempt, status = %next.state.status, facts = change.emitted.len(), "attempt advanced");
            }
            started += change.emitted.iter().filter(|e| matches!(e, Emitted::Queued(_))).count();
            // Advance in bounded steps (one transaction each) until nothing changes.
            Ok(AttemptStep::Write(AttemptWrite { emitted: change.emitted, again: true, ..AttemptWrite::default() }))
        })
        .await?;
    let Some(updated) = updated else {
        tracing::error!(%run_id, attempt, "advance of an attempt that does not exist");
        return fail_task(&context.clients.sfn, token, "AttemptNotFound", &format!("{run_id}/{attempt}")).await;
    };
    let item = updated.item;
    let now = chrono::Utc::now();
    let done = item.state.status.is_terminal() && item.state.all_jobs_terminal();
    let max_wait = context.config.orchestration.max_wait.as_secs();
    let wait_s = item
        .state
        .next_deadline()
        .map(|deadline| (deadline - now).num_seconds().max(0) as u64 + 1)
        .unwrap_or(max_wait)
        .clamp(1, max_wait);
    let output = AdvanceOutput { done, wait_s, progress: item.progress };
    emit(
        "orchestrator",
        &[
            ("advances", 1.0, Unit::Count),
            ("jobs_started", started as f64, Unit::Count),
            ("attempt_conflicts", f64::from(updated.lost_races), Unit::Count),
        ],
    );
    tracing::debug!(%run_id, attempt, done, wait_s, progress = item.progress, "advance reported");
    complete_task(&context.clients.sfn, token, &output).await
}
