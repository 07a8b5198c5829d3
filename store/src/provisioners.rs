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

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::{AttributeValue, Delete, KeysAndAttributes, Put, ReturnValue, TransactWriteItem, Update};
use baton_api::provisioners::{InstanceEvent, InstanceState, TerminateReason};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::keys::{self, timestamp};
use super::outbox::OutboxItem;
use super::queue::LabelSet;
use super::records::{RunnerRecord, RunnerStatus};
use super::sessions::{RegistrationToken, Session};
use super::{build, contention, from_item, n, s, to_item, Store};
use crate::error::StoreError;
use baton_api::facts::{Fact, InstanceTerminateRequested, ReservationCreated, ReservationReleased};
use baton_domain::runners::labels::is_subset;
use baton_domain::runners::provisioners::demand::{served_demand, spread_reservations, SetCounts};
use baton_domain::runners::provisioners::instances::stops;
use baton_domain::runners::provisioners::intents::{self, FleetPolicy, LeaseView, SessionView};
use baton_domain::runners::provisioners::settings::ProvisionerSettings;
use baton_domain::tokens::{self, hash_token, ReservationKey};

/// Reservations written by one transaction at most: each is two items (the
/// reservation and its token), next to one count per job set and the
/// provisioner's, within DynamoDB's 100 items. A larger reserve takes
/// several transactions.
const RESERVATIONS_PER_TRANSACTION: u32 = 35;

/// Why a reservation was released (the fact's `reason`).
pub const RELEASED_INSTANCE_ENDED: &str = "instance-ended";
pub const RELEASED_EXPIRED_UNUSED: &str = "expired-unused";
pub const RELEASED_PROVISIONER_REMOVED: &str = "provisioner-removed";

/// What a session (and the leases it takes) knows of its reservation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReservationLink {
    pub provisioner_id: Uuid,
    pub reservation_id: Uuid,
    /// The job label set whose demand the reservation holds.
    pub labelset: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Provisioner {
    pub pk: String,
    pub sk: String,
    #[serde(rename = "type")]
    pub kind: String,
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
    pub pk: String,
    pub sk: String,
    #[serde(rename = "type")]
    pub kind: String,
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
    pub pk: String,
    pub sk: String,
    #[serde(rename = "type")]
    pub kind: String,
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
    #[serde(default, skip_serializing_if = "Option::is_none", with = "baton_domain::time::stored_option")]
    pub released_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_reason: Option<String>,
}

impl ReservationItem {
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
    pub pk: String,
    pub sk: String,
    #[serde(rename = "type")]
    pub kind: String,
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

/// A provisioner's whole fleet as read, with what its decisions need.
#[derive(Debug, Clone)]
pub struct Fleet {
    pub provisioner: Provisioner,
    pub reservations: Vec<ReservationItem>,
    pub instances: Vec<InstanceItem>,
    sessions: HashMap<Uuid, Session>,
    records: HashMap<Uuid, RunnerRecord>,
    pub sets: Vec<LabelSet>,
}

impl Fleet {
    fn reservation(&self, id: Option<Uuid>) -> Option<&ReservationItem> {
        id.and_then(|id| self.reservations.iter().find(|r| r.id == id))
    }

    fn session_of(&self, instance: &InstanceItem) -> Option<&Session> {
        let id = instance.session_id.or_else(|| self.reservation(instance.reservation_id)?.session_id)?;
        self.sessions.get(&id)
    }

    fn leases_of(&self, session: &Session) -> Vec<LeaseView> {
        session
            .executions
            .iter()
            .map(|id| match self.records.get(id) {
                Some(r) if r.session_id == Some(session.id) && r.status == RunnerStatus::Leased => {
                    LeaseView { live: true, cancel_requested: r.cancel_requested_at.is_some() }
                }
                // The session lists an execution only from the claim that
                // leased it (one transaction), and a record never goes back
                // to `pending`: a pending one is the record as it was before
                // that claim, read eventually consistently on AWS a moment
                // after it. Counted as live, as a record not readable yet
                // is, so that neither a release nor an `exhausted` or `idle`
                // intent runs ahead of a lease (the machine would be stopped
                // under its job, which would end `runner_lost`).
                Some(r) if r.status == RunnerStatus::Pending => LeaseView { live: true, cancel_requested: false },
                Some(_) => LeaseView { live: false, cancel_requested: false },
                None => LeaseView { live: true, cancel_requested: false },
            })
            .collect()
    }

    /// Whether unreserved demand exists that a runner with `labels` could take.
    fn demand_fits(&self, labels: &[String]) -> bool {
        self.sets.iter().any(|set| set.counts().unreserved() > 0 && is_subset(&set.labels, labels))
    }

    /// The intent each live instance without one gets now.
    pub fn decide_intents(&self, now: DateTime<Utc>) -> Vec<(usize, TerminateReason)> {
        let undecided: Vec<usize> = (0..self.instances.len())
            .filter(|i| self.instances[*i].terminate_reason.is_none() && !self.instances[*i].state.is_terminal())
            .collect();
        let views: Vec<intents::InstanceView> = undecided
            .iter()
            .map(|i| {
                let instance = &self.instances[*i];
                let reservation = self.reservation(instance.reservation_id);
                let session = self.session_of(instance).map(|session| SessionView {
                    claims: session.claims,
                    max_claims: session.max_claims.unwrap_or(u64::MAX),
                    idle_since: session.last_claim_at.unwrap_or(session.created_at),
                    leases: self.leases_of(session),
                });
                intents::InstanceView {
                    state: instance.state,
                    first_seen_at: instance.first_seen_at,
                    reservation_expires_at: reservation.map(|r| r.expires_at),
                    session,
                    demand_fits: reservation.is_some_and(|r| self.demand_fits(&r.labels)),
                }
            })
            .collect();
        intents::decide(&views, self.provisioner.policy(), now)
            .into_iter()
            .zip(undecided)
            .filter_map(|(reason, i)| reason.map(|r| (i, r)))
            .collect()
    }

    /// The reservations to release now, and why.
    pub fn releases(&self, now: DateTime<Utc>) -> Vec<(usize, &'static str)> {
        let mut released = Vec::new();
        for (i, reservation) in self.reservations.iter().enumerate() {
            if reservation.released_at.is_some() {
                continue;
            }
            // Its instance by the link, or by the instance's own record of
            // its reservation (written with its state, so it holds even
            // when the link's write was lost).
            let instance = self.instances.iter().find(|i| {
                reservation.provider_runner_id.as_ref() == Some(&i.provider_runner_id)
                    || i.reservation_id == Some(reservation.id)
            });
            let leases = reservation.session_id.and_then(|id| self.sessions.get(&id)).map(|s| self.leases_of(s));
            if self.provisioner.removed_at.is_some()
                && leases.as_deref().is_none_or(|l| !l.iter().any(LeaseView::blocks_release))
            {
                released.push((i, RELEASED_PROVISIONER_REMOVED));
            } else if instance.is_some_and(|inst| intents::releasable(inst.state, leases.as_deref().unwrap_or(&[]))) {
                released.push((i, RELEASED_INSTANCE_ENDED));
            } else if intents::expired_unused(reservation.expires_at, reservation.session_id.is_some(), now) {
                released.push((i, RELEASED_EXPIRED_UNUSED));
            }
        }
        released
    }

    /// Idle registered runners of this fleet that could take work of `served`.
    pub fn idle_sessions(&self, served: &[String]) -> u64 {
        self.reservations
            .iter()
            .filter(|r| r.released_at.is_none() && is_subset(served, &r.labels))
            .filter_map(|r| self.sessions.get(&r.session_id?))
            .filter(|s| !s.is_capped_out() && !self.leases_of(s).iter().any(|l| l.live))
            .count() as u64
    }
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
        now: DateTime<Utc>,
    ) -> Result<(Provisioner, String), StoreError> {
        let id = baton_domain::ids::new_id();
        let token = tokens::new_provisioner_token(id);
        let provisioner = Provisioner {
            pk: keys::provisioner_pk(id),
            sk: keys::PROVISIONER_SK.into(),
            kind: "provisioner".into(),
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
            pk: keys::PROVISIONER_REGISTRY_PK.into(),
            sk: keys::provisioner_registry_sk(workspace_id, id),
            kind: "provisioner-registration".into(),
            workspace_id: workspace_id.to_string(),
            provisioner_id: id,
            label_sets: provisioner.settings.label_sets.clone(),
        };
        // Both or neither: a provisioner missing from the registry would
        // never have its demand published on the schedule. A new id: a
        // failed condition is this very transaction, applied before its
        // answer was lost (the SDK's retry carries the same request token,
        // so it is answered done; a conflict's resend is not).
        let items = vec![
            TransactWriteItem::builder()
                .put(build(
                    Put::builder()
                        .table_name(&self.table)
                        .set_item(Some(to_item(&provisioner)?))
                        .condition_expression("attribute_not_exists(pk)")
                        .build(),
                )?)
                .build(),
            TransactWriteItem::builder()
                .put(build(Put::builder().table_name(&self.table).set_item(Some(to_item(&entry)?)).build())?)
                .build(),
        ];
        self.transact(items).await?;
        Ok((provisioner, token))
    }

    /// Every live provisioner of the stage, by workspace: the registry the
    /// scheduled demand metrics read (one partition, paged; never a Scan).
    pub async fn registered_provisioners(&self) -> Result<Vec<RegisteredProvisioner>, StoreError> {
        let mut pages = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(keys::PROVISIONER_REGISTRY_PK))
            .into_paginator()
            .items()
            .send();
        let mut entries = Vec::new();
        while let Some(item) = pages.next().await {
            entries.push(from_item(item?)?);
        }
        Ok(entries)
    }

    /// The workspace's provisioners that were not removed, oldest first.
    pub async fn list_provisioners(&self, workspace_id: &str) -> Result<Vec<Provisioner>, StoreError> {
        let mut pages = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(keys::RUNS_BY_WORKSPACE)
            .key_condition_expression("rw_pk = :pk")
            .expression_attribute_values(":pk", s(keys::workspace_provisioners_pk(workspace_id)))
            .into_paginator()
            .items()
            .send();
        let mut items = Vec::new();
        while let Some(item) = pages.next().await {
            let provisioner: Provisioner = from_item(item?)?;
            if provisioner.removed_at.is_none() {
                items.push(provisioner);
            }
        }
        Ok(items)
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

    /// Reads a provisioner's fleet: its partition, the sessions its
    /// reservations made, their executions' records, and the workspace's
    /// label-set counts.
    pub async fn fleet(&self, provisioner_id: Uuid) -> Result<Option<Fleet>, StoreError> {
        let mut pages = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(keys::provisioner_pk(provisioner_id)))
            .consistent_read(true)
            .into_paginator()
            .items()
            .send();
        let mut provisioner = None;
        let mut reservations = Vec::new();
        let mut instances = Vec::new();
        while let Some(item) = pages.next().await {
            let item = item?;
            let sk = match item.get("sk") {
                Some(AttributeValue::S(sk)) => sk.clone(),
                _ => continue,
            };
            if sk == keys::PROVISIONER_SK {
                provisioner = Some(from_item::<Provisioner>(item)?);
            } else if sk.starts_with(keys::RESERVATION_PREFIX) {
                reservations.push(from_item::<ReservationItem>(item)?);
            } else if sk.starts_with(keys::INSTANCE_PREFIX) {
                instances.push(from_item::<InstanceItem>(item)?);
            }
        }
        let Some(provisioner) = provisioner else { return Ok(None) };
        // Released reservations' sessions still matter while their
        // instance lives (intents); those of ended instances do not.
        let live_instances: Vec<&InstanceItem> = instances.iter().filter(|i| !i.state.is_terminal()).collect();
        let mut session_ids: Vec<Uuid> = reservations
            .iter()
            .filter(|r| r.released_at.is_none() || live_instances.iter().any(|i| i.reservation_id == Some(r.id)))
            .filter_map(|r| r.session_id)
            .chain(live_instances.iter().filter_map(|i| i.session_id))
            .collect();
        session_ids.sort();
        session_ids.dedup();
        let sessions: HashMap<Uuid, Session> = self
            .batch_get::<Session>(session_ids.iter().map(|id| (keys::session_pk(*id), keys::SESSION_SK.to_string())))
            .await?
            .into_iter()
            .filter(|s| s.reservation.as_ref().is_some_and(|r| r.provisioner_id == provisioner_id))
            .map(|s| (s.id, s))
            .collect();
        let executions: Vec<Uuid> = sessions.values().flat_map(|s| s.executions.iter().copied()).collect();
        let records: HashMap<Uuid, RunnerRecord> =
            self.runner_records(&executions).await?.into_iter().map(|r| (r.execution_id, r)).collect();
        let sets = self.label_sets(&provisioner.workspace_id).await?;
        Ok(Some(Fleet { provisioner, reservations, instances, sessions, records, sets }))
    }

    async fn batch_get<T: serde::de::DeserializeOwned>(
        &self,
        keys: impl Iterator<Item = (String, String)>,
    ) -> Result<Vec<T>, StoreError> {
        let keys: Vec<HashMap<String, AttributeValue>> =
            keys.map(|(pk, sk)| HashMap::from([("pk".to_string(), s(pk)), ("sk".to_string(), s(sk))])).collect();
        let mut found = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(100) {
            let mut wanted =
                build(KeysAndAttributes::builder().set_keys(Some(chunk.to_vec())).consistent_read(true).build())?;
            for attempt in 0..5 {
                if attempt > 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(50 << attempt)).await;
                }
                let out = self.client.batch_get_item().request_items(&self.table, wanted.clone()).send().await?;
                for item in out.responses.and_then(|mut r| r.remove(&self.table)).unwrap_or_default() {
                    found.push(from_item(item)?);
                }
                match out.unprocessed_keys.and_then(|mut u| u.remove(&self.table)) {
                    Some(rest) if !rest.keys.is_empty() => wanted = rest,
                    _ => break,
                }
                if attempt == 4 {
                    return Err(StoreError::Throttled("a batch read left keys unprocessed".into()));
                }
            }
        }
        Ok(found)
    }

    /// Reads the fleet and writes what it decides now: the intents not yet
    /// written and the releases due. Any path may run it (a report, a read
    /// of instances or demand, a lease's end, a removal); every write is
    /// conditioned on the state read, so running it twice writes once.
    pub async fn fleet_pass(
        &self,
        provisioner_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Option<(Fleet, u32)>, StoreError> {
        let Some(fleet) = self.fleet(provisioner_id).await? else { return Ok(None) };
        self.write_fleet_decisions(fleet, now).await.map(Some)
    }

    /// Writes what `fleet`, as read, decides at `now`: the intents not yet
    /// written and the releases due. Every write is conditioned on what was
    /// read, so a fleet read before a claim (or another pass) writes nothing
    /// that claim made wrong.
    pub async fn write_fleet_decisions(
        &self,
        mut fleet: Fleet,
        now: DateTime<Utc>,
    ) -> Result<(Fleet, u32), StoreError> {
        for (i, reason) in fleet.decide_intents(now) {
            let session = fleet.session_of(&fleet.instances[i]).map(|s| (s.id, s.claims));
            if self.request_termination(&fleet.provisioner, &fleet.instances[i], session, reason, now).await? {
                fleet.instances[i].terminate_reason = Some(reason);
                fleet.instances[i].terminate_at = Some(now);
            }
        }
        let mut released = 0;
        for (i, reason) in fleet.releases(now) {
            if self.release_reservation(&fleet.provisioner, &fleet.reservations[i], reason, now).await? {
                fleet.reservations[i].released_at = Some(now);
                fleet.reservations[i].release_reason = Some(reason.to_string());
                released += 1;
            }
        }
        Ok((fleet, released))
    }

    /// Writes an instance's terminate intent with its fact, once. A machine
    /// told to go must take no more work, so the same transaction caps its
    /// runner session (`session`: its id and its claims as read) at the
    /// claims it has, on condition that it has no more than were read. Both
    /// this and a claim write the session item, so they are ordered: a claim
    /// that came first fails this condition (nothing is written; the next
    /// pass decides on the fleet with its lease), and a claim that comes
    /// after finds the session capped and is refused `session-exhausted`.
    /// Without it, an `idle` intent decided on a read a claim overtook
    /// stopped the machine under the job it had just claimed.
    async fn request_termination(
        &self,
        provisioner: &Provisioner,
        instance: &InstanceItem,
        session: Option<(Uuid, u64)>,
        reason: TerminateReason,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let update = build(
            Update::builder()
                .table_name(&self.table)
                .key("pk", s(&instance.pk))
                .key("sk", s(&instance.sk))
                .update_expression("SET terminate_reason = :reason, terminate_at = :now")
                .condition_expression("attribute_exists(pk) AND attribute_not_exists(terminate_reason)")
                .expression_attribute_values(":reason", serde_dynamo::to_attribute_value(reason)?)
                .expression_attribute_values(":now", s(timestamp(now)))
                .build(),
        )?;
        let fact = Fact::new(
            provisioner.workspace_id.clone(),
            now,
            InstanceTerminateRequested {
                provisioner_id: provisioner.id,
                provider_runner_id: instance.provider_runner_id.clone(),
                reservation_id: instance.reservation_id,
                runner_session_id: instance.session_id,
                reason,
                requested_at: now,
            },
        );
        let mut items = vec![TransactWriteItem::builder().update(update).build(), self.outbox_put(&fact, 7)?];
        if let Some((session_id, claims)) = session {
            let cap = build(
                Update::builder()
                    .table_name(&self.table)
                    .key("pk", s(keys::session_pk(session_id)))
                    .key("sk", s(keys::SESSION_SK))
                    .update_expression("SET max_claims = claims")
                    .condition_expression("attribute_exists(pk) AND claims = :read")
                    .expression_attribute_values(":read", n(claims))
                    .build(),
            )?;
            items.push(TransactWriteItem::builder().update(cap).build());
        }
        let decided = !contention::lost_race(self.transact(items).await)?;
        if decided {
            tracing::info!(provisioner_id = %provisioner.id, provider_runner_id = %instance.provider_runner_id, reason = reason.as_str(), "terminate intent");
        }
        Ok(decided)
    }

    /// Releases a reservation as read, with its fact: the provisioner's slot
    /// comes back, and the demand it still held (an unused reservation)
    /// counts again. Conditioned on the reservation being as read
    /// (unreleased, holding demand or not), so it happens once.
    async fn release_reservation(
        &self,
        provisioner: &Provisioner,
        reservation: &ReservationItem,
        reason: &'static str,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let held = reservation.holds_demand.is_some();
        let mut items = vec![TransactWriteItem::builder()
            .update(build(
                Update::builder()
                    .table_name(&self.table)
                    .key("pk", s(&reservation.pk))
                    .key("sk", s(&reservation.sk))
                    .update_expression("SET released_at = :now, release_reason = :reason REMOVE holds_demand")
                    .condition_expression(if held {
                        "attribute_not_exists(released_at) AND attribute_exists(holds_demand)"
                    } else {
                        "attribute_not_exists(released_at) AND attribute_not_exists(holds_demand)"
                    })
                    .expression_attribute_values(":now", s(timestamp(now)))
                    .expression_attribute_values(":reason", s(reason))
                    .build(),
            )?)
            .build()];
        items.push(self.provisioner_slots(provisioner.id, -1)?);
        if held {
            items.push(
                TransactWriteItem::builder()
                    .update(build(
                        Update::builder()
                            .table_name(&self.table)
                            .key("pk", s(keys::labelset_registry_pk(&provisioner.workspace_id)))
                            .key("sk", s(&reservation.labelset))
                            .update_expression("ADD reserved :minus")
                            .expression_attribute_values(":minus", n(-1))
                            .build(),
                    )?)
                    .build(),
            );
        }
        let fact = Fact::new(
            provisioner.workspace_id.clone(),
            now,
            ReservationReleased {
                provisioner_id: provisioner.id,
                reservation_id: reservation.id,
                reason: reason.to_string(),
                released_at: now,
            },
        );
        items.push(self.outbox_put(&fact, 7)?);
        let released = !contention::lost_race(self.transact(items).await)?;
        if released {
            tracing::info!(provisioner_id = %provisioner.id, reservation_id = %reservation.id, reason, "reservation released");
        }
        Ok(released)
    }

    fn provisioner_slots(&self, provisioner_id: Uuid, by: i64) -> Result<TransactWriteItem, StoreError> {
        Ok(TransactWriteItem::builder()
            .update(build(
                Update::builder()
                    .table_name(&self.table)
                    .key("pk", s(keys::provisioner_pk(provisioner_id)))
                    .key("sk", s(keys::PROVISIONER_SK))
                    .update_expression("ADD reserved_instances :by")
                    .expression_attribute_values(":by", n(by))
                    .build(),
            )?)
            .build())
    }

    /// Reserves up to `count` instances for `labels` (one of the
    /// provisioner's served sets), as demand and `max_instances` allow.
    #[allow(clippy::too_many_arguments)]
    pub async fn reserve(
        &self,
        provisioner_id: Uuid,
        labels: &[String],
        count: u32,
        expires_in_s: u32,
        key: Option<ReservationKey>,
        outbox_ttl_days: u32,
        now: DateTime<Utc>,
    ) -> Result<Vec<Reserved>, StoreError> {
        let mut made = Vec::new();
        // A named reserve: what an earlier try of it made is answered again
        // (the unreleased ones; a released one's index stays used), and only
        // the rest is reserved, under the indices no try used yet.
        let mut free_indices: Vec<u32> = Vec::new();
        if let Some(key) = &key {
            let ids: Vec<Uuid> = (0..count).map(|i| key.reservation_id(i)).collect();
            let earlier = self.reservations_of(provisioner_id, &ids).await?;
            for index in 0..count {
                match earlier.get(&key.reservation_id(index)) {
                    Some(reservation) if reservation.released_at.is_none() => {
                        made.push(Reserved { reservation: reservation.clone(), token: key.registration_token(index).1 })
                    }
                    Some(_) => {}
                    None => free_indices.push(index),
                }
            }
            if free_indices.len() + made.len() < count as usize {
                // Released ones count as made: the reserve was answered.
                return Ok(made);
            }
        }
        // (Two tries at once racing for one index: the loser's transaction
        // fails as a lost race, and a later retry finds the winner's.)
        let mut lost = 0;
        while (made.len() as u32) < count {
            let Some(provisioner) = self.provisioner(provisioner_id).await? else { break };
            if provisioner.removed_at.is_some() {
                break;
            }
            let slots = (i64::from(provisioner.settings.max_instances) - provisioner.reserved_instances).max(0) as u32;
            let want = (count - made.len() as u32).min(slots).min(RESERVATIONS_PER_TRANSACTION);
            if want == 0 {
                break;
            }
            let sets: Vec<SetCounts> =
                self.label_sets(&provisioner.workspace_id).await?.iter().map(LabelSet::counts).collect();
            let plan = spread_reservations(labels, &sets, want);
            if plan.is_empty() {
                break;
            }
            let total: u32 = plan.iter().map(|(_, k)| k).sum();
            let identities: Vec<(Uuid, Uuid, String)> = (0..total as usize)
                .map(|n| match (&key, free_indices.get(n)) {
                    (Some(key), Some(index)) => {
                        let (token_id, token) = key.registration_token(*index);
                        (key.reservation_id(*index), token_id, token)
                    }
                    _ => {
                        let token_id = baton_domain::ids::new_id();
                        (baton_domain::ids::new_id(), token_id, tokens::new_registration_token(token_id))
                    }
                })
                .collect();
            let (items, reserved) =
                self.reservation_writes(&provisioner, labels, &plan, identities, expires_in_s, outbox_ttl_days, now)?;
            if contention::lost_race(self.transact(items).await)? {
                lost += 1;
                if lost == contention::MAX_LOST_RACES {
                    return Err(contention::too_contended("a reserve"));
                }
                contention::pause_after_lost_race().await;
                continue;
            }
            for r in &reserved {
                tracing::info!(provisioner_id = %provisioner.id, reservation_id = %r.reservation.id, labelset = %r.reservation.labelset, "reservation created");
            }
            let used = reserved.len();
            made.extend(reserved);
            free_indices.drain(..used.min(free_indices.len()));
        }
        Ok(made)
    }

    #[allow(clippy::too_many_arguments)]
    fn reservation_writes(
        &self,
        provisioner: &Provisioner,
        labels: &[String],
        plan: &[(SetCounts, u32)],
        identities: Vec<(Uuid, Uuid, String)>,
        expires_in_s: u32,
        outbox_ttl_days: u32,
        now: DateTime<Utc>,
    ) -> Result<(Vec<TransactWriteItem>, Vec<Reserved>), StoreError> {
        let total: u32 = plan.iter().map(|(_, k)| k).sum();
        let expires_at = now + Duration::seconds(i64::from(expires_in_s));
        let mut items = Vec::new();
        // The cap: within `max_instances` after this write, whatever other
        // reserves committed since the read.
        items.push(
            TransactWriteItem::builder()
                .update(build(
                    Update::builder()
                        .table_name(&self.table)
                        .key("pk", s(keys::provisioner_pk(provisioner.id)))
                        .key("sk", s(keys::PROVISIONER_SK))
                        .update_expression("ADD reserved_instances :k")
                        .condition_expression("attribute_not_exists(removed_at) AND reserved_instances <= :cap")
                        .expression_attribute_values(":k", n(total))
                        .expression_attribute_values(
                            ":cap",
                            n(i64::from(provisioner.settings.max_instances) - i64::from(total)),
                        )
                        .build(),
                )?)
                .build(),
        );
        // The demand: each set's `reserved` as read (no reserve in between)
        // and its `queued` covering the new total.
        for (set, k) in plan {
            let reserved_now =
                if set.reserved == 0 { "(attribute_not_exists(reserved) OR reserved = :r)" } else { "reserved = :r" };
            items.push(
                TransactWriteItem::builder()
                    .update(build(
                        Update::builder()
                            .table_name(&self.table)
                            .key("pk", s(keys::labelset_registry_pk(&provisioner.workspace_id)))
                            .key("sk", s(&set.labelset))
                            .update_expression("ADD reserved :k")
                            .condition_expression(format!("{reserved_now} AND queued >= :need"))
                            .expression_attribute_values(":k", n(*k))
                            .expression_attribute_values(":r", n(set.reserved))
                            .expression_attribute_values(":need", n(set.reserved.max(0) + i64::from(*k)))
                            .build(),
                    )?)
                    .build(),
            );
        }
        let mut reserved = Vec::new();
        let mut facts = Vec::new();
        // Each reservation's id and token (derived for a named reserve).
        let mut identities = identities.into_iter();
        for (set, k) in plan {
            for _ in 0..*k {
                let Some((id, token_id, token)) = identities.next() else {
                    return Err(StoreError::Other("fewer reservation ids than the plan".into()));
                };
                let reservation = ReservationItem {
                    pk: keys::provisioner_pk(provisioner.id),
                    sk: keys::reservation_sk(id),
                    kind: "reservation".into(),
                    id,
                    provisioner_id: provisioner.id,
                    workspace_id: provisioner.workspace_id.clone(),
                    labels: labels.to_vec(),
                    labelset: set.labelset.clone(),
                    expires_at,
                    created_at: now,
                    holds_demand: Some(true),
                    session_id: None,
                    provider_runner_id: None,
                    released_at: None,
                    release_reason: None,
                };
                // The ephemeral token: single use, bound to the labels and
                // the reservation, its session capped at `jobs_per_instance`
                // claims, expiring with the reservation. Listed under the
                // provisioner, not among the operator's tokens.
                let registration = RegistrationToken {
                    pk: keys::registration_token_pk(token_id),
                    sk: keys::REGISTRATION_TOKEN_SK.into(),
                    kind: "registration_token".into(),
                    id: token_id,
                    workspace_id: provisioner.workspace_id.clone(),
                    name: Some(format!("reservation {id}")),
                    secret_hash: hash_token(&token),
                    expires_at: Some(expires_at),
                    single_use: true,
                    max_claims: Some(u64::from(provisioner.settings.jobs_per_instance)),
                    consumed_at: None,
                    revoked_at: None,
                    created_at: now,
                    rw_pk: format!("PROVTOKENS#{}", provisioner.id),
                    rw_sk: keys::registration_token_listing_sk(now, token_id),
                    labels: Some(labels.to_vec()),
                    reservation: Some(reservation.link()),
                };
                for item in [to_item(&reservation)?, to_item(&registration)?] {
                    items.push(
                        TransactWriteItem::builder()
                            .put(build(
                                Put::builder()
                                    .table_name(&self.table)
                                    .set_item(Some(item))
                                    .condition_expression("attribute_not_exists(pk)")
                                    .build(),
                            )?)
                            .build(),
                    );
                }
                facts.push(OutboxItem::for_fact(
                    &Fact::new(
                        provisioner.workspace_id.clone(),
                        now,
                        ReservationCreated {
                            provisioner_id: provisioner.id,
                            reservation_id: id,
                            labels: labels.to_vec(),
                            expires_at,
                        },
                    ),
                    outbox_ttl_days,
                )?);
                reserved.push(Reserved { reservation, token });
            }
        }
        items.extend(self.outbox_puts(facts)?);
        Ok((items, reserved))
    }

    /// The registration's write on its reservation: which session the
    /// token made; refused once the reservation was released.
    pub(super) fn reservation_registration(
        &self,
        link: &ReservationLink,
        session_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<TransactWriteItem, StoreError> {
        Ok(TransactWriteItem::builder()
            .update(build(
                Update::builder()
                    .table_name(&self.table)
                    .key("pk", s(keys::provisioner_pk(link.provisioner_id)))
                    .key("sk", s(keys::reservation_sk(link.reservation_id)))
                    .update_expression("SET session_id = :session, registered_at = :now")
                    .condition_expression(
                        "attribute_exists(pk) AND attribute_not_exists(released_at) AND attribute_not_exists(session_id)",
                    )
                    .expression_attribute_values(":session", s(session_id.to_string()))
                    .expression_attribute_values(":now", s(timestamp(now)))
                    .build(),
            )?)
            .build())
    }

    /// The reservations of `provisioner_id` among `ids` (others' and unknown
    /// ones are simply absent).
    pub async fn reservations_of(
        &self,
        provisioner_id: Uuid,
        ids: &[Uuid],
    ) -> Result<BTreeMap<Uuid, ReservationItem>, StoreError> {
        let found: Vec<ReservationItem> = self
            .batch_get(ids.iter().map(|id| (keys::provisioner_pk(provisioner_id), keys::reservation_sk(*id))))
            .await?;
        Ok(found.into_iter().map(|r| (r.id, r)).collect())
    }

    /// Applies a provisioner's instance report (events already validated),
    /// in order: a state moves only forward; an instance that stops while
    /// Baton asked it to go honours that intent; one that ended lets its
    /// reservation go if no uncancelled lease remains (the fleet pass).
    pub async fn report_instances(
        &self,
        provisioner: &Provisioner,
        events: &[InstanceEvent],
        now: DateTime<Utc>,
    ) -> Result<ReportOutcome, StoreError> {
        let mut outcome = ReportOutcome::default();
        let mut any_stopped = false;
        for event in events {
            let at = event.at.unwrap_or(now);
            let mut set = vec![
                "#type = :type",
                "provider_runner_id = :prid",
                "provisioner_id = :prov",
                "#state = :state",
                "#rank = :rank",
                "state_at = :at",
                "first_seen_at = if_not_exists(first_seen_at, :now)",
            ];
            // The condition is `instances::moves_forward` as DynamoDB can
            // check it: only a higher rank than the one stored is a move.
            let mut update = self
                .client
                .update_item()
                .table_name(&self.table)
                .key("pk", s(keys::provisioner_pk(provisioner.id)))
                .key("sk", s(keys::instance_sk(&event.provider_runner_id)))
                .condition_expression("attribute_not_exists(#rank) OR #rank < :rank")
                .expression_attribute_names("#type", "type")
                .expression_attribute_names("#state", "state")
                .expression_attribute_names("#rank", "rank")
                .expression_attribute_values(":type", s("instance"))
                .expression_attribute_values(":prid", s(&event.provider_runner_id))
                .expression_attribute_values(":prov", s(provisioner.id.to_string()))
                .expression_attribute_values(":state", serde_dynamo::to_attribute_value(event.state)?)
                .expression_attribute_values(":rank", n(event.state.rank()))
                .expression_attribute_values(":at", s(timestamp(at)))
                .expression_attribute_values(":now", s(timestamp(now)));
            if let Some(id) = event.reservation_id {
                set.push("reservation_id = if_not_exists(reservation_id, :res)");
                update = update.expression_attribute_values(":res", s(id.to_string()));
            }
            if let Some(id) = event.runner_session_id {
                set.push("session_id = if_not_exists(session_id, :session)");
                update = update.expression_attribute_values(":session", s(id.to_string()));
            }
            let update = update.update_expression(format!("SET {}", set.join(", "))).return_values(ReturnValue::AllNew);
            let written = contention::retry_conflicts(|| async {
                match update.clone().send().await {
                    Ok(out) => Ok(out.attributes),
                    Err(err) if matches!(err.as_service_error(), Some(e) if e.is_conditional_check_failed_exception()) => Ok(None),
                    Err(err) => Err(err.into()),
                }
            })
            .await?;
            let instance: InstanceItem = match written {
                Some(attributes) => {
                    outcome.accepted += 1;
                    from_item(attributes)?
                }
                // No move: this state (or a later one) is stored already.
                // Perhaps by this very report's earlier try, whose answer
                // was lost after the update but before the link, the honour
                // or the release it leads to; they are each idempotent, so
                // they are done again from what is stored (skipping them
                // left a reservation unlinked, never released: the 30 %
                // soak's leak).
                None => {
                    let key = (keys::provisioner_pk(provisioner.id), keys::instance_sk(&event.provider_runner_id));
                    match self.get(&key.0, &key.1).await? {
                        Some(stored) => from_item(stored)?,
                        None => continue,
                    }
                }
            };
            if instance.state.rank() < event.state.rank() {
                continue;
            }
            if let Some(reservation_id) = instance.reservation_id {
                self.link_instance(provisioner.id, reservation_id, &instance.provider_runner_id).await?;
            }
            if stops(event.state) {
                any_stopped = true;
                if let Some(reason) = instance.terminate_reason {
                    if self.honor(&instance, now).await? {
                        outcome.honored.push((instance.provider_runner_id.clone(), reason));
                    }
                }
            }
        }
        if any_stopped {
            if let Some((_, released)) = self.fleet_pass(provisioner.id, now).await? {
                outcome.reservations_released = released;
            }
        }
        Ok(outcome)
    }

    /// Ties a reservation to the instance first reported for it.
    async fn link_instance(
        &self,
        provisioner_id: Uuid,
        reservation_id: Uuid,
        provider_runner_id: &str,
    ) -> Result<(), StoreError> {
        let link = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(keys::provisioner_pk(provisioner_id)))
            .key("sk", s(keys::reservation_sk(reservation_id)))
            .update_expression("SET provider_runner_id = :prid")
            .condition_expression("attribute_exists(pk) AND attribute_not_exists(provider_runner_id)")
            .expression_attribute_values(":prid", s(provider_runner_id));
        super::condition_may_fail(|| link.clone().send()).await.map(|_| ())
    }

    async fn honor(&self, instance: &InstanceItem, now: DateTime<Utc>) -> Result<bool, StoreError> {
        let honor = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(&instance.pk))
            .key("sk", s(&instance.sk))
            .update_expression("SET honored_at = :now")
            .condition_expression("attribute_exists(terminate_reason) AND attribute_not_exists(honored_at)")
            .expression_attribute_values(":now", s(timestamp(now)));
        super::condition_may_fail(|| honor.clone().send()).await
    }

    /// A lease path's share of the convergence: when a lease of a reserved
    /// session ends or is cancelled, its fleet is decided again (an
    /// `exhausted` or `job-cancelled` intent, a release whose last blocking
    /// lease just ended). Failures are the caller's to log: the next pass
    /// (a report, a read) converges all the same.
    pub async fn converge_reservation(&self, link: &ReservationLink, now: DateTime<Utc>) -> Result<(), StoreError> {
        self.fleet_pass(link.provisioner_id, now).await.map(|_| ())
    }
}

/// Demand per served set, as the demand route answers it.
pub fn demand_of(fleet: &Fleet) -> Vec<(Vec<String>, baton_domain::runners::provisioners::demand::ServedDemand, u64)> {
    let sets: Vec<SetCounts> = fleet.sets.iter().map(LabelSet::counts).collect();
    fleet
        .provisioner
        .settings
        .label_sets
        .iter()
        .map(|served| (served.clone(), served_demand(served, &sets), fleet.idle_sessions(served)))
        .collect()
}

#[cfg(test)]
mod tests {
    use baton_api::provisioners::CreateProvisioner;

    use super::*;
    use baton_domain::runners::provisioners::settings::validate;

    /// An ephemeral machine (one job) whose runner claimed `execution`, as
    /// a fleet pass reads it, the runners' record of that execution being
    /// `record` (absent: not readable yet).
    fn fleet(record: Option<RunnerRecord>, execution: Uuid, now: DateTime<Utc>) -> Fleet {
        let request = CreateProvisioner {
            name: "f".into(),
            label_sets: vec![vec!["linux".into()]],
            max_instances: 3,
            jobs_per_instance: Some(1),
            idle_timeout_s: None,
            boot_timeout_s: None,
            warm: None,
        };
        let provisioner_id = Uuid::now_v7();
        let session_id = Uuid::now_v7();
        let provisioner = Provisioner {
            pk: keys::provisioner_pk(provisioner_id),
            sk: keys::PROVISIONER_SK.into(),
            kind: "provisioner".into(),
            id: provisioner_id,
            workspace_id: "ws1".into(),
            settings: validate(&request).unwrap(),
            secret_hash: String::new(),
            reserved_instances: 1,
            removed_at: None,
            created_at: now,
            rw_pk: String::new(),
            rw_sk: String::new(),
        };
        let instance = InstanceItem {
            pk: keys::provisioner_pk(provisioner_id),
            sk: "INSTANCE#i-1".into(),
            kind: "instance".into(),
            provider_runner_id: "i-1".into(),
            provisioner_id,
            state: InstanceState::Running,
            rank: 0,
            reservation_id: None,
            session_id: Some(session_id),
            first_seen_at: now,
            state_at: now,
            terminate_reason: None,
            terminate_at: None,
            honored_at: None,
        };
        let session = Session {
            pk: keys::session_pk(session_id),
            sk: keys::SESSION_SK.into(),
            kind: "session".into(),
            id: session_id,
            workspace_id: "ws1".into(),
            name: None,
            labels: vec!["linux".into()],
            max_claims: Some(1),
            claims: 1,
            token_hash: String::new(),
            expires_at: now + Duration::hours(1),
            last_seen_at: now,
            created_at: now,
            reservation: None,
            executions: vec![execution],
            last_claim_at: Some(now),
        };
        Fleet {
            provisioner,
            reservations: Vec::new(),
            instances: vec![instance],
            sessions: HashMap::from([(session_id, session)]),
            records: record.map(|r| HashMap::from([(execution, r)])).unwrap_or_default(),
            sets: Vec::new(),
        }
    }

    #[test]
    fn a_claimed_execution_whose_record_still_reads_pending_holds_its_machine() {
        let now = Utc::now();
        let execution = Uuid::now_v7();
        let record = |status| RunnerRecord::unclaimed(execution, "ws1", (Uuid::now_v7(), 1, Uuid::now_v7()), status);
        // The record read eventually consistently a moment after the claim
        // that listed the execution in the session: still `pending`. The
        // machine is busy, not exhausted.
        assert_eq!(fleet(Some(record(RunnerStatus::Pending)), execution, now).decide_intents(now), vec![]);
        assert_eq!(fleet(None, execution, now).decide_intents(now), vec![], "a record not readable yet holds it too");
        // Its job ended: the one-job machine is exhausted.
        let ended = fleet(Some(record(RunnerStatus::Completed)), execution, now);
        assert_eq!(ended.decide_intents(now), vec![(0, TerminateReason::Exhausted)]);
    }
}
