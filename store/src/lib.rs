//! The DynamoDB store: one table, generic keys (`pk`, `sk`), an item `type`,
//! sparse GSIs. Item families live in their own modules (`keys` is the key
//! schema); this one holds what they share (the client, transactions,
//! conversions). The domain (`baton-domain`) never sees an `AttributeValue`:
//! modules convert at this edge with `serde_dynamo`.
//!
//! Every status write here is a conditional write, and a state change writes
//! its facts to the outbox in the same transaction. The store knows nothing
//! of HTTP, Lambda or the other AWS services.

use std::collections::HashMap;

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes, Put, TransactWriteItem};

pub use crate::error::StoreError;

pub type Item = HashMap<String, AttributeValue>;

/// The attributes every item starts with: its key (`pk`, `sk`, made in
/// `keys`) and its `type`. An item struct flattens it
/// (`#[serde(flatten)] head: ItemHead`), so they are stored as the item's
/// own top-level attributes, written in one place for every family.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ItemHead {
    pub pk: String,
    pub sk: String,
    #[serde(rename = "type")]
    pub kind: String,
}

impl ItemHead {
    pub fn new(pk: impl Into<String>, sk: impl Into<String>, kind: &str) -> Self {
        Self { pk: pk.into(), sk: sk.into(), kind: kind.to_string() }
    }
}

/// The table and its client.
#[derive(Clone, Debug)]
pub struct Store {
    pub client: aws_sdk_dynamodb::Client,
    pub table: String,
}

/// The outcome of a transaction that may lose a race.
#[derive(Debug)]
pub enum TxOutcome {
    Committed,
    /// A condition failed; `reasons[i]` is the cancellation code of item `i`
    /// (`None` for items that were fine), so callers can tell which check lost.
    ConditionFailed {
        reasons: Vec<Option<String>>,
    },
}

impl Store {
    pub fn new(client: aws_sdk_dynamodb::Client, table: impl Into<String>) -> Self {
        Self { client, table: table.into() }
    }

    /// Runs a transaction; a failed condition is an outcome, not an error.
    ///
    /// A transaction of one write is sent as that write alone: a single-item
    /// write is just as atomic and conditional, and DynamoDB bills an item
    /// inside `TransactWriteItems` twice (the attempt item, a few KB, is
    /// written this way on every runner fact).
    ///
    /// A transaction conflict (another transaction held an item) or
    /// throttling applied nothing, so the same transaction is sent again, its
    /// conditions evaluated afresh (`contention::retry_conflicts`); the
    /// caller hears of it only when it persists.
    ///
    /// A transaction carries a `ClientRequestToken` (the SDK fills it in, one
    /// per `send`), so when its response is lost after it was applied, the
    /// SDK's retry of the same request is answered "done" instead of running
    /// it again against the state it created (which would fail its own
    /// conditions and read as a lost race).
    pub async fn transact(&self, items: Vec<TransactWriteItem>) -> Result<TxOutcome, StoreError> {
        contention::retry_conflicts(|| self.transact_once(&items)).await
    }

    async fn transact_once(&self, items: &[TransactWriteItem]) -> Result<TxOutcome, StoreError> {
        if let [item] = items {
            if let Some(outcome) = self.write_one(item.clone()).await? {
                return Ok(outcome);
            }
        }
        match self.client.transact_write_items().set_transact_items(Some(items.to_vec())).send().await {
            Ok(_) => Ok(TxOutcome::Committed),
            Err(SdkError::ServiceError(err)) => match err.err() {
                TransactWriteItemsError::TransactionCanceledException(cancel) => {
                    let reasons: Vec<Option<String>> = cancel
                        .cancellation_reasons()
                        .iter()
                        .map(|r| r.code().filter(|c| *c != "None").map(str::to_string))
                        .collect();
                    let codes = || reasons.iter().flatten();
                    if codes().all(|c| c == "ConditionalCheckFailed") {
                        Ok(TxOutcome::ConditionFailed { reasons })
                    } else if codes().any(|c| c == "TransactionConflict") {
                        Err(StoreError::TransactionConflict(format!("transaction cancelled: {reasons:?}")))
                    } else if codes().any(|c| THROTTLING_CODES.contains(&c.as_str())) {
                        Err(StoreError::Throttled(format!("transaction cancelled: {reasons:?}")))
                    } else {
                        Err(StoreError::DynamoDb(format!("transaction cancelled: {reasons:?}")))
                    }
                }
                _ => Err(StoreError::from(SdkError::ServiceError(err))),
            },
            Err(err) => Err(err.into()),
        }
    }
}

impl Store {
    /// The item at (`pk`, `sk`), read consistently (what a compare-and-set
    /// or an authentication decides on).
    pub async fn get(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        self.get_item(pk, sk, true).await
    }

    /// The item at (`pk`, `sk`), read eventually consistently: half the
    /// read units, where a moment's staleness is harmless (a snapshot never
    /// changes; an operator token's revocation may take a moment to bite).
    pub async fn get_eventually(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        self.get_item(pk, sk, false).await
    }

    async fn get_item(&self, pk: &str, sk: &str, consistent: bool) -> Result<Option<Item>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .consistent_read(consistent)
            .send()
            .await?;
        Ok(out.item)
    }

    /// A `Query` of partition `pk`, for the caller to refine (a limit, a
    /// start key, consistency).
    pub(crate) fn query_partition(&self, pk: String) -> QueryFluentBuilder {
        self.client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(pk))
    }

    /// Every item of partition `pk`, read consistently, every page.
    pub(crate) async fn partition<T: serde::de::DeserializeOwned>(&self, pk: String) -> Result<Vec<T>, StoreError> {
        query_all(self.query_partition(pk).consistent_read(true)).await
    }

    /// The items at `keys` (`pk`, `sk`) that exist, read consistently in
    /// `BatchGetItem`s of at most 100 keys.
    pub(crate) async fn batch_get<T: serde::de::DeserializeOwned>(
        &self,
        keys: impl Iterator<Item = (String, String)>,
    ) -> Result<Vec<T>, StoreError> {
        self.batch_get_items(keys, true).await
    }

    /// [`Store::batch_get`] read eventually consistently: half the read
    /// units, where a view a moment stale is fine.
    pub(crate) async fn batch_get_eventually<T: serde::de::DeserializeOwned>(
        &self,
        keys: impl Iterator<Item = (String, String)>,
    ) -> Result<Vec<T>, StoreError> {
        self.batch_get_items(keys, false).await
    }

    async fn batch_get_items<T: serde::de::DeserializeOwned>(
        &self,
        keys: impl Iterator<Item = (String, String)>,
        consistent: bool,
    ) -> Result<Vec<T>, StoreError> {
        let keys: Vec<Item> =
            keys.map(|(pk, sk)| HashMap::from([("pk".to_string(), s(pk)), ("sk".to_string(), s(sk))])).collect();
        let mut found = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(BATCH_GET_MAX_KEYS) {
            let mut wanted =
                build(KeysAndAttributes::builder().set_keys(Some(chunk.to_vec())).consistent_read(consistent).build())?;
            for attempt in 0..BATCH_GET_ATTEMPTS {
                if attempt > 0 {
                    // Unprocessed keys mean the table throttled part of the batch.
                    tokio::time::sleep(std::time::Duration::from_millis(50 << attempt)).await;
                }
                let out = self.client.batch_get_item().request_items(&self.table, wanted.clone()).send().await?;
                for item in out.responses.and_then(|mut r| r.remove(&self.table)).unwrap_or_default() {
                    found.push(from_item(item)?);
                }
                match out.unprocessed_keys.and_then(|mut u| u.remove(&self.table)) {
                    Some(rest) if !rest.keys.is_empty() => wanted = rest,
                    _ => break,
                }
                if attempt + 1 == BATCH_GET_ATTEMPTS {
                    return Err(StoreError::Throttled("a batch read left keys unprocessed".into()));
                }
            }
        }
        Ok(found)
    }

    /// The transaction's put of a new item: its condition fails if an item
    /// is at its key already.
    pub(crate) fn new_item_put<T: serde::Serialize>(&self, item: &T) -> Result<TransactWriteItem, StoreError> {
        self.versioned_put(item, None)
    }

    /// The transaction's put of a versioned item: a new one
    /// (`expected_version: None`, must not exist) or a compare-and-set on
    /// the `version` that was read.
    pub(crate) fn versioned_put<T: serde::Serialize>(
        &self,
        item: &T,
        expected_version: Option<u64>,
    ) -> Result<TransactWriteItem, StoreError> {
        let put = Put::builder().table_name(&self.table).set_item(Some(to_item(item)?));
        let put = match expected_version {
            None => put.condition_expression("attribute_not_exists(pk)"),
            Some(version) => put.condition_expression("version = :v").expression_attribute_values(":v", n(version)),
        };
        Ok(TransactWriteItem::builder().put(build(put.build())?).build())
    }

    /// The transaction's put of `item`, whatever is at its key.
    pub(crate) fn item_put<T: serde::Serialize>(&self, item: &T) -> Result<TransactWriteItem, StoreError> {
        let put = build(Put::builder().table_name(&self.table).set_item(Some(to_item(item)?)).build())?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// Puts a new item on its own; `false` if an item is at its key already.
    pub(crate) async fn put_if_absent<T: serde::Serialize>(&self, item: &T) -> Result<bool, StoreError> {
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(to_item(item)?))
            .condition_expression("attribute_not_exists(pk)");
        condition_may_fail(|| put.clone().send()).await
    }

    /// The single-item form of a transaction's write; `None` for a lone
    /// condition check, which only a transaction can express.
    async fn write_one(&self, mut item: TransactWriteItem) -> Result<Option<TxOutcome>, StoreError> {
        let written = if let Some(put) = item.put.take() {
            let written = self
                .client
                .put_item()
                .table_name(put.table_name)
                .set_item(Some(put.item))
                .set_condition_expression(put.condition_expression)
                .set_expression_attribute_names(put.expression_attribute_names)
                .set_expression_attribute_values(put.expression_attribute_values)
                .send()
                .await;
            condition_outcome(written)?
        } else if let Some(update) = item.update.take() {
            let written = self
                .client
                .update_item()
                .table_name(update.table_name)
                .set_key(Some(update.key))
                .update_expression(update.update_expression)
                .set_condition_expression(update.condition_expression)
                .set_expression_attribute_names(update.expression_attribute_names)
                .set_expression_attribute_values(update.expression_attribute_values)
                .send()
                .await;
            condition_outcome(written)?
        } else if let Some(delete) = item.delete.take() {
            let written = self
                .client
                .delete_item()
                .table_name(delete.table_name)
                .set_key(Some(delete.key))
                .set_condition_expression(delete.condition_expression)
                .set_expression_attribute_names(delete.expression_attribute_names)
                .set_expression_attribute_values(delete.expression_attribute_values)
                .send()
                .await;
            condition_outcome(written)?
        } else {
            return Ok(None);
        };
        Ok(Some(if written {
            TxOutcome::Committed
        } else {
            TxOutcome::ConditionFailed { reasons: vec![Some("ConditionalCheckFailed".to_string())] }
        }))
    }
}

/// `BatchGetItem` takes at most 100 keys.
const BATCH_GET_MAX_KEYS: usize = 100;

/// Sends of one batch before its unprocessed keys are an error.
const BATCH_GET_ATTEMPTS: u32 = 5;

/// Error codes (of a request, or of a transaction's cancellation reasons)
/// that mean DynamoDB throttled the request.
const THROTTLING_CODES: &[&str] = &[
    "ProvisionedThroughputExceeded",
    "ProvisionedThroughputExceededException",
    "ThrottlingError",
    "ThrottlingException",
    "RequestLimitExceeded",
];

/// Keeps throttling and transaction conflicts apart from other failures:
/// they are lost races to retry, the others are not.
impl<E, R> From<SdkError<E, R>> for StoreError
where
    E: std::error::Error + aws_sdk_dynamodb::error::ProvideErrorMetadata + 'static,
    R: std::fmt::Debug,
{
    fn from(err: SdkError<E, R>) -> Self {
        let message = display_sdk_error(&err);
        // No answer, or none that could be read: the request may or may not
        // have been applied, like a 500.
        let no_answer =
            matches!(err, SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_));
        match err.as_service_error().and_then(|e| e.code()) {
            Some(code) if THROTTLING_CODES.contains(&code) => StoreError::Throttled(message),
            Some("TransactionConflictException") => StoreError::TransactionConflict(message),
            Some("InternalServerError" | "ServiceUnavailable") => StoreError::Unavailable(message),
            _ if no_answer => StoreError::Unavailable(message),
            _ => StoreError::DynamoDb(message),
        }
    }
}

/// A conditional write whose condition failing is fine (the state it wanted
/// is there already, or the item it guards is gone): `Ok(false)` then.
/// `send` sends the write; a conflict or throttling sends it again
/// (`contention::retry_conflicts`).
pub async fn condition_may_fail<T, E, R, F, Fut>(send: F) -> Result<bool, StoreError>
where
    E: std::error::Error + aws_sdk_dynamodb::error::ProvideErrorMetadata + 'static,
    R: std::fmt::Debug,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, SdkError<E, R>>>,
{
    let mut send = send;
    contention::retry_conflicts(|| {
        let sent = send();
        async move { condition_outcome(sent.await) }
    })
    .await
}

/// Every item `query` matches, page after page.
pub(crate) async fn query_all<T: serde::de::DeserializeOwned>(query: QueryFluentBuilder) -> Result<Vec<T>, StoreError> {
    let mut pages = query.into_paginator().items().send();
    let mut found = Vec::new();
    while let Some(item) = pages.next().await {
        found.push(from_item(item?)?);
    }
    Ok(found)
}

/// Whether a conditional write was applied (`Ok(false)`: its condition failed).
fn condition_outcome<T, E, R>(result: Result<T, SdkError<E, R>>) -> Result<bool, StoreError>
where
    E: std::error::Error + aws_sdk_dynamodb::error::ProvideErrorMetadata + 'static,
    R: std::fmt::Debug,
{
    match result {
        Ok(_) => Ok(true),
        Err(SdkError::ServiceError(err)) if err.err().code() == Some("ConditionalCheckFailedException") => Ok(false),
        Err(err) => Err(err.into()),
    }
}

/// A readable message for an SDK error (its `Display` alone says "service error").
pub fn display_sdk_error<E: std::error::Error + 'static, R: std::fmt::Debug>(err: &SdkError<E, R>) -> String {
    format!("{}", aws_sdk_dynamodb::error::DisplayErrorContext(err))
}

/// A string attribute.
pub fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

/// A number attribute.
pub fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// Serialises a value into an item.
pub fn to_item<T: serde::Serialize>(value: &T) -> Result<Item, StoreError> {
    Ok(serde_dynamo::to_item(value)?)
}

/// A built request part (an `Update`, a `Put`…): the SDK's builders fail
/// only on a missing required field, a bug here, not a state of the table.
pub fn build<T, E: std::fmt::Display>(built: Result<T, E>) -> Result<T, StoreError> {
    built.map_err(|e| StoreError::Other(e.to_string()))
}

/// Deserialises an item.
pub fn from_item<T: serde::de::DeserializeOwned>(item: Item) -> Result<T, StoreError> {
    Ok(serde_dynamo::from_item(item)?)
}

pub mod artifacts;
pub mod attempts;
pub mod caches;
pub mod claims;
pub mod concurrency;
pub mod connections;
pub mod contention;
pub mod error;
#[cfg(test)]
mod flattened_items;
pub mod hooks;
pub mod keys;
pub mod leases;
pub mod operators;
pub mod outbox;
pub mod pipelines;
pub mod processed;
pub mod provisioners;
pub mod queue;
pub mod records;
pub mod run_requests;
pub mod runner_items;
pub mod runs;
pub mod schedules;
pub mod serialize;
pub mod sessions;
pub mod specs;
pub mod variables;
