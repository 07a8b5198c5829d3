//! Operator API tokens (`bat_`): workspace-scoped or admin. Stored by hash.

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{from_item, s, to_item, Store};
use crate::auth::{hash_token, require_token, TokenKind};
use crate::error::{ApiError, ErrorCode, StoreError};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct OperatorToken {
    pub pk: String,
    pub sk: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// `None`: an admin token, valid for every workspace.
    pub workspace_id: Option<String>,
    pub name: Option<String>,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

fn key(token_hash: &str) -> String {
    format!("APITOKEN#{token_hash}")
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
        let record = OperatorToken {
            pk: key(&hash_token(token)),
            sk: "APITOKEN".into(),
            kind: "api_token".into(),
            workspace_id: workspace_id.map(str::to_string),
            name: name.map(str::to_string),
            created_at: Utc::now(),
            revoked_at: None,
        };
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(to_item(&record)?))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        super::condition_may_fail(put).map(|_| ())
    }

    async fn operator_token(&self, token: &str) -> Result<Option<OperatorToken>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(key(&hash_token(token))))
            .key("sk", AttributeValue::S("APITOKEN".into()))
            .send()
            .await?;
        out.item.map(from_item).transpose()
    }

    /// Authorises an operator request on `workspace_id`: 401 without a valid
    /// `bat_` token; 404 for a token scoped to another workspace (existence
    /// is not revealed).
    pub async fn authorize_operator(&self, req: &lambda_http::Request, workspace_id: &str) -> Result<(), ApiError> {
        let token = require_token(req, TokenKind::Operator)?;
        let record = self.operator_token(token).await?.ok_or_else(ApiError::unauthenticated)?;
        if record.revoked_at.is_some() {
            return Err(ApiError::unauthenticated());
        }
        match record.workspace_id {
            None => Ok(()),
            Some(scope) if scope == workspace_id => Ok(()),
            Some(_) => Err(ApiError::new(ErrorCode::NotFound, "workspace not found")),
        }
    }
}
