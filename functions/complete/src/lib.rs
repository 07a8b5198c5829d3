//! The runner's reports on a lease: step progress
//! (`POST …/leases/{execution_id}/steps/{step_id}`) and the job's result
//! (`POST …/leases/{execution_id}/complete`), which ends the lease at once.
//! Both are fenced by the lease's epoch and token.

use baton_shared::api::runners::{CancelFlag, CompleteRequest, CompleteResponse, StepReport};
use baton_shared::context::Context;
use baton_shared::error::ApiError;
use baton_shared::facts::{Fact, JobCompleted, StepResult};
use baton_shared::http::{json_response, lease_credentials, lease_lost, parse_json, path_id, respond};
use baton_shared::limits;
use baton_shared::outcomes::{adopt, RunnerFact};
use baton_shared::store::leases::{Completion, Fenced};
use baton_shared::workflows::definition::MAX_STEPS_PER_JOB;
use baton_shared::workflows::execution::recorded_outcome;
use http::StatusCode;
use lambda_http::{Body, Request, RequestExt, Response};

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    let is_step = req.path_parameters().first("step_id").is_some();
    respond(if is_step { report_step(context, req).await } else { complete(context, req).await })
}

async fn report_step(context: &Context, req: Request) -> Result<Response<Body>, ApiError> {
    let lease = lease_credentials(&req)?;
    let step_id = path_id(&req, "step_id")?;
    let report: StepReport = parse_json(&req)?;
    let step = StepResult {
        id: step_id,
        status: report.status,
        soft_failed: report.soft_failed,
        exit_code: report.exit_code,
        started_at: report.started_at,
        finished_at: report.finished_at,
    };
    match context.store.report_step(lease.execution_id, lease.epoch, &lease.token_hash, &step).await? {
        Fenced::Ok(recorded) => Ok(json_response(StatusCode::OK, &CancelFlag { cancel: recorded.cancel_requested })),
        Fenced::LeaseLost => Err(lease_lost()),
        Fenced::NotFound => Err(ApiError::not_found("lease")),
        Fenced::Refused(reason) => Err(ApiError::invalid_request(reason)),
    }
}

async fn complete(context: &Context, req: Request) -> Result<Response<Body>, ApiError> {
    let lease = lease_credentials(&req)?;
    let body: CompleteRequest = parse_json(&req)?;
    check_storable(&body)?;
    // The lease item knows the run, job and session the fact must name. When
    // it is gone (a repeat, or a lost lease) the fenced write below tells
    // which, and the placeholder fact is never written.
    let item = context.store.lease(lease.execution_id).await?;
    finish(context, &lease, item, body).await
}

/// What a complete stores must fit where it is stored (and in the fact that
/// carries it): bounded outputs with storable numbers, a bounded message,
/// no more step results than a job has steps.
fn check_storable(body: &CompleteRequest) -> Result<(), ApiError> {
    let outputs =
        serde_json::to_value(&body.outputs).map_err(|e| ApiError::invalid_request(format!("outputs: {e}")))?;
    limits::storable_json("outputs", &outputs, limits::MAX_OUTPUTS_BYTES)?;
    if let Some(message) = &body.message {
        limits::bounded_text("message", message, limits::MAX_MESSAGE_BYTES)?;
    }
    if body.steps.len() > MAX_STEPS_PER_JOB {
        return Err(ApiError::invalid_request(format!("steps: at most {MAX_STEPS_PER_JOB} results (a job's steps)")));
    }
    Ok(())
}

async fn finish(
    context: &Context,
    lease: &baton_shared::http::LeaseCredentials,
    item: Option<baton_shared::store::leases::LeaseItem>,
    body: CompleteRequest,
) -> Result<Response<Body>, ApiError> {
    let now = chrono::Utc::now();
    let lease_ref = match &item {
        Some(item) if item.epoch == lease.epoch => item.lease_ref(),
        _ => baton_shared::facts::LeaseRef {
            run_id: uuid::Uuid::nil(),
            attempt: 0,
            job_id: uuid::Uuid::nil(),
            job_execution_id: lease.execution_id,
            session_id: uuid::Uuid::nil(),
            epoch: lease.epoch,
        },
    };
    let workspace = item.as_ref().map(|i| i.workspace_id.clone()).unwrap_or_default();
    let fact = Fact::new(
        workspace,
        now,
        JobCompleted {
            lease: lease_ref,
            status: recorded_outcome(body.status, &body.steps),
            steps: body.steps,
            outputs: body.outputs,
            message: body.message,
            completed_at: now,
            claimed_at: item.as_ref().filter(|i| i.epoch == lease.epoch).map(|i| i.claimed_at),
        },
    );
    match context
        .store
        .complete(
            lease.execution_id,
            lease.epoch,
            &lease.token_hash,
            item.as_ref(),
            &fact,
            context.config.outbox_ttl_days,
        )
        .await?
    {
        Fenced::Ok(Completion::Recorded(status)) => {
            tracing::info!(job_execution_id = %lease.execution_id, run_id = %fact.detail.lease.run_id, session_id = %fact.detail.lease.session_id, ?status, "job completed; lease ended");
            // The direct path: the outcome reaches the attempt and wakes the
            // orchestration now, instead of after stream → relay → bus →
            // queue → job-outcomes. The fact still travels that way, and
            // adopting it again there changes nothing; if this adoption fails
            // (a crash, a busy attempt), that one is the way it gets done.
            if item.as_ref().is_some_and(|i| i.direct_adoption) {
                if let Err(err) = adopt(context, &RunnerFact::completed(&fact.detail), "complete").await {
                    tracing::warn!(job_execution_id = %lease.execution_id, error = %err, "direct adoption failed; the job.completed fact will carry it");
                }
            }
            // A provisioned machine's job ended: its fleet is decided again
            // now (an ephemeral runner is `exhausted`; a release waiting on
            // this lease goes). Any later report or read converges it too.
            if let Some(link) = item.as_ref().and_then(|i| i.reservation.as_ref()) {
                if let Err(err) = context.store.converge_reservation(link, now).await {
                    tracing::warn!(job_execution_id = %lease.execution_id, reservation_id = %link.reservation_id, error = %err, "fleet not converged; the next pass will");
                }
            }
            Ok(json_response(StatusCode::OK, &CompleteResponse { status }))
        }
        Fenced::Ok(Completion::AlreadyRecorded(status)) => {
            Ok(json_response(StatusCode::OK, &CompleteResponse { status }))
        }
        Fenced::LeaseLost => Err(lease_lost()),
        Fenced::NotFound => Err(ApiError::not_found("lease")),
        Fenced::Refused(reason) => Err(ApiError::invalid_request(reason)),
    }
}
