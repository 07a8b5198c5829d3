//! Workspace variables (`vars.NAME`): `VARS#<ws>` / `<NAME>`, one partition
//! a workspace, so a run's create reads them in one `Query`. A put replaces
//! the value (the last put wins, as with any named setting); the workspace's
//! cap is checked on the partition read before it, so it is soft under
//! concurrent puts of new names.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::keys::variables_pk;
use super::{s, to_item, Store};
use crate::error::StoreError;
use crate::ItemHead;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct VariableItem {
    #[serde(flatten)]
    pub head: ItemHead,
    pub workspace_id: String,
    /// Upper-cased (`baton_api::variables::variable_name`).
    pub name: String,
    pub value: String,
    #[serde(with = "baton_domain::time::stored")]
    pub updated_at: DateTime<Utc>,
}

impl VariableItem {
    pub fn view(&self) -> baton_api::variables::Variable {
        baton_api::variables::Variable {
            name: self.name.clone(),
            value: self.value.clone(),
            updated_at: self.updated_at,
        }
    }
}

/// What a put did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VariablePut {
    Set(VariableItem),
    /// A new name past the workspace's cap: nothing written.
    TooMany,
}

impl Store {
    /// Every variable of the workspace, by name.
    pub async fn variables(&self, workspace_id: &str) -> Result<Vec<VariableItem>, StoreError> {
        self.partition(variables_pk(workspace_id)).await
    }

    /// Sets variable `name` (upper-cased already) of the workspace, unless
    /// it is a new one and the workspace holds `cap` already.
    pub async fn put_variable(
        &self,
        workspace_id: &str,
        name: &str,
        value: &str,
        cap: usize,
        now: DateTime<Utc>,
    ) -> Result<VariablePut, StoreError> {
        let held = self.variables(workspace_id).await?;
        if held.len() >= cap && !held.iter().any(|v| v.name == name) {
            return Ok(VariablePut::TooMany);
        }
        let item = VariableItem {
            head: ItemHead::new(variables_pk(workspace_id), name.to_string(), "variable"),
            workspace_id: workspace_id.to_string(),
            name: name.to_string(),
            value: value.to_string(),
            updated_at: now,
        };
        self.client.put_item().table_name(&self.table).set_item(Some(to_item(&item)?)).send().await?;
        Ok(VariablePut::Set(item))
    }

    /// Deletes variable `name`; `false` when the workspace has none of it.
    pub async fn delete_variable(&self, workspace_id: &str, name: &str) -> Result<bool, StoreError> {
        let delete = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(variables_pk(workspace_id)))
            .key("sk", s(name))
            .condition_expression("attribute_exists(pk)");
        super::condition_may_fail(|| delete.clone().send()).await
    }

    /// The variables `names` of the workspace, as a run is created with
    /// them (an unset one is left out: it reads as empty).
    pub async fn variables_named(
        &self,
        workspace_id: &str,
        names: &std::collections::BTreeSet<String>,
    ) -> Result<serde_json::Map<String, serde_json::Value>, StoreError> {
        if names.is_empty() {
            return Ok(serde_json::Map::new());
        }
        let held = self.variables(workspace_id).await?;
        Ok(held
            .into_iter()
            .filter(|v| names.contains(&v.name))
            .map(|v| (v.name, serde_json::Value::String(v.value)))
            .collect())
    }
}
