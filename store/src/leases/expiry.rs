//! Baton's own ends of a live lease: the reaper's reads of the expiry index
//! and its expiries, and the cancel flag a terminated execution's lease gets.

use aws_sdk_dynamodb::types::{Delete, TransactWriteItem, Update};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{lease_from, ReportedSteps};
use crate::error::StoreError;
use crate::keys::{execution_pk, timestamp, LEASES_BY_EXPIRY, LEASE_SK, RUNNER_SK};
use crate::records::RunnerStatus;
use crate::runner_items::LeaseItem;
use crate::{build, n, s, Store, TxOutcome};
use baton_api::facts::{Fact, JobLeaseExpired};

impl Store {
    /// Live leases of one index shard whose index bound passed before `now`,
    /// oldest first: the expired ones, and heartbeated ones whose entry the
    /// reaper moves up (`advance_lease_index`).
    ///
    /// The index projects keys only: every heartbeat moves a lease in it, and
    /// a copy of the whole lease (its step reports included) would bill that
    /// move by the lease's size. The few expired leases are read from the
    /// table instead; one already gone (completed meanwhile) is skipped.
    pub async fn expired_leases(
        &self,
        shard: &str,
        now: DateTime<Utc>,
        limit: i32,
    ) -> Result<Vec<LeaseItem>, StoreError> {
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(LEASES_BY_EXPIRY)
            .key_condition_expression("lx_shard = :shard AND lx_expires_at < :now")
            .expression_attribute_values(":shard", s(shard))
            .expression_attribute_values(":now", n(now.timestamp_millis()))
            .limit(limit)
            .send()
            .await?;
        let keys: Vec<String> = out
            .items
            .unwrap_or_default()
            .into_iter()
            .filter_map(|mut key| match key.remove("pk") {
                Some(aws_sdk_dynamodb::types::AttributeValue::S(pk)) => Some(pk),
                _ => None,
            })
            .collect();
        let read = futures::future::try_join_all(
            keys.iter().map(|pk| async move { lease_from(self.get(pk, LEASE_SK).await?) }),
        )
        .await?;
        Ok(read.into_iter().flatten().collect())
    }

    /// Moves a heartbeated lease's index entry up to its expiry as read, so
    /// the reaper finds it again only when it may have expired. Only ever
    /// forward, and only on the same claim: a second reaper doing the same,
    /// or a complete that deleted the lease, makes this a no-op.
    pub async fn advance_lease_index(&self, lease: &LeaseItem) -> Result<(), StoreError> {
        let bound = lease.expires_at.timestamp_millis();
        let advance = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(&lease.head.pk))
            .key("sk", s(LEASE_SK))
            .update_expression("SET lx_expires_at = :bound")
            .condition_expression("epoch = :e AND lx_expires_at < :bound")
            .expression_attribute_values(":bound", n(bound))
            .expression_attribute_values(":e", n(lease.epoch));
        crate::condition_may_fail(|| advance.clone().send()).await.map(|_| ())
    }

    /// Expires one lease with its tombstone and its `lease_expired` fact. The
    /// condition re-checks the expiry at write time, so a heartbeat that lands
    /// after the reaper read the index saves the lease; and only one of two
    /// concurrent reapers can delete it, so there is one fact per lease.
    /// The steps `reported` as read go into the fact and onto the record,
    /// conditioned on the count of reports read: a step report that lands
    /// in between makes this `false` too, and the next pass reads it.
    /// `false` when the lease was saved or already gone.
    pub async fn expire_lease(
        &self,
        lease: &LeaseItem,
        reported: &ReportedSteps,
        now: DateTime<Utc>,
        fact: &Fact<JobLeaseExpired>,
        outbox_ttl_days: u32,
    ) -> Result<bool, StoreError> {
        let delete = build(
            Delete::builder()
                .table_name(&self.table)
                .key("pk", s(&lease.head.pk))
                .key("sk", s(LEASE_SK))
                .condition_expression("epoch = :e AND expires_at < :now")
                .expression_attribute_values(":e", n(lease.epoch))
                .expression_attribute_values(":now", s(timestamp(now)))
                .build(),
        )?;
        let tombstone = build(
            Update::builder()
                .table_name(&self.table)
                .key("pk", s(execution_pk(lease.execution.id)))
                .key("sk", s(RUNNER_SK))
                // The record keeps the steps (a lease claimed before they
                // moved there brings its own): the orchestrator adopts them
                // from there if the job's timeout comes before this expiry's
                // fact does, and the fact must say what the record says.
                .update_expression("SET #status = :expired, steps = :steps")
                .condition_expression(
                    "#status = :leased AND epoch = :e AND (attribute_not_exists(step_reports) OR step_reports = :n)",
                )
                .expression_attribute_names("#status", "status")
                .expression_attribute_values(":expired", s(RunnerStatus::Expired.as_str()))
                .expression_attribute_values(":steps", serde_dynamo::to_attribute_value(&reported.steps)?)
                .expression_attribute_values(":n", n(reported.reports))
                .expression_attribute_values(":leased", s(RunnerStatus::Leased.as_str()))
                .expression_attribute_values(":e", n(lease.epoch))
                .build(),
        )?;
        let mut items = vec![
            TransactWriteItem::builder().delete(delete).build(),
            TransactWriteItem::builder().update(tombstone).build(),
            self.outbox_put(fact, outbox_ttl_days)?,
        ];
        items.extend(lease.running_count_end(&self.table)?);
        Ok(matches!(self.transact(items).await?, TxOutcome::Committed))
    }

    /// Flags a live lease for cancellation, on the lease (a heartbeat's
    /// answer) and on its runner record (a step report's); the first
    /// timestamp wins. A lease that already ended needs no flag. Each write
    /// is idempotent, so a retry after a failure between them completes it.
    pub async fn flag_lease_for_cancel(
        &self,
        execution_id: Uuid,
        epoch: u64,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let flag = |sk: &str, condition: &str| {
            self.client
                .update_item()
                .table_name(&self.table)
                .key("pk", s(execution_pk(execution_id)))
                .key("sk", s(sk))
                .update_expression("SET cancel_requested_at = if_not_exists(cancel_requested_at, :now)")
                .condition_expression(condition)
                .expression_attribute_values(":now", s(timestamp(now)))
                .expression_attribute_values(":e", n(epoch))
        };
        let on_record = flag(RUNNER_SK, "#status = :leased AND epoch = :e")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":leased", s(RunnerStatus::Leased.as_str()));
        crate::condition_may_fail(|| on_record.clone().send()).await?;
        let on_lease = flag(LEASE_SK, "attribute_exists(pk) AND epoch = :e");
        crate::condition_may_fail(|| on_lease.clone().send()).await.map(|_| ())
    }
}
