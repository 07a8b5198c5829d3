//! Job specs (`EXEC#<execution>` / `SPEC`): what a runner needs to execute a
//! queued job (its steps, its env with the workflow's merged in, its
//! timeout). The orchestrator writes it in the transaction that queues the
//! job, next to the `job_execution.queued` fact, which carries only the
//! job's key, labels and timeout; the claim that takes the job reads it and
//! hands it to the runner. So facts stay small whatever the scripts, and a
//! job's env (often secrets) never reaches the bus. Kept with the
//! execution's other items (never rewritten: a spec does not change).

use aws_sdk_dynamodb::types::TransactWriteItem;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::keys::{execution_pk, SPEC_SK};
use super::{from_item, Store};
use crate::error::StoreError;
use crate::ItemHead;
use baton_api::facts::JobSpec;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobSpecItem {
    #[serde(flatten)]
    pub head: ItemHead,
    pub execution_id: Uuid,
    pub workspace_id: String,
    pub spec: JobSpec,
}

impl Store {
    /// Writes the spec of a job being queued (a redelivered advance that
    /// queues it again writes the same spec).
    pub fn job_spec_put(
        &self,
        execution_id: Uuid,
        workspace_id: &str,
        spec: &JobSpec,
    ) -> Result<TransactWriteItem, StoreError> {
        let item = JobSpecItem {
            head: ItemHead::new(execution_pk(execution_id), SPEC_SK, "job_spec"),
            execution_id,
            workspace_id: workspace_id.to_string(),
            spec: spec.clone(),
        };
        self.item_put(&item)
    }

    /// The spec of a queued job.
    pub async fn job_spec(&self, execution_id: Uuid) -> Result<Option<JobSpec>, StoreError> {
        let item = self.get(&execution_pk(execution_id), SPEC_SK).await?;
        item.map(|item| from_item::<JobSpecItem>(item).map(|stored| stored.spec)).transpose()
    }
}
