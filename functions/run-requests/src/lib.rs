//! Subscriber of `baton.workflows.run.requested` (behaviour.md §18): creates
//! the run a webhook delivery asked for, from its request
//! (`store::run_requests`), under the run id the delivery's answer named
//! and the request's idempotency key. A redelivered fact finds the run it
//! created (the key) and creates nothing new.
//!
//! The pipeline is read now: one edited between the delivery and this
//! (seconds) runs its new version, which the run records. A request that
//! cannot become a run (its pipeline deleted, its definition refused now,
//! the workspace's label sets full) is dropped, logged with why and counted
//! (`run_requests_dropped`, which an alarm watches); only a backend
//! failure is retried.

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use baton_api::facts::{FactDetail, RunRequested};
use baton_api::pipelines::PipelineVersion;
use baton_domain::error::ErrorCode;
use baton_domain::pipelines;
use baton_service::context::Context;
use baton_service::facts::subscriber::{consume, Delivered, HandlerError};
use baton_service::usecases::called_workflows;
use baton_service::usecases::run_creation::{self, Created, RunRequest};
use baton_telemetry::metrics::{emit, Unit};

/// The function's name in its metrics.
const FUNCTION: &str = "run-requests";

pub async fn handle(context: &Context, event: SqsEvent) -> SqsBatchResponse {
    consume(event, |delivered| take(context, delivered)).await
}

async fn take(context: &Context, delivered: Delivered) -> Result<(), HandlerError> {
    if delivered.detail_type != RunRequested::DETAIL_TYPE {
        return Ok(());
    }
    let fact = delivered.parse::<RunRequested>()?;
    let workspace_id = fact.header.workspace_id;
    let run_id = fact.detail.run_id;
    let transient = |err: baton_domain::error::ApiError| HandlerError::Transient(err.message);
    let Some(request) = context.store.run_request(run_id).await.map_err(|e| transient(e.into()))? else {
        return dropped(&workspace_id, run_id, "its request is no longer kept");
    };
    if request.workspace_id != workspace_id {
        return dropped(&workspace_id, run_id, "the request is another workspace's");
    }
    let Some(pipeline) =
        context.store.pipeline(&workspace_id, &request.run.pipeline).await.map_err(|e| transient(e.into()))?
    else {
        return dropped(&workspace_id, run_id, &format!("pipeline {} was deleted", request.run.pipeline));
    };
    let called =
        called_workflows::read(&context.store, &workspace_id, &pipeline.definition).await.map_err(transient)?;
    let read = match pipelines::read(&pipeline.definition, &called) {
        Ok(read) => read,
        Err(err) => return dropped(&workspace_id, run_id, &format!("its definition is refused: {}", err.message)),
    };
    let github = serde_json::from_str(&request.run.github).unwrap_or_default();
    let inputs = serde_json::from_str(&request.run.inputs).unwrap_or_default();
    let run = RunRequest {
        workspace_id: &workspace_id,
        run_id: Some(run_id),
        definition: read.definition,
        inputs: Some(inputs),
        idempotency_key: Some(request.run.idempotency_key.clone()),
        creator: None,
        trigger: request.run.trigger.clone(),
        pipeline: Some(PipelineVersion { name: pipeline.name.clone(), version: pipeline.version.clone() }),
        github,
    };
    match run_creation::create_run(context, run).await {
        Ok(Created::New(view)) => {
            tracing::info!(workspace_id, %run_id, pipeline = %pipeline.name, number = view.header.number, "requested run created");
            Ok(())
        }
        Ok(Created::Existing(view)) => {
            tracing::info!(workspace_id, %run_id, existing = %view.header.id, "requested run exists already: nothing new");
            Ok(())
        }
        Err(err) if matches!(err.code, ErrorCode::Internal | ErrorCode::Unavailable) => Err(transient(err)),
        Err(err) => dropped(&workspace_id, run_id, &format!("{}: {}", err.code.as_str(), err.message)),
    }
}

fn dropped(workspace_id: &str, run_id: uuid::Uuid, reason: &str) -> Result<(), HandlerError> {
    tracing::warn!(workspace_id, %run_id, reason, "run request dropped");
    emit(FUNCTION, &[("run_requests_dropped", 1.0, Unit::Count)]);
    Ok(())
}
