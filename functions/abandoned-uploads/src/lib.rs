//! Subscriber of `baton.runners.job.completed` and
//! `baton.runners.job.lease_expired` (behaviour.md §17): a lease's end
//! aborts the artifact uploads its job left open, so the presigned part
//! URLs it was given are refused by S3 from then on (`NoSuchUpload`), not
//! only at their expiry, and the parts never become an artifact (the
//! complete is fenced on the lease anyway). The item stays `uploading`: it
//! was never stored.
//!
//! A replay is safe: aborting an upload S3 no longer has is a no-op. A
//! cache save is made before the job's last report ends the lease, so no
//! cache upload is left open by a lease that ended normally; one a crash
//! left is aborted by the bucket's lifecycle rule after a day.

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use baton_api::artifacts::ArtifactStatus;
use baton_api::facts::{FactDetail, JobCompleted, JobLeaseExpired, LeaseRef};
use baton_service::context::Context;
use baton_service::facts::subscriber::{consume, Delivered, HandlerError};
use baton_service::usecases::artifacts::abort_open_upload;
use baton_telemetry::metrics::{emit, Unit};

const FUNCTION: &str = "abandoned-uploads";

pub async fn handle(context: &Context, event: SqsEvent) -> SqsBatchResponse {
    consume(event, |delivered| take(context, delivered)).await
}

async fn take(context: &Context, delivered: Delivered) -> Result<(), HandlerError> {
    let (workspace_id, lease): (String, LeaseRef) = match delivered.detail_type.as_str() {
        JobCompleted::DETAIL_TYPE => {
            let fact = delivered.parse::<JobCompleted>()?;
            (fact.header.workspace_id, fact.detail.lease)
        }
        JobLeaseExpired::DETAIL_TYPE => {
            let fact = delivered.parse::<JobLeaseExpired>()?;
            (fact.header.workspace_id, fact.detail.lease)
        }
        other => return Err(HandlerError::Permanent(format!("not a lease's end: {other}"))),
    };
    let Some(bucket) = context.config.artifacts.bucket.as_deref() else {
        return Err(HandlerError::Permanent("BATON_ARTIFACTS_BUCKET is not set".into()));
    };
    let artifacts = context.store.run_artifacts(&workspace_id, lease.run_id).await?.unwrap_or_default();
    let mut aborted = 0;
    for open in artifacts
        .iter()
        .filter(|a| a.execution.id == lease.job_execution_id && a.upload.status == ArtifactStatus::Uploading)
    {
        abort_open_upload(context.clients.s3(), bucket, &open.upload.object_key, &open.upload.upload_id)
            .await
            .map_err(HandlerError::Transient)?;
        tracing::info!(workspace_id = %workspace_id, run_id = %lease.run_id, job_execution_id = %lease.job_execution_id, artifact = %open.name, "open artifact upload aborted at its lease's end");
        aborted += 1;
    }
    if aborted > 0 {
        emit(FUNCTION, &[("artifact_uploads_aborted", f64::from(aborted), Unit::Count)]);
    }
    Ok(())
}
