//! A provisioner's fleet as the API shows it: what the provisioner polls
//! (`GET /v1/provisioners/demand`) and what an operator reads
//! (`GET /v1/workspaces/{ws}/provisioners/{id}`) are the same figures, made
//! here once.

use std::collections::HashMap;

use baton_api::provisioners::LabelSetDemand;
use baton_store::error::StoreError;
use baton_store::provisioners::fleet::{demand_of, Fleet};
use baton_store::Store;
use chrono::{DateTime, Utc};

/// The demand of each label set `fleet`'s provisioner serves, with the
/// oldest queued job each could take.
pub async fn label_set_demand(store: &Store, fleet: &Fleet) -> Result<Vec<LabelSetDemand>, StoreError> {
    let workspace = &fleet.provisioner.workspace_id;
    let mut label_sets = Vec::new();
    // A job set fits several served sets (its labels are a subset of each):
    // its head is read once a request, not once a served set it fits.
    let mut heads: HashMap<String, Option<DateTime<Utc>>> = HashMap::new();
    for (labels, served_now, idle_sessions) in demand_of(fleet) {
        let mut oldest: Option<DateTime<Utc>> = None;
        for set in &served_now.waiting_sets {
            let head = match heads.get(set) {
                Some(head) => *head,
                None => {
                    let head = store.pending_head(workspace, set, 1).await?.first().map(|h| h.queued_at);
                    heads.insert(set.clone(), head);
                    head
                }
            };
            if let Some(queued_at) = head {
                oldest = Some(oldest.map_or(queued_at, |o| o.min(queued_at)));
            }
        }
        label_sets.push(LabelSetDemand {
            labels,
            queued: served_now.queued,
            reserved: served_now.reserved,
            running: served_now.running,
            idle_sessions,
            oldest_queued_at: oldest,
        });
    }
    Ok(label_sets)
}
