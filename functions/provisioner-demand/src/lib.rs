//! `GET /v1/provisioners/demand?wait_s=0..20&since=<version>` (`bpt_`): the
//! demand of each label set the provisioner serves (behaviour.md §15).
//!
//! A long poll: while the demand's `version` is the caller's `since`, the
//! function reads the workspace's label-set counts again every second (one
//! small `Query`, whatever the number of queued jobs) and answers as soon
//! as it changes, or at `wait_s`; a re-read that fails transiently is
//! skipped, not answered. The answer itself reads the fleet once
//! (its idle runners, and the releases and intents due now). The demand
//! metrics are not published here but by the `demand-metrics` schedule,
//! one datapoint a served set a period, however often anything polls.

use std::time::Duration;

use baton_api::provisioners::{Demand, MAX_DEMAND_WAIT_S};
use baton_domain::error::ApiError;
use baton_domain::runners::labels::is_subset;
use baton_domain::runners::provisioners::demand::{served_demand, SetCounts};
use baton_service::context::Context;
use baton_service::http::{authorize_provisioner, json_response, method_not_allowed, query_param, respond};
use baton_store::runner_items::LabelSet;
use http::{Method, StatusCode};
use lambda_http::{Body, Request, Response};
use sha2::{Digest, Sha256};

/// How often a waiting poll reads the counts again.
const POLL_EVERY: Duration = Duration::from_secs(1);

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    respond(demand(context, req).await)
}

/// The version of the demand of `served` over `sets`: a digest of every
/// figure a provisioner acts on and of the registry version of every job set
/// they cover. The figures alone could come back to what the caller saw (a
/// job ends and the next is queued between two reads: ABA); an enqueue
/// always writes a fresh `v`, so new work always changes the version.
pub fn version(served: &[Vec<String>], sets: &[LabelSet]) -> String {
    let counts: Vec<SetCounts> = sets.iter().map(LabelSet::counts).collect();
    let mut digest = Sha256::new();
    for labels in served {
        let d = served_demand(labels, &counts);
        digest.update(format!("{}:{}:{}:{};", labels.join(","), d.queued, d.reserved, d.running));
    }
    for set in sets.iter().filter(|set| served.iter().any(|labels| is_subset(&set.labels, labels))) {
        digest.update(format!("{}={};", set.sk, set.v));
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
            // A read that fails while the poll waits is not the answer: the
            // next second's may get through, and the answer reads afresh
            // anyway. A 20 s poll makes twenty reads, and failing it on any
            // one failed most long polls exactly when AWS throttled, so a
            // provisioner backing off from them saw no demand for minutes.
            match context.store.label_sets(&provisioner.workspace_id).await {
                Ok(sets) if version(served, &sets) != since => break,
                Ok(_) => {}
                Err(err) if err.is_retriable() => {
                    tracing::warn!(provisioner_id = %provisioner.id, workspace_id = %provisioner.workspace_id,
                        error = %err, "demand re-read failed; the poll goes on");
                }
                Err(err) => return Err(err.into()),
            }
            if tokio::time::Instant::now() + POLL_EVERY > deadline {
                break;
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    }
    let now = chrono::Utc::now();
    let (fleet, _) = context.store.fleet_pass(provisioner.id, now).await?.ok_or_else(ApiError::unauthenticated)?;
    let label_sets = baton_service::usecases::fleet::label_set_demand(&context.store, &fleet).await?;
    let version = version(served, &fleet.sets);
    tracing::info!(provisioner_id = %provisioner.id, workspace_id = %provisioner.workspace_id, %version, "demand read");
    Ok(json_response(StatusCode::OK, &Demand { label_sets, version }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &str, queued: i64) -> LabelSet {
        LabelSet {
            pk: "QREG#ws".into(),
            sk: "abc".into(),
            labels: vec!["linux".into()],
            v: v.into(),
            queued,
            running: 0,
            reserved: 0,
        }
    }

    #[test]
    fn new_work_changes_the_version_even_when_the_figures_come_back_to_what_was_seen() {
        let served = vec![vec!["linux".to_string(), "x64".into()]];
        let seen = version(&served, &[set("v1", 1)]);
        assert_eq!(version(&served, &[set("v1", 1)]), seen);
        assert_ne!(version(&served, &[set("v1", 0)]), seen, "a claim changes it");
        assert_ne!(version(&served, &[set("v2", 1)]), seen, "one job ended, the next queued: still a change");
        let other = LabelSet { labels: vec!["gpu".into()], sk: "gpu".into(), ..set("v9", 5) };
        assert_eq!(version(&served, &[set("v1", 1), other]), seen, "work no served set covers is not a change");
    }
}
