//! The runner's reports on a lease: step progress
//! (`POST …/leases/{execution_id}/steps/{step_id}`) and the job's result
//! (`POST …/leases/{execution_id}/complete`), which ends the lease at once.
//! Both are fenced by the lease's epoch and token. The report of a job's
//! last step, every earlier one ended, settles the job as a complete would
//! (behaviour.md §16, `runners::settle`).

use baton_api::facts::{Fact, JobCompleted, SettledBy, StepResult};
use baton_api::runners::{CompleteRequest, CompleteResponse, StepAnswer, StepReport};
use baton_domain::error::ApiError;
use baton_domain::limits;
use baton_domain::runners::settle;
use baton_domain::workflows::definition::MAX_STEPS_PER_JOB;
use baton_domain::workflows::execution::recorded_outcome;
use baton_service::context::Context;
use baton_service::http::{json_response, lease_credentials, lease_lost, parse_json, path_id, respond};
use baton_service::usecases::outcomes::{adopt, RunnerFact};
use baton_store::leases::{Completion, Fenced, Settlement};
use baton_store::runner_items::LeaseItem;
use http::StatusCode;
use lambda_http::{Body, Request, RequestExt, Response};

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    let is_step = req.path_parameters().first("step_id").is_some();
    respond(if is_step { report_step(context, req).await } else { complete(context, req).await })
}

async fn report_step(context: &Context, req: Request) -> Result<Response<Body>, ApiError> {
    let lease = lease_credentials(&req)?;
    let step_id = path_id(&req, "step_id")?;
    // Step ids are derived from the execution (`ids::step_id`): an id of
    // none of its steps is refused without a read, and never recorded.
    if baton_domain::ids::step_index(lease.execution_id, step_id).is_none() {
        return Err(ApiError::not_found("step"));
    }
    let report: StepReport = parse_json(&req)?;
    check_outputs(&report.outputs)?;
    let step = StepResult {
        id: step_id,
        status: report.status,
        soft_failed: report.soft_failed,
        exit_code: report.exit_code,
        started_at: report.started_at,
        finished_at: report.finished_at,
    };
    // Only the report the runner marks as its last may settle the job, so
    // the others (most of them) cost one conditional write and no read.
    if report.last && step.status.is_terminal() {
        if let Some(answer) = settle_on(context, &lease, &step, report.outputs).await? {
            return Ok(json_response(StatusCode::OK, &answer));
        }
    }
    match context.store.report_step(lease.execution_id, lease.epoch, &lease.token_hash, &step).await? {
        Fenced::Ok(recorded) => {
            let answer = StepAnswer { cancel: recorded.cancel_requested, settled: recorded.settled };
            Ok(json_response(StatusCode::OK, &answer))
        }
        Fenced::LeaseLost => Err(lease_lost()),
        Fenced::NotFound => Err(ApiError::not_found("lease")),
        Fenced::Refused(reason) => Err(ApiError::invalid_request(reason)),
    }
}

/// Settles the job if this is its last step's report and every earlier
/// step ended; `None` when it does not (the report is then recorded the
/// ordinary way, which also tells a lost lease from a foreign token).
async fn settle_on(
    context: &Context,
    credentials: &baton_service::http::LeaseCredentials,
    step: &StepResult,
    outputs: std::collections::BTreeMap<String, serde_json::Value>,
) -> Result<Option<StepAnswer>, ApiError> {
    let Some(lease) = context.store.lease(credentials.execution_id).await? else { return Ok(None) };
    if lease.epoch != credentials.epoch || lease.token_hash != credentials.token_hash {
        return Ok(None);
    }
    let Some(step_count) = lease.step_count else { return Ok(None) };
    if !settle::is_last_step_report(lease.execution.id, step_count, step) {
        return Ok(None);
    }
    let Some(record) = context.store.runner_record(lease.execution.id).await? else { return Ok(None) };
    let Some(steps) = settle::settled_steps(lease.execution.id, step_count, &record.steps, step) else {
        return Ok(None);
    };
    let status = settle::settled_outcome(&steps);
    let now = chrono::Utc::now();
    let fact = Fact::new(
        lease.execution.workspace_id.clone(),
        now,
        JobCompleted {
            lease: lease.lease_ref(),
            status,
            steps,
            outputs,
            message: None,
            completed_at: now,
            claimed_at: Some(lease.claimed_at),
            settled_by: SettledBy::Steps,
        },
    );
    let outbox_ttl = context.config.outbox_ttl_days;
    let settled = match context.store.settle_on_steps(&lease, step, record.step_reports, &fact, outbox_ttl).await? {
        Settlement::Settled(Completion::Recorded(status)) => {
            tracing::info!(job_execution_id = %lease.execution.id, run_id = %lease.execution.run_id, session_id = %lease.session_id, ?status, "job settled by its steps; lease ended");
            after_recorded(context, &lease, &fact).await;
            status
        }
        Settlement::Settled(Completion::AlreadyRecorded(status)) => status,
        Settlement::Moved => return Ok(None),
    };
    Ok(Some(StepAnswer { cancel: lease.cancel_requested_at.is_some(), settled: Some(settled) }))
}

/// What follows a recorded outcome, whichever report recorded it.
async fn after_recorded(context: &Context, lease: &LeaseItem, fact: &Fact<JobCompleted>) {
    // The direct path: the outcome reaches the attempt and wakes the
    // orchestration now, instead of after stream → relay → bus → queue →
    // job-outcomes. The fact still travels that way, and adopting it again
    // there changes nothing; if this adoption fails (a crash, a busy
    // attempt), that one is the way it gets done.
    if lease.direct_adoption {
        if let Err(err) = adopt(context, &RunnerFact::completed(&fact.detail), "complete").await {
            tracing::warn!(job_execution_id = %lease.execution.id, error = %err, "direct adoption failed; the job.completed fact will carry it");
        }
    }
    // A provisioned machine's job ended: its fleet is decided again now (an
    // ephemeral runner is `exhausted`; a release waiting on this lease
    // goes). Any later report or read converges it too.
    if let Some(link) = lease.reservation.as_ref() {
        if let Err(err) = context.store.converge_reservation(link, fact.detail.completed_at).await {
            tracing::warn!(job_execution_id = %lease.execution.id, reservation_id = %link.reservation_id, error = %err, "fleet not converged; the next pass will");
        }
    }
}

/// The outputs a report or a complete carries must fit where they are
/// stored (and the fact that carries them): bounded, storable numbers.
fn check_outputs(outputs: &std::collections::BTreeMap<String, serde_json::Value>) -> Result<(), ApiError> {
    let outputs = serde_json::to_value(outputs).map_err(|e| ApiError::invalid_request(format!("outputs: {e}")))?;
    limits::storable_json("outputs", &outputs, limits::MAX_OUTPUTS_BYTES)
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
    check_outputs(&body.outputs)?;
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
    lease: &baton_service::http::LeaseCredentials,
    item: Option<LeaseItem>,
    body: CompleteRequest,
) -> Result<Response<Body>, ApiError> {
    let now = chrono::Utc::now();
    let lease_ref = match &item {
        Some(item) if item.epoch == lease.epoch => item.lease_ref(),
        _ => baton_api::facts::LeaseRef {
            run_id: uuid::Uuid::nil(),
            attempt: 0,
            job_id: uuid::Uuid::nil(),
            job_execution_id: lease.execution_id,
            session_id: uuid::Uuid::nil(),
            epoch: lease.epoch,
        },
    };
    let workspace = item.as_ref().map(|i| i.execution.workspace_id.clone()).unwrap_or_default();
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
            settled_by: SettledBy::Complete,
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
            if let Some(item) = &item {
                after_recorded(context, item, &fact).await;
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
