//! Run requests (behaviour.md §18): a run something asked for (a forge's
//! delivery matched a pipeline) that is created after the answer, so a
//! forge hears back within its timeout however many runs a burst asks
//! for. `RUNREQ#<run id>` / `REQUEST` holds what the run is created from;
//! the `run.requested` fact, written in the same transaction, makes the
//! `run-requests` subscriber create it, under the run id the request
//! reserved and its idempotency key, so a redelivered fact creates
//! nothing new.

use aws_sdk_dynamodb::types::TransactWriteItem;
use baton_api::facts::{Fact, RunRequested};
use baton_api::hooks::DeliveryAnswer;
use baton_api::pipelines::RunTrigger;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::keys::{hook_delivery_sk, hook_pk, run_request_pk, RUN_REQUEST_SK};
use super::{from_item, Store, TxOutcome};
use crate::error::StoreError;
use crate::ItemHead;

/// How long a request is kept after it was made (its run exists long before).
pub const REQUEST_KEPT_DAYS: i64 = 7;

/// What a requested run is created from: the request, and where and when
/// it was made.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunRequestItem {
    #[serde(flatten)]
    pub head: ItemHead,
    pub workspace_id: String,
    #[serde(flatten)]
    pub run: NewRunRequest,
    #[serde(with = "baton_domain::time::stored")]
    pub requested_at: DateTime<Utc>,
    pub ttl: i64,
}

/// A run to request.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NewRunRequest {
    pub run_id: Uuid,
    pub pipeline: String,
    /// The version the request was matched against.
    pub pipeline_version: String,
    pub trigger: RunTrigger,
    /// The `github` context's trigger fields, as JSON text.
    pub github: String,
    /// The run's inputs, as JSON text.
    pub inputs: String,
    pub idempotency_key: String,
}

/// What accepting a delivery did.
#[derive(Debug, Clone, PartialEq)]
pub enum Accepted {
    /// Its answer and requests are written.
    New,
    /// A concurrent copy of the delivery was accepted first: its answer.
    Existing(DeliveryAnswer),
}

/// The most runs one delivery requests: its answer, and a request and a
/// fact each, fit one transaction (100 items).
pub const MAX_RUNS_PER_DELIVERY: usize = 49;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct DeliveryItem {
    #[serde(flatten)]
    head: ItemHead,
    answer: String,
    ttl: i64,
}

impl Store {
    /// Accepts hook `hook_id`'s delivery `delivery`: its answer and its run
    /// requests with their facts, in one transaction conditioned on no
    /// answer being kept for it yet, so that of two copies delivered at
    /// once only one requests runs, and the other answers as it did.
    #[allow(clippy::too_many_arguments)]
    pub async fn accept_delivery(
        &self,
        hook_id: Uuid,
        workspace_id: &str,
        delivery: &str,
        answer: &DeliveryAnswer,
        requests: &[NewRunRequest],
        now: DateTime<Utc>,
        kept_days: i64,
        outbox_ttl_days: u32,
    ) -> Result<Accepted, StoreError> {
        if requests.len() > MAX_RUNS_PER_DELIVERY {
            return Err(StoreError::Other(format!("{} run requests in one delivery", requests.len())));
        }
        let record = DeliveryItem {
            head: ItemHead::new(hook_pk(hook_id), hook_delivery_sk(delivery), "hook_delivery"),
            answer: serde_json::to_string(answer).map_err(|e| StoreError::Other(format!("delivery answer: {e}")))?,
            ttl: (now + chrono::Duration::days(kept_days)).timestamp(),
        };
        let mut items: Vec<TransactWriteItem> = vec![self.new_item_put(&record)?];
        for request in requests {
            items.extend(self.request_writes(workspace_id, request, now, outbox_ttl_days)?);
        }
        match self.transact(items).await? {
            TxOutcome::Committed => Ok(Accepted::New),
            TxOutcome::ConditionFailed { .. } => match self.hook_delivery(hook_id, delivery).await? {
                Some(answer) => Ok(Accepted::Existing(answer)),
                None => Err(StoreError::Other(format!("delivery {delivery} lost its condition but has no answer"))),
            },
        }
    }

    /// The writes of one run request: its item and its `run.requested`
    /// fact, for the transaction of what asked for it.
    pub(crate) fn request_writes(
        &self,
        workspace_id: &str,
        request: &NewRunRequest,
        now: DateTime<Utc>,
        outbox_ttl_days: u32,
    ) -> Result<[TransactWriteItem; 2], StoreError> {
        let item = RunRequestItem {
            head: ItemHead::new(run_request_pk(request.run_id), RUN_REQUEST_SK, "run_request"),
            workspace_id: workspace_id.to_string(),
            run: request.clone(),
            requested_at: now,
            ttl: (now + chrono::Duration::days(REQUEST_KEPT_DAYS)).timestamp(),
        };
        let trigger = serde_json::to_value(request.trigger.kind)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        let fact = Fact::new(
            workspace_id,
            now,
            RunRequested {
                run_id: request.run_id,
                pipeline: request.pipeline.clone(),
                trigger,
                delivery: request.trigger.delivery.clone(),
            },
        );
        Ok([self.new_item_put(&item)?, self.outbox_put(&fact, outbox_ttl_days)?])
    }

    /// The request of run `run_id`, if it is still kept.
    pub async fn run_request(&self, run_id: Uuid) -> Result<Option<RunRequestItem>, StoreError> {
        self.get(&run_request_pk(run_id), RUN_REQUEST_SK).await?.map(from_item).transpose()
    }
}
