//! Pipelines (behaviour.md §18): `PIPELINES#<ws>` / `<name>`, one partition
//! a workspace, so listing them is one `Query`. An item holds the
//! definition's text and its version (the text's digest); `revision` counts
//! the writes, and every write is a compare-and-set on the revision read,
//! so of two concurrent puts of one name neither is lost unseen: the later
//! reads again and writes on top.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::keys::{pipeline_sk, pipelines_pk};
use aws_sdk_dynamodb::types::{Delete, Put, TransactWriteItem};
use baton_api::facts::{Fact, PipelineChanged};

use super::{build, contention, from_item, n, s, to_item, Store, TxOutcome};
use crate::error::StoreError;
use crate::ItemHead;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PipelineItem {
    #[serde(flatten)]
    pub head: ItemHead,
    pub workspace_id: String,
    pub name: String,
    /// The definition's digest (`pipelines::version_of`).
    pub version: String,
    pub definition: String,
    /// How many times it was written: what a put compares and sets.
    pub revision: u64,
    #[serde(with = "baton_domain::time::stored")]
    pub created_at: DateTime<Utc>,
    #[serde(with = "baton_domain::time::stored")]
    pub updated_at: DateTime<Utc>,
}

/// What putting a pipeline did.
#[derive(Debug, Clone, PartialEq)]
pub enum PipelinePut {
    /// A new name.
    Created(PipelineItem),
    /// A new version of an existing one.
    Changed(PipelineItem),
    /// The text stored already: nothing written.
    Unchanged(PipelineItem),
}

impl Store {
    /// The pipeline `name` of the workspace.
    pub async fn pipeline(&self, workspace_id: &str, name: &str) -> Result<Option<PipelineItem>, StoreError> {
        self.get(&pipelines_pk(workspace_id), &pipeline_sk(name)).await?.map(from_item).transpose()
    }

    /// Every pipeline of the workspace, by name.
    pub async fn pipelines(&self, workspace_id: &str) -> Result<Vec<PipelineItem>, StoreError> {
        self.partition(pipelines_pk(workspace_id)).await
    }

    /// Stores `definition` (already read and checked) as the pipeline
    /// `name`: a new pipeline, a new version, or nothing when the text is
    /// the one stored. A put that lost the revision it read to a concurrent
    /// one reads again and writes on top (the last put wins, as with any
    /// "put" of a named thing, but never over a write it did not see).
    /// With it, in the same transaction, its `pipeline.changed` fact (its
    /// schedules follow it).
    pub async fn put_pipeline(
        &self,
        workspace_id: &str,
        name: &str,
        definition: &str,
        version: &str,
        now: DateTime<Utc>,
        outbox_ttl_days: u32,
    ) -> Result<PipelinePut, StoreError> {
        for _ in 0..=contention::MAX_LOST_RACES {
            let current = self.pipeline(workspace_id, name).await?;
            if let Some(current) = current.as_ref().filter(|c| c.version == version) {
                return Ok(PipelinePut::Unchanged(current.clone()));
            }
            let item = PipelineItem {
                head: ItemHead::new(pipelines_pk(workspace_id), pipeline_sk(name), "pipeline"),
                workspace_id: workspace_id.to_string(),
                name: name.to_string(),
                version: version.to_string(),
                definition: definition.to_string(),
                revision: current.as_ref().map_or(1, |c| c.revision + 1),
                created_at: current.as_ref().map_or(now, |c| c.created_at),
                updated_at: now,
            };
            let put = Put::builder().table_name(&self.table).set_item(Some(to_item(&item)?));
            let put = match &current {
                None => put.condition_expression("attribute_not_exists(pk)"),
                Some(read) => {
                    put.condition_expression("revision = :read").expression_attribute_values(":read", n(read.revision))
                }
            };
            let changed = PipelineChanged { pipeline: name.to_string(), revision: Some(item.revision) };
            let writes = vec![
                TransactWriteItem::builder().put(build(put.build())?).build(),
                self.outbox_put(&Fact::new(workspace_id, now, changed), outbox_ttl_days)?,
            ];
            if matches!(self.transact(writes).await?, TxOutcome::Committed) {
                return Ok(match current {
                    None => PipelinePut::Created(item),
                    Some(_) => PipelinePut::Changed(item),
                });
            }
            contention::pause_after_lost_race().await;
        }
        Err(contention::too_contended(format!("pipeline {workspace_id}/{name}")))
    }

    /// Deletes the pipeline `name`, with its `pipeline.changed` fact;
    /// `false` when there is none. Runs it started keep their own copy of
    /// the definition.
    pub async fn delete_pipeline(
        &self,
        workspace_id: &str,
        name: &str,
        now: DateTime<Utc>,
        outbox_ttl_days: u32,
    ) -> Result<bool, StoreError> {
        let delete = Delete::builder()
            .table_name(&self.table)
            .key("pk", s(pipelines_pk(workspace_id)))
            .key("sk", s(pipeline_sk(name)))
            .condition_expression("attribute_exists(pk)");
        let changed = PipelineChanged { pipeline: name.to_string(), revision: None };
        let writes = vec![
            TransactWriteItem::builder().delete(build(delete.build())?).build(),
            self.outbox_put(&Fact::new(workspace_id, now, changed), outbox_ttl_days)?,
        ];
        Ok(matches!(self.transact(writes).await?, TxOutcome::Committed))
    }
}
