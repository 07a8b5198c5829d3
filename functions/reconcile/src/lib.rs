//! Reconcile: consumes `workflows.job_execution.terminated`. The runners side
//! drops the execution's pending item, flags its live lease for cancellation
//! (the runner sees `cancel` on its next heartbeat) or leaves a tombstone.
//! Idempotent: each write is a compare-and-set on the state it read, and the
//! cancellation timestamp is set only if absent (first one wins).

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use baton_shared::context::Context;
use baton_shared::facts::subscriber::{consume, Delivered, HandlerError};
use baton_shared::facts::JobExecutionTerminated;

pub async fn handle(context: &Context, event: SqsEvent) -> SqsBatchResponse {
    consume(event, |delivered| reconcile(context, delivered)).await
}

async fn reconcile(context: &Context, delivered: Delivered) -> Result<(), HandlerError> {
    let fact = delivered.parse::<JobExecutionTerminated>()?;
    context.store.reconcile_terminated(&fact.header.workspace_id, &fact.detail, chrono::Utc::now()).await?;
    tracing::info!(
        job_execution_id = %fact.detail.job_execution_id,
        run_id = %fact.detail.run_id,
        job_id = %fact.detail.job_id,
        event_id = %fact.header.event_id,
        "terminated execution reconciled"
    );
    Ok(())
}
