//! Outbox items: the facts of a state change, stored in the same transaction
//! as the change. The table's stream carries the new item to the relay,
//! which publishes its facts; nothing else reads these items.
//!
//! A change that emits several facts (an outcome ends an execution and its
//! job; an advance queues jobs) writes them as one item when they fit
//! ([`Store::outbox_puts`]): the first fact in the item's own attributes,
//! the others in `more`. An item is billed by the started kilobyte and
//! twice inside a transaction, so two 500-byte facts in one item cost half
//! of what two items cost.

use aws_sdk_dynamodb::types::TransactWriteItem;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{keys, Store};
use crate::error::StoreError;
use crate::ItemHead;
use baton_api::facts::{Fact, FactDetail};

/// The item `type` of outbox items; the relay ignores every other type.
pub const OUTBOX_TYPE: &str = "outbox";

/// An outbox item as stored.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct OutboxItem {
    #[serde(flatten)]
    pub head: ItemHead,
    pub event_id: Uuid,
    pub source: String,
    pub detail_type: String,
    /// The fact as JSON text: exactly what EventBridge will carry as `detail`.
    pub detail: String,
    pub occurred_at: DateTime<Utc>,
    /// Clean-up only (TTL is never relied upon).
    pub ttl: i64,
    /// The other facts of the same change, published after this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more: Vec<OutboxFact>,
}

/// One more fact of an outbox item (its item holds its key and TTL).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct OutboxFact {
    pub event_id: Uuid,
    pub source: String,
    pub detail_type: String,
    pub detail: String,
    pub occurred_at: DateTime<Utc>,
}

/// Facts in one outbox item at most, and bytes of their details: an item
/// stays far under DynamoDB's 400 KB whatever the facts (one is at most
/// 64 KB, `limits`).
pub const FACTS_PER_OUTBOX_ITEM: usize = 25;
pub const OUTBOX_ITEM_DETAIL_BYTES: usize = 100 * 1024;

impl OutboxItem {
    pub fn for_fact<D: FactDetail>(fact: &Fact<D>, ttl_days: u32) -> Result<Self, StoreError> {
        let detail = serde_json::to_string(fact).map_err(|e| StoreError::Malformed(e.to_string()))?;
        Ok(Self {
            head: ItemHead::new(keys::outbox_pk(fact.header.event_id), keys::OUTBOX_SK, OUTBOX_TYPE),
            event_id: fact.header.event_id,
            source: D::CONTEXT.source().into(),
            detail_type: D::DETAIL_TYPE.into(),
            detail,
            occurred_at: fact.header.occurred_at,
            ttl: fact.header.occurred_at.timestamp() + i64::from(ttl_days) * 86_400,
            more: Vec::new(),
        })
    }

    /// Every fact the item holds, in order, each as an item of its own
    /// (what the relay publishes one by one).
    pub fn facts(&self) -> Vec<OutboxItem> {
        let first = OutboxItem { more: Vec::new(), ..self.clone() };
        let more = self.more.iter().map(|fact| OutboxItem {
            event_id: fact.event_id,
            source: fact.source.clone(),
            detail_type: fact.detail_type.clone(),
            detail: fact.detail.clone(),
            occurred_at: fact.occurred_at,
            ..first.clone()
        });
        std::iter::once(first.clone()).chain(more).collect()
    }

    /// The facts of one change, in order, as few items as
    /// [`FACTS_PER_OUTBOX_ITEM`] and [`OUTBOX_ITEM_DETAIL_BYTES`] allow.
    pub fn together(facts: Vec<OutboxItem>) -> Vec<OutboxItem> {
        let mut items: Vec<OutboxItem> = Vec::new();
        let mut bytes = 0;
        for fact in facts {
            match items.last_mut() {
                Some(item)
                    if item.more.len() + 1 < FACTS_PER_OUTBOX_ITEM
                        && bytes + fact.detail.len() <= OUTBOX_ITEM_DETAIL_BYTES =>
                {
                    bytes += fact.detail.len();
                    item.more.push(OutboxFact {
                        event_id: fact.event_id,
                        source: fact.source,
                        detail_type: fact.detail_type,
                        detail: fact.detail,
                        occurred_at: fact.occurred_at,
                    });
                }
                _ => {
                    bytes = fact.detail.len();
                    items.push(fact);
                }
            }
        }
        items
    }
}

/// The facts of one change, in order: about one workspace, at one instant,
/// kept as long; written together ([`Store::outbox_puts`]).
pub struct ChangeFacts {
    workspace_id: String,
    now: DateTime<Utc>,
    ttl_days: u32,
    items: Vec<OutboxItem>,
}

impl ChangeFacts {
    pub fn new(workspace_id: impl Into<String>, now: DateTime<Utc>, ttl_days: u32) -> Self {
        Self { workspace_id: workspace_id.into(), now, ttl_days, items: Vec::new() }
    }

    /// Adds the fact of `detail`, under a fresh id.
    pub fn push<D: FactDetail>(&mut self, detail: D) -> Result<(), StoreError> {
        let fact = Fact::new(self.workspace_id.clone(), self.now, detail);
        self.items.push(OutboxItem::for_fact(&fact, self.ttl_days)?);
        Ok(())
    }
}

impl Store {
    /// The transaction item that writes `fact` to the outbox. The condition
    /// makes a retried transaction unable to write the same fact twice.
    pub fn outbox_put<D: FactDetail>(&self, fact: &Fact<D>, ttl_days: u32) -> Result<TransactWriteItem, StoreError> {
        self.new_item_put(&OutboxItem::for_fact(fact, ttl_days)?)
    }

    /// The transaction items that write the facts of one change, together
    /// ([`OutboxItem::together`]).
    pub fn outbox_puts(&self, facts: ChangeFacts) -> Result<Vec<TransactWriteItem>, StoreError> {
        OutboxItem::together(facts.items).iter().map(|item| self.new_item_put(item)).collect()
    }

    /// The outbox items whose fact occurred from `since` to `until`, oldest
    /// first. An operator's recovery tool (`baton-ops republish-outbox`),
    /// never a hot path: it scans the table (the outbox keeps facts for their
    /// TTL, 7 days by default), so no function is built with it.
    #[cfg(feature = "operator-tools")]
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
            found.extend(item.facts().into_iter().filter(|fact| (since..=until).contains(&fact.occurred_at)));
        }
        found.sort_by_key(|item| (item.occurred_at, item.event_id));
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_api::facts::RunCancelled;

    fn fact(detail_bytes: usize) -> OutboxItem {
        let fact = Fact::new("ws", Utc::now(), RunCancelled { run_id: Uuid::now_v7(), attempt: 1 });
        let mut item = OutboxItem::for_fact(&fact, 7).expect("an outbox item");
        item.detail = "x".repeat(detail_bytes);
        item
    }

    #[test]
    fn the_facts_of_a_change_share_items_up_to_a_count_and_a_size_and_keep_their_order() {
        let many: Vec<OutboxItem> = (0..60).map(|_| fact(300)).collect();
        let items = OutboxItem::together(many.clone());
        let counts: Vec<usize> = items.iter().map(|item| 1 + item.more.len()).collect();
        assert_eq!(counts, [FACTS_PER_OUTBOX_ITEM, FACTS_PER_OUTBOX_ITEM, 10]);
        let unpacked: Vec<OutboxItem> = items.iter().flat_map(OutboxItem::facts).collect();
        let ids = |facts: &[OutboxItem]| facts.iter().map(|f| f.event_id).collect::<Vec<_>>();
        assert_eq!(ids(&unpacked), ids(&many));
        // Each item is keyed by its first fact, so a retried transaction cannot write it twice.
        assert!(items.iter().all(|item| item.head.pk == keys::outbox_pk(item.event_id)));

        let big: Vec<OutboxItem> = (0..3).map(|_| fact(40 * 1024)).collect();
        let counts: Vec<usize> = OutboxItem::together(big).iter().map(|item| 1 + item.more.len()).collect();
        assert_eq!(counts, [2, 1], "a second 40 KB fact fits, a third would pass 100 KB");
        assert!(OutboxItem::together(Vec::new()).is_empty());
    }
}
