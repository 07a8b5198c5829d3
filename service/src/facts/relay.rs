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

use baton_store::outbox::{OutboxItem, OUTBOX_TYPE};

/// EventBridge takes at most 10 entries per `PutEvents`.
pub const PUT_EVENTS_MAX_ENTRIES: usize = 10;

/// EventBridge takes at most 256 KB of entries per `PutEvents` (and so per
/// entry), counted by [`entry_size`].
pub const PUT_EVENTS_MAX_BYTES: usize = 256 * 1024;

/// An entry's size as EventBridge counts it against [`PUT_EVENTS_MAX_BYTES`]:
/// 14 bytes for the time, then the source, detail type and detail (UTF-8).
pub fn entry_size(item: &OutboxItem) -> usize {
    14 + item.source.len() + item.detail_type.len() + item.detail.len()
}

/// Splits `facts`, in order, into requests EventBridge accepts: at most ten
/// entries and [`PUT_EVENTS_MAX_BYTES`] each. A fact larger than the limit
/// alone cannot be published by anyone; it gets a request of its own (which
/// fails, and the stream's retries, bisection and failure destination take
/// it out of the way of later facts). Facts are small by construction
/// (`limits`), so that never happens to a fact Baton writes.
pub fn put_events_batches(facts: &[PendingFact]) -> Vec<&[PendingFact]> {
    let mut batches = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, fact) in facts.iter().enumerate() {
        let size = entry_size(&fact.item);
        let full = i - start == PUT_EVENTS_MAX_ENTRIES || (i > start && bytes + size > PUT_EVENTS_MAX_BYTES);
        if full {
            batches.push(&facts[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    if start < facts.len() {
        batches.push(&facts[start..]);
    }
    batches
}

/// How often a failed entry is retried within one invocation before the
/// record is handed back to the stream as a batch item failure.
pub const PUBLISH_ATTEMPTS: u32 = 3;

/// An outbox item taken from one stream record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingFact {
    pub sequence_number: Option<String>,
    pub item: OutboxItem,
}

/// The facts of a stream batch's outbox items, in stream order (an item's
/// facts in its order, each with the item's sequence number: a failure
/// hands the whole item back to the stream, and its facts published
/// already are published again, which consumers absorb). Records that are
/// not new outbox items are skipped; an outbox record that cannot be read
/// is logged and skipped too (retrying it could never succeed, and holding
/// the shard on it would stall every later fact).
pub fn outbox_records(event: &Event) -> Vec<PendingFact> {
    event
        .records
        .iter()
        .filter_map(pending_fact)
        .flat_map(|pending| {
            let sequence_number = pending.sequence_number;
            pending
                .item
                .facts()
                .into_iter()
                .map(move |item| PendingFact { sequence_number: sequence_number.clone(), item })
        })
        .collect()
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

/// Publishes the facts to `bus` in requests EventBridge accepts (by count
/// and by bytes), retrying failed entries, and reports the first fact that
/// could not be published (with everything after it, the stream retries
/// from there).
pub async fn publish(client: &aws_sdk_eventbridge::Client, bus: &str, facts: &[PendingFact]) -> DynamoDbEventResponse {
    let mut response = DynamoDbEventResponse::default();
    for chunk in put_events_batches(facts) {
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

/// Publishes again the facts of the outbox that occurred from `since` to
/// `until`: the recovery for stream batches the relay gave up on (they land
/// in the stream's failure queue with their records' arrival times).
/// Consumers are idempotent, so a fact published twice is harmless. Returns
/// how many facts were published; an error names the first that was not.
#[cfg(feature = "operator-tools")]
pub async fn republish_outbox(
    store: &baton_store::Store,
    client: &aws_sdk_eventbridge::Client,
    bus: &str,
    since: chrono::DateTime<chrono::Utc>,
    until: chrono::DateTime<chrono::Utc>,
) -> Result<usize, String> {
    let items = store.outbox_between(since, until).await.map_err(|e| e.to_string())?;
    let facts: Vec<PendingFact> =
        items.into_iter().map(|item| PendingFact { sequence_number: Some(item.event_id.to_string()), item }).collect();
    let response = publish(client, bus, &facts).await;
    match response.batch_item_failures.first() {
        None => Ok(facts.len()),
        Some(failed) => Err(format!("fact {:?} and the ones after it were not published", failed.item_identifier)),
    }
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
    use baton_api::facts::{Fact, RunCancelled};
    use baton_store::to_item;

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

    fn fact_of(detail_bytes: usize, seq: usize) -> PendingFact {
        let (mut item, _) = outbox_image();
        item.detail = "x".repeat(detail_bytes);
        PendingFact { sequence_number: Some(seq.to_string()), item }
    }

    #[test]
    fn batches_hold_at_most_ten_entries_and_256_kb_in_order() {
        let small: Vec<PendingFact> = (0..25).map(|i| fact_of(100, i)).collect();
        let sizes: Vec<usize> = put_events_batches(&small).iter().map(|b| b.len()).collect();
        assert_eq!(sizes, vec![10, 10, 5]);

        // 100 KB facts: two fit a request, a third would pass 256 KB.
        let big: Vec<PendingFact> = (0..5).map(|i| fact_of(100 * 1024, i)).collect();
        let batches = put_events_batches(&big);
        assert_eq!(batches.iter().map(|b| b.len()).collect::<Vec<_>>(), vec![2, 2, 1]);
        for batch in &batches {
            assert!(batch.iter().map(|f| entry_size(&f.item)).sum::<usize>() <= PUT_EVENTS_MAX_BYTES);
        }
        let order: Vec<_> = batches.iter().flat_map(|b| b.iter()).map(|f| f.sequence_number.clone()).collect();
        assert_eq!(order, big.iter().map(|f| f.sequence_number.clone()).collect::<Vec<_>>(), "stream order kept");

        // One that is too large alone goes alone, and holds nothing else up.
        let mixed = vec![fact_of(10, 0), fact_of(300 * 1024, 1), fact_of(10, 2)];
        assert_eq!(put_events_batches(&mixed).iter().map(|b| b.len()).collect::<Vec<_>>(), vec![1, 1, 1]);
        assert!(put_events_batches(&[]).is_empty());
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

    #[test]
    fn the_facts_written_together_in_one_item_are_each_relayed_in_order_under_its_sequence_number() {
        let facts: Vec<OutboxItem> = (0..3).map(|_| outbox_image().0).collect();
        let together = OutboxItem::together(facts.clone());
        assert_eq!(together.len(), 1, "three small facts of one change, one item");
        let image = serde_dynamo::Item::from(to_item(&together[0]).unwrap());
        let mut event = Event::default();
        event.records = vec![record("INSERT", image, "7"), record("INSERT", outbox_image().1, "8")];
        let relayed = outbox_records(&event);
        let ids: Vec<_> = relayed.iter().map(|f| f.item.event_id).collect();
        assert_eq!(ids[..3], facts.iter().map(|f| f.event_id).collect::<Vec<_>>()[..], "each fact, in order");
        assert_eq!(relayed.len(), 4);
        let sequence: Vec<_> = relayed.iter().map(|f| f.sequence_number.as_deref()).collect();
        assert_eq!(sequence, [Some("7"), Some("7"), Some("7"), Some("8")]);
        let published =
            |f: &OutboxItem| (f.event_id, f.source.clone(), f.detail_type.clone(), f.detail.clone(), f.occurred_at);
        for (relayed, written) in relayed.iter().zip(&facts) {
            assert_eq!(published(&relayed.item), published(written), "published exactly as written");
        }
    }
}
