//! Reconcile: consumes `workflows.job_execution.terminated`. The runners side
//! drops the execution's pending item, flags its live lease for cancellation
//! (the runner sees `cancel` on its next heartbeat, at once if it holds a
//! push socket: it is nudged) or leaves a tombstone.
//! Idempotent: each write is a compare-and-set on the state it read, and the
//! cancellation timestamp is set only if absent (first one wins).

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use baton_api::facts::JobExecutionTerminated;
use baton_service::context::Context;
use baton_service::facts::subscriber::{consume, Delivered, HandlerError};

pub async fn handle(context: &Context, event: SqsEvent) -> SqsBatchResponse {
    consume(event, |delivered| reconcile(context, delivered)).await
}

async fn reconcile(context: &Context, delivered: Delivered) -> Result<(), HandlerError> {
    let fact = delivered.parse::<JobExecutionTerminated>()?;
    let ws = &fact.header.workspace_id;
    let now = chrono::Utc::now();
    let flagged = context.store.reconcile_terminated(ws, &fact.detail, now).await?;
    if flagged {
        let execution_id = fact.detail.job_execution_id;
        if let Some(lease) = context.store.lease(execution_id).await? {
            if context.push().is_enabled() {
                // A redelivery nudges again: harmless, the runner only heartbeats.
                context.push().nudge_cancel(&context.store, ws, lease.session_id, execution_id).await;
            }
            // A provisioned machine's job was cancelled: its `job-cancelled`
            // intent is decided now, so the machine can be stopped rather
            // than wait for its runner (a redelivery decides nothing new).
            if let Some(link) = &lease.reservation {
                context.store.converge_reservation(link, now).await?;
            }
        }
    }
    tracing::info!(
        job_execution_id = %fact.detail.job_execution_id,
        run_id = %fact.detail.run_id,
        job_id = %fact.detail.job_id,
        event_id = %fact.header.event_id,
        "terminated execution reconciled"
    );
    Ok(())
}
