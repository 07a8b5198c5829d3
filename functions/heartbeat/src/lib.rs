//! `POST /v1/runners/leases/{execution_id}/heartbeat`: one conditional write,
//! no read; answers whether cancellation was requested.

use baton_api::runners::HeartbeatResponse;
use baton_domain::error::ApiError;
use baton_domain::runners::lease::expiry_after_heartbeat;
use baton_service::context::Context;
use baton_service::http::{json_response, respond};
use baton_store::leases::Fenced;
use http::StatusCode;
use lambda_http::{Body, Request, Response};

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    respond(heartbeat(context, req).await)
}

async fn heartbeat(context: &Context, req: Request) -> Result<Response<Body>, ApiError> {
    let lease = baton_service::http::lease_credentials(&req)?;
    let _: serde_json::Value = baton_service::http::parse_json(&req)?;
    let expires_at = expiry_after_heartbeat(chrono::Utc::now(), &context.config.lease);
    match context.store.heartbeat(lease.execution_id, lease.epoch, &lease.token_hash, expires_at).await? {
        Fenced::Ok(item) => Ok(json_response(
            StatusCode::OK,
            &HeartbeatResponse {
                cancel: item.cancel_requested_at.is_some(),
                expires_at: item.expires_at,
                heartbeat_interval_s: context.config.lease.heartbeat_interval.as_secs(),
            },
        )),
        Fenced::LeaseLost => Err(baton_service::http::lease_lost()),
        Fenced::NotFound => Err(ApiError::not_found("lease")),
        Fenced::Refused(reason) => Err(ApiError::invalid_request(reason)),
    }
}
