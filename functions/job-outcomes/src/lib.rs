//! Subscriber of the runners context's job facts: `runners.job.claimed`
//! (execution `running`, `started_at` = the claim's instant, first write
//! wins), `runners.job.completed` (terminal per the runner's status and
//! steps) and `runners.job.lease_expired` (`failed`/`runner_lost` unless
//! every step had finished, then the steps' outcome). Precedence and
//! replays are decided by `apply_execution_event` (finished > lease expired
//! > claimed > timeout; terminal states absorb).
//!
//! Each fact is one compare-and-set on the attempt's version. An outcome
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
use std::time::Duration;

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use baton_shared::facts::subscriber::{consume, Delivered, HandlerError};
use baton_shared::facts::{
    self, FactDetail, JobClaimed, JobCompleted, JobLeaseExpired, JobOutcome, LeaseRef, StepResult,
};
use baton_shared::metrics::{emit, Unit};
use baton_shared::orchestration::wake;
use baton_shared::store::{serialize, TxOutcome};
use baton_shared::workflows::attempt::{step_id, AttemptState};
use baton_shared::workflows::{CompletionStatus, ExecutionEvent, StepStatus, WorkflowDefinition};
use chrono::{DateTime, Utc};
use rand::Rng;

/// How many lost compare-and-sets one fact tolerates before SQS retries it.
const MAX_CONFLICTS: u32 = 50;

/// The function's cold-start state: the context every function shares.
pub use baton_shared::context::Context as State;

pub async fn handle(state: &State, event: SqsEvent) -> SqsBatchResponse {
    consume(event, |delivered| adopt(state, delivered)).await
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
    Completed(CompletionStatus),
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
            let status = match fact.detail.status {
                JobOutcome::Succeeded => CompletionStatus::Succeeded,
                JobOutcome::Failed => CompletionStatus::Failed,
            };
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

fn step_status(status: facts::StepStatus) -> StepStatus {
    match status {
        facts::StepStatus::Pending => StepStatus::Pending,
        facts::StepStatus::Running => StepStatus::Running,
        facts::StepStatus::Succeeded => StepStatus::Succeeded,
        facts::StepStatus::Failed => StepStatus::Failed,
        facts::StepStatus::Skipped => StepStatus::Skipped,
    }
}

/// The status of every step of the job, in order: what the runner reported
/// for it, `pending` for steps it never reported on.
fn all_steps(definition: &WorkflowDefinition, job_key: &str, fact: &RunnerFact) -> Vec<StepStatus> {
    let count = definition.job(job_key).map_or(0, |job| job.steps.len());
    (0..count)
        .map(|index| {
            let id = step_id(fact.lease.job_execution_id, index);
            fact.steps.iter().find(|step| step.id == id).map_or(StepStatus::Pending, |step| step_status(step.status))
        })
        .collect()
}

async fn adopt(state: &State, delivered: Delivered) -> Result<(), HandlerError> {
    let fact = read_fact(&delivered)?;
    let store = &state.store;
    let (run_id, attempt) = (fact.lease.run_id, fact.lease.attempt);
    let execution_id = fact.lease.job_execution_id;
    let _serialised = serialize::lock(serialize::attempt_key(run_id, attempt)).await;
    let mut conflicts = 0;
    loop {
        let item = store
            .get_attempt(run_id, attempt)
            .await?
            .ok_or_else(|| HandlerError::Permanent(format!("attempt {run_id}/{attempt} does not exist")))?;
        let Some(job) = item.state.jobs.iter().find(|job| job.id == fact.lease.job_id) else {
            return Err(HandlerError::Permanent(format!("job {} is not in {run_id}/{attempt}", fact.lease.job_id)));
        };
        let event = match fact.kind {
            Kind::Claimed => ExecutionEvent::Claimed { at: fact.at },
            Kind::Completed(status) => {
                ExecutionEvent::Completed { status, steps: job_steps(store, &item.state, &job.key, &fact).await? }
            }
            Kind::LeaseExpired => {
                ExecutionEvent::LeaseExpired { steps: job_steps(store, &item.state, &job.key, &fact).await? }
            }
        };
        let mut next = item.clone();
        let effect = next.state.apply_runner_event(
            fact.lease.job_id,
            execution_id,
            &event,
            Some(fact.lease.session_id),
            fact.at,
        );
        if !effect.changed {
            tracing::debug!(%run_id, attempt, %execution_id, fact = delivered.detail_type, "runner fact changed nothing");
            let ended_by_server = matches!(fact.kind, Kind::Completed(_))
                && job.execution.as_ref().is_some_and(|e| e.id == execution_id && e.status.is_terminal());
            if ended_by_server && !fact.steps.is_empty() {
                let outputs = fact.outputs.clone().unwrap_or_default();
                store.record_late_results(run_id, attempt, execution_id, &fact.steps, &outputs).await?;
            }
            emit("job-outcomes", &[("facts_without_effect", 1.0, Unit::Count)]);
            if let Some(token) = item.token_to_wake() {
                wake(&state.clients.sfn, token).await?;
            }
            return Ok(());
        }
        next.version += 1;
        if effect.finished {
            next.progress += 1;
        }
        let now = Utc::now();
        let workspace_id = next.state.workspace_id.clone();
        let mut items = vec![store.attempt_put(&next, Some(item.version))?];
        let outputs = fact.outputs.clone().unwrap_or_default();
        if effect.finished && (!fact.steps.is_empty() || !outputs.is_empty()) {
            items.push(store.result_put(run_id, attempt, execution_id, &fact.steps, &outputs)?);
        }
        items.extend(store.emitted_puts(&workspace_id, now, &effect.emitted, state.config.outbox_ttl_days)?);
        match store.transact(items).await? {
            TxOutcome::Committed => {
                tracing::info!(%run_id, attempt, job_id = %fact.lease.job_id, %execution_id,
                    fact = delivered.detail_type, finished = effect.finished, "execution updated");
                emit(
                    "job-outcomes",
                    &[
                        ("executions_finished", if effect.finished { 1.0 } else { 0.0 }, Unit::Count),
                        ("attempt_conflicts", f64::from(conflicts), Unit::Count),
                    ],
                );
                if let Some(token) = next.token_to_wake() {
                    wake(&state.clients.sfn, token).await?;
                }
                return Ok(());
            }
            TxOutcome::ConditionFailed { .. } => {
                conflicts += 1;
                if conflicts > MAX_CONFLICTS {
                    return Err(HandlerError::Transient(format!("attempt {run_id}/{attempt} too contended")));
                }
                let pause = rand::rng().random_range(5..40);
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
        }
    }
}

/// Every step's status for the precedence rules (needs the frozen
/// definition for how many steps the job has).
async fn job_steps(
    store: &baton_shared::store::Store,
    attempt: &AttemptState,
    job_key: &str,
    fact: &RunnerFact,
) -> Result<Vec<StepStatus>, HandlerError> {
    let definition = store.get_snapshot(attempt.run_id, attempt.snapshot_attempt).await?.ok_or_else(|| {
        HandlerError::Transient(format!("snapshot of {}/{} missing", attempt.run_id, attempt.attempt))
    })?;
    Ok(all_steps(&definition, job_key, fact))
}
