//! Enqueue: consumes `workflows.job_execution.queued` and makes the execution
//! claimable. Idempotent through the runners' record of the execution (a
//! durable tombstone): a replay, before or after a claim, an expiry or the
//! end of the execution, writes nothing. Invalid labels are a permanent
//! failure: the message is retried, then dead-lettered (and alarmed on).
//! The orchestrator usually made the execution claimable already; if it is
//! still unclaimed, the fitting runners are nudged again.

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use baton_shared::context::Context;
use baton_shared::facts::subscriber::{consume, Delivered, HandlerError};
use baton_shared::facts::JobExecutionQueued;
use baton_shared::runners::labels::{canonicalize, labelset_id};
use baton_shared::store::queue::Enqueued;

pub async fn handle(context: &Context, event: SqsEvent) -> SqsBatchResponse {
    consume(event, |delivered| enqueue(context, delivered)).await
}

async fn enqueue(context: &Context, delivered: Delivered) -> Result<(), HandlerError> {
    let fact = delivered.parse::<JobExecutionQueued>()?;
    let labels = canonicalize(&fact.detail.job.labels)
        .map_err(|e| HandlerError::Permanent(format!("execution {}: {e}", fact.detail.job_execution_id)))?;
    let labelset = labelset_id(&labels);
    let outcome = context.store.enqueue(&fact, labels.clone(), &labelset).await?;
    // Still pending when its fact arrives: the orchestrator's nudge may
    // have been lost (a crash right after its commit, a failed post), and a
    // redelivered advance finds nothing new to nudge for. This second nudge
    // spares the job a wait for the runners' safety poll; a job claimed
    // meanwhile (the usual case) costs nothing more.
    if matches!(outcome, Enqueued::Queued | Enqueued::StillPending) {
        context.push.nudge_work(&context.store, &fact.header.workspace_id, &[labels]).await;
    }
    tracing::info!(
        job_execution_id = %fact.detail.job_execution_id,
        run_id = %fact.detail.run_id,
        job_id = %fact.detail.job_id,
        event_id = %fact.header.event_id,
        replay = outcome != Enqueued::Queued,
        "execution enqueued"
    );
    Ok(())
}
