//! The runners' record of an execution, `EXEC#<execution>` / `RUNNER`: its
//! status, the lease epoch, where its pending item is and, once completed,
//! the recorded outcome and who completed it. It is never deleted: it is the
//! durable tombstone that makes a replayed enqueue a no-op (behaviour.md §3),
//! and the queue (enqueue, claim) and the leases (complete, expiry) each
//! move it by a compare-and-set on its status and epoch.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::keys::{execution_pk, RUNNER_SK};
use super::{from_item, Store};
use crate::error::StoreError;
use crate::facts::JobOutcome;

/// Status of the runners' record of an execution: `pending → leased →
/// completed | expired`, or `terminated` (ended by the workflows side before
/// or while it ran). The record is never deleted, whatever its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunnerStatus {
    Pending,
    Leased,
    Completed,
    Expired,
    Terminated,
}

impl RunnerStatus {
    /// The stored spelling, for condition and update expressions.
    pub fn as_str(self) -> &'static str {
        match self {
            RunnerStatus::Pending => "pending",
            RunnerStatus::Leased => "leased",
            RunnerStatus::Completed => "completed",
            RunnerStatus::Expired => "expired",
            RunnerStatus::Terminated => "terminated",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunnerRecord {
    pub pk: String,
    pub sk: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub execution_id: Uuid,
    pub workspace_id: String,
    pub run_id: Uuid,
    pub job_id: Uuid,
    pub attempt: u32,
    pub status: RunnerStatus,
    pub epoch: u64,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "crate::time::stored_option")]
    pub queued_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_pk: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_sk: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<JobOutcome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_epoch: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_token_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "crate::time::stored_option")]
    pub terminated_at: Option<DateTime<Utc>>,
}

impl Store {
    pub async fn runner_record(&self, execution_id: Uuid) -> Result<Option<RunnerRecord>, StoreError> {
        self.get(&execution_pk(execution_id), RUNNER_SK).await?.map(from_item).transpose()
    }
}
