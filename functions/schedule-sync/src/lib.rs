//! Subscriber of `baton.workflows.pipeline.changed` (behaviour.md §18): the
//! changed pipeline's schedules on EventBridge Scheduler are made its
//! `on.schedule`'s (`baton_service::usecases::schedules`). The pipeline is
//! read as it is now, so a repeated or late fact changes nothing back; a
//! failure of the scheduler or the table is retried by redelivery, and a
//! fact that kept failing reaches the queue's DLQ, which an alarm watches
//! (the pipeline's schedules are then stale until its next change: the
//! runbook says how to replay it).

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use baton_api::facts::{FactDetail, PipelineChanged};
use baton_service::context::Context;
use baton_service::facts::subscriber::{consume, Delivered, HandlerError};
use baton_service::usecases::schedules;
use baton_telemetry::metrics::{emit, Unit};

/// The function's name in its metrics.
const FUNCTION: &str = "schedule-sync";

pub async fn handle(context: &Context, event: SqsEvent) -> SqsBatchResponse {
    consume(event, |delivered| take(context, delivered)).await
}

async fn take(context: &Context, delivered: Delivered) -> Result<(), HandlerError> {
    if delivered.detail_type != PipelineChanged::DETAIL_TYPE {
        return Ok(());
    }
    let fact = delivered.parse::<PipelineChanged>()?;
    let (workspace_id, pipeline) = (&fact.header.workspace_id, &fact.detail.pipeline);
    let synced = schedules::sync(context, workspace_id, pipeline)
        .await
        .map_err(|err| HandlerError::Transient(err.to_string()))?;
    tracing::info!(workspace_id = %workspace_id, pipeline = %pipeline, created = synced.created,
        updated = synced.updated, deleted = synced.deleted, passes = synced.passes, "schedules synced");
    emit(
        FUNCTION,
        &[
            ("schedules_created", synced.created as f64, Unit::Count),
            ("schedules_updated", synced.updated as f64, Unit::Count),
            ("schedules_deleted", synced.deleted as f64, Unit::Count),
        ],
    );
    Ok(())
}
