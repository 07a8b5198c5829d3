//! Subscriber of `baton.external.job_event` (behaviour.md §16): events a
//! producer puts on the stack's bus for listening jobs (a webhook bridge,
//! another system's rule), delivered exactly as the events route delivers
//! them (`baton_service::usecases::job_events::deliver`): idempotent by `ref`, a job
//! that ended acknowledges and changes nothing.
//!
//! Anyone allowed to put events on the bus can send one, so each is
//! checked against the run it names: a run of another workspace (or none),
//! a malformed event, an event the job does not take or a job that does not
//! listen are dropped, logged with why, and counted
//! (`external_events_dropped`, which an alarm watches), never retried: a
//! redelivery could not change them. Only a backend failure is retried.

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use baton_api::runs::{EventDelivery, ExternalJobEvent, EXTERNAL_JOB_EVENT};
use baton_domain::error::ErrorCode;
use baton_service::context::Context;
use baton_service::facts::subscriber::{consume, Delivered, HandlerError};
use baton_service::usecases::job_events::{deliver, JobRef};
use baton_telemetry::metrics::{emit, Unit};

/// The function's name in its metrics.
const FUNCTION: &str = "external-events";

pub async fn handle(context: &Context, event: SqsEvent) -> SqsBatchResponse {
    consume(event, |delivered| take(context, delivered)).await
}

async fn take(context: &Context, delivered: Delivered) -> Result<(), HandlerError> {
    if delivered.detail_type != EXTERNAL_JOB_EVENT {
        drop_event(&format!("detail type {} is not {EXTERNAL_JOB_EVENT}", delivered.detail_type));
        return Ok(());
    }
    let event: ExternalJobEvent = match serde_json::from_value(delivered.detail) {
        Ok(event) => event,
        Err(err) => {
            drop_event(&format!("malformed: {err}"));
            return Ok(());
        }
    };
    let job = JobRef::parse(&event.job);
    let delivery = EventDelivery {
        name: event.name,
        disposition: event.disposition,
        reference: event.reference,
        payload: event.payload,
    };
    match deliver(context, &event.workspace_id, event.run_id, &job, delivery).await {
        Ok(delivered) => {
            tracing::info!(workspace_id = %event.workspace_id, run_id = %event.run_id, %job, delivered, "external event taken");
            Ok(())
        }
        Err(err) if matches!(err.code, ErrorCode::Internal | ErrorCode::Unavailable) => {
            Err(HandlerError::Transient(err.message))
        }
        Err(err) => {
            // A run of another workspace reads as no run at all: 404.
            tracing::warn!(workspace_id = %event.workspace_id, run_id = %event.run_id, %job, code = err.code.as_str(), reason = %err.message, "external event dropped");
            emit(FUNCTION, &[("external_events_dropped", 1.0, Unit::Count)]);
            Ok(())
        }
    }
}

fn drop_event(reason: &str) {
    tracing::warn!(reason, "external event dropped");
    emit(FUNCTION, &[("external_events_dropped", 1.0, Unit::Count)]);
}
