//! `POST /v1/provisioners/reservations` (`bpt_`): reserves instances for
//! one of the provisioner's label sets (behaviour.md §15). Each reservation
//! takes one queued job's worth of demand off every provisioner's count and
//! one of `max_instances`' slots, in one conditional write; the answer may
//! hold fewer than asked, or none.

use baton_api::provisioners::{Reservation, ReserveRequest, Reserved};
use baton_domain::error::{ApiError, ErrorCode};
use baton_domain::runners::labels::canonicalize;
use baton_domain::runners::provisioners::settings;
use baton_domain::tokens::{ReservationKey, TokenKind};
use baton_service::context::Context;
use baton_service::http::{
    authorize_provisioner, json_response, method_not_allowed, parse_json, require_token, respond,
};
use http::{Method, StatusCode};
use lambda_http::{Body, Request, Response};

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    respond(reserve(context, req).await)
}

async fn reserve(context: &Context, req: Request) -> Result<Response<Body>, ApiError> {
    if req.method() != Method::POST {
        return Err(method_not_allowed());
    }
    let provisioner = authorize_provisioner(&context.store, &req).await?;
    let body: ReserveRequest = parse_json(&req)?;
    // A named reserve derives its reservations from the caller's token.
    let token = require_token(&req, TokenKind::Provisioner)?;
    let key = body.request_id.map(|request_id| ReservationKey::new(token, request_id));
    let labels = canonicalize(&body.labels)?;
    if !provisioner.settings.label_sets.contains(&labels) {
        return Err(ApiError::new(ErrorCode::InvalidLabels, "labels must be one of the provisioner's label_sets"));
    }
    let (count, expires_in_s) = settings::reservation(body.count, body.expires_in_s)?;
    let now = chrono::Utc::now();
    // Expired unused reservations give their slots and demand back first.
    context.store.fleet_pass(provisioner.id, now).await?;
    let made = context
        .store
        .reserve(provisioner.id, &labels, count, expires_in_s, key, context.config.outbox_ttl_days, now)
        .await?;
    tracing::info!(provisioner_id = %provisioner.id, asked = count, reserved = made.len(), "reserve");
    let reservations = made
        .into_iter()
        .map(|r| Reservation {
            id: r.reservation.id,
            registration_token: r.token,
            expires_at: r.reservation.expires_at,
        })
        .collect();
    Ok(json_response(StatusCode::CREATED, &Reserved { reservations }))
}
