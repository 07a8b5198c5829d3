//! Webhooks (behaviour.md §18, api.md "Pipelines and hooks").
//!
//! The workspace's routes, with an operator token: `POST` and `GET
//! /v1/workspaces/{ws}/hooks` (a new hook's secret is answered once and
//! kept in the secret store), `POST …/hooks/{id}/rotate` (the old secret
//! keeps verifying for `hooks::ROTATION_GRACE`), `DELETE …/hooks/{id}`.
//!
//! `POST /v1/hooks/{id}`, a forge's delivery, public: its size is checked
//! (413), then its signature (401 `bad-signature`, nothing read or
//! written), then a redelivery is answered with the first delivery's runs.
//! Only then is the body read: each pipeline of the hook is matched
//! (`hooks::decide`) and each that matches gets a run request, its run id
//! reserved, written with the delivery's answer and `run.requested` facts
//! in one transaction conditioned on the delivery being new (so of two
//! copies delivered at once, one requests runs and the other answers as
//! it did). The `run-requests` subscriber creates the runs, under an
//! idempotency key of the hook, the delivery and the pipeline. The answer
//! (202) names the runs and says why the other pipelines did not start,
//! for the forge's delivery log.

use baton_api::hooks::{
    CreateHookRequest, DeliveryAnswer, HookCreated, HookList, HookSecretRotated, IgnoredPipeline, StartedRun,
};
use baton_domain::error::{ApiError, ErrorCode};
use baton_domain::hooks::{self, HookSecrets, Incoming, Provider, Reading};
use baton_domain::pipelines;
use baton_domain::workflows::references;
use baton_service::context::Context;
use baton_service::http::{
    empty_response, json_response, method_not_allowed, operator_workspace, parse_json, path_id, respond,
};
use baton_service::usecases::called_workflows;
use baton_store::hooks::{HookItem, DELIVERY_KEPT_DAYS};
use baton_store::run_requests::{Accepted, NewRunRequest, MAX_RUNS_PER_DELIVERY};
use baton_telemetry::metrics::{emit, Unit};
use http::{Method, StatusCode};
use lambda_http::{Body, Request, Response};
use sha2::{Digest, Sha256};

/// The function's name in its metrics.
const FUNCTION: &str = "hooks";

/// The most pipelines a hook names.
pub const MAX_HOOK_PIPELINES: usize = 100;

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    let path = req.uri().path().to_string();
    if path.starts_with("/v1/hooks/") {
        respond(deliver(context, &req).await)
    } else {
        respond(manage(context, req).await)
    }
}

async fn manage(context: &Context, req: Request) -> Result<Response<Body>, ApiError> {
    let workspace = operator_workspace(&context.store, &req).await?;
    let path = req.uri().path().trim_end_matches('/').to_string();
    match (req.method().clone(), path.ends_with("/hooks"), path.ends_with("/rotate")) {
        (Method::POST, true, _) => {
            let body: CreateHookRequest = parse_json(&req)?;
            if let Some(names) = &body.pipelines {
                if names.is_empty() || names.len() > MAX_HOOK_PIPELINES {
                    return Err(ApiError::invalid_request(format!(
                        "pipelines names 1 to {MAX_HOOK_PIPELINES} pipelines (leave it out for every pipeline)"
                    )));
                }
                for name in names {
                    pipelines::name(name)?;
                }
            }
            let id = baton_domain::ids::new_id();
            let secrets = HookSecrets::new();
            // The secret first: a hook whose item exists always has one.
            context.secrets().put_hook_secrets(id, &secrets).await?;
            context.store.create_hook(id, &workspace, body.provider, body.pipelines, chrono::Utc::now()).await?;
            tracing::info!(workspace_id = %workspace, hook = %id, provider = Provider::from(body.provider).as_str(), "hook created");
            let url = public_url(&req, &format!("/v1/hooks/{id}"));
            Ok(json_response(StatusCode::CREATED, &HookCreated { id, url, secret: secrets.current }))
        }
        (Method::GET, true, _) => {
            let items = context.store.hooks(&workspace).await?.iter().map(HookItem::summary).collect();
            Ok(json_response(StatusCode::OK, &HookList { items }))
        }
        (Method::POST, false, true) => {
            let hook = workspace_hook(context, &req, &workspace).await?;
            let now = chrono::Utc::now();
            let current = context.secrets().hook_secrets(hook.id).await?.unwrap_or_default();
            let rotated = current.rotated(now);
            context.secrets().put_hook_secrets(hook.id, &rotated).await?;
            tracing::info!(workspace_id = %workspace, hook = %hook.id, "hook secret rotated");
            let previous_valid_until = rotated.previous_until.unwrap_or(now);
            Ok(json_response(StatusCode::OK, &HookSecretRotated { secret: rotated.current, previous_valid_until }))
        }
        (Method::DELETE, false, false) => {
            let hook = workspace_hook(context, &req, &workspace).await?;
            // The item first: once it is gone no delivery is verified, so
            // the secret can go after it.
            if !context.store.delete_hook(&workspace, hook.id).await? {
                return Err(ApiError::not_found(format!("hook {}", hook.id)));
            }
            context.secrets().delete_hook_secrets(hook.id).await?;
            tracing::info!(workspace_id = %workspace, hook = %hook.id, "hook deleted");
            Ok(empty_response(StatusCode::NO_CONTENT))
        }
        _ => Err(method_not_allowed()),
    }
}

/// The hook `{id}` of the path, if it is `workspace`'s (404 otherwise, as
/// for an id that does not exist).
async fn workspace_hook(context: &Context, req: &Request, workspace: &str) -> Result<HookItem, ApiError> {
    let id = path_id(req, "id")?;
    context
        .store
        .hook(id)
        .await?
        .filter(|hook| hook.workspace_id == workspace)
        .ok_or_else(|| ApiError::not_found(format!("hook {id}")))
}

/// `path` on the origin the request came to (what the forge will call).
fn public_url(req: &Request, path: &str) -> String {
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    let host = header("x-forwarded-host").or_else(|| header("host")).unwrap_or_default();
    let local = host.starts_with("127.0.0.1") || host.starts_with("localhost") || host.starts_with("[::1]");
    let scheme = header("x-forwarded-proto").unwrap_or_else(|| if local { "http" } else { "https" }.to_string());
    format!("{scheme}://{host}{path}")
}

async fn deliver(context: &Context, req: &Request) -> Result<Response<Body>, ApiError> {
    if req.method() != Method::POST {
        return Err(method_not_allowed());
    }
    let id = path_id(req, "id")?;
    let body: &[u8] = match req.body() {
        Body::Text(text) => text.as_bytes(),
        Body::Binary(bytes) => bytes,
        _ => &[],
    };
    if body.len() > hooks::MAX_BODY_BYTES {
        return Err(ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("a delivery is at most {} bytes", hooks::MAX_BODY_BYTES),
        ));
    }
    let hook = context.store.hook(id).await?.ok_or_else(|| ApiError::not_found(format!("hook {id}")))?;
    let secrets = context.secrets().hook_secrets(id).await?.ok_or_else(|| ApiError::not_found(format!("hook {id}")))?;
    let provider = Provider::from(hook.provider);
    let header =
        |name: &str| req.headers().get(name).and_then(|value| value.to_str().ok()).map(|value| value.to_string());
    let now = chrono::Utc::now();
    if let Err(bad) = hooks::verify(provider, &header, body, &secrets.verifying(now), now) {
        // Nothing of the delivery is read, kept or logged but that it failed.
        tracing::warn!(hook = %id, workspace_id = %hook.workspace_id, reason = %bad.0, "delivery refused: bad signature");
        emit(FUNCTION, &[("bad_signatures", 1.0, Unit::Count)]);
        return Err(ApiError::new(ErrorCode::BadSignature, bad.0));
    }
    // Without the forge's id, the body names the delivery: the same body
    // twice is one delivery.
    let delivery = provider.delivery_id(&header).unwrap_or_else(|| format!("sha256-{:x}", Sha256::digest(body)));
    if let Some(answer) = context.store.hook_delivery(id, &delivery).await? {
        tracing::info!(hook = %id, %delivery, runs = answer.runs.len(), "redelivery: answered as the first time");
        return Ok(json_response(StatusCode::ACCEPTED, &answer));
    }
    let (answer, requests) = match hooks::read(provider, &header, body)? {
        Reading::Ping => (DeliveryAnswer { message: Some("pong".into()), ..DeliveryAnswer::default() }, Vec::new()),
        Reading::Ignored(reason) => (DeliveryAnswer { message: Some(reason), ..DeliveryAnswer::default() }, Vec::new()),
        Reading::Event(incoming) => match_pipelines(context, &hook, &incoming, &delivery).await?,
    };
    let accepted = context
        .store
        .accept_delivery(
            id,
            &hook.workspace_id,
            &delivery,
            &answer,
            &requests,
            now,
            DELIVERY_KEPT_DAYS,
            context.config.outbox_ttl_days,
        )
        .await?;
    let answer = match accepted {
        Accepted::New => answer,
        // A copy delivered at the same moment was accepted first.
        Accepted::Existing(first) => first,
    };
    tracing::info!(hook = %id, workspace_id = %hook.workspace_id, %delivery, runs = answer.runs.len(), ignored = answer.ignored.len(), "delivery accepted");
    emit(FUNCTION, &[("deliveries", 1.0, Unit::Count), ("runs_requested", answer.runs.len() as f64, Unit::Count)]);
    Ok(json_response(StatusCode::ACCEPTED, &answer))
}

/// Which of the hook's pipelines the event starts, each with the run it
/// requests (its id reserved now, so the answer names it), and why the
/// others do not start. The runs are created after the answer
/// (`run-requests`): a burst of deliveries answers within the forge's
/// timeout whatever the runs cost to create.
async fn match_pipelines(
    context: &Context,
    hook: &HookItem,
    incoming: &Incoming,
    delivery: &str,
) -> Result<(DeliveryAnswer, Vec<NewRunRequest>), ApiError> {
    let stored = context.store.pipelines(&hook.workspace_id).await?;
    let names: Vec<String> = match &hook.pipelines {
        Some(names) => names.clone(),
        None => stored.iter().map(|p| p.name.clone()).collect(),
    };
    let mut answer = DeliveryAnswer::default();
    let mut requests = Vec::new();
    for name in &names {
        let mut ignore = |reason: String| answer.ignored.push(IgnoredPipeline { pipeline: name.clone(), reason });
        let Some(pipeline) = stored.iter().find(|p| &p.name == name) else {
            ignore("the workspace has no pipeline by that name".into());
            continue;
        };
        let read = match pipelines::read(&pipeline.definition, &called_workflows::among(&stored, &pipeline.definition))
        {
            Ok(read) => read,
            Err(err) => {
                ignore(format!("its definition is refused now: {}", err.message));
                continue;
            }
        };
        let event_name = match hooks::decide(&read.triggers, incoming) {
            Ok(event_name) => event_name,
            Err(reason) => {
                ignore(reason);
                continue;
            }
        };
        let inputs = pipelines::event_inputs(&read.triggers);
        if let Some(name) = references::inputs_used(&read.definition).into_iter().find(|n| !inputs.contains_key(n)) {
            ignore(format!(
                "it reads `inputs.{name}`, which only a dispatch gives (declare it in on.workflow_dispatch.inputs)"
            ));
            continue;
        }
        if requests.len() == MAX_RUNS_PER_DELIVERY {
            ignore(format!("a delivery starts at most {MAX_RUNS_PER_DELIVERY} runs"));
            continue;
        }
        let run_id = baton_domain::ids::new_id();
        answer.runs.push(StartedRun { pipeline: name.clone(), run_id });
        requests.push(NewRunRequest {
            run_id,
            pipeline: name.clone(),
            pipeline_version: pipeline.version.clone(),
            trigger: incoming.trigger.clone(),
            github: serde_json::Value::Object(hooks::github_fields(incoming, event_name)).to_string(),
            inputs: serde_json::Value::Object(inputs).to_string(),
            idempotency_key: idempotency_key(hook, delivery, name),
        });
    }
    Ok((answer, requests))
}

/// Within the 200 characters an idempotency key holds: the delivery id is
/// hashed when long (a forge's are 36).
fn idempotency_key(hook: &HookItem, delivery: &str, pipeline: &str) -> String {
    let delivery = if delivery.len() <= 72 { delivery.to_string() } else { format!("{:x}", Sha256::digest(delivery)) };
    format!("hook:{}:{delivery}:{pipeline}", hook.id)
}
