//! Artifacts (behaviour.md §17). Under a job's lease (`blt_`):
//!
//! - `POST /v1/runners/leases/{execution_id}/artifacts`: begin (or resume)
//!   an upload: the bytes are charged to the job's and the run's caps and
//!   the answer holds one presigned `PUT` per part (`store::artifacts`).
//! - `POST …/artifacts/{name}/complete`: every part sent; S3 assembles the
//!   archive and the artifact is stored, only while the lease is held.
//! - `GET …/artifacts/{name}`: a presigned `GET` of one of the run's stored
//!   artifacts (a later job's `download`); `GET …/artifacts` lists them.
//!
//! For operators (`bat_`): `GET /v1/workspaces/{ws}/runs/{run_id}/artifacts`
//! lists a run's artifacts, `GET …/artifacts/{name}` gives a presigned `GET`.
//! The archive's bytes never pass through this function.

use baton_api::artifacts::{
    valid_artifact_name, ArtifactCompleteRequest, ArtifactDownload, ArtifactList, ArtifactStatus,
    ArtifactUploadRequest, MAX_ARTIFACT_NAME_LEN,
};
use baton_domain::error::{ApiError, ErrorCode};
use baton_service::context::Context;
use baton_service::http::{
    authorize_operator, json_response, lease_credentials, lease_lost, parse_json, path_id, path_param, path_workspace,
    respond,
};
use baton_service::usecases::artifacts::{
    self as archives, bucket, held_lease, object_key, parts_complete, s3_failed, valid_sha256, UploadStart,
};
use baton_store::artifacts::{ArtifactCaps, ArtifactItem, Upload, UploadRefused};
use baton_store::keys::{artifact_sk, run_pk};
use baton_store::runner_items::LeaseItem;
use baton_store::ItemHead;
use chrono::Utc;
use http::{Method, StatusCode};
use lambda_http::{Body, Request, RequestExt, Response};

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    respond(route(context, req).await)
}

async fn route(context: &Context, req: Request) -> Result<Response<Body>, ApiError> {
    let params = req.path_parameters();
    let (by_lease, named) = (params.first("execution_id").is_some(), params.first("name").is_some());
    match (req.method().clone(), by_lease, named) {
        (Method::POST, true, false) => begin_upload(context, &req).await,
        (Method::POST, true, true) => complete_upload(context, &req).await,
        (Method::GET, true, true) => runner_download(context, &req).await,
        (Method::GET, true, false) => runner_list(context, &req).await,
        (Method::GET, false, false) => list(context, &req).await,
        (Method::GET, false, true) => operator_download(context, &req).await,
        _ => Err(baton_service::http::method_not_allowed()),
    }
}

fn artifact_name(req: &Request) -> Result<String, ApiError> {
    let name = path_param(req, "name")?;
    check_name(&name)?;
    Ok(name)
}

fn check_name(name: &str) -> Result<(), ApiError> {
    if valid_artifact_name(name) {
        Ok(())
    } else {
        Err(ApiError::invalid_request(format!(
            "name: 1 to {MAX_ARTIFACT_NAME_LEN} of letters, digits, '.', '_' and '-', not starting with '.'"
        )))
    }
}

async fn begin_upload(context: &Context, req: &Request) -> Result<Response<Body>, ApiError> {
    let credentials = lease_credentials(req)?;
    let body: ArtifactUploadRequest = parse_json(req)?;
    check_name(&body.name)?;
    if !valid_sha256(&body.sha256) {
        return Err(ApiError::invalid_request("sha256: the archive's SHA-256 in lowercase hex (64 characters)"));
    }
    let caps = ArtifactCaps {
        job_bytes: context.config.artifacts.job_cap_bytes,
        run_bytes: context.config.artifacts.run_cap_bytes,
    };
    if body.bytes == 0 {
        return Err(ApiError::invalid_request("bytes: an archive has at least 1 byte"));
    }
    if body.bytes > caps.job_bytes {
        let message = format!("{} bytes: a job's artifacts may weigh at most {} bytes", body.bytes, caps.job_bytes);
        return Err(ApiError::new(ErrorCode::ArtifactCap, message));
    }
    let UploadStart { asked, bucket, lease, now, valid_for } =
        archives::start_upload(context, &credentials, body.first_part, body.bytes).await?;
    let existing = context.store.artifact(lease.execution.run_id, &body.name).await?;
    // The job's key, unless this is its own upload asked again: a name is
    // held by a job key (a rerun's job has a new id).
    let job_key = match &existing {
        Some(mine) if mine.execution.id == lease.execution.id => mine.job_key.clone(),
        _ => context
            .store
            .job_spec(lease.execution.id)
            .await?
            .map(|spec| spec.work.key)
            .ok_or_else(|| ApiError::not_found("the lease's job"))?,
    };
    let item = match existing {
        // This execution's own upload, asked again (a lost answer, URLs
        // that expired): the same upload, charged once.
        Some(mine) if mine.execution.id == lease.execution.id => {
            if mine.upload.bytes != body.bytes || mine.upload.sha256 != body.sha256 {
                let message = format!("this job is storing another archive named {:?}", body.name);
                return Err(ApiError::new(ErrorCode::ArtifactExists, message));
            }
            if mine.upload.status == ArtifactStatus::Stored {
                return Ok(json_response(StatusCode::OK, &archives::already_stored()));
            }
            mine
        }
        Some(theirs) if theirs.job_key != job_key => {
            let message = format!("job {} of this run stored an artifact named {:?}", theirs.job_key, body.name);
            return Err(ApiError::new(ErrorCode::ArtifactExists, message));
        }
        // None yet, or one an earlier execution of this job made (a retry,
        // a rerun): begin, replacing it.
        _ => begin(context, bucket, &lease, job_key, &body, caps, now).await?,
    };
    let s3 = context.clients.s3();
    let answer = archives::upload_answer(s3, bucket, &item.upload, &asked, now, valid_for).await?;
    tracing::info!(job_execution_id = %lease.execution.id, run_id = %lease.execution.run_id, artifact = %item.name, bytes = item.upload.bytes, parts = answer.parts.len(), "artifact upload URLs issued");
    Ok(json_response(StatusCode::OK, &answer))
}

/// Starts the S3 upload and charges it (one transaction, see
/// `Store::begin_artifact`); an upload refused is given up.
async fn begin(
    context: &Context,
    bucket: &str,
    lease: &LeaseItem,
    job_key: String,
    body: &ArtifactUploadRequest,
    caps: ArtifactCaps,
    now: chrono::DateTime<Utc>,
) -> Result<ArtifactItem, ApiError> {
    let key = object_key(&lease.execution.workspace_id, lease.execution.run_id, lease.execution.id, &body.name);
    let upload_id =
        archives::create_upload(context.clients.s3(), bucket, &key).await.map_err(|e| s3_failed("upload start", e))?;
    let retention = chrono::Duration::days(i64::from(context.config.artifacts.retention_days));
    let item = ArtifactItem {
        head: ItemHead::new(run_pk(lease.execution.run_id), artifact_sk(&body.name), "artifact"),
        execution: lease.execution.clone(),
        name: body.name.clone(),
        job_key,
        upload: Upload::begun(body.bytes, body.sha256.clone(), key, upload_id, now, now + retention),
    };
    let refused = match context.store.begin_artifact(lease, &item, caps).await? {
        Ok(()) => return Ok(item),
        Err(refused) => refused,
    };
    archives::abort_upload(context.clients.s3(), bucket, &item.upload).await;
    // Another try of this very request (a retry after a 504 runs beside
    // the original) began it first: its upload is this one's.
    if let Some(mine) = context.store.artifact(lease.execution.run_id, &body.name).await?.filter(|a| {
        a.execution.id == lease.execution.id && a.upload.bytes == body.bytes && a.upload.sha256 == body.sha256
    }) {
        return Ok(mine);
    }
    tracing::info!(job_execution_id = %lease.execution.id, run_id = %lease.execution.run_id, artifact = %item.name, ?refused, "artifact upload refused");
    Err(match refused {
        UploadRefused::LeaseLost => lease_lost(),
        UploadRefused::NotFound => ApiError::not_found("lease"),
        UploadRefused::JobCap(message) | UploadRefused::RunCap(message) => {
            ApiError::new(ErrorCode::ArtifactCap, message)
        }
        UploadRefused::Exists(message) => ApiError::new(ErrorCode::ArtifactExists, message),
    })
}

async fn complete_upload(context: &Context, req: &Request) -> Result<Response<Body>, ApiError> {
    let credentials = lease_credentials(req)?;
    let name = artifact_name(req)?;
    let body: ArtifactCompleteRequest = parse_json(req)?;
    let bucket = bucket(&context.config)?;
    let lease = held_lease(&context.store, &credentials).await?;
    let item = context
        .store
        .artifact(lease.execution.run_id, &name)
        .await?
        .filter(|a| a.execution.id == lease.execution.id)
        .ok_or_else(|| ApiError::not_found(format!("an upload of artifact {name:?} by this job")))?;
    if item.upload.status == ArtifactStatus::Stored {
        return Ok(json_response(StatusCode::OK, &item.view()));
    }
    if !parts_complete(item.upload.bytes, &body.parts) {
        let wanted = baton_api::artifacts::artifact_parts(item.upload.bytes);
        return Err(ApiError::invalid_request(format!(
            "parts: every part from 1 to {wanted}, in order, each with the ETag S3 answered"
        )));
    }
    archives::complete_upload(context.clients.s3(), bucket, &item.upload, &body.parts)
        .await
        .map_err(|err| {
            tracing::warn!(job_execution_id = %lease.execution.id, artifact = %name, error = %err, "completing an artifact upload failed");
            ApiError::invalid_request(format!("S3 refused to assemble the parts of {name:?}: send them again"))
        })?;
    let stored = context.store.artifact_stored(&lease, &name, Utc::now()).await?.ok_or_else(lease_lost)?;
    tracing::info!(job_execution_id = %lease.execution.id, run_id = %lease.execution.run_id, artifact = %name, bytes = stored.upload.bytes, "artifact stored");
    Ok(json_response(StatusCode::OK, &stored.view()))
}

async fn runner_download(context: &Context, req: &Request) -> Result<Response<Body>, ApiError> {
    let credentials = lease_credentials(req)?;
    let name = artifact_name(req)?;
    let bucket = bucket(&context.config)?;
    let lease = held_lease(&context.store, &credentials).await?;
    let item = context.store.artifact(lease.execution.run_id, &name).await?;
    download(context, bucket, item, &name).await
}

/// The run's stored artifacts, for a job holding its lease (GitHub's
/// `actions/download-artifact` without a name, or by `pattern`).
async fn runner_list(context: &Context, req: &Request) -> Result<Response<Body>, ApiError> {
    let credentials = lease_credentials(req)?;
    let lease = held_lease(&context.store, &credentials).await?;
    let artifacts =
        context.store.run_artifacts(&lease.execution.workspace_id, lease.execution.run_id).await?.unwrap_or_default();
    Ok(json_response(StatusCode::OK, &ArtifactList { artifacts: listed(&artifacts) }))
}

/// What a list shows of `artifacts`. An expired artifact is gone from the
/// bucket (its lifecycle rule acts on time) while DynamoDB's TTL deletes its
/// item up to days later: listing it would offer a download that answers
/// 403.
fn listed(artifacts: &[ArtifactItem]) -> Vec<baton_api::artifacts::Artifact> {
    let now = Utc::now();
    artifacts.iter().filter(|a| a.upload.expires_at > now).map(ArtifactItem::view).collect()
}

async fn list(context: &Context, req: &Request) -> Result<Response<Body>, ApiError> {
    let workspace_id = path_workspace(req)?;
    authorize_operator(&context.store, req, &workspace_id).await?;
    let run_id = path_id(req, "run_id")?;
    let artifacts = context
        .store
        .run_artifacts(&workspace_id, run_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("run {run_id}")))?;
    Ok(json_response(StatusCode::OK, &ArtifactList { artifacts: listed(&artifacts) }))
}

async fn operator_download(context: &Context, req: &Request) -> Result<Response<Body>, ApiError> {
    let workspace_id = path_workspace(req)?;
    authorize_operator(&context.store, req, &workspace_id).await?;
    let run_id = path_id(req, "run_id")?;
    let name = artifact_name(req)?;
    let bucket = bucket(&context.config)?;
    // Another workspace's run answers as if it did not exist.
    let item = context.store.artifact(run_id, &name).await?.filter(|a| a.execution.workspace_id == workspace_id);
    download(context, bucket, item, &name).await
}

/// A presigned `GET` of a stored artifact; 404 for one that is not (yet),
/// or no longer: past its expiry the bucket's lifecycle rule has deleted
/// the archive, whatever DynamoDB's TTL has done to the item yet.
async fn download(
    context: &Context,
    bucket: &str,
    item: Option<ArtifactItem>,
    name: &str,
) -> Result<Response<Body>, ApiError> {
    let now = Utc::now();
    let item = item
        .filter(|a| a.upload.status == ArtifactStatus::Stored && a.upload.expires_at > now)
        .ok_or_else(|| ApiError::not_found(format!("artifact {name:?} in this run")))?;
    let (url, expires_at) = archives::presign_get(context.clients.s3(), bucket, &item.upload.object_key, now)
        .await
        .map_err(|e| s3_failed("presigning", e))?;
    Ok(json_response(StatusCode::OK, &ArtifactDownload { artifact: item.view(), url, expires_at }))
}
