//! `POST /v1/workspaces/{ws}/runs/{run_id}/jobs/{job_id}/events`
//! (behaviour.md §16): an event for a listening job. 202 `{delivered:
//! true}` when it waits its turn (a `fire` runs the job's steps once with
//! it, a `resolve` ends the listening); 200 `{delivered: false}` for a
//! `ref` delivered before or a job that ended; 409 `not-listening` for a
//! job that is not a listening job or does not listen yet. The delivery
//! itself is `baton_service::usecases::job_events::deliver`, which the bus path
//! shares.

use baton_api::runs::{EventDelivered, EventDelivery};
use baton_domain::error::ApiError;
use baton_service::context::Context;
use baton_service::http::{authorize_operator, json_response, parse_json, path_id, path_workspace, respond};
use lambda_http::{Body, Request, Response};

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    respond(deliver(context, &req).await)
}

async fn deliver(context: &Context, req: &Request) -> Result<Response<Body>, ApiError> {
    let workspace_id = path_workspace(req)?;
    authorize_operator(&context.store, req, &workspace_id).await?;
    let run_id = path_id(req, "run_id")?;
    let job_id = path_id(req, "job_id")?;
    let delivery: EventDelivery = parse_json(req)?;
    let job = baton_service::usecases::job_events::JobRef::Id(job_id);
    let delivered =
        baton_service::usecases::job_events::deliver(context, &workspace_id, run_id, &job, delivery).await?;
    let status = if delivered { http::StatusCode::ACCEPTED } else { http::StatusCode::OK };
    Ok(json_response(status, &EventDelivered { delivered }))
}
