//! A runner's claim (`POST /v1/runners/claim`): one look for a job its
//! session may run, or a long poll of up to `wait_s` seconds that looks
//! again every [`LONG_POLL_RECHECK`] and answers as soon as work appears.
//! The store's `claim_next` makes each look one conditional transaction;
//! this is the poll around it, and what makes a retried claim (an answer
//! lost on its way to the runner) get the same job again.

use std::time::Duration;

use baton_api::facts::JobWork;
use baton_api::runners::{ClaimRequest, ClaimResponse, ClaimedJob, LeaseGrant, MAX_CLAIM_WAIT_S};
use baton_domain::error::{ApiError, ErrorCode};
use baton_domain::runners::claim::{LONG_POLL_RECHECK, SESSION_TOUCH_EVERY};
use baton_domain::tokens::ClaimKey;
use baton_store::claims::{ClaimLook, ClaimOutcome, ClaimStats, Claimed};
use baton_telemetry::metrics::{emit, emit_for_stage, Unit};
use tracing::Instrument;

use crate::context::Context;

/// Claims a job for the session holding `token`: `Some` with the job and
/// its lease, `None` when nothing came within the request's wait.
pub async fn claim(context: &Context, token: &str, body: ClaimRequest) -> Result<Option<ClaimResponse>, ApiError> {
    let wait = match body.wait_s {
        Some(w) if w > MAX_CLAIM_WAIT_S => {
            return Err(ApiError::invalid_request(format!("wait_s must be between 0 and {MAX_CLAIM_WAIT_S}")))
        }
        w => Duration::from_secs(w.unwrap_or(0)),
    };
    let now = chrono::Utc::now();
    let session = context.store.session_for_token(token, now).await?.ok_or_else(ApiError::unauthenticated)?;
    let span = tracing::info_span!("claim", session_id = %session.id, workspace_id = %session.workspace_id);
    async move {
        // Every try of one claim derives the same lease token from it.
        let key = body.request_id.map(|id| ClaimKey::new(token, id));
        // A retry of a claim whose answer was lost gets that answer again,
        // even when that claim was the session's last: an ephemeral
        // runner's only claim, answered 504, is retried on a session that
        // is capped out by that very claim (and must not be told it is
        // exhausted, which would strand its job until the lease expires).
        let mut answered = match &key {
            Some(key) => context.store.claim_answered(&session, key, &context.config.lease, now).await?,
            None => None,
        };
        if answered.is_none() && session.is_capped_out() {
            return Err(exhausted());
        }
        let touch_every = chrono::Duration::from_std(SESSION_TOUCH_EVERY).unwrap_or_default();
        context.store.touch_session(&session, now, touch_every).await?;
        let deadline = tokio::time::Instant::now() + wait;
        let mut stats = ClaimStats::default();
        // An empty first look checks a cached list of label sets against
        // the registry; re-checks trust it (store::claims).
        let mut first_look = true;
        // Set once a look failed in a way that may have applied (a claim
        // transaction whose answer was lost): from then on the claim's
        // answer item is the truth, as it is for a retry.
        let mut unsure = false;
        loop {
            let outcome = match answered.take() {
                Some(outcome) => outcome,
                None => {
                    let now = chrono::Utc::now();
                    let (lease, ttl) = (&context.config.lease, context.config.outbox_ttl_days);
                    let look = ClaimLook {
                        request: key,
                        first_look: std::mem::replace(&mut first_look, false),
                    };
                    match context.store.claim_next(&session, look, lease, ttl, now, &mut stats).await {
                        Ok(outcome) => outcome,
                        // A long poll looks every second for up to 20 s;
                        // failing it on any one failed look failed most
                        // long polls exactly when AWS throttled. A claim
                        // with a request id can look again safely: a look
                        // that applied put the claim's answer item, which
                        // the next look (or the final empty answer) finds.
                        Err(err)
                            if err.is_retriable()
                                && key.is_some()
                                && tokio::time::Instant::now() + LONG_POLL_RECHECK <= deadline =>
                        {
                            tracing::warn!(error = %err, "claim look failed; the poll goes on");
                            unsure = true;
                            tokio::time::sleep(LONG_POLL_RECHECK).await;
                            if let Some(key) = &key {
                                // A look that applied answers now, not at
                                // the poll's end: its grace is running.
                                let now = chrono::Utc::now();
                                let found = context.store.claim_answered(&session, key, lease, now).await;
                                answered = found.ok().flatten().filter(|a| matches!(a, ClaimOutcome::Claimed(_)));
                            }
                            continue;
                        }
                        Err(err) => return Err(err.into()),
                    }
                }
            };
            match outcome {
                ClaimOutcome::Claimed(claimed) => {
                    let secrets = claimed.spec.secrets.clone();
                    let mut job = claim_response(*claimed, chrono::Utc::now());
                    if !secrets.is_empty() {
                        // Read with this function's own grant, for this job
                        // only; an SSM failure answers an error, and the
                        // runner's retry of this claim gets the same job again.
                        let found = context.secrets().read(&job.workspace_id, &secrets).await?;
                        crate::usecases::secrets::put_in(&mut job.job, &secrets, &found);
                        tracing::info!(job_execution_id = %job.job_execution_id, secrets = secrets.len(),
                            missing = job.job.missing_secrets.len(), "secrets put in");
                    }
                    tracing::info!(job_execution_id = %job.job_execution_id, run_id = %job.run_id, job_id = %job.job_id, epoch = job.lease.epoch, "job claimed");
                    emit("claim", &[("claims", 1.0, Unit::Count), ("lost_races", f64::from(stats.lost_races), Unit::Count)]);
                    // Claims go (about) oldest first, so the claimed job's wait
                    // is the age of the oldest pending job the fleet can run.
                    let waited = (chrono::Utc::now() - job.queued_at).num_milliseconds() as f64 / 1000.0;
                    emit_for_stage(&context.config.stage, "OldestPendingJobAgeSeconds", waited, Unit::Seconds);
                    return Ok(Some(job));
                }
                ClaimOutcome::SessionExhausted => return Err(exhausted()),
                ClaimOutcome::NothingToClaim => {
                    if tokio::time::Instant::now() + LONG_POLL_RECHECK > deadline {
                        // A retry's empty answer is made final first: the
                        // try it repeats may still be running.
                        if let Some(key) = key.as_ref().filter(|_| body.retry || unsure) {
                            let now = chrono::Utc::now();
                            let lease = &context.config.lease;
                            answered = Some(context.store.answer_claim_empty(&session, key, lease, now).await?);
                            if matches!(answered, Some(ClaimOutcome::Claimed(_))) {
                                continue;
                            }
                        }
                        return Ok(None);
                    }
                    tokio::time::sleep(LONG_POLL_RECHECK).await;
                }
            }
        }
    }
    .instrument(span)
    .await
}

fn exhausted() -> ApiError {
    ApiError::new(ErrorCode::SessionExhausted, "this session has used all the claims its registration token allows")
}

/// The 200 body: everything the runner needs to execute the job, and its
/// lease. The job's `timeout_s` is what is left of its timeout at `now`: it
/// counts from queueing (behaviour.md §9), not from the claim.
fn claim_response(claimed: Claimed, now: chrono::DateTime<chrono::Utc>) -> ClaimResponse {
    let Claimed { pending, spec, lease, lease_token } = claimed;
    let waited = u64::try_from((now - pending.queued_at).num_seconds()).unwrap_or(0);
    let timeout_s = pending.job.timeout_s.saturating_sub(waited).max(1);
    ClaimResponse {
        job_execution_id: pending.execution.id,
        job_id: pending.execution.job_id,
        run_id: pending.execution.run_id,
        attempt: pending.execution.attempt,
        workspace_id: pending.execution.workspace_id,
        queued_at: pending.queued_at,
        lease: LeaseGrant { token: lease_token, epoch: lease.epoch, expires_at: lease.expires_at },
        job: ClaimedJob {
            work: JobWork { key: pending.job.key, labels: pending.job.labels, timeout_s, ..spec.work },
            secret_values: Vec::new(),
            missing_secrets: Vec::new(),
        },
    }
}
