//! Provisioners, their reservations and their instances (behaviour.md §15).
//!
//! Items (keys in `store::keys`), one partition per provisioner so one
//! `Query` reads its whole fleet:
//! - `PROV#<id>` / `PROV`: the settings, the token's hash, and
//!   `reserved_instances`, the reservations holding an instance slot (the
//!   condition that keeps `max_instances` under concurrent reserves);
//! - `PROV#<id>` / `RESV#<reservation>`: a reservation: the served labels,
//!   the job label set whose demand it holds (`holds_demand` while it does:
//!   until its instance's first claim, or its release), its token's id, the
//!   session its token made, the instance reported for it;
//! - `PROV#<id>` / `INST#<provider runner id>`: an instance as reported, with
//!   the terminate intent Baton decided for it (written once).
//!
//! What ended (an instance's terminal state, a reservation's release) moves
//! to the fleet's history (`PROVHIST#<id>`, `history`) once settled, so the
//! partition read on every call holds the live fleet, not its past.
//!
//! Demand is not stored here: it is the label-set registry's counts
//! (`store::queue`), summed per served set (`runners::provisioners::demand`).
//! A reservation adds to a job set's `reserved` on the condition that the
//! set's `reserved` is still what was read and its `queued` covers the new
//! total, and to the provisioner's `reserved_instances` on the condition
//! that it stays within `max_instances`: both in one transaction, so two
//! provisioners, or two reserves of one, never reserve one job's demand
//! twice nor pass the cap; the loser reads again.
//!
//! Decisions (intents, release) are `runners::provisioners::intents`; this
//! module reads what they need and writes what they decide, each write
//! conditioned so a repeat (a retried report, two readers of one fleet, a
//! lease path and a report converging at once) is a no-op.
//!
//! The operations are here by concern: the provisioner's own item (create,
//! read, remove), its fleet as read and what it decides (`fleet`), the
//! reservations it makes and releases (`reservations`), its instance
//! reports (`instances`), and what ended (`history`).

use aws_sdk_dynamodb::types::{Delete, TransactWriteItem, Update};
use baton_api::provisioners::{InstanceState, TerminateReason};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::keys::{self, timestamp};
use super::runner_items::ReservationLink;
use super::{build, from_item, query_all, s, Store, TxOutcome};
use crate::error::StoreError;
use crate::ItemHead;
use baton_domain::runners::provisioners::intents::FleetPolicy;
use baton_domain::runners::provisioners::settings::ProvisionerSettings;
use baton_domain::tokens::{self, hash_token};

pub mod fleet;
pub mod history;
mod instances;
mod reservations;

/// What a provisioner create did.
#[derive(Debug)]
pub enum ProvisionerCreated {
    /// A new provisioner, and its token (shown once).
    New(Provisioner, String),
    /// The one an earlier create with the same idempotency key made.
    Existing(Provisioner),
}

/// Why a reservation was released (the fact's `reason`).
pub const RELEASED_INSTANCE_ENDED: &str = "instance-ended";
pub const RELEASED_EXPIRED_UNUSED: &str = "expired-unused";
pub const RELEASED_PROVISIONER_REMOVED: &str = "provisioner-removed";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Provisioner {
    #[serde(flatten)]
    pub head: ItemHead,
    pub id: Uuid,
    pub workspace_id: String,
    #[serde(flatten)]
    pub settings: ProvisionerSettings,
    pub secret_hash: String,
    pub reserved_instances: i64,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "baton_domain::time::stored_option")]
    pub removed_at: Option<DateTime<Utc>>,
    #[serde(with = "baton_domain::time::stored")]
    pub created_at: DateTime<Utc>,
    pub rw_pk: String,
    pub rw_sk: String,
}

/// A provisioner's entry in the stage's registry (`PROVREG`): what the
/// scheduled demand metrics need of it, without reading its partition.
/// A provisioner's served sets never change after create, so the copy
/// never goes stale; the entry is removed with the provisioner.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RegisteredProvisioner {
    #[serde(flatten)]
    pub head: ItemHead,
    pub workspace_id: String,
    pub provisioner_id: Uuid,
    pub label_sets: Vec<Vec<String>>,
}

impl Provisioner {
    /// As the API shows it (never the token's hash).
    pub fn summary(&self) -> baton_api::provisioners::ProvisionerSummary {
        let s = &self.settings;
        baton_api::provisioners::ProvisionerSummary {
            id: self.id,
            name: s.name.clone(),
            label_sets: s.label_sets.clone(),
            max_instances: s.max_instances,
            jobs_per_instance: s.jobs_per_instance,
            idle_timeout_s: s.idle_timeout_s,
            boot_timeout_s: s.boot_timeout_s,
            warm: s.warm,
            reserved_instances: self.reserved_instances.max(0) as u32,
            created_at: self.created_at,
        }
    }

    pub fn policy(&self) -> FleetPolicy {
        FleetPolicy {
            idle_timeout: Duration::seconds(i64::from(self.settings.idle_timeout_s)),
            boot_timeout: Duration::seconds(i64::from(self.settings.boot_timeout_s)),
            warm: self.settings.warm,
            removed: self.removed_at.is_some(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReservationItem {
    #[serde(flatten)]
    pub head: ItemHead,
    pub id: Uuid,
    pub provisioner_id: Uuid,
    pub workspace_id: String,
    /// The served label set the instance is for (its session's labels).
    pub labels: Vec<String>,
    /// The job label set whose demand it holds.
    pub labelset: String,
    #[serde(with = "baton_domain::time::stored")]
    pub expires_at: DateTime<Utc>,
    #[serde(with = "baton_domain::time::stored")]
    pub created_at: DateTime<Utc>,
    /// Present while the reservation holds demand on `labelset`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holds_demand: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_runner_id: Option<String>,
    /// When its instance's runner first claimed (the hold on demand ends).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "baton_domain::time::stored_option")]
    pub first_claim_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "baton_domain::time::stored_option")]
    pub released_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_reason: Option<String>,
}

impl ReservationItem {
    /// Whether it was read from the fleet's history: released, and its
    /// instance (if any) ended, more than the grace ago.
    pub fn in_history(&self) -> bool {
        self.head.pk == keys::provisioner_history_pk(self.provisioner_id)
    }

    pub fn link(&self) -> ReservationLink {
        ReservationLink {
            provisioner_id: self.provisioner_id,
            reservation_id: self.id,
            labelset: self.labelset.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct InstanceItem {
    #[serde(flatten)]
    pub head: ItemHead,
    pub provider_runner_id: String,
    pub provisioner_id: Uuid,
    pub state: InstanceState,
    pub rank: u8,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<Uuid>,
    #[serde(with = "baton_domain::time::stored")]
    pub first_seen_at: DateTime<Utc>,
    #[serde(with = "baton_domain::time::stored")]
    pub state_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminate_reason: Option<TerminateReason>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "baton_domain::time::stored_option")]
    pub terminate_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "baton_domain::time::stored_option")]
    pub honored_at: Option<DateTime<Utc>>,
}

/// What a reserve made.
#[derive(Debug, Clone)]
pub struct Reserved {
    pub reservation: ReservationItem,
    pub token: String,
}

/// What an instance report did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReportOutcome {
    pub accepted: u32,
    pub reservations_released: u32,
    pub honored: Vec<(String, TerminateReason)>,
}

impl Store {
    pub async fn create_provisioner(
        &self,
        workspace_id: &str,
        settings: ProvisionerSettings,
        idempotency_key: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<ProvisionerCreated, StoreError> {
        let id = baton_domain::ids::new_id();
        let token = tokens::new_provisioner_token(id);
        let provisioner = Provisioner {
            head: ItemHead::new(keys::provisioner_pk(id), keys::PROVISIONER_SK, "provisioner"),
            id,
            workspace_id: workspace_id.to_string(),
            settings,
            secret_hash: hash_token(&token),
            reserved_instances: 0,
            removed_at: None,
            created_at: now,
            rw_pk: keys::workspace_provisioners_pk(workspace_id),
            rw_sk: keys::registration_token_listing_sk(now, id),
        };
        let entry = RegisteredProvisioner {
            head: ItemHead::new(
                keys::PROVISIONER_REGISTRY_PK,
                keys::provisioner_registry_sk(workspace_id, id),
                "provisioner-registration",
            ),
            workspace_id: workspace_id.to_string(),
            provisioner_id: id,
            label_sets: provisioner.settings.label_sets.clone(),
        };
        // Both or neither: a provisioner missing from the registry would
        // never have its demand published on the schedule.
        let mut items = vec![self.new_item_put(&provisioner)?, self.item_put(&entry)?];
        // The key in the same transaction: of two creates with one key,
        // racing or a retry after a lost answer, exactly one writes anything.
        if let Some(key) = idempotency_key {
            let put = build(
                aws_sdk_dynamodb::types::Put::builder()
                    .table_name(&self.table)
                    .item("pk", s(keys::provisioner_idempotency_pk(workspace_id, key)))
                    .item("sk", s(keys::IDEMPOTENCY_SK))
                    .item("type", s("provisioner_idempotency"))
                    .item("provisioner_id", s(id.to_string()))
                    .condition_expression("attribute_not_exists(pk)")
                    .build(),
            )?;
            items.push(TransactWriteItem::builder().put(put).build());
        }
        let key_index = 2;
        match (self.transact(items).await?, idempotency_key) {
            (TxOutcome::ConditionFailed { reasons }, Some(key))
                if reasons.get(key_index).is_some_and(Option::is_some) =>
            {
                let made = self.provisioner_for_idempotency_key(workspace_id, key).await?;
                made.map(ProvisionerCreated::Existing)
                    .ok_or_else(|| StoreError::DynamoDb(format!("idempotency key {key:?} names no provisioner")))
            }
            // A new id: a failed condition on its own item is this very
            // transaction, applied before its answer was lost (the SDK's
            // retry carries the same request token, so it is answered done;
            // a conflict's resend is not).
            _ => Ok(ProvisionerCreated::New(provisioner, token)),
        }
    }

    /// The provisioner an earlier create with `key` made, removed or not.
    async fn provisioner_for_idempotency_key(
        &self,
        workspace_id: &str,
        key: &str,
    ) -> Result<Option<Provisioner>, StoreError> {
        let item = self.get(&keys::provisioner_idempotency_pk(workspace_id, key), keys::IDEMPOTENCY_SK).await?;
        let id = item
            .as_ref()
            .and_then(|item| item.get("provisioner_id"))
            .and_then(|v| v.as_s().ok())
            .and_then(|text| Uuid::parse_str(text).ok());
        match id {
            Some(id) => self.provisioner(id).await,
            None => Ok(None),
        }
    }

    /// Gives provisioner `id` a new token; the old one stops working at
    /// once. `None` when it is gone or removed (nothing written).
    pub async fn rotate_provisioner_token(&self, id: Uuid) -> Result<Option<String>, StoreError> {
        let token = tokens::new_provisioner_token(id);
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(keys::provisioner_pk(id)))
            .key("sk", s(keys::PROVISIONER_SK))
            .update_expression("SET secret_hash = :hash")
            .condition_expression("attribute_exists(pk) AND attribute_not_exists(removed_at)")
            .expression_attribute_values(":hash", s(hash_token(&token)));
        let rotated = super::condition_may_fail(|| update.clone().send()).await?;
        Ok(rotated.then_some(token))
    }

    /// Every live provisioner of the stage, by workspace: the registry the
    /// scheduled demand metrics read (one partition, paged; never a Scan).
    pub async fn registered_provisioners(&self) -> Result<Vec<RegisteredProvisioner>, StoreError> {
        query_all(self.query_partition(keys::PROVISIONER_REGISTRY_PK.into())).await
    }

    /// The workspace's provisioners that were not removed, oldest first.
    pub async fn list_provisioners(&self, workspace_id: &str) -> Result<Vec<Provisioner>, StoreError> {
        let provisioners: Vec<Provisioner> = query_all(
            self.client
                .query()
                .table_name(&self.table)
                .index_name(keys::RUNS_BY_WORKSPACE)
                .key_condition_expression("rw_pk = :pk")
                .expression_attribute_values(":pk", s(keys::workspace_provisioners_pk(workspace_id))),
        )
        .await?;
        Ok(provisioners.into_iter().filter(|provisioner| provisioner.removed_at.is_none()).collect())
    }

    pub async fn provisioner(&self, id: Uuid) -> Result<Option<Provisioner>, StoreError> {
        self.get(&keys::provisioner_pk(id), keys::PROVISIONER_SK).await?.map(from_item).transpose()
    }

    /// The provisioner a `bpt_` token belongs to, unless it was removed.
    pub async fn provisioner_for_token(&self, token: &str) -> Result<Option<Provisioner>, StoreError> {
        let Some(id) = tokens::provisioner_token_id(token) else { return Ok(None) };
        let provisioner = self.provisioner(id).await?;
        Ok(provisioner.filter(|p| p.secret_hash == hash_token(token) && p.removed_at.is_none()))
    }

    /// Removes a provisioner of `workspace_id`: its token stops working at
    /// once (the removal is the first write), its live instances get
    /// `provisioner-removed` intents and its reservations are released.
    /// `false` when there is none (another workspace's is not found either).
    pub async fn remove_provisioner(
        &self,
        workspace_id: &str,
        id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        match self.provisioner(id).await? {
            Some(p) if p.workspace_id == workspace_id && p.removed_at.is_none() => {
                // The registry entry goes with the removal, so the demand
                // metrics stop at once; both writes are idempotent, so a
                // resend after a lost answer changes nothing.
                let remove = vec![
                    TransactWriteItem::builder()
                        .update(build(
                            Update::builder()
                                .table_name(&self.table)
                                .key("pk", s(keys::provisioner_pk(id)))
                                .key("sk", s(keys::PROVISIONER_SK))
                                .update_expression("SET removed_at = if_not_exists(removed_at, :now)")
                                .expression_attribute_values(":now", s(timestamp(now)))
                                .build(),
                        )?)
                        .build(),
                    TransactWriteItem::builder()
                        .delete(build(
                            Delete::builder()
                                .table_name(&self.table)
                                .key("pk", s(keys::PROVISIONER_REGISTRY_PK))
                                .key("sk", s(keys::provisioner_registry_sk(workspace_id, id)))
                                .build(),
                        )?)
                        .build(),
                ];
                self.transact(remove).await?;
                // The intents and releases follow from `removed_at`; the
                // fleet pass writes them (and any later pass finishes them).
                self.fleet_pass(id, now).await?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}
