//! `POST /v1/workspaces/{ws}/runs/{run_id}/rerun {mode}` (behaviour.md §11):
//! attempt n+1 of the same run, from the frozen snapshot of attempt n (the
//! definition is never re-read; the new attempt points at the same snapshot
//! item). [`plan_rerun`] decides which jobs are carried over (status and
//! outputs copied, `carried_over: true`, no execution, never enqueued) and
//! which run again.
//!
//! One transaction (`Store::create_rerun`): the run moves to the new attempt
//! conditioned on its current attempt still being n, the new attempt item,
//! and the `run.attempt_created` fact (which starts the orchestration). Of two
//! concurrent reruns exactly one passes that condition; the other answers
//! 409 `run-not-terminal`, as it would a moment later.

use std::collections::BTreeMap;

use baton_api::runs::RerunRequest;
use baton_domain::error::{ApiError, ErrorCode};
use baton_domain::workflows::attempt::{AttemptState, NewAttempt};
use baton_domain::workflows::concurrency::{GroupHold, HoldStatus};
use baton_domain::workflows::{plan_rerun, PreviousJob, RerunAction};
use baton_service::context::Context;
use baton_service::http::{authorize_operator, json_response, parse_json, path_id, path_workspace, respond};
use lambda_http::{Body, Request, Response};

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    respond(rerun(context, &req).await)
}

fn not_terminal(run_id: uuid::Uuid) -> ApiError {
    ApiError::new(ErrorCode::RunNotTerminal, format!("run {run_id}'s current attempt has not finished"))
}

async fn rerun(context: &Context, req: &Request) -> Result<Response<Body>, ApiError> {
    let workspace_id = path_workspace(req)?;
    authorize_operator(&context.store, req, &workspace_id).await?;
    let run_id = path_id(req, "run_id")?;
    let store = &context.store;
    let run = store.get_run(&workspace_id, run_id).await?.ok_or_else(|| ApiError::not_found("run"))?;
    let body: RerunRequest = parse_json(req)?;
    let previous = store.get_attempt(run_id, run.current_attempt).await?.ok_or_else(ApiError::internal)?;
    if !previous.state.is_done() {
        return Err(not_terminal(run_id));
    }
    let definition =
        store.get_snapshot(run_id, previous.state.snapshot_attempt).await?.ok_or_else(ApiError::internal)?;
    // What the previous attempt ran: its decided matrices as their legs.
    let ran = previous.state.definition(&definition);
    let previous_jobs: Vec<PreviousJob> = previous
        .state
        .jobs
        .iter()
        .map(|job| PreviousJob {
            key: job.key.clone(),
            needs: ran.job(&job.key).map(|d| d.needs.clone()).unwrap_or_default(),
            status: job.status,
        })
        .collect();
    let plan = plan_rerun(&previous_jobs, body.mode)?;
    let carried: BTreeMap<String, _> = plan
        .iter()
        .filter(|planned| planned.action == RerunAction::Carry)
        .filter_map(|planned| previous.state.jobs.iter().find(|job| job.key == planned.key))
        .map(|job| (job.key.clone(), job.clone()))
        .collect();
    // A matrix with a leg carried over is taken as decided (its needs are
    // carried, so their outputs would decide it the same); one with every
    // leg to run again is decided again when it is due.
    let decided: BTreeMap<String, String> = previous
        .state
        .matrices
        .iter()
        .filter(|(key, _)| {
            ran.matrix_group(key).is_some_and(|group| group.legs.iter().any(|leg| carried.contains_key(leg)))
        })
        .map(|(key, text)| (key.clone(), text.clone()))
        .collect();
    let number = previous.state.attempt + 1;
    let now = chrono::Utc::now();
    let mut attempt = AttemptState::new(NewAttempt {
        run_id,
        workspace_id: &workspace_id,
        attempt: number,
        definition: &definition,
        snapshot_attempt: previous.state.snapshot_attempt,
        rerun_mode: Some(body.mode),
        carried: &carried,
        decided: &decided,
        now,
    });
    // A rerun takes its turn in the run's group again, as a new member.
    attempt.concurrency =
        previous.state.concurrency.clone().map(|hold| GroupHold { status: HoldStatus::Waiting, ..hold });
    let won = store
        .create_rerun(&run, previous.state.attempt, &attempt, body.mode, now, context.config.outbox_ttl_days)
        .await?;
    if !won {
        return Err(not_terminal(run_id));
    }
    tracing::info!(%run_id, attempt = number, mode = ?body.mode, carried = carried.len(), "rerun created");
    let view = store.run_records(&workspace_id, run_id).await?.ok_or_else(ApiError::internal)?.view();
    Ok(json_response(http::StatusCode::CREATED, &view))
}
