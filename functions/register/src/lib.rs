//! `POST /v1/runners/register`: a registration token and labels → a session.

use baton_api::runners::{RegisterRequest, RegisterResponse};
use baton_domain::error::{ApiError, ErrorCode};
use baton_domain::runners::labels::canonicalize;
use baton_domain::runners::tools::offered_labels;
use baton_domain::tokens::TokenKind;
use baton_service::context::Context;
use baton_service::http::require_token;
use baton_service::http::{json_response, parse_json, respond};
use baton_store::sessions::RegisterRefusal;
use http::StatusCode;
use lambda_http::{Body, Request, Response};

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    respond(register(context, req).await)
}

async fn register(context: &Context, req: Request) -> Result<Response<Body>, ApiError> {
    let token = require_token(&req, TokenKind::Registration)?;
    let mut body: RegisterRequest = parse_json(&req)?;
    // A runner's tools are labels of their own namespace (`runners::tools`).
    let mut labels = std::mem::take(&mut body.labels);
    labels.extend(offered_labels(&std::mem::take(&mut body.tools))?);
    body.labels = canonicalize(&labels)?;
    let ttl = chrono::Duration::from_std(context.config.session_ttl).map_err(|_| ApiError::internal())?;
    match context.store.register_session(token, body, ttl, chrono::Utc::now()).await? {
        Ok((session, session_token)) => {
            // Before the answer: a retry (same request id, the same session)
            // records it again if this failed, so no session goes unoffered
            // and no job is flagged unschedulable for want of it.
            context.store.record_offer(&session.workspace_id, &session.labels, session.expires_at).await?;
            tracing::info!(session_id = %session.id, workspace_id = %session.workspace_id, "runner registered");
            Ok(json_response(
                StatusCode::CREATED,
                &RegisterResponse {
                    session_id: session.id,
                    session_token,
                    session_expires_at: session.expires_at,
                    workspace_id: session.workspace_id,
                    labels: session.labels,
                    max_claims: session.max_claims,
                    heartbeat_interval_s: context.config.lease.heartbeat_interval.as_secs(),
                    poll_interval_s: context.config.poll_interval.as_secs(),
                    push_url: context.config.push.url.clone(),
                    safety_poll_s: context.config.push.url.as_ref().map(|_| context.config.push.safety_poll.as_secs()),
                },
            ))
        }
        Err(RegisterRefusal::Unauthenticated) => Err(ApiError::unauthenticated()),
        Err(RegisterRefusal::Consumed) => Err(ApiError::new(
            ErrorCode::RegistrationTokenConsumed,
            "this single-use registration token has already been used",
        )),
    }
}
