//! Processed markers: for a consumer whose effect is not naturally idempotent
//! (not a compare-and-set on state), a marker item keyed by consumer and
//! `event_id` is written in the same transaction as the effect. A redelivered
//! fact fails the marker's condition, so the effect happens once.

use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use uuid::Uuid;

use super::{build, keys, n, s, Store};
use crate::error::StoreError;

impl Store {
    /// The transaction item that marks `event_id` as processed by `consumer`;
    /// it fails its condition when the fact was processed before.
    pub fn processed_marker(&self, consumer: &str, event_id: Uuid, ttl: i64) -> Result<TransactWriteItem, StoreError> {
        let put = build(
            Put::builder()
                .table_name(&self.table)
                .item("pk", s(keys::processed_pk(consumer, event_id)))
                .item("sk", s(keys::PROCESSED_SK))
                .item("type", s("processed"))
                .item("ttl", n(ttl))
                .condition_expression("attribute_not_exists(pk)")
                .build(),
        )?;
        Ok(TransactWriteItem::builder().put(put).build())
    }
}
