//! An SQS event-source mapping: receive a batch, invoke the function, delete
//! what succeeded. A message the function reports as failed is left on the
//! queue and made visible again after `retry_delay` (on AWS: after the
//! visibility timeout); SQS itself moves it to the DLQ once it has been
//! received `maxReceiveCount` times.
//!
//! Under an `integration-throttled` fault (`states.sendMessage`), a task
//! message of a state machine (one with a `token`) is taken as never sent:
//! the poller deletes it and fails its task with Step Functions' error for
//! a throttled `sqs:sendMessage`, which is what the execution sees on AWS
//! (moto makes the state machine's call itself, below any fault layer).

use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, MessageSystemAttributeName};
use serde_json::json;

use baton_localstack::faults::{abandoned_after_first_write, Fault, FaultPlan, INTEGRATION, TRIGGER};
use baton_service::usecases::orchestration::{fail_task, INTEGRATION_ERROR};

use crate::Shutdown;

/// What a queue's messages are handed to: a function's SQS handler.
pub type SqsHandler =
    Arc<dyn Fn(SqsEvent) -> futures::future::BoxFuture<'static, Result<SqsBatchResponse, String>> + Send + Sync>;

pub struct QueuePoller {
    /// The function the queue feeds (names its `trigger.sqs.<function>` faults).
    pub function: String,
    pub handler: SqsHandler,
    pub queue_url: String,
    pub queue_arn: String,
    pub batch_size: i32,
    pub retry_delay: Duration,
    pub sqs: aws_sdk_sqs::Client,
    /// Deliveries as SQS makes them on a bad day (`trigger.sqs` faults).
    pub faults: Option<Arc<FaultPlan>>,
    /// Task messages an `integration-throttled` draw let through, by id: a
    /// throttle happens once, when the state machine sends, so a message
    /// received again (a lost answer, a redelivery) is not drawn for again
    /// (else a task delivered three times would fail three times as often
    /// as it was sent, and every generation of a busy attempt would die).
    pub sent: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl QueuePoller {
    pub async fn run(self: Arc<Self>, mut shutdown: Shutdown) {
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                result = self.poll_once() => {
                    if let Err(err) = result {
                        tracing::warn!(queue = %self.queue_url, error = %err, "queue poll failed");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
            }
        }
    }

    /// One receive → invoke → settle cycle; returns how many messages it saw.
    /// A batch held back by a `late` fault is invoked and settled later, by
    /// a task of its own, while the queue's next messages overtake it.
    pub async fn poll_once(self: &Arc<Self>) -> Result<usize, String> {
        let received = self
            .sqs
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(self.batch_size)
            .wait_time_seconds(1)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
            .map_err(|e| format!("{e:?}"))?;
        let messages = self.throttle_integrations(received.messages()).await?;
        if messages.is_empty() {
            return Ok(0);
        }
        let messages = &messages[..];
        let operation = format!("sqs.{}", self.function);
        let fault = || self.faults.as_ref().and_then(|plan| plan.decide(TRIGGER, &operation));
        let batch_fault = fault();
        let mut records: Vec<_> = messages
            .iter()
            .map(|m| {
                let attributes: serde_json::Map<String, serde_json::Value> = m
                    .attributes()
                    .map(|a| a.iter().map(|(k, v)| (k.as_str().to_string(), json!(v))).collect())
                    .unwrap_or_default();
                json!({
                    "messageId": m.message_id(),
                    "receiptHandle": m.receipt_handle(),
                    "body": m.body(),
                    "attributes": attributes,
                    "messageAttributes": {},
                    "md5OfBody": m.md5_of_body(),
                    "eventSource": "aws:sqs",
                    "eventSourceARN": self.queue_arn,
                    "awsRegion": "us-east-1",
                })
            })
            .collect();
        if batch_fault == Some(Fault::Reorder) {
            records.reverse();
        }
        let event: SqsEvent =
            serde_json::from_value(json!({ "Records": records })).map_err(|e| format!("building SQS event: {e}"))?;
        let messages = messages.to_vec();
        let count = messages.len();
        match (batch_fault, &self.faults) {
            (Some(Fault::Late), Some(plan)) => {
                let (this, late) = (self.clone(), plan.late());
                tokio::spawn(async move {
                    tokio::time::sleep(late).await;
                    if let Err(err) = this.invoke_and_settle(event, &messages, false).await {
                        tracing::warn!(queue = %this.queue_url, error = %err, "settling a late batch failed");
                    }
                });
            }
            _ => self.invoke_and_settle(event, &messages, batch_fault == Some(Fault::Abandon)).await?,
        }
        Ok(count)
    }

    /// The received messages minus the task messages an
    /// `integration-throttled` fault says the state machine never sent:
    /// those are deleted and their tasks failed with [`INTEGRATION_ERROR`].
    async fn throttle_integrations(
        &self,
        messages: &[aws_sdk_sqs::types::Message],
    ) -> Result<Vec<aws_sdk_sqs::types::Message>, String> {
        let Some(plan) = &self.faults else { return Ok(messages.to_vec()) };
        let mut kept = Vec::with_capacity(messages.len());
        for message in messages {
            let token = message
                .body()
                .and_then(|body| serde_json::from_str::<serde_json::Value>(body).ok())
                .and_then(|body| body.get("token").and_then(|t| t.as_str()).map(str::to_string));
            let drawn_before = message
                .message_id()
                .is_some_and(|id| !self.sent.lock().unwrap_or_else(|e| e.into_inner()).insert(id.to_string()));
            let throttled = token.filter(|_| {
                !drawn_before && plan.decide(INTEGRATION.0, INTEGRATION.1) == Some(Fault::IntegrationThrottled)
            });
            let Some(token) = throttled else {
                kept.push(message.clone());
                continue;
            };
            let token_tail = &token[token.len().saturating_sub(12)..];
            tracing::info!(function = %self.function, token_tail, "task message throttled on its way (injected): its task fails");
            let sfn = self.sfn().await;
            let cause = "Rate exceeded (injected by BATON_FAULTS: integration-throttled)";
            fail_task(&sfn, &token, INTEGRATION_ERROR, cause)
                .await
                .map_err(|e| format!("failing a throttled task: {e}"))?;
            if let Some(handle) = message.receipt_handle() {
                self.sqs
                    .delete_message()
                    .queue_url(&self.queue_url)
                    .receipt_handle(handle)
                    .send()
                    .await
                    .map_err(|e| format!("{e:?}"))?;
            }
        }
        Ok(kept)
    }

    /// A Step Functions client of the emulator the queue lives on (its
    /// endpoint is the queue URL's origin); only faults need one.
    async fn sfn(&self) -> aws_sdk_sfn::Client {
        let url = self.queue_url.as_str();
        let origin = match url.find("://") {
            Some(scheme) => {
                let host = scheme + 3;
                url[host..].find('/').map_or(url, |path| &url[..host + path])
            }
            None => url,
        };
        baton_service::aws::AwsClients::local(origin).await.sfn().clone()
    }

    /// Invokes the function with `event` (abandoning the invocation after
    /// its first AWS write if `abandon`), deletes what it handled and makes
    /// the rest visible again after the retry delay.
    async fn invoke_and_settle(
        &self,
        event: SqsEvent,
        messages: &[aws_sdk_sqs::types::Message],
        abandon: bool,
    ) -> Result<(), String> {
        let all = || messages.iter().filter_map(|m| m.message_id().map(str::to_string)).collect();
        let invoked = if abandon {
            abandoned_after_first_write((self.handler)(event)).await
        } else {
            Some((self.handler)(event).await)
        };
        let failed: Vec<String> = match invoked {
            Some(Ok(response)) => response.batch_item_failures.into_iter().map(|f| f.item_identifier).collect(),
            Some(Err(err)) => {
                // A function that cannot take the batch fails all of it, as on Lambda.
                tracing::error!(error = %err, "function failed the whole batch");
                all()
            }
            // Lambda retries a batch whose invocation timed out or crashed.
            None => {
                tracing::debug!(function = %self.function, "invocation abandoned after its first write");
                all()
            }
        };
        let operation = format!("sqs.{}", self.function);
        let fault = || self.faults.as_ref().and_then(|plan| plan.decide(TRIGGER, &operation));
        let mut deletes = Vec::new();
        for (i, message) in messages.iter().enumerate() {
            let (Some(id), Some(handle)) = (message.message_id(), message.receipt_handle()) else { continue };
            let failed = failed.iter().any(|f| f == id);
            // A handled message delivered again at once: at least once.
            if failed || fault() == Some(Fault::Duplicate) {
                let delay = if failed { self.retry_delay.as_secs() as i32 } else { 0 };
                let _ = self
                    .sqs
                    .change_message_visibility()
                    .queue_url(&self.queue_url)
                    .receipt_handle(handle)
                    .visibility_timeout(delay)
                    .send()
                    .await;
            } else {
                deletes.push(
                    DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(handle)
                        .build()
                        .map_err(|e| e.to_string())?,
                );
            }
        }
        if !deletes.is_empty() {
            self.sqs
                .delete_message_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(deletes))
                .send()
                .await
                .map_err(|e| format!("{e:?}"))?;
        }
        Ok(())
    }
}
