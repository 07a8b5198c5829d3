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
//! Idempotency: a compare-and-set on the attempt's version
//! (`Store::update_attempt`); a terminal attempt (a cancel already happened)
//! answers 409 `run-already-finished`, after waking the orchestration if
//! the cancel's progress went unheard (its own earlier try's wake lost).

use baton_domain::error::{ApiError, ErrorCode};
use baton_service::context::Context;
use baton_service::http::{authorize_operator, json_response, path_id, path_workspace, respond};
use baton_service::usecases::orchestration::{wake_after_cancel, JOBS_PER_TRANSACTION};
use baton_store::attempts::{AttemptStep, AttemptWrite};
use lambda_http::{Body, Request, Response};

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    respond(cancel(context, &req).await)
}

async fn cancel(context: &Context, req: &Request) -> Result<Response<Body>, ApiError> {
    let workspace_id = path_workspace(req)?;
    authorize_operator(&context.store, req, &workspace_id).await?;
    let run_id = path_id(req, "run_id")?;
    let store = &context.store;
    let run = store.get_run(&workspace_id, run_id).await?.ok_or_else(|| ApiError::not_found("run"))?;
    let mut facts = 0;
    let mut finished = false;
    let updated = store
        .update_attempt(run_id, run.current_attempt, context.config.outbox_ttl_days, |next, definition| {
            finished = false;
            let Ok(change) = next.state.cancel(definition, chrono::Utc::now(), JOBS_PER_TRANSACTION) else {
                // Refused below, once the orchestration got its due.
                finished = true;
                return Ok(AttemptStep::Done);
            };
            facts = change.emitted.len();
            Ok::<_, ApiError>(AttemptStep::Write(AttemptWrite {
                emitted: change.emitted,
                progressed: true,
                ..AttemptWrite::default()
            }))
        })
        .await?
        .ok_or_else(ApiError::internal)?;
    if !finished {
        tracing::info!(%run_id, attempt = run.current_attempt, facts, "run cancelled");
    }
    // Also when the attempt had finished already: an earlier try of this
    // cancel (a client's retry after a lost answer) may have written the
    // cancel and lost its answer before its wake, and this try, finding the
    // attempt cancelled, owes that wake, or the `always()` jobs wait for the
    // parked step's deadline (up to `max_wait`). The wake goes only to a
    // step parked for progress it has not seen, so it costs nothing else.
    if let Err(err) = wake_after_cancel(context, &updated.item).await {
        // Not woken, its orchestration's next step leaves the group instead.
        tracing::warn!(%run_id, error = %err, "could not leave the concurrency group");
    }
    if finished {
        return Err(ApiError::new(ErrorCode::RunAlreadyFinished, format!("run {run_id} has already finished")));
    }
    let view = store.run_records(&workspace_id, run_id).await?.ok_or_else(ApiError::internal)?.view();
    Ok(json_response(http::StatusCode::ACCEPTED, &view))
}
