//! `POST /v1/workspaces/{ws}/runs/{run_id}/cancel` (behaviour.md §10): the
//! current attempt and the run become `cancelled`, and in the same
//! transaction the non-terminal jobs and executions that do not run after a
//! cancel (not `always()`/`cancelled()`) become `cancelled`/`run_cancelled`,
//! with `workflows.run.cancelled`, `run.terminated` and the terminated facts
//! of every job and execution (the runners side drops pending items and
//! flags leases from `job_execution.terminated`). The orchestration is then
//! woken through its parked task token: it lets `always()`/`cancelled()`
//! jobs run and cancels whatever one transaction could not hold.
//!
//! Idempotency: a compare-and-set on the attempt's version; a terminal
//! attempt (a cancel already happened) answers 409 `run-already-finished`.

use std::time::Duration;

use baton_shared::error::{ApiError, ErrorCode};
use baton_shared::http::{json_response, path_id, path_param, respond};
use baton_shared::orchestration::{wake, JOBS_PER_TRANSACTION};
use baton_shared::store::{serialize, TxOutcome};
use lambda_http::{Body, Request, Response};
use rand::Rng;

/// How many times a cancel retries a lost compare-and-set.
const MAX_RETRIES: u32 = 50;

/// The function's cold-start state: the context every function shares.
pub use baton_shared::context::Context as State;

pub async fn handle(state: &State, req: Request) -> Response<Body> {
    respond(cancel(state, &req).await)
}

async fn cancel(state: &State, req: &Request) -> Result<Response<Body>, ApiError> {
    let workspace_id = path_param(req, "ws")?;
    state.store.authorize_operator(req, &workspace_id).await?;
    let run_id = path_id(req, "run_id")?;
    let store = &state.store;
    for _ in 0..MAX_RETRIES {
        let run = store
            .get_run(run_id)
            .await?
            .filter(|run| run.workspace_id == workspace_id)
            .ok_or_else(|| ApiError::not_found("run"))?;
        let _serialised = serialize::lock(serialize::attempt_key(run_id, run.current_attempt)).await;
        let item = store.get_attempt(run_id, run.current_attempt).await?.ok_or_else(ApiError::internal)?;
        let definition =
            store.get_snapshot(run_id, item.state.snapshot_attempt).await?.ok_or_else(ApiError::internal)?;
        let now = chrono::Utc::now();
        let mut next = item.clone();
        let change = next
            .state
            .cancel(&definition, now, JOBS_PER_TRANSACTION)
            .map_err(|_| ApiError::new(ErrorCode::RunAlreadyFinished, format!("run {run_id} has already finished")))?;
        next.version += 1;
        next.progress += 1;
        let mut items = vec![
            store.attempt_put(&next, Some(item.version))?,
            store.run_mirror_update(run_id, next.state.attempt, next.state.status, None, next.state.finished_at)?,
        ];
        items.extend(store.emitted_puts(&workspace_id, now, &change.emitted, state.config.outbox_ttl_days)?);
        match store.transact(items).await? {
            TxOutcome::Committed => {
                tracing::info!(%run_id, attempt = next.state.attempt, facts = change.emitted.len(), "run cancelled");
                if let Some(token) = next.token_to_wake() {
                    if let Err(err) = wake(&state.clients.sfn, token).await {
                        // The orchestration still looks again at its next deadline.
                        tracing::warn!(%run_id, error = %err, "could not wake the orchestration");
                    }
                }
                let view = store.run_view(&workspace_id, run_id).await?.ok_or_else(ApiError::internal)?;
                return Ok(json_response(http::StatusCode::ACCEPTED, &view));
            }
            TxOutcome::ConditionFailed { .. } => {
                let pause = rand::rng().random_range(5..40);
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
        }
    }
    Err(ApiError::new(ErrorCode::Unavailable, "the run changes too fast to cancel, try again"))
}
