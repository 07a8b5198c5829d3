//! Pipelines (behaviour.md §18, api.md "Pipelines and hooks"): `PUT`, `GET`
//! and `DELETE /v1/workspaces/{ws}/pipelines/{name}`, `GET
//! /v1/workspaces/{ws}/pipelines`. A put reads the definition as a run
//! would and its `on:` as a pipeline must mean it (400
//! `invalid-definition` naming the field, `on.…` included) before
//! anything is written; the same text again is 200 and writes nothing. A
//! new version keeps its crons' first ticks for the `schedules` sweep; a
//! deleted pipeline's ticks are dropped when reached.
//! Running one is `create-run`'s (`POST …/pipelines/{name}/runs`).

use baton_api::pipelines::{Pipeline, PipelineList, PipelineSummary, PutPipelineRequest};
use baton_domain::error::ApiError;
use baton_domain::pipelines;
use baton_service::context::Context;
use baton_service::http::{
    empty_response, json_response, method_not_allowed, operator_workspace, parse_json, path_param, respond,
};
use baton_service::usecases::called_workflows;
use baton_store::pipelines::{PipelineItem, PipelinePut};
use http::{Method, StatusCode};
use lambda_http::{Body, Request, Response};

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    respond(route(context, req).await)
}

async fn route(context: &Context, req: Request) -> Result<Response<Body>, ApiError> {
    let workspace = operator_workspace(&context.store, &req).await?;
    let named = req.uri().path().trim_end_matches('/').ends_with("/pipelines");
    match (req.method().clone(), named) {
        (Method::GET, true) => {
            let items = context.store.pipelines(&workspace).await?.iter().map(summary).collect();
            Ok(json_response(StatusCode::OK, &PipelineList { items }))
        }
        (Method::PUT, false) => {
            let name = pipeline_name(&req)?;
            let body: PutPipelineRequest = parse_json(&req)?;
            // A call of another pipeline is checked now, against the
            // pipelines stored: call one that exists, as a run would.
            let called = called_workflows::read(&context.store, &workspace, &body.definition).await?;
            pipelines::read(&body.definition, &called)?;
            let version = pipelines::version_of(&body.definition);
            let now = chrono::Utc::now();
            // Its schedules follow from the `pipeline.changed` fact the put
            // writes (`schedule-sync`).
            let ttl = context.config.outbox_ttl_days;
            let put = context.store.put_pipeline(&workspace, &name, &body.definition, &version, now, ttl).await?;
            let (status, item) = match put {
                PipelinePut::Created(item) => (StatusCode::CREATED, item),
                PipelinePut::Changed(item) | PipelinePut::Unchanged(item) => (StatusCode::OK, item),
            };
            tracing::info!(workspace_id = %workspace, pipeline = %name, version = %item.version, status = status.as_u16(), "pipeline put");
            Ok(json_response(status, &summary(&item)))
        }
        (Method::GET, false) => {
            let name = pipeline_name(&req)?;
            let item = context
                .store
                .pipeline(&workspace, &name)
                .await?
                .ok_or_else(|| ApiError::not_found(format!("pipeline {name}")))?;
            let PipelineSummary { name, version, triggers, updated_at } = summary(&item);
            Ok(json_response(
                StatusCode::OK,
                &Pipeline { name, version, definition: item.definition, triggers, updated_at },
            ))
        }
        (Method::DELETE, false) => {
            let name = pipeline_name(&req)?;
            let (now, ttl) = (chrono::Utc::now(), context.config.outbox_ttl_days);
            if !context.store.delete_pipeline(&workspace, &name, now, ttl).await? {
                return Err(ApiError::not_found(format!("pipeline {name}")));
            }
            tracing::info!(workspace_id = %workspace, pipeline = %name, "pipeline deleted");
            Ok(empty_response(StatusCode::NO_CONTENT))
        }
        _ => Err(method_not_allowed()),
    }
}

/// The `{name}` of the path, checked.
fn pipeline_name(req: &Request) -> Result<String, ApiError> {
    let name = path_param(req, "name")?;
    pipelines::name(&name)?;
    Ok(name)
}

/// A stored pipeline as listed, its triggers read from its text (it was
/// checked when put; a text a stricter reader would refuse now still
/// lists, with the triggers it can read, and its runs say why).
fn summary(item: &PipelineItem) -> PipelineSummary {
    let triggers = baton_domain::triggers::read_triggers(&item.definition).unwrap_or_default();
    PipelineSummary {
        name: item.name.clone(),
        version: item.version.clone(),
        triggers: pipelines::triggers_view(&triggers),
        updated_at: item.updated_at,
    }
}
