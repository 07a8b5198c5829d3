//! Job logs. Two routes:
//!
//! - `POST /v1/runners/leases/{execution_id}/logs` (`blt_`): presigned `PUT`
//!   URLs for numbered chunks of the job's log, each bound to its exact
//!   size and to an object not stored yet (a chunk is never replaced), and
//!   valid no longer than the lease.
//!   The bytes are charged to the lease (one fenced update, counted once
//!   under retries: `Store::charge_log_bytes`), so a job's log is capped
//!   however its runner behaves; log bytes never pass through Lambda.
//! - `GET /v1/workspaces/{ws}/runs/{run_id}/jobs/{job_id}/logs` (`bat_`):
//!   the lines from `cursor` on, of one attempt (default: the current one)
//!   and optionally one step; `wait_s` long-polls for new lines of a job
//!   still running. Chunks are read in order and only up to the first one
//!   not stored yet, so a reader never skips lines an upload still carries.
//!   A read is bounded in lines, bytes (`MAX_READ_BYTES`) and time
//!   (`READ_TIME_BUDGET`, chunks fetched in parallel), so its answer fits a
//!   Lambda response and the HTTP API's 30 s however the log was chunked.

use std::time::Duration;

use baton_api::logs::{
    LogLine, LogPage, LogUploadRequest, LogUploadResponse, MAX_CHUNKS_PER_REQUEST, MAX_CHUNK_BYTES, MAX_CHUNK_SEQ,
    MAX_LINES_PER_READ, MAX_LOG_WAIT_S, MAX_READ_BYTES,
};
use baton_domain::error::{ApiError, ErrorCode};
use baton_service::context::Context;
use baton_service::http::{
    authorize_operator, json_response, lease_credentials, parse_json, path_id, path_workspace, query_param, respond,
};
use baton_service::usecases::logs::{
    chunk_key, execution_prefix, upload_url_ttl, LogCursor, ReadBudget, READ_TIME_BUDGET,
};
use baton_store::leases::Fenced;
use baton_store::records::RunnerStatus;
use http::{Method, StatusCode};
use lambda_http::{Body, Request, Response};

/// How often a following read looks for new chunks.
const FOLLOW_POLL: Duration = Duration::from_millis(500);

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    respond(route(context, req).await)
}

async fn route(context: &Context, req: Request) -> Result<Response<Body>, ApiError> {
    match *req.method() {
        Method::POST => upload_urls(context, &req).await,
        Method::GET => read(context, &req).await,
        _ => Err(baton_service::http::method_not_allowed()),
    }
}

async fn upload_urls(context: &Context, req: &Request) -> Result<Response<Body>, ApiError> {
    let lease = lease_credentials(req)?;
    let body: LogUploadRequest = parse_json(req)?;
    if body.chunks.is_empty() || body.chunks.len() > MAX_CHUNKS_PER_REQUEST {
        return Err(ApiError::invalid_request(format!("chunks: 1 to {MAX_CHUNKS_PER_REQUEST} a request")));
    }
    if let Some(bad) = body.chunks.iter().find(|c| c.seq > MAX_CHUNK_SEQ) {
        return Err(ApiError::invalid_request(format!("chunk {}: seq must be from 0 to {MAX_CHUNK_SEQ}", bad.seq)));
    }
    if let Some(bad) = body.chunks.iter().find(|c| c.bytes == 0 || c.bytes > MAX_CHUNK_BYTES) {
        return Err(ApiError::invalid_request(format!("chunk {}: bytes must be from 1 to {MAX_CHUNK_BYTES}", bad.seq)));
    }
    if let Some(twice) = body.chunks.iter().enumerate().find(|(i, c)| body.chunks[..*i].iter().any(|o| o.seq == c.seq))
    {
        return Err(ApiError::invalid_request(format!("chunk {} is asked for twice", twice.1.seq)));
    }
    let bucket = context.config.logs_bucket.as_deref().ok_or_else(ApiError::internal)?;
    let now = chrono::Utc::now();
    let chunks: Vec<(u64, u64)> = body.chunks.iter().map(|c| (c.seq, c.bytes)).collect();
    let bytes: u64 = chunks.iter().map(|(_, b)| b).sum();
    let cap = context.config.log_cap_bytes;
    let item =
        match context.store.charge_log_bytes(lease.execution_id, lease.epoch, &lease.token_hash, &chunks, cap).await? {
            Fenced::Ok(item) => item,
            Fenced::LeaseLost => return Err(baton_service::http::lease_lost()),
            Fenced::NotFound => return Err(ApiError::not_found("lease")),
            Fenced::Refused(reason) => return Err(ApiError::invalid_request(reason)),
        };
    // The URLs die with the lease: a runner that lost it cannot write on.
    let valid_for = upload_url_ttl(now, item.expires_at).ok_or_else(baton_service::http::lease_lost)?;
    let mut uploads = Vec::with_capacity(body.chunks.len());
    for chunk in &body.chunks {
        let key = chunk_key(&item.execution.workspace_id, item.execution.run_id, item.execution.id, chunk.seq);
        let upload = baton_service::usecases::logs::presign_put(
            context.clients.s3(),
            bucket,
            &key,
            (chunk.seq, chunk.bytes),
            now,
            valid_for,
        )
        .await
        .map_err(|err| {
            tracing::error!(error = %err, execution_id = %item.execution.id, "presigning failed");
            ApiError::internal()
        })?;
        uploads.push(upload);
    }
    tracing::debug!(execution_id = %item.execution.id, run_id = %item.execution.run_id, chunks = uploads.len(), bytes, "log upload URLs issued");
    Ok(json_response(StatusCode::OK, &LogUploadResponse { uploads }))
}

async fn read(context: &Context, req: &Request) -> Result<Response<Body>, ApiError> {
    let workspace_id = path_workspace(req)?;
    authorize_operator(&context.store, req, &workspace_id).await?;
    let run_id = path_id(req, "run_id")?;
    let job_id = path_id(req, "job_id")?;
    let attempt = match query_param(req, "attempt") {
        Some(raw) => Some(raw.parse::<u32>().map_err(|_| ApiError::invalid_request("attempt must be a number"))?),
        None => None,
    };
    // One try of a job that `retry:` ran again: by default its latest.
    let execution = match query_param(req, "execution") {
        Some(raw) => Some(
            baton_domain::ids::parse_id(&raw)
                .ok_or_else(|| ApiError::invalid_request("execution must be an execution id"))?,
        ),
        None => None,
    };
    let step = match query_param(req, "step") {
        Some(raw) => {
            Some(baton_domain::ids::parse_id(&raw).ok_or_else(|| ApiError::invalid_request("step must be a step id"))?)
        }
        None => None,
    };
    let mut cursor = match query_param(req, "cursor") {
        Some(raw) => {
            LogCursor::parse(&raw).ok_or_else(|| ApiError::invalid_request("cursor is not one this route gave"))?
        }
        None => LogCursor::default(),
    };
    let wait_s = match query_param(req, "wait_s") {
        Some(raw) => raw
            .parse::<u64>()
            .ok()
            .filter(|w| *w <= MAX_LOG_WAIT_S)
            .ok_or_else(|| ApiError::invalid_request(format!("wait_s must be from 0 to {MAX_LOG_WAIT_S}")))?,
        None => 0,
    };
    let bucket = context.config.logs_bucket.as_deref().ok_or_else(ApiError::internal)?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(wait_s);
    let records = context
        .store
        .run_records(&workspace_id, run_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("run {run_id}")))?;
    let wanted = attempt.unwrap_or(records.run.current_attempt);
    let state = records
        .attempts
        .iter()
        .find(|a| a.attempt == wanted)
        .ok_or_else(|| ApiError::not_found(format!("attempt {wanted}")))?;
    let job = state.jobs.iter().find(|j| j.id == job_id).ok_or_else(|| ApiError::not_found(format!("job {job_id}")))?;
    // A job a rerun carried over ran in an earlier attempt: its log is that execution's.
    let (execution_id, mut ended) = match (&job.execution, job.carried_from) {
        (Some(_), _) if execution.is_some() => {
            let wanted = job.executions().find(|e| Some(e.id) == execution).ok_or_else(|| {
                ApiError::not_found(format!("execution {} of job {job_id}", execution.unwrap_or_default()))
            })?;
            (wanted.id, wanted.status.is_terminal())
        }
        (Some(execution), _) => (execution.id, execution.status.is_terminal()),
        (None, Some(earlier)) => (earlier, true),
        (None, None) => return Err(ApiError::not_found(format!("job {job_id} has no execution"))),
    };
    let mut first = true;
    loop {
        // While following, whether the execution ended comes from its small
        // runners' record, not another read of the whole run's partition.
        if !ended && !first {
            ended = context.store.runner_record(execution_id).await?.is_some_and(|r| {
                matches!(r.status, RunnerStatus::Completed | RunnerStatus::Expired | RunnerStatus::Terminated)
            });
        }
        first = false;
        let prefix = execution_prefix(&workspace_id, run_id, execution_id);
        let budget = ReadBudget { lines: MAX_LINES_PER_READ, bytes: MAX_READ_BYTES };
        let read_by = tokio::time::Instant::now() + READ_TIME_BUDGET;
        let read = baton_service::usecases::logs::read_lines(
            context.clients.s3(),
            bucket,
            &prefix,
            cursor,
            budget,
            read_by,
            ended,
        )
        .await
        .map_err(|err| {
            tracing::error!(error = %err, %run_id, %execution_id, "reading the log failed");
            ApiError::new(ErrorCode::Unavailable, "the log store did not answer; retry")
        })?;
        let lines: Vec<LogLine> = read.lines.into_iter().filter(|l| step.is_none_or(|s| s == l.step_id)).collect();
        let complete = ended && read.at_end;
        if !lines.is_empty() || complete || tokio::time::Instant::now() + FOLLOW_POLL > deadline {
            return Ok(json_response(StatusCode::OK, &LogPage { lines, next_cursor: read.next.to_string(), complete }));
        }
        // Lines of other steps were passed over: go on from after them.
        cursor = read.next;
        tokio::time::sleep(FOLLOW_POLL).await;
    }
}
