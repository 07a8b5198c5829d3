//! The items of the runners' side that more than one of its families reads
//! or writes: a registration token and the session it makes, the link to a
//! reservation they carry, a pending item and the claim's answer that keeps
//! it, a label set of the queue's registry, a lease, and the reference to
//! an execution that the record, pending item and lease (and an artifact)
//! carry. Each is written by one family's operations and used by others'
//! (a claim writes a lease, puts a claim's answer, takes a reservation's
//! demand), so they live apart from all of them: `sessions`, `queue`,
//! `claims`, `leases` and `provisioners` import them from here, never from
//! one another. Their keys are in `store::keys`.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::builders::UpdateBuilder;
use aws_sdk_dynamodb::types::{TransactWriteItem, Update};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::keys::{execution_pk, labelset_registry_pk};
use super::{build, n, s};
use crate::error::StoreError;
use crate::ItemHead;
use baton_api::facts::{dispatch_at, QueuedJob, StepResult};

/// The execution an item is of, and its place: its workspace, run, attempt
/// and job. The runners' record, a pending item, a lease and an artifact
/// each flatten it (`#[serde(flatten)] execution: ExecutionRef`), so these
/// are their own top-level attributes, named as the conditions on them
/// name them (`execution_id = :x`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExecutionRef {
    #[serde(rename = "execution_id")]
    pub id: Uuid,
    pub workspace_id: String,
    pub run_id: Uuid,
    pub job_id: Uuid,
    pub attempt: u32,
}

/// What a session (and the leases it takes) knows of its reservation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReservationLink {
    pub provisioner_id: Uuid,
    pub reservation_id: Uuid,
    /// The job label set whose demand the reservation holds.
    pub labelset: String,
}

/// A registration token, `REGTOKEN#<id>` / `REGTOKEN`: the secret's hash
/// and what the sessions it makes may do (`sessions`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RegistrationToken {
    #[serde(flatten)]
    pub head: ItemHead,
    pub id: Uuid,
    pub workspace_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub secret_hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "baton_domain::time::stored_option")]
    pub expires_at: Option<DateTime<Utc>>,
    pub single_use: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_claims: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "baton_domain::time::stored_option")]
    pub consumed_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "baton_domain::time::stored_option")]
    pub revoked_at: Option<DateTime<Utc>>,
    #[serde(with = "baton_domain::time::stored")]
    pub created_at: DateTime<Utc>,
    /// Listing index (`runs-by-workspace` GSI, shared by workspace listings).
    pub rw_pk: String,
    pub rw_sk: String,
    /// A reservation's ephemeral token binds its session's labels to the
    /// reserved label set, whatever the runner asks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Vec<String>>,
    /// The reservation this token was made for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<ReservationLink>,
}

/// A runner session, `SESSION#<id>` / `SESSION` (`sessions`); a claim
/// counts its claims on it (`queue::try_claim`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Session {
    #[serde(flatten)]
    pub head: ItemHead,
    pub id: Uuid,
    pub workspace_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub labels: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_claims: Option<u64>,
    pub claims: u64,
    pub token_hash: String,
    #[serde(with = "baton_domain::time::stored")]
    pub expires_at: DateTime<Utc>,
    #[serde(with = "baton_domain::time::stored")]
    pub last_seen_at: DateTime<Utc>,
    #[serde(with = "baton_domain::time::stored")]
    pub created_at: DateTime<Utc>,
    /// The reservation whose token made this session (a provisioned instance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<ReservationLink>,
    /// A reserved session's executions, in claim order, and its last claim:
    /// what its instance's terminate intents and release are decided on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub executions: Vec<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "baton_domain::time::stored_option")]
    pub last_claim_at: Option<DateTime<Utc>>,
}

impl Session {
    pub fn is_capped_out(&self) -> bool {
        self.max_claims.is_some_and(|max| self.claims >= max)
    }
}

/// A pending item, `Q#<workspace>#<labelset>` / `<dispatch at>#<execution>`:
/// a claimable execution in the partition of its label set (`queue`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PendingItem {
    #[serde(flatten)]
    pub head: ItemHead,
    #[serde(flatten)]
    pub execution: ExecutionRef,
    #[serde(with = "baton_domain::time::stored")]
    pub queued_at: DateTime<Utc>,
    /// The epoch of the record when it was queued; the claim's compare-and-set.
    pub epoch: u64,
    /// Key, labels and timeout: what the queue and the claim's ordering
    /// need. The steps and env are in the job's spec item, read only by the
    /// claim that wins the job, so a claim window reads small items.
    pub job: QueuedJob,
    /// Its complete adopts the outcome itself (`workflows::execution::DIRECT_ADOPTION_MAX_JOBS`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub direct_adoption: bool,
}

impl baton_domain::runners::claim::Candidate for PendingItem {
    fn dispatch_at(&self) -> DateTime<Utc> {
        dispatch_at(self.queued_at, self.job.priority)
    }
    fn execution_id(&self) -> Uuid {
        self.execution.id
    }
}

/// What a claim with a `request_id` took (`SESSION#<session>` /
/// `CLAIM#<request id>`), written in the claim's transaction: a retry of
/// that claim after its answer was lost finds it and is answered with the
/// same job under the same token (`tokens::ClaimKey`).
/// Kept a day (TTL); a retry comes within seconds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClaimAnswer {
    #[serde(flatten)]
    pub head: ItemHead,
    pub execution_id: Uuid,
    pub epoch: u64,
    /// The pending item the claim took: the answer is built from it.
    pub pending: PendingItem,
    pub ttl: i64,
}

/// An entry of a workspace's label-set registry, `QREG#<workspace>` /
/// `<labelset>`, with its counts (`queue`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LabelSet {
    pub pk: String,
    /// The label set id.
    pub sk: String,
    pub labels: Vec<String>,
    /// A fresh id written by every enqueue into the set (never a counter: a
    /// set pruned and registered again must not match an old read): a prune
    /// conditioned on the one it read cannot remove a set that gained work
    /// since.
    #[serde(default)]
    pub v: String,
    /// Claimable executions (`queued`), leased ones (`running`), and
    /// reservations holding demand here (`reserved`). Below zero only for
    /// work queued before the counts existed.
    #[serde(default)]
    pub queued: i64,
    #[serde(default)]
    pub running: i64,
    #[serde(default)]
    pub reserved: i64,
}

impl LabelSet {
    /// An update of the entry `labelset` of `workspace_id`'s registry.
    pub(crate) fn update(table: &str, workspace_id: &str, labelset: &str) -> UpdateBuilder {
        Update::builder().table_name(table).key("pk", s(labelset_registry_pk(workspace_id))).key("sk", s(labelset))
    }

    /// The write that takes one out of the entry's `count` (`queued`,
    /// `running` or `reserved`), in the transaction of the change it counts.
    pub(crate) fn count_down(
        table: &str,
        workspace_id: &str,
        labelset: &str,
        count: &str,
    ) -> Result<TransactWriteItem, StoreError> {
        let update = build(
            Self::update(table, workspace_id, labelset)
                .update_expression(format!("ADD {count} :minus"))
                .expression_attribute_values(":minus", n(-1))
                .build(),
        )?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    pub fn counts(&self) -> baton_domain::runners::provisioners::demand::SetCounts {
        baton_domain::runners::provisioners::demand::SetCounts {
            labelset: self.sk.clone(),
            labels: self.labels.clone(),
            queued: self.queued,
            reserved: self.reserved,
            running: self.running,
        }
    }
}

/// A live lease, `EXEC#<execution>` / `LEASE` (`leases`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LeaseItem {
    #[serde(flatten)]
    pub head: ItemHead,
    #[serde(flatten)]
    pub execution: ExecutionRef,
    pub session_id: Uuid,
    pub epoch: u64,
    pub token_hash: String,
    #[serde(with = "baton_domain::time::stored")]
    pub claimed_at: DateTime<Utc>,
    #[serde(with = "baton_domain::time::stored")]
    pub expires_at: DateTime<Utc>,
    pub heartbeated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "baton_domain::time::stored_option")]
    pub cancel_requested_at: Option<DateTime<Utc>>,
    /// Step reports of a lease claimed before they moved to the runner
    /// record (`RunnerRecord::token_hash`); empty, and not stored, on any
    /// lease claimed since.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub steps: BTreeMap<String, StepResult>,
    pub lx_shard: String,
    /// A lower bound of `expires_at` in epoch milliseconds, the index's sort
    /// key (the reaper moves it up; heartbeats leave it).
    pub lx_expires_at: i64,
    /// Its complete adopts the outcome itself (`workflows::execution::DIRECT_ADOPTION_MAX_JOBS`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub direct_adoption: bool,
    /// The label set whose `running` count this lease is in (its end takes
    /// it out). Absent on leases claimed before the counts existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labelset: Option<String>,
    /// The reservation of the session that holds it: its end may release
    /// the reservation (`Store::converge_reservation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<ReservationLink>,
    /// The job's number of steps: its last step's terminal report settles
    /// it (`runners::settle`). Absent on leases of jobs queued before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_count: Option<u32>,
}

impl LeaseItem {
    /// The write that takes this lease out of its label set's `running`
    /// count, in the transaction that ends it.
    pub fn running_count_end(&self, table: &str) -> Result<Option<TransactWriteItem>, StoreError> {
        let Some(labelset) = &self.labelset else { return Ok(None) };
        LabelSet::count_down(table, &self.execution.workspace_id, labelset, "running").map(Some)
    }

    pub fn key(execution_id: Uuid) -> String {
        execution_pk(execution_id)
    }

    pub fn lease_ref(&self) -> baton_api::facts::LeaseRef {
        baton_api::facts::LeaseRef {
            run_id: self.execution.run_id,
            attempt: self.execution.attempt,
            job_id: self.execution.job_id,
            job_execution_id: self.execution.id,
            session_id: self.session_id,
            epoch: self.epoch,
        }
    }
}
