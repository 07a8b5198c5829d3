//! `POST /v1/workspaces/{ws}/runs` (behaviour.md §8, api.md): validates the
//! definition completely before anything is written (400
//! `invalid-definition` naming job and field), then creates, in one
//! transaction, the run with the next per-workflow number, attempt 1 with
//! its jobs and executions, the frozen snapshot of the parsed definition,
//! the idempotency key and the `workflows.run.attempt_created` fact.
//!
//! Idempotency: a repeated `idempotency_key` finds the key's item and
//! answers 200 with the existing run, writing nothing; two concurrent
//! creates with one key race on the key item's condition and the loser
//! answers with the winner's run. Numbers: the counter item is written
//! conditioned on the value read, so a create that lost the number to a
//! concurrent one re-reads and retries.

use std::collections::BTreeMap;
use std::time::Duration;

use baton_shared::error::{ApiError, ErrorCode};
use baton_shared::facts::{Fact, RunAttemptCreated};
use baton_shared::http::{json_response, parse_json, path_param, respond};
use baton_shared::metrics::{emit, Unit};
use baton_shared::store::runs::{CreateOutcome, NewRun};
use baton_shared::store::serialize;
use baton_shared::workflows::attempt::{AttemptState, NewAttempt, RunState};
use baton_shared::workflows::parse_definition;
use baton_shared::workflows::status::RunStatus;
use baton_shared::workflows::view::CreateRunRequest;
use lambda_http::{Body, Request, Response};
use rand::Rng;

/// The longest idempotency key accepted.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 200;
/// How many times a create retries after losing its number to another.
const MAX_NUMBER_RETRIES: u32 = 100;
/// The name runs of a workflow without `name:` are numbered under.
pub const UNNAMED_WORKFLOW: &str = "unnamed";

/// The function's cold-start state: the context every function shares.
pub use baton_shared::context::Context as State;

pub async fn handle(state: &State, req: Request) -> Response<Body> {
    respond(create_run(state, &req).await)
}

async fn create_run(state: &State, req: &Request) -> Result<Response<Body>, ApiError> {
    let workspace_id = path_param(req, "ws")?;
    state.store.authorize_operator(req, &workspace_id).await?;
    let body: CreateRunRequest = parse_json(req)?;
    let definition = parse_definition(&body.definition)?;
    if let Some(key) = &body.idempotency_key {
        if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY_LEN {
            return Err(ApiError::invalid_request(format!(
                "idempotency_key must hold 1 to {MAX_IDEMPOTENCY_KEY_LEN} characters"
            )));
        }
        if let Some(existing) = state.store.run_for_idempotency_key(&workspace_id, key).await? {
            return existing_run(state, &workspace_id, existing).await;
        }
    }
    let inputs = body
        .inputs
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| ApiError::invalid_request(format!("inputs: {e}")))?;
    let name = definition.name.clone().unwrap_or_else(|| UNNAMED_WORKFLOW.to_string());
    let run_id = baton_shared::ids::new_id();
    let now = chrono::Utc::now();
    let attempt = AttemptState::new(NewAttempt {
        run_id,
        workspace_id: &workspace_id,
        attempt: 1,
        definition: &definition,
        snapshot_attempt: 1,
        rerun_mode: None,
        carried: &BTreeMap::new(),
        now,
    });

    let _serialised = serialize::lock(serialize::counter_key(&workspace_id, &name)).await;
    for retry in 0..MAX_NUMBER_RETRIES {
        let previous_number = state.store.last_run_number(&workspace_id, &name).await?;
        let run = RunState {
            id: run_id,
            workspace_id: workspace_id.clone(),
            name: name.clone(),
            number: previous_number + 1,
            status: RunStatus::Pending,
            current_attempt: 1,
            created_at: now,
            started_at: None,
            finished_at: None,
            inputs: inputs.clone(),
        };
        let fact = Fact::new(
            &workspace_id,
            now,
            RunAttemptCreated {
                run_id,
                attempt: 1,
                workflow_name: name.clone(),
                run_number: run.number,
                rerun_mode: None,
            },
        );
        let new = NewRun {
            run: &run,
            attempt: &attempt,
            definition: &definition,
            idempotency_key: body.idempotency_key.as_deref(),
            previous_number,
            fact: state.store.outbox_put(&fact, state.config.outbox_ttl_days)?,
        };
        match state.store.create_run(new).await? {
            CreateOutcome::Created => {
                tracing::info!(%run_id, workspace_id, number = run.number, jobs = attempt.jobs.len(), "run created");
                emit(
                    "create-run",
                    &[("runs_created", 1.0, Unit::Count), ("number_retries", f64::from(retry), Unit::Count)],
                );
                let view = baton_shared::workflows::view::build_run_view(
                    &run,
                    std::slice::from_ref(&attempt),
                    &BTreeMap::from([(1, definition.clone())]),
                    &Default::default(),
                );
                return Ok(json_response(http::StatusCode::CREATED, &view));
            }
            CreateOutcome::Existing(existing) => return existing_run(state, &workspace_id, existing).await,
            CreateOutcome::NumberTaken => {
                let pause = rand::rng().random_range(5..40);
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
        }
    }
    tracing::warn!(%run_id, workspace_id, "gave up creating a run: run numbers too contended");
    Err(ApiError::new(ErrorCode::Unavailable, "too many concurrent creates, try again"))
}

async fn existing_run(state: &State, workspace_id: &str, run_id: uuid::Uuid) -> Result<Response<Body>, ApiError> {
    let view = state.store.run_view(workspace_id, run_id).await?.ok_or_else(|| ApiError::not_found("run"))?;
    tracing::info!(%run_id, workspace_id, "repeated idempotency key: existing run");
    Ok(json_response(http::StatusCode::OK, &view))
}
