//! `POST /v1/runners/claim`: 200 with one job and its lease, or 204.
//! With `wait_s` (≤ 20) the claim long-polls and returns as soon as work
//! appears (`baton_service::usecases::claims`).

use baton_api::runners::ClaimRequest;
use baton_domain::error::ApiError;
use baton_domain::tokens::TokenKind;
use baton_service::context::Context;
use baton_service::http::{empty_response, json_response, parse_json, require_token, respond};
use baton_service::usecases::claims;
use http::StatusCode;
use lambda_http::{Body, Request, Response};

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    respond(claim(context, req).await)
}

async fn claim(context: &Context, req: Request) -> Result<Response<Body>, ApiError> {
    let token = require_token(&req, TokenKind::Session)?;
    let body: ClaimRequest = parse_json(&req)?;
    Ok(match claims::claim(context, token, body).await? {
        Some(job) => json_response(StatusCode::OK, &job),
        None => empty_response(StatusCode::NO_CONTENT),
    })
}
