//! The one partial-batch loop of every SQS-triggered function: messages are
//! handled concurrently and failures are reported per message
//! (`batchItemFailures`), so one poison message is retried, and finally
//! dead-lettered, on its own while the rest of the batch succeeds.

use std::fmt::Display;
use std::future::Future;

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};

/// A message's failure: reported to SQS either way (the queue's redrive
/// policy decides when to give up); `permanent` only says how loudly to log.
pub trait MessageError: Display {
    /// Will never succeed (malformed, unknown): it is headed for the DLQ.
    fn permanent(&self) -> bool {
        false
    }
}

impl MessageError for baton_store::StoreError {}

/// Runs `handle` on every message of the batch concurrently and reports the
/// ones that failed.
pub async fn partial_batch<F, Fut, E>(event: SqsEvent, handle: F) -> SqsBatchResponse
where
    F: Fn(SqsMessage) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: MessageError,
{
    let handle = &handle;
    let results = futures::future::join_all(event.records.into_iter().map(|message| async move {
        let message_id = message.message_id.clone();
        (message_id, handle(message).await)
    }))
    .await;
    report_failures(results)
}

/// The batch response for messages handled one way or another (one by one,
/// or several in one write): each failed message is logged and reported.
pub fn report_failures<E: MessageError>(
    outcomes: impl IntoIterator<Item = (Option<String>, Result<(), E>)>,
) -> SqsBatchResponse {
    let mut response = SqsBatchResponse::default();
    for (message_id, outcome) in outcomes {
        if let Err(err) = outcome {
            if err.permanent() {
                tracing::error!(message_id = ?message_id, error = %err, "message rejected");
            } else {
                tracing::warn!(message_id = ?message_id, error = %err, "message will be retried");
            }
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = message_id.unwrap_or_default();
            response.batch_item_failures.push(failure);
        }
    }
    response
}
