//! The tasks of the `run-attempt` state machine (infra/statemachines/
//! run-attempt.asl.json), delivered through the `orchestrate` task queue.
//!
//! - `advance`: applies [`AttemptState::advance`] until nothing changes:
//!   marks the attempt (and run) running, applies the run timeout and job
//!   timeouts, starts, skips and cancels jobs (each start writes the
//!   execution `queued` with the `job_execution.queued` fact carrying the
//!   job spec), finalises the attempt once every job is terminal; each
//!   step is one transaction of at most [`JOBS_PER_TRANSACTION`] jobs,
//!   compare-and-set on the attempt's version. Then it completes the task
//!   with `{done, wait_s, progress}`: `wait_s` runs to the next deadline.
//! - `wait`: parks the task token on the attempt, conditioned on the
//!   attempt's progress still being what `advance` saw; if it moved, the
//!   task is completed at once, so no outcome is ever missed.
//!
//! Idempotency: a redelivered `advance` recomputes from the stored state
//! (a second advance changes nothing and reports the same), a redelivered
//! `wait` parks the same token again or completes it; completing a used
//! token is "nothing to resume".

use std::time::Duration;

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use baton_shared::error::StoreError;
use baton_shared::metrics::{emit, Unit};
use baton_shared::orchestration::{complete_task, fail_task, wake, AdvanceOutput, TaskMessage, JOBS_PER_TRANSACTION};
use baton_shared::store::{serialize, TxOutcome};
use baton_shared::workflows::attempt::Emitted;
use rand::Rng;
use uuid::Uuid;

/// How many lost compare-and-sets one advance tolerates before the message
/// is retried by SQS.
const MAX_CONFLICTS: u32 = 50;

/// The function's cold-start state: the context every function shares.
pub use baton_shared::context::Context as State;

/// Handles a batch of task messages; failed ones are retried by SQS.
pub async fn handle(state: &State, event: SqsEvent) -> SqsBatchResponse {
    let results = futures::future::join_all(
        event
            .records
            .iter()
            .map(|message| async move { (message.message_id.clone(), handle_message(state, message).await) }),
    )
    .await;
    let mut response = SqsBatchResponse::default();
    for (message_id, result) in results {
        if let Err(err) = result {
            tracing::warn!(message_id = ?message_id, error = %err, "orchestration task will be retried");
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = message_id.unwrap_or_default();
            response.batch_item_failures.push(failure);
        }
    }
    response
}

async fn handle_message(state: &State, message: &SqsMessage) -> Result<(), StoreError> {
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
        TaskMessage::Advance { run_id, attempt, token, .. } => advance(state, run_id, attempt, &token).await,
        TaskMessage::Wait { run_id, attempt, token, progress, .. } => {
            let guard = serialize::lock(serialize::attempt_key(run_id, attempt)).await;
            let parked = state.store.park_wait_token(run_id, attempt, &token, progress).await?;
            drop(guard);
            tracing::debug!(%run_id, attempt, progress, parked, "wait for progress");
            if !parked {
                wake(&state.clients.sfn, &token).await?;
            }
            Ok(())
        }
    }
}

async fn advance(state: &State, run_id: Uuid, attempt: u32, token: &str) -> Result<(), StoreError> {
    let store = &state.store;
    let serialised = serialize::lock(serialize::attempt_key(run_id, attempt)).await;
    let Some(mut item) = store.get_attempt(run_id, attempt).await? else {
        tracing::error!(%run_id, attempt, "advance of an attempt that does not exist");
        return fail_task(&state.clients.sfn, token, "AttemptNotFound", &format!("{run_id}/{attempt}")).await;
    };
    let Some(definition) = store.get_snapshot(run_id, item.state.snapshot_attempt).await? else {
        return fail_task(&state.clients.sfn, token, "SnapshotNotFound", &format!("{run_id}/{attempt}")).await;
    };
    let minute = state.config.orchestration.timeout_minute;
    let mut conflicts = 0;
    let mut started = 0usize;
    loop {
        let now = chrono::Utc::now();
        let mut next = item.clone();
        let change = next.state.advance(&definition, now, minute, JOBS_PER_TRANSACTION);
        // The token that woke this advance has been used: forget it.
        let token_used = next.wait_token.take().is_some();
        next.wait_progress = None;
        if !change.changed && !token_used {
            break;
        }
        next.version += 1;
        let mut items = vec![store.attempt_put(&next, Some(item.version))?];
        if next.state.status != item.state.status {
            let started_at = if attempt == 1 { next.state.started_at } else { None };
            items.push(store.run_mirror_update(
                run_id,
                attempt,
                next.state.status,
                started_at,
                next.state.finished_at,
            )?);
        }
        let workspace_id = next.state.workspace_id.clone();
        items.extend(store.emitted_puts(&workspace_id, now, &change.emitted, state.config.outbox_ttl_days)?);
        match store.transact(items).await? {
            TxOutcome::Committed => {
                started += change.emitted.iter().filter(|e| matches!(e, Emitted::Queued(_))).count();
                if !change.emitted.is_empty() {
                    tracing::info!(%run_id, attempt, status = %next.state.status, facts = change.emitted.len(), "attempt advanced");
                }
                item = next;
            }
            TxOutcome::ConditionFailed { .. } => {
                conflicts += 1;
                if conflicts > MAX_CONFLICTS {
                    return Err(StoreError::ConditionFailed(format!("attempt {run_id}/{attempt} too contended")));
                }
                let pause = rand::rng().random_range(5..40);
                tokio::time::sleep(Duration::from_millis(pause)).await;
                item = store
                    .get_attempt(run_id, attempt)
                    .await?
                    .ok_or_else(|| StoreError::Malformed(format!("attempt {run_id}/{attempt} disappeared")))?;
            }
        }
    }
    drop(serialised);
    let now = chrono::Utc::now();
    let done = item.state.status.is_terminal() && item.state.all_jobs_terminal();
    let max_wait = state.config.orchestration.max_wait.as_secs();
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
            ("attempt_conflicts", f64::from(conflicts), Unit::Count),
        ],
    );
    tracing::debug!(%run_id, attempt, done, wait_s, progress = item.progress, "advance reported");
    complete_task(&state.clients.sfn, token, &output).await
}
