//! Webhooks (behaviour.md §18): a hook is `HOOK#<id>` / `HOOK` (found by
//! the id a delivery's URL names) and, in the same transaction,
//! `HOOKS#<ws>` / `<id>` (the workspace's list, one `Query`). Its secret is
//! never here: it lives in the secret store (`usecases::secrets`).
//!
//! A delivery's answer is kept as `HOOK#<id>` / `DELIVERY#<delivery id>`
//! for a month, so a forge's redelivery is answered with the first
//! delivery's runs and starts nothing.

use aws_sdk_dynamodb::types::{Delete, TransactWriteItem};
use baton_api::hooks::{DeliveryAnswer, HookProvider, HookSummary};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::keys::{hook_delivery_sk, hook_pk, hooks_pk, HOOK_SK};
use super::{build, from_item, s, Store, TxOutcome};
use crate::error::StoreError;
use crate::ItemHead;

/// How long a delivery's answer is kept for redeliveries (GitHub lets a
/// delivery be redelivered by hand for a few days; GitLab retries within
/// hours).
pub const DELIVERY_KEPT_DAYS: i64 = 30;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HookItem {
    #[serde(flatten)]
    pub head: ItemHead,
    pub id: Uuid,
    pub workspace_id: String,
    pub provider: HookProvider,
    /// `None`: every pipeline of the workspace.
    #[serde(default)]
    pub pipelines: Option<Vec<String>>,
    #[serde(with = "baton_domain::time::stored")]
    pub created_at: DateTime<Utc>,
}

impl HookItem {
    pub fn summary(&self) -> HookSummary {
        HookSummary {
            id: self.id,
            provider: self.provider,
            pipelines: self.pipelines.clone(),
            created_at: self.created_at,
        }
    }
}

impl Store {
    /// Stores a new hook (its item and its workspace's list entry).
    pub async fn create_hook(
        &self,
        id: Uuid,
        workspace_id: &str,
        provider: HookProvider,
        pipelines: Option<Vec<String>>,
        now: DateTime<Utc>,
    ) -> Result<HookItem, StoreError> {
        let item = HookItem {
            head: ItemHead::new(hook_pk(id), HOOK_SK, "hook"),
            id,
            workspace_id: workspace_id.to_string(),
            provider,
            pipelines,
            created_at: now,
        };
        let listed =
            HookItem { head: ItemHead::new(hooks_pk(workspace_id), id.to_string(), "hook_listing"), ..item.clone() };
        match self.transact(vec![self.new_item_put(&item)?, self.new_item_put(&listed)?]).await? {
            TxOutcome::Committed => Ok(item),
            // The id is new: a hook under it is this very transaction,
            // applied before its answer was lost and sent again by the SDK
            // (whose token makes the retry succeed on AWS; the emulator
            // answers it with the failed conditions).
            TxOutcome::ConditionFailed { .. } => match self.hook(id).await? {
                Some(stored) if stored.workspace_id == item.workspace_id => Ok(stored),
                _ => Err(StoreError::Other(format!("hook {id} exists already"))),
            },
        }
    }

    /// The hook `id`, whatever its workspace (a delivery names only it).
    pub async fn hook(&self, id: Uuid) -> Result<Option<HookItem>, StoreError> {
        self.get(&hook_pk(id), HOOK_SK).await?.map(from_item).transpose()
    }

    /// The workspace's hooks, oldest first.
    pub async fn hooks(&self, workspace_id: &str) -> Result<Vec<HookItem>, StoreError> {
        let mut hooks: Vec<HookItem> = self.partition(hooks_pk(workspace_id)).await?;
        hooks.sort_by_key(|hook| (hook.created_at, hook.id));
        Ok(hooks)
    }

    /// Deletes the hook `id` of `workspace_id`; `false` when it has none.
    pub async fn delete_hook(&self, workspace_id: &str, id: Uuid) -> Result<bool, StoreError> {
        let delete = |pk: String, sk: String| -> Result<TransactWriteItem, StoreError> {
            let delete = Delete::builder()
                .table_name(&self.table)
                .key("pk", s(pk))
                .key("sk", s(sk))
                .condition_expression("workspace_id = :ws")
                .expression_attribute_values(":ws", s(workspace_id));
            Ok(TransactWriteItem::builder().delete(build(delete.build())?).build())
        };
        let items = vec![delete(hook_pk(id), HOOK_SK.into())?, delete(hooks_pk(workspace_id), id.to_string())?];
        Ok(matches!(self.transact(items).await?, TxOutcome::Committed))
    }

    /// The answer kept for delivery `delivery` of hook `id`, if any.
    pub async fn hook_delivery(&self, id: Uuid, delivery: &str) -> Result<Option<DeliveryAnswer>, StoreError> {
        let Some(item) = self.get(&hook_pk(id), &hook_delivery_sk(delivery)).await? else { return Ok(None) };
        let answer = item.get("answer").and_then(|a| a.as_s().ok()).cloned().unwrap_or_default();
        serde_json::from_str(&answer).map(Some).map_err(|_| StoreError::Malformed(format!("delivery {delivery}")))
    }
}
