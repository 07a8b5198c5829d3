//! Subscriber of `workflows.run.attempt_created`: starts the attempt's
//! `run-attempt` state machine execution.
//!
//! Idempotency: the execution is named `<run_id>-<attempt>` and its input
//! is serialised deterministically, so a redelivered fact starts nothing
//! new (`ExecutionAlreadyExists` of a running or succeeded execution counts
//! as started); one that died is replaced by its next generation
//! (`<run_id>-<attempt>-g<n>`, `orchestration::start_attempt_execution`).

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use baton_api::facts::RunAttemptCreated;
use baton_service::context::Context;
use baton_service::facts::subscriber::{consume, Delivered, HandlerError};
use baton_service::usecases::orchestration::{start_attempt_execution, AttemptRef};

pub async fn handle(context: &Context, event: SqsEvent) -> SqsBatchResponse {
    consume(event, |delivered| start(context, delivered)).await
}

async fn start(context: &Context, delivered: Delivered) -> Result<(), HandlerError> {
    let fact = delivered.parse::<RunAttemptCreated>()?;
    let arn = context
        .config
        .run_state_machine_arn
        .as_deref()
        .ok_or_else(|| HandlerError::Transient("BATON_RUN_STATE_MACHINE_ARN is not configured".into()))?;
    let attempt = AttemptRef {
        workspace_id: fact.header.workspace_id.clone(),
        run_id: fact.detail.run_id,
        attempt: fact.detail.attempt,
    };
    let execution =
        start_attempt_execution(context.clients.sfn(), arn, &attempt, context.config.orchestration.max_wait).await?;
    tracing::info!(run_id = %attempt.run_id, attempt = attempt.attempt, %execution, "attempt orchestration started");
    Ok(())
}
