//! Creating runs, as an operator asks for them:
//! - `POST /v1/workspaces/{ws}/runs` (behaviour.md §8, api.md): a whole
//!   workflow file, validated completely before anything is written;
//! - `POST /v1/workspaces/{ws}/pipelines/{name}/runs` (§18): a dispatch of
//!   a stored pipeline, its inputs typed by `on.workflow_dispatch.inputs`
//!   (400 `invalid-inputs` naming the input), the run recording the
//!   pipeline's version.
//!
//! Both end in `usecases::run_creation`, as a webhook's runs will.

use baton_api::pipelines::{DispatchRequest, PipelineVersion, RunTrigger, TriggerKind};
use baton_api::runs::CreateRunRequest;
use baton_domain::error::ApiError;
use baton_domain::pipelines;
use baton_domain::workflows::{github, parse_definition_with};
use baton_service::context::Context;
use baton_service::http::{authorize_operator, json_response, parse_json, path_param, path_workspace, respond};
use baton_service::usecases::called_workflows;
use baton_service::usecases::run_creation::{self, Created, RunRequest};
use lambda_http::{Body, Request, Response};

pub use run_creation::{MAX_IDEMPOTENCY_KEY_LEN, UNNAMED_WORKFLOW};

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    respond(create_run(context, &req).await)
}

async fn create_run(context: &Context, req: &Request) -> Result<Response<Body>, ApiError> {
    let workspace_id = path_workspace(req)?;
    let creator = authorize_operator(&context.store, req, &workspace_id).await?.identity();
    let is_dispatch = req.uri().path().contains("/pipelines/");
    let request = if is_dispatch {
        let name = path_param(req, "name")?;
        pipelines::name(&name)?;
        let body: DispatchRequest = parse_json(req)?;
        let stored = context
            .store
            .pipeline(&workspace_id, &name)
            .await?
            .ok_or_else(|| ApiError::not_found(format!("pipeline {name}")))?;
        // Stored texts were read when put; read again, as the reader may
        // have grown stricter since (a refusal here names the field).
        let called = called_workflows::read(&context.store, &workspace_id, &stored.definition).await?;
        let read = pipelines::read(&stored.definition, &called)?;
        let inputs = pipelines::dispatch_inputs(&read.triggers, body.inputs.as_ref())?;
        RunRequest {
            workspace_id: &workspace_id,
            run_id: None,
            definition: read.definition,
            github: github::for_dispatch(Some(&creator), Some(&inputs)),
            inputs: Some(inputs),
            idempotency_key: None,
            trigger: trigger(TriggerKind::Dispatch, &creator),
            pipeline: Some(PipelineVersion { name: stored.name, version: stored.version }),
            creator: Some(creator),
        }
    } else {
        let body: CreateRunRequest = parse_json(req)?;
        let called = called_workflows::read(&context.store, &workspace_id, &body.definition).await?;
        let definition = parse_definition_with(&body.definition, &called)?;
        RunRequest {
            workspace_id: &workspace_id,
            run_id: None,
            definition,
            github: github::for_dispatch(Some(&creator), body.inputs.as_ref()),
            inputs: body.inputs,
            idempotency_key: body.idempotency_key,
            trigger: trigger(TriggerKind::Api, &creator),
            pipeline: None,
            creator: Some(creator),
        }
    };
    Ok(match run_creation::create_run(context, request).await? {
        Created::New(view) => json_response(http::StatusCode::CREATED, &view),
        Created::Existing(view) => json_response(http::StatusCode::OK, &view),
    })
}

fn trigger(kind: TriggerKind, actor: &str) -> RunTrigger {
    RunTrigger { kind, git_ref: None, sha: None, actor: Some(actor.to_string()), delivery: None }
}
