//! A fleet's history: ended instances and released reservations leave the
//! provisioner's partition for `PROVHIST#<id>` once settled
//! (`intents::moves_to_history`), with a `ttl`. Every pass, report, demand
//! read and instances page reads the live partition whole, so without this
//! its cost grew with every machine the provisioner ever ran; with it, it
//! is what is alive plus a few minutes of churn.
//!
//! A move is one transaction: the copy put in the history, the live item
//! deleted on the condition that it is still as read (ended, released),
//! and, for an instance, the history's ended count. Moving twice is safe:
//! the copy's put requires no copy yet, so a replay whose first try
//! applied cancels and counts nothing.

use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem, Update};
use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use super::{InstanceItem, ReservationItem};
use crate::error::StoreError;
use crate::keys;
use crate::{build, n, s, to_item, Store, TxOutcome};

/// How long the history keeps what ended (DynamoDB's TTL deletes it after).
pub const HISTORY_TTL_DAYS: i64 = 30;

/// The most moves one pass makes: a partition a deployment filled before
/// the history existed empties over passes, each bounded in time.
pub const MOVES_PER_PASS: usize = 25;

impl Store {
    /// Moves an ended instance to the history. `Ok(true)` when this call
    /// moved it (and counted it).
    pub(super) async fn move_instance_to_history(
        &self,
        instance: &InstanceItem,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let delete = build(
            Delete::builder()
                .table_name(&self.table)
                .key("pk", s(&instance.head.pk))
                .key("sk", s(&instance.head.sk))
                .condition_expression("#rank = :rank")
                .expression_attribute_names("#rank", "rank")
                .expression_attribute_values(":rank", n(instance.rank))
                .build(),
        )?;
        let count = build(
            Update::builder()
                .table_name(&self.table)
                .key("pk", s(keys::provisioner_history_pk(instance.provisioner_id)))
                .key("sk", s(keys::PROVISIONER_HISTORY_COUNT_SK))
                .update_expression("ADD instances :one")
                .expression_attribute_values(":one", n(1))
                .build(),
        )?;
        let items = vec![
            self.history_put(instance.provisioner_id, instance, now)?,
            TransactWriteItem::builder().delete(delete.clone()).build(),
            TransactWriteItem::builder().update(count).build(),
        ];
        match self.transact(items).await? {
            TxOutcome::Committed => Ok(true),
            // The copy is there already: an earlier try applied with its
            // answer lost, or a report sent again after the move wrote the
            // instance anew. Either way the live item (if any) goes, uncounted.
            TxOutcome::ConditionFailed { reasons } if reasons.first().is_some_and(Option::is_some) => {
                let ghost = self
                    .client
                    .delete_item()
                    .table_name(&self.table)
                    .set_key(Some(delete.key))
                    .set_condition_expression(delete.condition_expression)
                    .set_expression_attribute_names(delete.expression_attribute_names)
                    .set_expression_attribute_values(delete.expression_attribute_values);
                crate::condition_may_fail(|| ghost.clone().send()).await?;
                Ok(false)
            }
            // It moved on since it was read: the next pass decides again.
            TxOutcome::ConditionFailed { .. } => Ok(false),
        }
    }

    /// Moves a released reservation to the history.
    pub(super) async fn move_reservation_to_history(
        &self,
        reservation: &ReservationItem,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let delete = build(
            Delete::builder()
                .table_name(&self.table)
                .key("pk", s(&reservation.head.pk))
                .key("sk", s(&reservation.head.sk))
                .condition_expression("attribute_exists(released_at)")
                .build(),
        )?;
        let items = vec![
            self.history_put(reservation.provisioner_id, reservation, now)?,
            TransactWriteItem::builder().delete(delete).build(),
        ];
        Ok(matches!(self.transact(items).await?, TxOutcome::Committed))
    }

    /// The copy of a live item in the history: same sort key, a `ttl`, and
    /// required to be the first copy.
    fn history_put<T: Serialize>(
        &self,
        provisioner_id: Uuid,
        item: &T,
        now: DateTime<Utc>,
    ) -> Result<TransactWriteItem, StoreError> {
        let mut item = to_item(item)?;
        item.insert("pk".into(), s(keys::provisioner_history_pk(provisioner_id)));
        item.insert("ttl".into(), n(now.timestamp() + HISTORY_TTL_DAYS * 86_400));
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .build();
        Ok(TransactWriteItem::builder().put(build(put)?).build())
    }

    /// How many of the provisioner's instances ended and moved to its
    /// history since it was created (one item read, whatever the history;
    /// eventually consistent: an operator's figure, a moment's lag is fine).
    pub async fn ended_instances(&self, provisioner_id: Uuid) -> Result<u64, StoreError> {
        let pk = keys::provisioner_history_pk(provisioner_id);
        let item = self.get_eventually(&pk, keys::PROVISIONER_HISTORY_COUNT_SK).await?;
        Ok(match item.as_ref().and_then(|i| i.get("instances")) {
            Some(AttributeValue::N(count)) => count.parse().unwrap_or(0),
            _ => 0,
        })
    }
}
