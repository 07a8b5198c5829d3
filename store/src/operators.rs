//! Operator API tokens (`bat_`): workspace-scoped or admin. Stored by hash.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{from_item, keys, Store};
use crate::error::StoreError;
use crate::ItemHead;
use baton_domain::tokens::hash_token;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct OperatorToken {
    #[serde(flatten)]
    pub head: ItemHead,
    /// `None`: an admin token, valid for every workspace.
    pub workspace_id: Option<String>,
    pub name: Option<String>,
    /// Groups an admin put the token in: an approval's `from` may name
    /// them (behaviour.md §16).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    #[serde(with = "baton_domain::time::stored")]
    pub created_at: DateTime<Utc>,
    #[serde(default, with = "baton_domain::time::stored_option")]
    pub revoked_at: Option<DateTime<Utc>>,
}

impl OperatorToken {
    /// Who the token is, in approvals and on the runs it creates: its name,
    /// or (unnamed) a stable name from its hash. An approval counts once
    /// per name.
    pub fn identity(&self) -> String {
        match &self.name {
            Some(name) if !name.is_empty() => name.clone(),
            _ => {
                format!(
                    "token-{}",
                    self.head.pk.rsplit('#').next().unwrap_or_default().chars().take(12).collect::<String>()
                )
            }
        }
    }
}

impl Store {
    /// Stores an operator token (by hash). Idempotent: storing the same token
    /// again keeps the first record.
    pub async fn put_operator_token(
        &self,
        token: &str,
        workspace_id: Option<&str>,
        name: Option<&str>,
    ) -> Result<(), StoreError> {
        self.put_operator_token_in_groups(token, workspace_id, name, &[]).await
    }

    /// [`Store::put_operator_token`], the token in `groups`.
    pub async fn put_operator_token_in_groups(
        &self,
        token: &str,
        workspace_id: Option<&str>,
        name: Option<&str>,
        groups: &[String],
    ) -> Result<(), StoreError> {
        let record = OperatorToken {
            head: ItemHead::new(keys::operator_token_pk(&hash_token(token)), keys::OPERATOR_TOKEN_SK, "api_token"),
            workspace_id: workspace_id.map(str::to_string),
            name: name.map(str::to_string),
            groups: groups.to_vec(),
            created_at: Utc::now(),
            revoked_at: None,
        };
        self.put_if_absent(&record).await.map(|_| ())
    }

    /// The operator token record of `token`, if one is stored.
    pub async fn operator_token(&self, token: &str) -> Result<Option<OperatorToken>, StoreError> {
        self.get_eventually(&keys::operator_token_pk(&hash_token(token)), keys::OPERATOR_TOKEN_SK)
            .await?
            .map(from_item)
            .transpose()
    }
}
