//! Cache entries (behaviour.md §17): `CACHE#<ws>` / `<scope>,<key>`, one
//! partition a workspace, so a restore prefix is one `Query` with
//! `begins_with`. An entry is immutable once stored (a later save of its
//! key is skipped, as GitHub's caches are), evicted by age (`expires_at`,
//! which reads honour before DynamoDB's TTL deletes the item), and stored
//! only while the lease that uploaded it is held, as an artifact is.

use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::artifacts::{status, Upload, UploadItem};
use super::keys::{cache_pk, cache_sk, timestamp};
use super::runner_items::LeaseItem;
use super::{build, from_item, query_all, s, to_item, Store, TxOutcome};
use crate::error::StoreError;
use crate::ItemHead;
use baton_api::artifacts::ArtifactStatus;
use baton_api::caches::CacheEntry;

/// An upload nobody completed within this long no longer holds its key.
pub const STALE_UPLOAD: chrono::Duration = chrono::Duration::hours(1);

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CacheItem {
    #[serde(flatten)]
    pub head: ItemHead,
    pub workspace_id: String,
    pub scope: String,
    pub key: String,
    pub execution_id: Uuid,
    #[serde(flatten)]
    pub upload: Upload,
}

impl UploadItem for CacheItem {
    fn execution_id(&self) -> Uuid {
        self.execution_id
    }
    fn upload(&self) -> &Upload {
        &self.upload
    }
}

impl CacheItem {
    pub fn entry(&self) -> CacheEntry {
        CacheEntry {
            key: self.key.clone(),
            scope: self.scope.clone(),
            bytes: self.upload.bytes,
            sha256: self.upload.sha256.clone(),
            stored_at: self.upload.stored_at.unwrap_or(self.upload.created_at),
            expires_at: self.upload.expires_at,
        }
    }

    /// Stored, and not evicted yet at `now`.
    pub fn restorable(&self, now: DateTime<Utc>) -> bool {
        self.upload.status == ArtifactStatus::Stored && self.upload.expires_at > now
    }
}

impl Store {
    pub async fn cache_entry(
        &self,
        workspace_id: &str,
        scope: &str,
        key: &str,
    ) -> Result<Option<CacheItem>, StoreError> {
        self.get(&cache_pk(workspace_id), &cache_sk(scope, key)).await?.map(from_item).transpose()
    }

    /// The newest restorable entry of `scope` whose key starts with `prefix`.
    /// Every page under the prefix is read: keys sort by name, not age, so
    /// the newest can be on any page, and one page (1 MB at most) would
    /// restore whichever old entry sorts first. Entries leave by age
    /// (`expires_at`, then the TTL), so the pages are those of the live
    /// entries under the prefix (and the TTL's lag), not of all history.
    pub async fn newest_cache_under(
        &self,
        workspace_id: &str,
        scope: &str,
        prefix: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<CacheItem>, StoreError> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
            .expression_attribute_values(":pk", s(cache_pk(workspace_id)))
            .expression_attribute_values(":prefix", s(cache_sk(scope, prefix)));
        let entries: Vec<CacheItem> = query_all(query).await?;
        Ok(entries.into_iter().filter(|entry| entry.restorable(now)).max_by_key(|entry| entry.upload.stored_at))
    }

    /// Writes `item` (`uploading`) if its key is free: never saved, evicted,
    /// or held by an upload gone stale. `false` when it is not.
    pub async fn begin_cache_save(&self, item: &CacheItem, now: DateTime<Utc>) -> Result<bool, StoreError> {
        let put = build(
            Put::builder()
                .table_name(&self.table)
                .set_item(Some(to_item(item)?))
                .condition_expression(
                    "attribute_not_exists(pk) OR expires_at < :now \
                     OR (#status = :uploading AND created_at < :stale)",
                )
                .expression_attribute_names("#status", "status")
                .expression_attribute_values(":now", s(timestamp(now)))
                .expression_attribute_values(":stale", s(timestamp(now - STALE_UPLOAD)))
                .expression_attribute_values(":uploading", status(ArtifactStatus::Uploading)?)
                .build(),
        )?;
        Ok(matches!(self.transact(vec![TransactWriteItem::builder().put(put).build()]).await?, TxOutcome::Committed))
    }

    /// Marks the entry stored if `lease` still holds: as
    /// `Store::artifact_stored` does for an artifact.
    pub async fn cache_stored(
        &self,
        lease: &LeaseItem,
        scope: &str,
        key: &str,
        at: DateTime<Utc>,
    ) -> Result<Option<CacheItem>, StoreError> {
        self.stored_under_lease(lease, &cache_pk(&lease.execution.workspace_id), &cache_sk(scope, key), at).await
    }
}
