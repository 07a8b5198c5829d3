//! Subscriber of the runners context's job facts: `runners.job.claimed`
//! (execution `running`, `started_at` = the claim's instant, first write
//! wins), `runners.job.completed` (terminal per the runner's status and
//! steps) and `runners.job.lease_expired` (`failed`/`runner_lost` unless
//! every step had finished, then the steps' outcome). Precedence and
//! replays are decided by `apply_execution_event` (finished > lease expired
//! > claimed > timeout; terminal states absorb).
//!
//! Each fact is one compare-and-set on the attempt's version
//! (`baton_shared::outcomes::adopt`). An outcome
//! also bumps the attempt's progress, writes the reported steps and the
//! `job_execution.terminated` and `job.terminated` facts in the same
//! transaction, then wakes the orchestration through its parked token. A
//! completion was usually adopted already by the `complete` function itself
//! (the direct path); here it then finds nothing to change.
//!
//! Idempotency: state, not markers. A redelivered or late fact finds the
//! execution already where the fact would put it (or terminal) and changes
//! nothing, emits nothing; it only re-sends a wake-up if the orchestration
//! still waits for progress that has happened (a crash between a commit
//! and its wake-up is healed by the redelivery).

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use baton_shared::context::Context;
use baton_shared::facts::subscriber::{consume, Delivered, HandlerError};
use baton_shared::facts::{FactDetail, JobClaimed, JobCompleted, JobLeaseExpired};
use baton_shared::outcomes::{adopt, RunnerFact};

pub async fn handle(context: &Context, event: SqsEvent) -> SqsBatchResponse {
    consume(event, |delivered| async move { adopt(context, &read_fact(&delivered)?, "bus").await }).await
}

fn read_fact(delivered: &Delivered) -> Result<RunnerFact, HandlerError> {
    match delivered.detail_type.as_str() {
        JobClaimed::DETAIL_TYPE => Ok(RunnerFact::claimed(&delivered.parse::<JobClaimed>()?.detail)),
        JobCompleted::DETAIL_TYPE => Ok(RunnerFact::completed(&delivered.parse::<JobCompleted>()?.detail)),
        JobLeaseExpired::DETAIL_TYPE => Ok(RunnerFact::lease_expired(&delivered.parse::<JobLeaseExpired>()?.detail)),
        other => Err(HandlerError::Permanent(format!("unexpected fact {other}"))),
    }
}
