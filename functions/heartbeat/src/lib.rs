//! `POST /v1/runners/leases/{execution_id}/heartbeat`: one conditional write,
//! no read; answers whether cancellation was requested.

use baton_api::runners::HeartbeatResponse;
use baton_domain::error::ApiError;
use baton_domain::runners::lease::expiry_after_heartbeat;
use baton_shared::context::Context;
use baton_shared::http::{json_response, respond};
use baton_store::leases::Fenced;
use http::StatusCode;
use lambda_http::{Body, Request, Response};

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    respond(heartbeat(context, req).await)
}

async fn heartbeat(context: &Context, req: Request) -> Result<Response<Body>, ApiError> {
    let lease = baton_shared::http::lease_credentials(&req)?;
    let _: serde_json::Value = baton_shared::http::parse_json(&req)?;
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
        Fenced::LeaseLost => Err(baton_shared::http::lease_lost()),
        Fenced::NotFound => Err(ApiError::not_found("lease")),
        Fenced::Refused(reason) => Err(ApiError::invalid_request(reason)),
    }
}
