//! The `orchestrator` function: the trigger side of the `run-attempt` state
//! machine's tasks (infra/statemachines/run-attempt.asl.json), delivered
//! through the `orchestrate` task queue. What a task does is the use case's
//! (`baton_service::usecases::orchestration::step`); this reads the SQS
//! message and its `SentTimestamp`, and lets SQS retry a failed message.

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use baton_service::context::Context;
use baton_service::sqs::partial_batch;
use baton_service::usecases::orchestration::step::run_task;
use baton_service::usecases::orchestration::TaskMessage;
use baton_store::StoreError;

/// Handles a batch of task messages; failed ones are retried by SQS.
pub async fn handle(context: &Context, event: SqsEvent) -> SqsBatchResponse {
    partial_batch(event, |message| handle_message(context, message)).await
}

async fn handle_message(context: &Context, message: SqsMessage) -> Result<(), StoreError> {
    let body = message.body.as_deref().unwrap_or_default();
    let task: TaskMessage = match serde_json::from_str(body) {
        Ok(task) => task,
        Err(err) => {
            // Not from the state machine: nothing can ever handle it.
            tracing::error!(error = %err, body, "malformed orchestration task dropped");
            return Ok(());
        }
    };
    run_task(context, task, sent_at(&message)).await
}

/// When SQS took the message (`SentTimestamp`, ms; kept on redelivery).
fn sent_at(message: &SqsMessage) -> i64 {
    message.attributes.get("SentTimestamp").and_then(|t| t.parse().ok()).unwrap_or(0)
}
