//! `GET /v1/provisioners/demand?wait_s=0..20&since=<version>` (`bpt_`): the
//! demand of each label set the provisioner serves (behaviour.md §15).
//!
//! A long poll: while the demand's `version` is the caller's `since`, the
//! function reads the workspace's label-set counts again every second (one
//! small `Query`, whatever the number of queued jobs) and answers as soon
//! as it changes, or at `wait_s`. The answer itself reads the fleet once
//! (its idle runners, and the releases and intents due now) and publishes
//! each set's demand as an EMF metric.

use std::time::Duration;

use baton_shared::api::provisioners::{Demand, LabelSetDemand, MAX_DEMAND_WAIT_S};
use baton_shared::context::Context;
use baton_shared::error::ApiError;
use baton_shared::http::{authorize_provisioner, json_response, method_not_allowed, query_param, respond};
use baton_shared::runners::provisioners::demand::{served_demand, SetCounts};
use baton_shared::store::provisioners::demand_of;
use baton_shared::store::queue::LabelSet;
use http::{Method, StatusCode};
use lambda_http::{Body, Request, Response};
use sha2::{Digest, Sha256};

/// How often a waiting poll reads the counts again.
const POLL_EVERY: Duration = Duration::from_secs(1);

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    respond(demand(context, req).await)
}

/// The version of the demand of `served` over `sets`: a digest of every
/// figure a provisioner acts on, so any change changes it.
pub fn version(served: &[Vec<String>], sets: &[SetCounts]) -> String {
    let mut digest = Sha256::new();
    for set in served {
        let d = served_demand(set, sets);
        digest.update(format!("{}:{}:{}:{};", set.join(","), d.queued, d.reserved, d.running));
    }
    digest.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect()
}

async fn demand(context: &Context, req: Request) -> Result<Response<Body>, ApiError> {
    if req.method() != Method::GET {
        return Err(method_not_allowed());
    }
    let provisioner = authorize_provisioner(&context.store, &req).await?;
    let wait_s = match query_param(&req, "wait_s") {
        None => 0,
        Some(raw) => raw
            .parse::<u32>()
            .ok()
            .filter(|w| *w <= MAX_DEMAND_WAIT_S)
            .ok_or_else(|| ApiError::invalid_request(format!("wait_s must be 0 to {MAX_DEMAND_WAIT_S}")))?,
    };
    let since = query_param(&req, "since");
    let served = &provisioner.settings.label_sets;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(u64::from(wait_s));
    if let Some(since) = since {
        loop {
            let sets: Vec<SetCounts> =
                context.store.label_sets(&provisioner.workspace_id).await?.iter().map(LabelSet::counts).collect();
            if version(served, &sets) != since || tokio::time::Instant::now() + POLL_EVERY > deadline {
                break;
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    }
    let now = chrono::Utc::now();
    let (fleet, _) = context.store.fleet_pass(provisioner.id, now).await?.ok_or_else(ApiError::unauthenticated)?;
    let sets: Vec<SetCounts> = fleet.sets.iter().map(LabelSet::counts).collect();
    let mut label_sets = Vec::new();
    for (labels, served_now, idle_sessions) in demand_of(&fleet) {
        let mut oldest = None;
        for set in &served_now.waiting_sets {
            if let Some(head) = context.store.pending_head(&provisioner.workspace_id, set, 1).await?.first() {
                oldest = Some(oldest.map_or(head.queued_at, |o: chrono::DateTime<chrono::Utc>| o.min(head.queued_at)));
            }
        }
        println!(
            "{}",
            baton_shared::metrics::demand_emf_line(
                &provisioner.workspace_id,
                &labels,
                served_now.queued,
                served_now.running,
                now.timestamp_millis()
            )
        );
        label_sets.push(LabelSetDemand {
            labels,
            queued: served_now.queued,
            reserved: served_now.reserved,
            running: served_now.running,
            idle_sessions,
            oldest_queued_at: oldest,
        });
    }
    let version = version(served, &sets);
    tracing::info!(provisioner_id = %provisioner.id, workspace_id = %provisioner.workspace_id, %version, "demand read");
    Ok(json_response(StatusCode::OK, &Demand { label_sets, version }))
}
