//! Caches (behaviour.md §17), under a job's lease (`blt_`), in the job's
//! workspace only:
//!
//! - `POST /v1/runners/leases/{execution_id}/caches/restore`: the exact key,
//!   else the newest entry under each restore prefix in turn, in the
//!   request's scope then the workspace-wide one; a presigned `GET` of it.
//! - `POST …/caches`: save an entry: parts' URLs as for an artifact, or
//!   `stored: true` when the key is saved already (entries are immutable).
//! - `POST …/caches/complete`: every part sent; stored only while the
//!   lease is held.

use baton_api::artifacts::{artifact_parts, ArtifactStatus};
use baton_api::caches::{
    valid_cache_key, CacheCompleteRequest, CacheHit, CacheRestoreRequest, CacheRestoreResponse, CacheSaveRequest,
    MAX_CACHE_KEY_LEN, MAX_CACHE_SCOPE_LEN, MAX_RESTORE_KEYS,
};
use baton_domain::error::{ApiError, ErrorCode};
use baton_service::context::Context;
use baton_service::http::{json_response, lease_credentials, lease_lost, parse_json, respond};
use baton_service::usecases::artifacts::{
    self as archives, bucket, cache_object_key, held_lease, parts_complete, s3_failed, UploadStart,
};
use baton_store::artifacts::Upload;
use baton_store::caches::CacheItem;
use baton_store::keys::{cache_pk, cache_sk};
use baton_store::ItemHead;
use chrono::{DateTime, Utc};
use http::{Method, StatusCode};
use lambda_http::{Body, Request, Response};

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    respond(route(context, req).await)
}

async fn route(context: &Context, req: Request) -> Result<Response<Body>, ApiError> {
    if *req.method() != Method::POST {
        return Err(baton_service::http::method_not_allowed());
    }
    let path = req.uri().path().to_string();
    if path.ends_with("/caches/restore") {
        restore(context, &req).await
    } else if path.ends_with("/caches/complete") {
        complete(context, &req).await
    } else {
        save(context, &req).await
    }
}

fn check_key(field: &str, key: &str) -> Result<(), ApiError> {
    if valid_cache_key(key, MAX_CACHE_KEY_LEN) {
        return Ok(());
    }
    Err(ApiError::invalid_request(format!(
        "{field}: 1 to {MAX_CACHE_KEY_LEN} printable ASCII characters, no spaces or commas"
    )))
}

fn check_scope(scope: &str) -> Result<(), ApiError> {
    if scope.is_empty() || valid_cache_key(scope, MAX_CACHE_SCOPE_LEN) {
        return Ok(());
    }
    Err(ApiError::invalid_request(format!(
        "scope: empty (the workspace's) or 1 to {MAX_CACHE_SCOPE_LEN} printable ASCII characters, no spaces or commas"
    )))
}

/// The scopes a restore looks in, in order: the request's, then the
/// workspace-wide one.
fn scopes(scope: &str) -> Vec<&str> {
    if scope.is_empty() {
        vec![""]
    } else {
        vec![scope, ""]
    }
}

async fn restore(context: &Context, req: &Request) -> Result<Response<Body>, ApiError> {
    let credentials = lease_credentials(req)?;
    let body: CacheRestoreRequest = parse_json(req)?;
    check_key("key", &body.key)?;
    check_scope(&body.scope)?;
    if body.restore_keys.len() > MAX_RESTORE_KEYS {
        return Err(ApiError::invalid_request(format!("restore_keys: at most {MAX_RESTORE_KEYS}")));
    }
    for prefix in &body.restore_keys {
        check_key("restore_keys", prefix)?;
    }
    let bucket = bucket(&context.config)?;
    let lease = held_lease(&context.store, &credentials).await?;
    let ws = lease.execution.workspace_id.as_str();
    let now = Utc::now();
    let mut found: Option<(CacheHit, CacheItem)> = None;
    'search: for scope in scopes(&body.scope) {
        if let Some(exact) = context.store.cache_entry(ws, scope, &body.key).await?.filter(|c| c.restorable(now)) {
            found = Some((CacheHit::Exact, exact));
            break;
        }
        for prefix in &body.restore_keys {
            if let Some(newest) = context.store.newest_cache_under(ws, scope, prefix, now).await? {
                found = Some((CacheHit::Prefix, newest));
                break 'search;
            }
        }
    }
    let answer = match found {
        None => CacheRestoreResponse { hit: CacheHit::Miss, entry: None, url: None },
        Some((hit, item)) => {
            let (url, _) = archives::presign_get(context.clients.s3(), bucket, &item.upload.object_key, now)
                .await
                .map_err(|e| s3_failed("presigning", e))?;
            CacheRestoreResponse { hit, entry: Some(item.entry()), url: Some(url) }
        }
    };
    tracing::info!(job_execution_id = %lease.execution.id, workspace_id = ws, key = %body.key, hit = ?answer.hit, restored = answer.entry.as_ref().map(|e| e.key.as_str()), "cache restore");
    Ok(json_response(StatusCode::OK, &answer))
}

async fn save(context: &Context, req: &Request) -> Result<Response<Body>, ApiError> {
    let credentials = lease_credentials(req)?;
    let body: CacheSaveRequest = parse_json(req)?;
    check_key("key", &body.key)?;
    check_scope(&body.scope)?;
    if !archives::valid_sha256(&body.sha256) {
        return Err(ApiError::invalid_request("sha256: the archive's SHA-256 in lowercase hex (64 characters)"));
    }
    let cap = context.config.artifacts.cache_entry_cap_bytes;
    if body.bytes == 0 || body.bytes > cap {
        let message = format!("{} bytes: a cache entry weighs 1 to {cap} bytes", body.bytes);
        return Err(ApiError::new(ErrorCode::ArtifactCap, message));
    }
    let UploadStart { asked, bucket, lease, now, valid_for } =
        archives::start_upload(context, &credentials, body.first_part, body.bytes).await?;
    let ws = lease.execution.workspace_id.clone();
    let stored = |item: Option<CacheItem>| item.filter(|c| c.restorable(now));
    let existing = context.store.cache_entry(&ws, &body.scope, &body.key).await?;
    if stored(existing.clone()).is_some() {
        return Ok(json_response(StatusCode::OK, &archives::already_stored()));
    }
    let item = match existing {
        // This execution's own save, asked again: the same upload.
        Some(mine)
            if mine.execution_id == lease.execution.id
                && mine.upload.status == ArtifactStatus::Uploading
                && mine.upload.bytes == body.bytes
                && mine.upload.sha256 == body.sha256 =>
        {
            mine
        }
        _ => {
            let object_key = cache_object_key(&ws, &body.scope, &body.key, lease.execution.id);
            let upload_id = archives::create_upload(context.clients.s3(), bucket, &object_key)
                .await
                .map_err(|e| s3_failed("upload start", e))?;
            let item = new_item(context, &ws, &body, object_key, upload_id, lease.execution.id, now);
            if !context.store.begin_cache_save(&item, now).await? {
                archives::abort_upload(context.clients.s3(), bucket, &item.upload).await;
                let current = context.store.cache_entry(&ws, &body.scope, &body.key).await?;
                if stored(current.clone()).is_some() {
                    return Ok(json_response(StatusCode::OK, &archives::already_stored()));
                }
                // Another try of this very request began it first: the same upload.
                match current.filter(|c| {
                    c.execution_id == lease.execution.id
                        && c.upload.bytes == body.bytes
                        && c.upload.sha256 == body.sha256
                }) {
                    Some(mine) => mine,
                    None => {
                        let message = format!("another job is saving cache {:?} now", body.key);
                        return Err(ApiError::new(ErrorCode::ArtifactExists, message));
                    }
                }
            } else {
                item
            }
        }
    };
    let s3 = context.clients.s3();
    let answer = archives::upload_answer(s3, bucket, &item.upload, &asked, now, valid_for).await?;
    tracing::info!(job_execution_id = %lease.execution.id, workspace_id = %ws, key = %item.key, bytes = item.upload.bytes, parts = answer.parts.len(), "cache save URLs issued");
    Ok(json_response(StatusCode::OK, &answer))
}

fn new_item(
    context: &Context,
    ws: &str,
    body: &CacheSaveRequest,
    object_key: String,
    upload_id: String,
    execution_id: uuid::Uuid,
    now: DateTime<Utc>,
) -> CacheItem {
    let expires_at = now + chrono::Duration::days(i64::from(context.config.artifacts.cache_retention_days));
    CacheItem {
        head: ItemHead::new(cache_pk(ws), cache_sk(&body.scope, &body.key), "cache"),
        workspace_id: ws.to_string(),
        scope: body.scope.clone(),
        key: body.key.clone(),
        execution_id,
        upload: Upload::begun(body.bytes, body.sha256.clone(), object_key, upload_id, now, expires_at),
    }
}

async fn complete(context: &Context, req: &Request) -> Result<Response<Body>, ApiError> {
    let credentials = lease_credentials(req)?;
    let body: CacheCompleteRequest = parse_json(req)?;
    check_key("key", &body.key)?;
    check_scope(&body.scope)?;
    let bucket = bucket(&context.config)?;
    let lease = held_lease(&context.store, &credentials).await?;
    let item = context
        .store
        .cache_entry(&lease.execution.workspace_id, &body.scope, &body.key)
        .await?
        .filter(|c| c.execution_id == lease.execution.id)
        .ok_or_else(|| ApiError::not_found(format!("a save of cache {:?} by this job", body.key)))?;
    if item.upload.status == ArtifactStatus::Stored {
        return Ok(json_response(StatusCode::OK, &item.entry()));
    }
    if !parts_complete(item.upload.bytes, &body.parts) {
        return Err(ApiError::invalid_request(format!(
            "parts: every part from 1 to {}, in order, each with the ETag S3 answered",
            artifact_parts(item.upload.bytes)
        )));
    }
    archives::complete_upload(context.clients.s3(), bucket, &item.upload, &body.parts)
        .await
        .map_err(|err| {
            tracing::warn!(job_execution_id = %lease.execution.id, key = %item.key, error = %err, "completing a cache save failed");
            ApiError::invalid_request(format!("S3 refused to assemble the parts of cache {:?}", item.key))
        })?;
    let stored =
        context.store.cache_stored(&lease, &body.scope, &body.key, Utc::now()).await?.ok_or_else(lease_lost)?;
    tracing::info!(job_execution_id = %lease.execution.id, workspace_id = %lease.execution.workspace_id, key = %stored.key, bytes = stored.upload.bytes, "cache saved");
    Ok(json_response(StatusCode::OK, &stored.entry()))
}
