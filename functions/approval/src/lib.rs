//! `POST /v1/workspaces/{ws}/runs/{run_id}/jobs/{job_id}/approval`
//! (behaviour.md §16): an operator approves or rejects an approval job.
//!
//! The decision is a compare-and-set on the attempt (`Store::update_attempt`)
//! with its `workflows.job.approval_decided` fact, and, when it settles the
//! job, the job's end, its outputs (the approval's inputs) and terminated
//! facts in the same transaction, where the attempt also advances (what
//! the job made ready is queued, what a rejection left without it skipped;
//! `outcomes::advance_in_write`); the orchestration is woken only for what
//! is left.
//!
//! Refusals change nothing: 403 `self-approval` for the run's creator, 403
//! `forbidden` for a token neither named nor grouped in `from`, 400 for bad
//! inputs, 409 `not-waiting` for a job that is not an approval waiting. A
//! repeat by an approver who decided already is answered with the job as
//! it is and records nothing: each approver counts once.

use baton_api::runs::ApprovalRequest;
use baton_domain::error::{ApiError, ErrorCode};
use baton_domain::limits;
use baton_domain::workflows::approval::{Approver, Refusal, MAX_COMMENT_BYTES};
use baton_domain::workflows::attempt::ApprovalError;
use baton_service::context::Context;
use baton_service::http::{authorize_operator, json_response, parse_json, path_id, path_workspace, respond};
use baton_service::usecases::orchestration::JOBS_PER_TRANSACTION;
use baton_service::usecases::outcomes::{advance_in_write, after_progress};
use baton_store::attempts::{AttemptStep, AttemptWrite};
use lambda_http::{Body, Request, Response};

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    respond(decide(context, &req).await)
}

async fn decide(context: &Context, req: &Request) -> Result<Response<Body>, ApiError> {
    let workspace_id = path_workspace(req)?;
    let token = authorize_operator(&context.store, req, &workspace_id).await?;
    let run_id = path_id(req, "run_id")?;
    let job_id = path_id(req, "job_id")?;
    let request: ApprovalRequest = parse_json(req)?;
    if let Some(comment) = &request.comment {
        limits::bounded_text("comment", comment, MAX_COMMENT_BYTES)?;
    }
    let store = &context.store;
    let run = store.get_run(&workspace_id, run_id).await?.ok_or_else(|| ApiError::not_found("run"))?;
    let approver = Approver { name: token.identity(), groups: token.groups.clone() };
    let decision = request.decision;
    let mut recorded = false;
    let mut ended = false;
    let minute = context.config.orchestration.timeout_minute;
    let updated = store
        .update_attempt(run_id, run.current_attempt, context.config.outbox_ttl_days, |next, definition| {
            recorded = false;
            ended = false;
            let now = chrono::Utc::now();
            let decided = next.state.decide_approval(
                definition,
                job_id,
                &approver,
                run.created_by.as_deref(),
                request.clone(),
                now,
            );
            let change = match decided {
                // Refused below, once the orchestration got its due (see there).
                Err(ApprovalError::NotWaiting) => {
                    ended = true;
                    return Ok(AttemptStep::Done);
                }
                other => other.map_err(refusal)?,
            };
            Ok::<_, ApiError>(match change {
                None => AttemptStep::Done,
                Some(change) => {
                    recorded = true;
                    // The job's end starts what it made ready in this very
                    // write, as an outcome's adoption does.
                    let mut emitted = change.emitted;
                    let (advanced, wake) = advance_in_write(next, definition, minute, JOBS_PER_TRANSACTION);
                    emitted.extend(advanced);
                    AttemptStep::Write(AttemptWrite { emitted, progressed: wake, ..AttemptWrite::default() })
                }
            })
        })
        .await?
        .ok_or_else(|| ApiError::not_found("run"))?;
    let job = updated.item.state.jobs.iter().find(|job| job.id == job_id).ok_or_else(ApiError::internal)?;
    tracing::info!(%run_id, %job_id, job = %job.key, by = %approver.name, ?decision, recorded, status = %job.status, "approval decision");
    // Also when this try recorded nothing: an earlier try of the same click
    // (a retry after a lost answer) may have ended the job, written its
    // progress and lost its answer before its wake, and this try, finding the
    // job ended, owes that wake. `after_progress` wakes only a step parked
    // for progress that happened, so this costs nothing else.
    if let Err(err) = after_progress(context, &updated).await {
        tracing::warn!(%run_id, error = %err, "could not wake the orchestration; its parked step looks again");
    }
    if ended {
        return Err(refusal(ApprovalError::NotWaiting));
    }
    let view = store.run_records(&workspace_id, run_id).await?.ok_or_else(ApiError::internal)?.view();
    let job = view
        .attempts
        .iter()
        .find(|attempt| attempt.attempt == run.current_attempt)
        .and_then(|attempt| attempt.jobs.iter().find(|job| job.id == job_id))
        .ok_or_else(ApiError::internal)?;
    Ok(json_response(http::StatusCode::OK, job))
}

fn refusal(err: ApprovalError) -> ApiError {
    match err {
        ApprovalError::NoSuchJob => ApiError::not_found("job"),
        ApprovalError::NotWaiting => {
            ApiError::new(ErrorCode::NotWaiting, "the job is not an approval waiting for decisions")
        }
        ApprovalError::Refused(Refusal::SelfApproval) => {
            ApiError::new(ErrorCode::SelfApproval, "the run's creator cannot approve its approval jobs")
        }
        ApprovalError::Refused(Refusal::NotAnApprover) => {
            ApiError::new(ErrorCode::Forbidden, "this token is not one of the approval's `from` (by name or group)")
        }
        ApprovalError::Refused(Refusal::InvalidInputs(message)) => ApiError::invalid_request(message),
    }
}
