//! Artifacts (behaviour.md §17): `RUN#<run>` / `ARTIFACT#<name>`, in the
//! run's partition so the run view's one `Query` lists them, and the run's
//! byte count `RUN#<run>` / `ARTIFACTS` that holds its cap.
//!
//! An upload begins with one transaction: the job's lease, still held (its
//! epoch and token), is charged the bytes under the job's cap; the run's
//! count is charged under the run's cap; the item is written `uploading`.
//! Either every charge is made with the item or none is, so two uploads
//! racing for the last of a cap cannot both pass it. The archive is stored
//! (`stored`) only by a second write that checks the lease again: a runner
//! that lost its lease can send parts, but never makes them an artifact.

use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Put, TransactWriteItem, Update};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::keys::{artifact_sk, execution_pk, run_pk, timestamp, ARTIFACT_USAGE_SK, LEASE_SK, RUN_SK};
use super::runner_items::{ExecutionRef, LeaseItem};
use super::{build, from_item, n, query_all, s, to_item, Store, TxOutcome};
use crate::error::StoreError;
use crate::ItemHead;
use baton_api::artifacts::{Artifact, ArtifactStatus, MAX_ARTIFACTS_PER_JOB};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ArtifactItem {
    #[serde(flatten)]
    pub head: ItemHead,
    /// The execution that uploads it.
    #[serde(flatten)]
    pub execution: ExecutionRef,
    pub name: String,
    pub job_key: String,
    #[serde(flatten)]
    pub upload: Upload,
}

/// What an uploaded archive's item (an artifact, a cache entry) holds of
/// the upload: the archive, S3's multipart upload its parts go to, and how
/// far it got. Each item flattens it (`#[serde(flatten)] upload: Upload`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Upload {
    pub bytes: u64,
    pub sha256: String,
    /// The archive's object key in its bucket.
    pub object_key: String,
    pub upload_id: String,
    pub status: ArtifactStatus,
    #[serde(with = "baton_domain::time::stored")]
    pub created_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "baton_domain::time::stored_option")]
    pub stored_at: Option<DateTime<Utc>>,
    /// When the bucket's lifecycle rule deletes the archive.
    #[serde(with = "baton_domain::time::stored")]
    pub expires_at: DateTime<Utc>,
    /// DynamoDB's TTL: the item goes with its archive (in epoch seconds).
    pub ttl: i64,
}

impl Upload {
    /// An upload that begins at `now` (`uploading`), its archive kept
    /// until `expires_at`.
    pub fn begun(
        bytes: u64,
        sha256: String,
        object_key: String,
        upload_id: String,
        now: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> Self {
        Self {
            bytes,
            sha256,
            object_key,
            upload_id,
            status: ArtifactStatus::Uploading,
            created_at: now,
            stored_at: None,
            expires_at,
            ttl: expires_at.timestamp(),
        }
    }
}

impl ArtifactItem {
    pub fn view(&self) -> Artifact {
        Artifact {
            name: self.name.clone(),
            bytes: self.upload.bytes,
            sha256: self.upload.sha256.clone(),
            job_key: self.job_key.clone(),
            job_id: self.execution.job_id,
            job_execution_id: self.execution.id,
            attempt: self.execution.attempt,
            status: self.upload.status,
            created_at: self.upload.created_at,
            stored_at: self.upload.stored_at,
            expires_at: self.upload.expires_at,
        }
    }
}

/// The caps an upload is charged against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArtifactCaps {
    pub job_bytes: u64,
    pub run_bytes: u64,
}

/// Why an upload could not begin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UploadRefused {
    /// The lease ended, or moved on to another epoch.
    LeaseLost,
    /// The token is not this lease's.
    NotFound,
    /// The job's bytes or number of artifacts would pass its cap.
    JobCap(String),
    /// The run's bytes would pass its cap.
    RunCap(String),
    /// Another job (or this one, uploading now) holds the name.
    Exists(String),
}

impl Store {
    /// The artifact `name` of a run, read consistently.
    pub async fn artifact(&self, run_id: Uuid, name: &str) -> Result<Option<ArtifactItem>, StoreError> {
        self.get(&run_pk(run_id), &artifact_sk(name)).await?.map(from_item).transpose()
    }

    /// Begins the upload of `item` under `lease` (see the module's doc).
    /// An artifact of the same name that an earlier execution of the same
    /// job (by key: a retry, a rerun's attempt) uploaded is replaced;
    /// another job's is not.
    pub async fn begin_artifact(
        &self,
        lease: &LeaseItem,
        item: &ArtifactItem,
        caps: ArtifactCaps,
    ) -> Result<Result<(), UploadRefused>, StoreError> {
        let bytes = item.upload.bytes;
        let charge_lease = build(
            Update::builder()
                .table_name(&self.table)
                .key("pk", s(LeaseItem::key(lease.execution.id)))
                .key("sk", s(LEASE_SK))
                .update_expression("ADD artifact_bytes :b, artifact_count :one")
                .condition_expression(
                    "epoch = :e AND token_hash = :h \
                     AND (attribute_not_exists(artifact_bytes) OR artifact_bytes <= :room) \
                     AND (attribute_not_exists(artifact_count) OR artifact_count < :most)",
                )
                .expression_attribute_values(":b", n(bytes))
                .expression_attribute_values(":one", n(1))
                .expression_attribute_values(":e", n(lease.epoch))
                .expression_attribute_values(":h", s(&lease.token_hash))
                .expression_attribute_values(":room", n(caps.job_bytes.saturating_sub(bytes)))
                .expression_attribute_values(":most", n(MAX_ARTIFACTS_PER_JOB))
                .build(),
        )?;
        let charge_run = build(
            Update::builder()
                .table_name(&self.table)
                .key("pk", s(run_pk(item.execution.run_id)))
                .key("sk", s(ARTIFACT_USAGE_SK))
                .update_expression("SET #type = :type ADD #bytes :b")
                .condition_expression("attribute_not_exists(#bytes) OR #bytes <= :room")
                .expression_attribute_names("#type", "type")
                .expression_attribute_names("#bytes", "bytes")
                .expression_attribute_values(":type", s("artifact_usage"))
                .expression_attribute_values(":b", n(bytes))
                .expression_attribute_values(":room", n(caps.run_bytes.saturating_sub(bytes)))
                .build(),
        )?;
        let put = build(
            Put::builder()
                .table_name(&self.table)
                .set_item(Some(to_item(item)?))
                // By key: a rerun's job has a new id, and may replace what
                // its earlier attempt uploaded.
                .condition_expression("attribute_not_exists(pk) OR (job_key = :job AND execution_id <> :x)")
                .expression_attribute_values(":job", s(&item.job_key))
                .expression_attribute_values(":x", s(item.execution.id.to_string()))
                .build(),
        )?;
        let items = vec![
            TransactWriteItem::builder().update(charge_lease).build(),
            TransactWriteItem::builder().update(charge_run).build(),
            TransactWriteItem::builder().put(put).build(),
        ];
        let reasons = match self.transact(items).await? {
            TxOutcome::Committed => return Ok(Ok(())),
            TxOutcome::ConditionFailed { reasons } => reasons,
        };
        let failed = |i: usize| reasons.get(i).is_some_and(|r| r.is_some());
        if failed(0) {
            // The fence or the job's cap: the lease as it is now tells which.
            return Ok(Err(match self.lease(lease.execution.id).await? {
                Some(now) if now.epoch == lease.epoch && now.token_hash == lease.token_hash => {
                    UploadRefused::JobCap(format!(
                        "the job's artifacts would pass its cap of {} bytes or {MAX_ARTIFACTS_PER_JOB} artifacts",
                        caps.job_bytes
                    ))
                }
                Some(now) if now.epoch == lease.epoch => UploadRefused::NotFound,
                _ => UploadRefused::LeaseLost,
            }));
        }
        if failed(1) {
            return Ok(Err(UploadRefused::RunCap(format!(
                "the run's artifacts would pass its cap of {} bytes",
                caps.run_bytes
            ))));
        }
        Ok(Err(UploadRefused::Exists(format!("another job of this run stored an artifact named {:?}", item.name))))
    }

    /// Marks the artifact stored, if the lease that uploads it is still
    /// held: `Ok(Some(item))` as stored (also when it was already: a repeat
    /// of the complete), `Ok(None)` when the lease ended first.
    pub async fn artifact_stored(
        &self,
        lease: &LeaseItem,
        name: &str,
        at: DateTime<Utc>,
    ) -> Result<Option<ArtifactItem>, StoreError> {
        self.stored_under_lease(lease, &run_pk(lease.execution.run_id), &artifact_sk(name), at).await
    }

    /// Marks the upload item at (`pk`, `sk`) stored, in one transaction with
    /// a check that `lease`, which uploaded it, is still held (artifacts'
    /// and caches' completes), and reads it again: `Some` as stored (also
    /// when it was already, by this very execution: a repeat of the
    /// complete), `None` when the lease ended first.
    pub(super) async fn stored_under_lease<T: UploadItem>(
        &self,
        lease: &LeaseItem,
        pk: &str,
        sk: &str,
        at: DateTime<Utc>,
    ) -> Result<Option<T>, StoreError> {
        let held = build(
            ConditionCheck::builder()
                .table_name(&self.table)
                .key("pk", s(execution_pk(lease.execution.id)))
                .key("sk", s(LEASE_SK))
                .condition_expression("epoch = :e AND token_hash = :h")
                .expression_attribute_values(":e", n(lease.epoch))
                .expression_attribute_values(":h", s(&lease.token_hash))
                .build(),
        )?;
        let store = build(
            Update::builder()
                .table_name(&self.table)
                .key("pk", s(pk))
                .key("sk", s(sk))
                .update_expression("SET #status = :stored, stored_at = :at")
                .condition_expression("execution_id = :x AND #status = :uploading")
                .expression_attribute_names("#status", "status")
                .expression_attribute_values(":stored", status(ArtifactStatus::Stored)?)
                .expression_attribute_values(":uploading", status(ArtifactStatus::Uploading)?)
                .expression_attribute_values(":x", s(lease.execution.id.to_string()))
                .expression_attribute_values(":at", s(timestamp(at)))
                .build(),
        )?;
        let outcome = self
            .transact(vec![
                TransactWriteItem::builder().condition_check(held).build(),
                TransactWriteItem::builder().update(store).build(),
            ])
            .await?;
        let now: Option<T> = self.get(pk, sk).await?.map(from_item).transpose()?;
        Ok(match outcome {
            TxOutcome::Committed => now,
            // Stored already by this very execution: the write is done.
            TxOutcome::ConditionFailed { .. } => {
                now.filter(|u| u.execution_id() == lease.execution.id && u.upload().status == ArtifactStatus::Stored)
            }
        })
    }

    /// The artifacts of a run of `workspace_id`, by name; `None` when the
    /// run is not one of the workspace's.
    pub async fn run_artifacts(
        &self,
        workspace_id: &str,
        run_id: Uuid,
    ) -> Result<Option<Vec<ArtifactItem>>, StoreError> {
        let Some(run) = self.get_eventually(&run_pk(run_id), RUN_SK).await? else { return Ok(None) };
        // The run's index key names its workspace.
        let owner = super::keys::workspace_runs_pk(workspace_id);
        if run.get("rw_pk").and_then(|w| w.as_s().ok()) != Some(&owner) {
            return Ok(None);
        }
        let artifacts = query_all(
            self.client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                .expression_attribute_values(":pk", s(run_pk(run_id)))
                .expression_attribute_values(":prefix", s(super::keys::ARTIFACT_PREFIX))
                .consistent_read(true),
        )
        .await?;
        Ok(Some(artifacts))
    }
}

/// An uploaded item (an artifact, a cache entry): the execution that
/// uploads it and how far it got.
pub(super) trait UploadItem: serde::de::DeserializeOwned {
    fn execution_id(&self) -> Uuid;
    fn upload(&self) -> &Upload;
}

impl UploadItem for ArtifactItem {
    fn execution_id(&self) -> Uuid {
        self.execution.id
    }
    fn upload(&self) -> &Upload {
        &self.upload
    }
}

/// An upload status as stored (artifacts' and caches').
pub(super) fn status(status: ArtifactStatus) -> Result<AttributeValue, StoreError> {
    Ok(serde_dynamo::to_attribute_value(status)?)
}
