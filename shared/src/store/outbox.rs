//! Outbox items: a fact, stored in the same transaction as the state change it
//! describes. The table's stream carries the new item to the relay, which
//! publishes it; nothing else reads these items.

use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{keys, to_item, Item, Store};
use crate::error::StoreError;
use crate::facts::{Fact, FactDetail};

/// The item `type` of outbox items; the relay ignores every other type.
pub const OUTBOX_TYPE: &str = "outbox";

/// An outbox item as stored.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct OutboxItem {
    pub pk: String,
    pub sk: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub event_id: Uuid,
    pub source: String,
    pub detail_type: String,
    /// The fact as JSON text: exactly what EventBridge will carry as `detail`.
    pub detail: String,
    pub occurred_at: DateTime<Utc>,
    /// Clean-up only (TTL is never relied upon).
    pub ttl: i64,
}

impl OutboxItem {
    pub fn for_fact<D: FactDetail>(fact: &Fact<D>, ttl_days: u32) -> Result<Self, StoreError> {
        let detail = serde_json::to_string(fact).map_err(|e| StoreError::Malformed(e.to_string()))?;
        Ok(Self {
            pk: keys::outbox_pk(fact.header.event_id),
            sk: keys::OUTBOX_SK.into(),
            kind: OUTBOX_TYPE.into(),
            event_id: fact.header.event_id,
            source: D::CONTEXT.source().into(),
            detail_type: D::DETAIL_TYPE.into(),
            detail,
            occurred_at: fact.header.occurred_at,
            ttl: fact.header.occurred_at.timestamp() + i64::from(ttl_days) * 86_400,
        })
    }
}

impl Store {
    /// The transaction item that writes `fact` to the outbox. The condition
    /// makes a retried transaction unable to write the same fact twice.
    pub fn outbox_put<D: FactDetail>(&self, fact: &Fact<D>, ttl_days: u32) -> Result<TransactWriteItem, StoreError> {
        let item: Item = to_item(&OutboxItem::for_fact(fact, ttl_days)?)?;
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .map_err(|e| StoreError::Other(e.to_string()))?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// The outbox items whose fact occurred from `since` to `until`, oldest
    /// first. An operator's recovery tool (`baton-devhost republish-outbox`),
    /// never a hot path: it scans the table (the outbox keeps facts for their
    /// TTL, 7 days by default), so no function is built with it.
    #[cfg(feature = "local-stack")]
    pub async fn outbox_between(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Vec<OutboxItem>, StoreError> {
        let mut pages = self
            .client
            .scan()
            .table_name(&self.table)
            .filter_expression("#type = :outbox")
            .expression_attribute_names("#type", "type")
            .expression_attribute_values(":outbox", aws_sdk_dynamodb::types::AttributeValue::S(OUTBOX_TYPE.into()))
            .into_paginator()
            .items()
            .send();
        let mut found = Vec::new();
        while let Some(item) = pages.next().await {
            let item: OutboxItem = super::from_item(item?)?;
            if (since..=until).contains(&item.occurred_at) {
                found.push(item);
            }
        }
        found.sort_by_key(|item| (item.occurred_at, item.event_id));
        Ok(found)
    }
}
