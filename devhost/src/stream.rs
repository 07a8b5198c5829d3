//! A DynamoDB Streams event-source mapping for the relay: read the table's
//! stream in order, hand batches to the function, and on a reported failure
//! resume from the failed record (later records are delivered again, as on
//! Lambda: at least once).

use baton_localstack::faults::{abandoned_after_first_write, Fault, FaultPlan, TRIGGER};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::dynamodb::{Event, EventRecord};
use aws_sdk_dynamodbstreams::types::{Record, ShardIteratorType};

use crate::functions::Functions;
use crate::Shutdown;

pub struct StreamPoller {
    pub function: String,
    pub stream_arn: String,
    pub batch_size: i32,
    pub idle_delay: Duration,
    pub retry_delay: Duration,
    pub streams: aws_sdk_dynamodbstreams::Client,
    pub functions: Arc<Functions>,
    /// Deliveries as Lambda makes them on a bad day (`trigger.stream` faults).
    pub faults: Option<Arc<FaultPlan>>,
}

impl StreamPoller {
    pub async fn run(self, mut shutdown: Shutdown) {
        let mut iterator: Option<String> = None;
        loop {
            if shutdown.has_changed().unwrap_or(true) {
                return;
            }
            match self.step(iterator.take()).await {
                Ok((next, busy)) => {
                    iterator = next;
                    if !busy {
                        tokio::select! {
                            _ = shutdown.changed() => return,
                            _ = tokio::time::sleep(self.idle_delay) => {}
                        }
                    }
                }
                Err(err) => {
                    tracing::warn!(error = %err, "stream poll failed");
                    tokio::select! {
                        _ = shutdown.changed() => return,
                        _ = tokio::time::sleep(self.retry_delay) => {}
                    }
                }
            }
        }
    }

    async fn shard_iterator(&self, kind: ShardIteratorType, sequence: Option<String>) -> Result<String, String> {
        let described =
            self.streams.describe_stream().stream_arn(&self.stream_arn).send().await.map_err(|e| format!("{e:?}"))?;
        let shard = described
            .stream_description()
            .and_then(|d| d.shards().first())
            .and_then(|s| s.shard_id())
            .ok_or("stream has no shard")?
            .to_string();
        let out = self
            .streams
            .get_shard_iterator()
            .stream_arn(&self.stream_arn)
            .shard_id(shard)
            .shard_iterator_type(kind)
            .set_sequence_number(sequence)
            .send()
            .await
            .map_err(|e| format!("{e:?}"))?;
        out.shard_iterator().map(str::to_string).ok_or_else(|| "no shard iterator".to_string())
    }

    /// Reads one batch and relays it; returns the iterator to continue with
    /// and whether records were seen.
    async fn step(&self, iterator: Option<String>) -> Result<(Option<String>, bool), String> {
        let iterator = match iterator {
            Some(it) => it,
            None => self.shard_iterator(ShardIteratorType::TrimHorizon, None).await?,
        };
        let out = self
            .streams
            .get_records()
            .shard_iterator(&iterator)
            .limit(self.batch_size)
            .send()
            .await
            .map_err(|e| format!("{e:?}"))?;
        let records = out.records();
        let next = out.next_shard_iterator().map(str::to_string);
        if records.is_empty() {
            return Ok((next.or(Some(iterator)), false));
        }
        let mut event = Event::default();
        event.records = records.iter().map(|r| to_lambda_record(r, &self.stream_arn)).collect();
        let first = records.first().and_then(|r| r.dynamodb()).and_then(|c| c.sequence_number()).map(str::to_string);
        let fault = self.faults.as_ref().map(|plan| {
            let fault = plan.decide(TRIGGER, &format!("stream.{}", self.function));
            (fault, plan.late())
        });
        let invocation = self.functions.stream(&self.function, event);
        // One shard is read in order: a late batch holds up the records
        // behind it, as a slow invocation does on Lambda.
        let response = match fault {
            Some((Some(Fault::Late), late)) => {
                tokio::time::sleep(late).await;
                Some(invocation.await)
            }
            Some((Some(Fault::Abandon), _)) => abandoned_after_first_write(invocation).await,
            _ => Some(invocation.await),
        };
        let duplicate = matches!(fault, Some((Some(Fault::Duplicate), _)));
        let Some(response) = response else {
            // Lambda retries a batch whose invocation timed out or crashed.
            tracing::debug!(function = %self.function, "invocation abandoned after its first write");
            let again = self.shard_iterator(ShardIteratorType::AtSequenceNumber, first).await?;
            return Ok((Some(again), true));
        };
        let response = response.map_err(|e| e.to_string())?;
        match response.batch_item_failures.first().and_then(|f| f.item_identifier.clone()) {
            // The batch was handled; deliver it again all the same, as Lambda
            // does when an invocation's answer is lost.
            None if duplicate && first.is_some() => {
                let again = self.shard_iterator(ShardIteratorType::AtSequenceNumber, first).await?;
                Ok((Some(again), true))
            }
            None => Ok((next, true)),
            Some(sequence) => {
                tracing::warn!(%sequence, "relay reported a failure; retrying from it");
                tokio::time::sleep(self.retry_delay).await;
                let retry = self.shard_iterator(ShardIteratorType::AtSequenceNumber, Some(sequence)).await?;
                Ok((Some(retry), true))
            }
        }
    }
}

fn image(attributes: Option<&HashMap<String, aws_sdk_dynamodbstreams::types::AttributeValue>>) -> serde_dynamo::Item {
    attributes.cloned().map(serde_dynamo::Item::from).unwrap_or_default()
}

/// The record as Lambda delivers it.
pub fn to_lambda_record(record: &Record, stream_arn: &str) -> EventRecord {
    let mut out = EventRecord::default();
    out.event_id = record.event_id().unwrap_or_default().to_string();
    out.event_name = record.event_name().map(|n| n.as_str().to_string()).unwrap_or_default();
    out.event_source = Some("aws:dynamodb".into());
    out.event_version = Some("1.1".into());
    out.event_source_arn = Some(stream_arn.to_string());
    out.aws_region = "us-east-1".into();
    if let Some(change) = record.dynamodb() {
        out.change.keys = image(change.keys.as_ref());
        out.change.new_image = image(change.new_image.as_ref());
        out.change.old_image = image(change.old_image.as_ref());
        out.change.sequence_number = change.sequence_number().map(str::to_string);
        out.change.size_bytes = change.size_bytes().unwrap_or_default();
        if let Some(at) = change.approximate_creation_date_time() {
            out.change.approximate_creation_date_time =
                chrono::DateTime::from_timestamp_millis(at.to_millis().unwrap_or_default()).unwrap_or_default();
        }
    }
    out
}
