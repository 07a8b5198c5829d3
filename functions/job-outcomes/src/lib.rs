//! Subscriber of the runners context's job facts: `runners.job.claimed`
//! (execution `running`, `started_at` = the claim's instant, first write
//! wins), `runners.job.completed` (terminal per the runner's status and
//! steps) and `runners.job.lease_expired` (`failed`/`runner_lost` unless
//! every step had finished, then the steps' outcome). Precedence and
//! replays are decided by `apply_execution_event` (finished > lease expired
//! > claimed > timeout; terminal states absorb).
//!
//! Each fact is one compare-and-set on the attempt's version
//! (`Store::update_attempt`). An outcome
//! also bumps the attempt's progress, writes the reported steps and the
//! `job_execution.terminated` and `job.terminated` facts in the same
//! transaction, then wakes the orchestration through its parked token.
//!
//! Idempotency: state, not markers. A redelivered or late fact finds the
//! execution already where the fact would put it (or terminal) and changes
//! nothing, emits nothing; it only re-sends a wake-up if the orchestration
//! still waits for progress that has happened (a crash between a commit
//! and its wake-up is healed by the redelivery).

use std::collections::BTreeMap;

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use baton_shared::context::Context;
use baton_shared::facts::subscriber::{consume, Delivered, HandlerError};
use baton_shared::facts::{FactDetail, JobClaimed, JobCompleted, JobLeaseExpired, JobOutcome, LeaseRef, StepResult};
use baton_shared::metrics::{emit, Unit};
use baton_shared::orchestration::wake;
use baton_shared::store::attempts::{AttemptStep, AttemptWrite};
use baton_shared::workflows::attempt::step_statuses;
use baton_shared::workflows::{ExecutionEvent, StepStatus, WorkflowDefinition};
use chrono::{DateTime, Utc};

pub async fn handle(context: &Context, event: SqsEvent) -> SqsBatchResponse {
    consume(event, |delivered| adopt(context, delivered)).await
}

/// What a runner fact says happened to an execution.
struct RunnerFact {
    lease: LeaseRef,
    at: DateTime<Utc>,
    kind: Kind,
    steps: Vec<StepResult>,
    outputs: Option<BTreeMap<String, serde_json::Value>>,
}

#[derive(Clone, Copy)]
enum Kind {
    Claimed,
    Completed(JobOutcome),
    LeaseExpired,
}

fn read_fact(delivered: &Delivered) -> Result<RunnerFact, HandlerError> {
    match delivered.detail_type.as_str() {
        JobClaimed::DETAIL_TYPE => {
            let fact = delivered.parse::<JobClaimed>()?;
            Ok(RunnerFact {
                lease: fact.detail.lease,
                at: fact.detail.claimed_at,
                kind: Kind::Claimed,
                steps: Vec::new(),
                outputs: None,
            })
        }
        JobCompleted::DETAIL_TYPE => {
            let fact = delivered.parse::<JobCompleted>()?;
            let status = fact.detail.status;
            Ok(RunnerFact {
                lease: fact.detail.lease,
                at: fact.detail.completed_at,
                kind: Kind::Completed(status),
                steps: fact.detail.steps,
                outputs: Some(fact.detail.outputs),
            })
        }
        JobLeaseExpired::DETAIL_TYPE => {
            let fact = delivered.parse::<JobLeaseExpired>()?;
            Ok(RunnerFact {
                lease: fact.detail.lease,
                at: fact.detail.expired_at,
                kind: Kind::LeaseExpired,
                steps: fact.detail.steps,
                outputs: None,
            })
        }
        other => Err(HandlerError::Permanent(format!("unexpected fact {other}"))),
    }
}

/// The status of every step of the job, in order.
fn all_steps(definition: &WorkflowDefinition, job_key: &str, fact: &RunnerFact) -> Vec<StepStatus> {
    step_statuses(definition, job_key, fact.lease.job_execution_id, &fact.steps)
}

async fn adopt(context: &Context, delivered: Delivered) -> Result<(), HandlerError> {
    let fact = read_fact(&delivered)?;
    let store = &context.store;
    let (run_id, attempt) = (fact.lease.run_id, fact.lease.attempt);
    let execution_id = fact.lease.job_execution_id;
    // What the last decision found, for what happens after the write.
    let mut finished = false;
    let mut already_ended = false;
    let updated = store
        .update_attempt(run_id, attempt, context.config.outbox_ttl_days, |next, definition| {
            let Some(job) = next.state.jobs.iter().find(|job| job.id == fact.lease.job_id) else {
                return Err(HandlerError::Permanent(format!("job {} is not in {run_id}/{attempt}", fact.lease.job_id)));
            };
            let event = match fact.kind {
                Kind::Claimed => ExecutionEvent::Claimed { at: fact.at },
                Kind::Completed(status) => {
                    ExecutionEvent::Completed { status, steps: all_steps(definition, &job.key, &fact) }
                }
                Kind::LeaseExpired => ExecutionEvent::LeaseExpired { steps: all_steps(definition, &job.key, &fact) },
            };
            already_ended = !matches!(fact.kind, Kind::Claimed)
                && job.execution.as_ref().is_some_and(|e| e.id == execution_id && e.status.is_terminal());
            let effect = next.state.apply_runner_event(
                fact.lease.job_id,
                execution_id,
                &event,
                Some(fact.lease.session_id),
                fact.at,
            );
            finished = effect.finished;
            if !effect.changed {
                return Ok(AttemptStep::Done);
            }
            let outputs = fact.outputs.clone().unwrap_or_default();
            let mut items = Vec::new();
            if effect.finished && (!fact.steps.is_empty() || !outputs.is_empty()) {
                items.push(store.result_put(run_id, attempt, execution_id, &fact.steps, &outputs)?);
            }
            Ok(AttemptStep::Write(AttemptWrite {
                emitted: effect.emitted,
                items,
                progressed: effect.finished,
                again: false,
            }))
        })
        .await?
        .ok_or_else(|| HandlerError::Permanent(format!("attempt {run_id}/{attempt} does not exist")))?;
    if updated.writes == 0 {
        tracing::debug!(%run_id, attempt, %execution_id, fact = delivered.detail_type, "runner fact changed nothing");
        if already_ended && !fact.steps.is_empty() {
            let outputs = fact.outputs.clone().unwrap_or_default();
            store.record_late_results(run_id, attempt, execution_id, &fact.steps, &outputs).await?;
        }
        emit("job-outcomes", &[("facts_without_effect", 1.0, Unit::Count)]);
    } else {
        tracing::info!(%run_id, attempt, job_id = %fact.lease.job_id, %execution_id,
            fact = delivered.detail_type, finished, "execution updated");
        emit(
            "job-outcomes",
            &[
                ("executions_finished", if finished { 1.0 } else { 0.0 }, Unit::Count),
                ("attempt_conflicts", f64::from(updated.lost_races), Unit::Count),
            ],
        );
    }
    // A redelivered fact re-sends the wake-up if the orchestration still
    // waits for progress that has happened (a crash between a commit and its
    // wake-up is healed by the redelivery).
    if let Some(token) = updated.item.token_to_wake() {
        wake(&context.clients.sfn, token).await?;
    }
    Ok(())
}
