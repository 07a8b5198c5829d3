//! The provisioner's instances (`bpt_`): `POST /v1/provisioners/instances`
//! reports their states, `GET /v1/provisioners/instances[?intent=terminate]`
//! lists them with Baton's terminate intents (behaviour.md §15).
//!
//! A report is checked whole before anything is written (at most 100
//! events, ids bounded, every reservation and session the provisioner's
//! own), then applied in order; states only move forward, so a late or
//! repeated event is accepted silently and counts nothing.

use std::collections::BTreeSet;

use baton_api::provisioners::{
    HonoredIntent, InstanceList, InstanceReport, InstanceReportAnswer, InstanceView, MAX_INSTANCES_PER_PAGE,
    MAX_INSTANCE_EVENTS,
};
use baton_domain::error::ApiError;
use baton_service::context::Context;
use baton_service::http::{authorize_provisioner, json_response, method_not_allowed, parse_json, query_param, respond};
use baton_store::provisioners::Provisioner;
use http::{Method, StatusCode};
use lambda_http::{Body, Request, Response};

/// The longest `provider_runner_id` (an EC2 id is 19, a pod name at most 253).
pub const MAX_PROVIDER_RUNNER_ID_LEN: usize = 256;

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    respond(route(context, req).await)
}

async fn route(context: &Context, req: Request) -> Result<Response<Body>, ApiError> {
    let provisioner = authorize_provisioner(&context.store, &req).await?;
    match *req.method() {
        Method::POST => report(context, &provisioner, parse_json(&req)?).await,
        Method::GET => list(context, &provisioner, &req).await,
        _ => Err(method_not_allowed()),
    }
}

async fn report(
    context: &Context,
    provisioner: &Provisioner,
    body: InstanceReport,
) -> Result<Response<Body>, ApiError> {
    if body.events.len() > MAX_INSTANCE_EVENTS {
        return Err(ApiError::invalid_request(format!(
            "events holds {} events; at most {MAX_INSTANCE_EVENTS}",
            body.events.len()
        )));
    }
    for (i, event) in body.events.iter().enumerate() {
        let id = &event.provider_runner_id;
        if id.is_empty() || id.chars().count() > MAX_PROVIDER_RUNNER_ID_LEN || id.chars().any(char::is_control) {
            return Err(ApiError::invalid_request(format!(
                "events[{i}].provider_runner_id must be 1 to {MAX_PROVIDER_RUNNER_ID_LEN} printable characters"
            )));
        }
    }
    let reservation_ids: Vec<_> =
        body.events.iter().filter_map(|e| e.reservation_id).collect::<BTreeSet<_>>().into_iter().collect();
    let known = context.store.reservations_of(provisioner.id, &reservation_ids).await?;
    for (i, event) in body.events.iter().enumerate() {
        if let Some(id) = event.reservation_id {
            let Some(reservation) = known.get(&id) else {
                return Err(ApiError::invalid_request(format!(
                    "events[{i}].reservation_id {id} is not a reservation of this provisioner"
                )));
            };
            if let (Some(session), Some(theirs)) = (event.runner_session_id, reservation.session_id) {
                if session != theirs {
                    return Err(ApiError::invalid_request(format!(
                        "events[{i}].runner_session_id is not the session of reservation {id}"
                    )));
                }
            }
        } else if event.runner_session_id.is_some() {
            return Err(ApiError::invalid_request(format!(
                "events[{i}].runner_session_id needs the reservation_id whose token made it"
            )));
        }
    }
    // An event about an instance whose reservation moved to the fleet's
    // history is late: that instance ended and was settled minutes ago.
    // Writing it would bring a machine back from the dead (a state never
    // moves backwards), so it is accepted and changes nothing.
    let events: Vec<_> = body
        .events
        .iter()
        .filter(|e| !e.reservation_id.and_then(|id| known.get(&id)).is_some_and(|r| r.in_history()))
        .cloned()
        .collect();
    let outcome = context.store.report_instances(provisioner, &events, chrono::Utc::now()).await?;
    tracing::info!(
        provisioner_id = %provisioner.id,
        events = body.events.len(),
        accepted = outcome.accepted,
        released = outcome.reservations_released,
        honored = outcome.honored.len(),
        "instance report"
    );
    Ok(json_response(
        StatusCode::OK,
        &InstanceReportAnswer {
            accepted: outcome.accepted,
            reservations_released: outcome.reservations_released,
            terminate_intents_honored: outcome
                .honored
                .into_iter()
                .map(|(provider_runner_id, reason)| HonoredIntent { provider_runner_id, reason })
                .collect(),
        },
    ))
}

/// One page of the provisioner's instances, by `provider_runner_id`:
/// `limit` (1 to 1,000) from after `cursor` (the previous page's last id).
/// The fleet is read whole (its decisions need every instance; what ended
/// has moved to its history, so whole is the live fleet) and only the
/// answer is paged, so it stays far under Lambda's 6 MB. The first page
/// runs the fleet pass; the pages after it only read, so a walk through
/// the pages decides once.
async fn list(context: &Context, provisioner: &Provisioner, req: &Request) -> Result<Response<Body>, ApiError> {
    let limit = match query_param(req, "limit") {
        None => MAX_INSTANCES_PER_PAGE,
        Some(raw) => raw
            .parse::<usize>()
            .ok()
            .filter(|l| (1..=MAX_INSTANCES_PER_PAGE).contains(l))
            .ok_or_else(|| ApiError::invalid_request(format!("limit must be from 1 to {MAX_INSTANCES_PER_PAGE}")))?,
    };
    let cursor = query_param(req, "cursor");
    if cursor.as_ref().is_some_and(|c| c.is_empty() || c.len() > MAX_PROVIDER_RUNNER_ID_LEN) {
        return Err(ApiError::invalid_request("cursor is not one this route gave"));
    }
    let intent = query_param(req, "intent");
    let only_terminate = match intent.as_deref() {
        None => false,
        Some("terminate") => true,
        Some(other) => return Err(ApiError::invalid_request(format!("intent must be `terminate` (got `{other}`)"))),
    };
    let fleet = match cursor {
        None => context.store.fleet_pass(provisioner.id, chrono::Utc::now()).await?.map(|(fleet, _)| fleet),
        Some(_) => context.store.fleet(provisioner.id).await?,
    }
    .ok_or_else(ApiError::unauthenticated)?;
    let mut items: Vec<InstanceView> = fleet
        .instance_views()
        .into_iter()
        .filter(|i| !only_terminate || (i.terminate.is_some() && !i.state.is_terminal()))
        .filter(|i| cursor.as_deref().is_none_or(|after| i.provider_runner_id.as_str() > after))
        .collect();
    let next_cursor = (items.len() > limit).then(|| items[limit - 1].provider_runner_id.clone());
    items.truncate(limit);
    Ok(json_response(StatusCode::OK, &InstanceList { items, next_cursor }))
}
