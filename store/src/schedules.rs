//! The ticks pipelines' schedules have fired (behaviour.md §18,
//! `domain::schedules`). Amazon EventBridge Scheduler delivers a tick at
//! least once, and a cron said as two schedules may wake its target twice
//! in one minute: a tick fires when its item
//! `FIRED#<ws>#<pipeline>#<cron index>` / `<minute>` is put, if absent, in
//! the transaction that requests its run, so the same tick never requests
//! two. The items go after two days (the scheduler retries for minutes).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::keys::{schedule_fired_pk, schedule_fired_sk};
use super::run_requests::NewRunRequest;
use super::{Store, TxOutcome};
use crate::error::StoreError;
use crate::ItemHead;

/// How long a fired tick is remembered.
const FIRED_KEPT_DAYS: i64 = 2;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct FiredItem {
    #[serde(flatten)]
    head: ItemHead,
    run_id: uuid::Uuid,
    ttl: i64,
}

impl Store {
    /// Requests the run of the tick of cron `index` of `pipeline` due at
    /// `due`: `false` when that tick has fired already.
    pub async fn fire_schedule(
        &self,
        workspace_id: &str,
        index: usize,
        due: DateTime<Utc>,
        request: &NewRunRequest,
        now: DateTime<Utc>,
        outbox_ttl_days: u32,
    ) -> Result<bool, StoreError> {
        let fired = FiredItem {
            head: ItemHead::new(
                schedule_fired_pk(workspace_id, &request.pipeline, index),
                schedule_fired_sk(due),
                "schedule_fired",
            ),
            run_id: request.run_id,
            ttl: (now + chrono::Duration::days(FIRED_KEPT_DAYS)).timestamp(),
        };
        let mut items = vec![self.new_item_put(&fired)?];
        items.extend(self.request_writes(workspace_id, request, now, outbox_ttl_days)?);
        Ok(matches!(self.transact(items).await?, TxOutcome::Committed))
    }
}
