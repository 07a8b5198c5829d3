//! `GET /v1/workspaces/{ws}/runs/{run_id}` (the run view: every attempt
//! with its jobs, executions and steps, read with one `Query` of the run's
//! partition) and `GET /v1/workspaces/{ws}/runs?status=&workflow=&limit=&cursor=`
//! (newest first, from the `runs-by-workspace` index; never a Scan).
//! Read-only: nothing here writes.

use baton_api::runs::RunList;
use baton_domain::error::ApiError;
use baton_domain::workflows::definition::MAX_WORKFLOW_NAME_LEN;
use baton_domain::workflows::status::RunStatus;
use baton_domain::workflows::view::run_summary;
use baton_service::context::Context;
use baton_service::http::{json_response, path_id, path_workspace, query_param, respond};
use lambda_http::{Body, Request, RequestExt, Response};

/// Runs a page holds when `limit` is not given.
pub const DEFAULT_LIMIT: usize = 20;
/// The largest `limit` accepted.
pub const MAX_LIMIT: usize = 100;

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    respond(read(context, &req).await)
}

async fn read(context: &Context, req: &Request) -> Result<Response<Body>, ApiError> {
    let workspace_id = path_workspace(req)?;
    baton_service::http::authorize_operator(&context.store, req, &workspace_id).await?;
    if req.path_parameters().first("run_id").is_some() {
        let run_id = path_id(req, "run_id")?;
        let view = context
            .store
            .run_records_live(&workspace_id, run_id)
            .await?
            .ok_or_else(|| ApiError::not_found("run"))?
            .view();
        return Ok(json_response(http::StatusCode::OK, &view));
    }
    let status = query_param(req, "status")
        .filter(|s| !s.is_empty())
        .map(|raw| {
            serde_json::from_value::<RunStatus>(serde_json::Value::String(raw.clone())).map_err(|_| {
                ApiError::invalid_request(format!(
                    "status must be pending, running, succeeded, failed or cancelled, got {raw:?}"
                ))
            })
        })
        .transpose()?;
    let limit = match query_param(req, "limit").filter(|s| !s.is_empty()) {
        None => DEFAULT_LIMIT,
        Some(raw) => raw
            .parse::<usize>()
            .ok()
            .filter(|l| (1..=MAX_LIMIT).contains(l))
            .ok_or_else(|| ApiError::invalid_request(format!("limit must be 1 to {MAX_LIMIT}, got {raw:?}")))?,
    };
    let cursor = query_param(req, "cursor")
        .filter(|s| !s.is_empty())
        .map(|raw| baton_domain::ids::parse_id(&raw).ok_or_else(|| ApiError::invalid_request("cursor is malformed")))
        .transpose()?;
    let workflow = query_param(req, "workflow").filter(|w| !w.is_empty());
    if let Some(workflow) = &workflow {
        if workflow.len() > MAX_WORKFLOW_NAME_LEN {
            return Err(ApiError::invalid_request(format!(
                "workflow is {} bytes, a workflow's name at most {MAX_WORKFLOW_NAME_LEN}",
                workflow.len()
            )));
        }
    }
    let (runs, next) = context.store.list_runs(&workspace_id, status, workflow.as_deref(), limit, cursor).await?;
    let list = RunList { items: runs.iter().map(run_summary).collect(), next_cursor: next.map(|id| id.to_string()) };
    Ok(json_response(http::StatusCode::OK, &list))
}
