//! Pipelines' schedule ticks (behaviour.md §18, `domain::schedules`): each
//! cron's next tick is an item under the minute it falls in,
//! `TICKS#<yyyy-mm-ddThh:mm>` / `<ws>#<pipeline>#<cron index>#<revision>`,
//! so the sweep reads one partition a minute. A tick names the pipeline's
//! revision it was scheduled for: a pipeline put again schedules its new
//! crons under its new revision, and the old ticks, and a deleted
//! pipeline's, are dropped when reached without firing. Settling a tick
//! deletes it (conditioned on it being there, so of two sweeps only one
//! settles it), requests its run and keeps the cron's next tick, in one
//! transaction. `TICKS` / `SWEPT` says the last minute swept.

use aws_sdk_dynamodb::types::{AttributeValue, Delete, TransactWriteItem, Update};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::keys::{schedule_tick_pk, schedule_tick_sk, SCHEDULE_SWEPT_PK, SCHEDULE_SWEPT_SK};
use super::run_requests::NewRunRequest;
use super::{build, s, Store, TxOutcome};
use crate::error::StoreError;

/// How long a tick nobody reached is kept (the sweep reads a day back).
const TICK_KEPT_DAYS: i64 = 2;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ScheduleTick {
    pub pk: String,
    pub sk: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub workspace_id: String,
    pub pipeline: String,
    /// The cron's place in `on.schedule`.
    pub index: usize,
    pub cron: String,
    /// The pipeline's revision it was scheduled for.
    pub revision: u64,
    #[serde(with = "baton_domain::time::stored")]
    pub due: DateTime<Utc>,
    pub ttl: i64,
}

impl ScheduleTick {
    pub fn new(
        workspace_id: &str,
        pipeline: &str,
        index: usize,
        cron: &str,
        revision: u64,
        due: DateTime<Utc>,
    ) -> Self {
        ScheduleTick {
            pk: schedule_tick_pk(due),
            sk: schedule_tick_sk(workspace_id, pipeline, index, revision),
            kind: "schedule_tick".into(),
            workspace_id: workspace_id.to_string(),
            pipeline: pipeline.to_string(),
            index,
            cron: cron.to_string(),
            revision,
            due,
            ttl: (due + chrono::Duration::days(TICK_KEPT_DAYS)).timestamp(),
        }
    }
}

impl Store {
    /// The ticks due in `minute`.
    pub async fn schedule_ticks(&self, minute: DateTime<Utc>) -> Result<Vec<ScheduleTick>, StoreError> {
        self.partition(schedule_tick_pk(minute)).await
    }

    /// Settles `tick`: deletes it, requests its run (`None`: dropped or
    /// missed) and keeps its cron's `next` tick, at once. `false` when
    /// another sweep settled it first.
    pub async fn settle_tick(
        &self,
        tick: &ScheduleTick,
        request: Option<&NewRunRequest>,
        next: Option<&ScheduleTick>,
        now: DateTime<Utc>,
        outbox_ttl_days: u32,
    ) -> Result<bool, StoreError> {
        let delete = Delete::builder()
            .table_name(&self.table)
            .key("pk", s(&tick.pk))
            .key("sk", s(&tick.sk))
            .condition_expression("attribute_exists(pk)");
        let mut items = vec![TransactWriteItem::builder().delete(build(delete.build())?).build()];
        if let Some(request) = request {
            items.extend(self.request_writes(&tick.workspace_id, request, now, outbox_ttl_days)?);
        }
        if let Some(next) = next {
            items.push(self.item_put(next)?);
        }
        Ok(matches!(self.transact(items).await?, TxOutcome::Committed))
    }

    /// The last minute a sweep finished, if any did.
    pub async fn schedules_swept(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let item = self.get(SCHEDULE_SWEPT_PK, SCHEDULE_SWEPT_SK).await?;
        Ok(item
            .as_ref()
            .and_then(|item| item.get("minute"))
            .and_then(|v| v.as_s().ok())
            .and_then(|text| DateTime::parse_from_rfc3339(text).ok())
            .map(|t| t.with_timezone(&Utc)))
    }

    /// Records that every minute up to `minute` was swept; never moves
    /// back (a slower sweep finishing later leaves a later mark).
    pub async fn mark_schedules_swept(&self, minute: DateTime<Utc>) -> Result<(), StoreError> {
        let text = baton_domain::time::format(minute);
        let update = Update::builder()
            .table_name(&self.table)
            .key("pk", s(SCHEDULE_SWEPT_PK))
            .key("sk", s(SCHEDULE_SWEPT_SK))
            .update_expression("SET #m = :m")
            .condition_expression("attribute_not_exists(#m) OR #m < :m")
            .expression_attribute_names("#m", "minute")
            .expression_attribute_values(":m", AttributeValue::S(text));
        let update = build(update.build())?;
        super::condition_may_fail(|| {
            self.client
                .update_item()
                .table_name(&update.table_name)
                .set_key(Some(update.key.clone()))
                .update_expression(&update.update_expression)
                .set_condition_expression(update.condition_expression.clone())
                .set_expression_attribute_names(update.expression_attribute_names.clone())
                .set_expression_attribute_values(update.expression_attribute_values.clone())
                .send()
        })
        .await?;
        Ok(())
    }
}
