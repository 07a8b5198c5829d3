//! The outbox relay: stream records of outbox items → EventBridge.
//!
//! Replay safety: the fact's `event_id` is the outbox item's id, so a stream
//! record delivered twice publishes the same fact twice and consumers dedupe by
//! state. Only INSERT records of outbox items are published (an emulator's
//! no-op MODIFY of the same item is not a new fact).

use aws_lambda_events::dynamodb::{Event, EventRecord};
use aws_lambda_events::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use std::time::Duration;

use crate::store::outbox::{OutboxItem, OUTBOX_TYPE};

/// EventBridge takes at most 10 entries per `PutEvents`.
pub const PUT_EVENTS_MAX_ENTRIES: usize = 10;

/// How often a failed entry is retried within one invocation before the
/// record is handed back to the stream as a batch item failure.
pub const PUBLISH_ATTEMPTS: u32 = 3;

/// An outbox item taken from one stream record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingFact {
    pub sequence_number: Option<String>,
    pub item: OutboxItem,
}

/// The outbox items of a stream batch, in stream order. Records that are not
/// new outbox items are skipped; an outbox record that cannot be read is
/// logged and skipped too (retrying it could never succeed, and holding the
/// shard on it would stall every later fact).
pub fn outbox_records(event: &Event) -> Vec<PendingFact> {
    event.records.iter().filter_map(pending_fact).collect()
}

fn pending_fact(record: &EventRecord) -> Option<PendingFact> {
    if record.event_name != "INSERT" {
        return None;
    }
    let image = &record.change.new_image;
    let is_outbox = matches!(image.get("type"), Some(serde_dynamo::AttributeValue::S(t)) if t == OUTBOX_TYPE);
    if !is_outbox {
        return None;
    }
    match serde_dynamo::from_item::<_, OutboxItem>(image.clone()) {
        Ok(item) => Some(PendingFact { sequence_number: record.change.sequence_number.clone(), item }),
        Err(err) => {
            tracing::error!(error = %err, sequence_number = ?record.change.sequence_number, "unreadable outbox item skipped");
            None
        }
    }
}

/// Publishes the facts to `bus` in chunks of at most ten, retrying failed
/// entries, and reports the first fact that could not be published (with
/// everything after it, the stream retries from there).
pub async fn publish(client: &aws_sdk_eventbridge::Client, bus: &str, facts: &[PendingFact]) -> DynamoDbEventResponse {
    let mut response = DynamoDbEventResponse::default();
    for chunk in facts.chunks(PUT_EVENTS_MAX_ENTRIES) {
        if let Err(first_failed) = publish_chunk(client, bus, chunk).await {
            let mut failure = DynamoDbBatchItemFailure::default();
            failure.item_identifier = first_failed.sequence_number.clone();
            response.batch_item_failures.push(failure);
            break;
        }
    }
    response
}

/// Publishes one chunk; on persistent failure returns the earliest fact that failed.
async fn publish_chunk<'a>(
    client: &aws_sdk_eventbridge::Client,
    bus: &str,
    chunk: &'a [PendingFact],
) -> Result<(), &'a PendingFact> {
    let mut remaining: Vec<&PendingFact> = chunk.iter().collect();
    for attempt in 0..PUBLISH_ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(100 * 2u64.pow(attempt))).await;
        }
        let entries: Vec<PutEventsRequestEntry> = remaining.iter().map(|f| entry(bus, &f.item)).collect();
        match client.put_events().set_entries(Some(entries)).send().await {
            Ok(out) => {
                // Entries come back in request order; an entry with an error
                // code was not published.
                let failed: Vec<&PendingFact> = out
                    .entries()
                    .iter()
                    .zip(remaining.iter())
                    .filter(|(result, _)| result.error_code().is_some())
                    .map(|(_, fact)| *fact)
                    .collect();
                if failed.is_empty() {
                    for fact in &remaining {
                        tracing::info!(event_id = %fact.item.event_id, detail_type = %fact.item.detail_type, "fact published");
                    }
                    return Ok(());
                }
                tracing::warn!(failed = failed.len(), attempt, "some facts were not published; retrying them");
                remaining = failed;
            }
            Err(err) => {
                tracing::warn!(error = ?err, attempt, "PutEvents failed; retrying");
            }
        }
    }
    Err(remaining[0])
}

fn entry(bus: &str, item: &OutboxItem) -> PutEventsRequestEntry {
    PutEventsRequestEntry::builder()
        .event_bus_name(bus)
        .source(&item.source)
        .detail_type(&item.detail_type)
        .detail(&item.detail)
        .time(aws_smithy_types::DateTime::from_millis(item.occurred_at.timestamp_millis()))
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{Fact, RunCancelled};
    use crate::store::to_item;

    fn record(event_name: &str, item: serde_dynamo::Item, seq: &str) -> EventRecord {
        let mut record = EventRecord::default();
        record.event_name = event_name.into();
        record.change.new_image = item;
        record.change.sequence_number = Some(seq.into());
        record
    }

    fn outbox_image() -> (OutboxItem, serde_dynamo::Item) {
        let fact = Fact::new("ws", chrono::Utc::now(), RunCancelled { run_id: uuid::Uuid::now_v7(), attempt: 1 });
        let item = OutboxItem::for_fact(&fact, 7).unwrap();
        let sdk_item = to_item(&item).unwrap();
        (item, serde_dynamo::Item::from(sdk_item))
    }

    #[test]
    fn only_inserted_outbox_items_are_relayed() {
        let (item, image) = outbox_image();
        let mut other = image.clone();
        other.insert("type".into(), serde_dynamo::AttributeValue::S("run".into()));
        let mut event = Event::default();
        event.records = vec![
            record("INSERT", image.clone(), "1"),
            record("MODIFY", image.clone(), "2"),
            record("INSERT", other, "3"),
            record("REMOVE", image, "4"),
        ];
        let facts = outbox_records(&event);
        assert_eq!(facts, vec![PendingFact { sequence_number: Some("1".into()), item }]);
    }
}
