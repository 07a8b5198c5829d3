//! Consuming facts from a subscriber's SQS queue.
//!
//! Each message body is an EventBridge envelope whose `detail` is a [`Fact`].
//! Messages go through the one partial-batch loop (`crate::sqs`), so one
//! poison message is retried and finally dead-lettered on its own while the
//! rest of the batch succeeds.

use std::future::Future;

use aws_lambda_events::eventbridge::EventBridgeEvent;
use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};

use crate::sqs::{partial_batch, MessageError};
use baton_api::facts::{Fact, FactDetail};

/// A fact as delivered: its detail type and raw detail.
#[derive(Debug, Clone)]
pub struct Delivered {
    pub detail_type: String,
    pub detail: serde_json::Value,
}

impl Delivered {
    /// The detail as the typed fact `D`; an error when the type or the shape differ.
    pub fn parse<D: FactDetail>(&self) -> Result<Fact<D>, HandlerError> {
        if self.detail_type != D::DETAIL_TYPE {
            return Err(HandlerError::Permanent(format!("expected {}, got {}", D::DETAIL_TYPE, self.detail_type)));
        }
        serde_json::from_value(self.detail.clone())
            .map_err(|e| HandlerError::Permanent(format!("malformed {}: {e}", D::DETAIL_TYPE)))
    }
}

/// Why a message was not handled. Both kinds are reported as failures (the
/// queue's redrive policy decides when to give up); the kind only changes how
/// loudly it is logged.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HandlerError {
    /// Will never succeed (malformed, unknown type): it is headed for the DLQ.
    #[error("permanent: {0}")]
    Permanent(String),
    /// May succeed on redelivery (a backend failed).
    #[error("transient: {0}")]
    Transient(String),
}

impl MessageError for HandlerError {
    fn permanent(&self) -> bool {
        matches!(self, HandlerError::Permanent(_))
    }
}

impl From<baton_store::StoreError> for HandlerError {
    fn from(err: baton_store::StoreError) -> Self {
        HandlerError::Transient(err.to_string())
    }
}

/// Parses one SQS message into the fact it carries.
pub fn delivered(message: &SqsMessage) -> Result<Delivered, HandlerError> {
    let body = message.body.as_deref().ok_or_else(|| HandlerError::Permanent("empty message".into()))?;
    let envelope: EventBridgeEvent<serde_json::Value> =
        serde_json::from_str(body).map_err(|e| HandlerError::Permanent(format!("not an EventBridge event: {e}")))?;
    Ok(Delivered { detail_type: envelope.detail_type, detail: envelope.detail })
}

/// Runs `handle` on the fact of every message of the batch concurrently
/// and reports the ones that failed (`crate::sqs::partial_batch`).
pub async fn consume<F, Fut>(event: SqsEvent, handle: F) -> SqsBatchResponse
where
    F: Fn(Delivered) -> Fut,
    Fut: Future<Output = Result<(), HandlerError>>,
{
    let handle = &handle;
    partial_batch(event, |message| async move { handle(delivered(&message)?).await }).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_api::facts::RunCancelled;

    fn message(id: &str, body: &str) -> SqsMessage {
        let mut m = SqsMessage::default();
        m.message_id = Some(id.into());
        m.body = Some(body.into());
        m
    }

    #[tokio::test]
    async fn a_poison_message_fails_alone() {
        let fact = Fact::new("ws", chrono::Utc::now(), RunCancelled { run_id: uuid::Uuid::now_v7(), attempt: 1 });
        let good = serde_json::json!({
            "version": "0", "id": "e1", "detail-type": "baton.workflows.run.cancelled",
            "source": "baton.workflows", "time": "2026-01-01T00:00:00Z", "region": "us-east-1",
            "resources": [], "detail": fact,
        });
        let mut event = SqsEvent::default();
        event.records = vec![message("bad", "{not json"), message("good", &good.to_string())];
        let response = consume(event, |d: Delivered| async move { d.parse::<RunCancelled>().map(|_| ()) }).await;
        let failed: Vec<_> = response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
        assert_eq!(failed, vec!["bad"]);
    }
}
