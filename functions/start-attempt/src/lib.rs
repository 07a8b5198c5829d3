//! Subscriber of `workflows.run.attempt_created`: starts the attempt's
//! `run-attempt` state machine execution.
//!
//! Idempotency: the execution is named `<run_id>-<attempt>` and its input
//! is serialised deterministically, so a redelivered fact starts nothing
//! new (`ExecutionAlreadyExists` counts as started).

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use baton_shared::aws::AwsClients;
use baton_shared::config::Config;
use baton_shared::facts::subscriber::{consume, Delivered, HandlerError};
use baton_shared::facts::RunAttemptCreated;
use baton_shared::orchestration::{start_attempt_execution, AttemptRef};

pub struct State {
    pub config: Config,
    pub clients: AwsClients,
}

impl State {
    pub fn new(config: Config, clients: AwsClients) -> Self {
        Self { config, clients }
    }
}

pub async fn handle(state: &State, event: SqsEvent) -> SqsBatchResponse {
    consume(event, |delivered| start(state, delivered)).await
}

async fn start(state: &State, delivered: Delivered) -> Result<(), HandlerError> {
    let fact = delivered.parse::<RunAttemptCreated>()?;
    let arn = state
        .config
        .run_state_machine_arn
        .as_deref()
        .ok_or_else(|| HandlerError::Transient("BATON_RUN_STATE_MACHINE_ARN is not configured".into()))?;
    let attempt = AttemptRef {
        workspace_id: fact.header.workspace_id.clone(),
        run_id: fact.detail.run_id,
        attempt: fact.detail.attempt,
    };
    start_attempt_execution(&state.clients.sfn, arn, &attempt).await?;
    tracing::info!(run_id = %attempt.run_id, attempt = attempt.attempt, execution = %attempt.execution_name(), "attempt orchestration started");
    Ok(())
}
