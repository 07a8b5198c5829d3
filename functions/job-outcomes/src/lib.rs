//! Subscriber of the runners context's job facts: `runners.job.claimed`
//! (execution `running`, `started_at` = the claim's instant, first write
//! wins), `runners.job.completed` (terminal per the runner's status and
//! steps) and `runners.job.lease_expired` (`failed`/`runner_lost` unless
//! every step had finished, then the steps' outcome). Precedence and
//! replays are decided by `apply_execution_event` (finished > lease expired
//! > claimed > timeout; terminal states absorb).
//!
//! Each fact is one compare-and-set on the attempt's version
//! (`baton_shared::outcomes::adopt`), but the claims of one attempt in a
//! batch share one (`adopt_claims`): a claim only marks its execution
//! running, and each compare-and-set rewrites the whole attempt item. An
//! outcome
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

use std::collections::BTreeMap;

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use baton_shared::context::Context;
use baton_shared::facts::subscriber::{delivered, Delivered, HandlerError};
use baton_shared::facts::{FactDetail, JobClaimed, JobCompleted, JobLeaseExpired};
use baton_shared::outcomes::{adopt, adopt_claims, Kind, RunnerFact};
use baton_shared::sqs::report_failures;
use uuid::Uuid;

/// A message of the batch (its id) and what it carries.
type Message<T> = (Option<String>, T);

pub async fn handle(context: &Context, event: SqsEvent) -> SqsBatchResponse {
    // Claims grouped by attempt; everything else (and what cannot be read)
    // one by one.
    let mut claims: BTreeMap<(Uuid, u32), Vec<Message<RunnerFact>>> = BTreeMap::new();
    let mut singles = Vec::new();
    for message in &event.records {
        let fact = delivered(message).and_then(|delivered| read_fact(&delivered));
        match fact {
            Ok(fact) if matches!(fact.kind, Kind::Claimed) => {
                let attempt = (fact.lease.run_id, fact.lease.attempt);
                claims.entry(attempt).or_default().push((message.message_id.clone(), fact));
            }
            other => singles.push((message.message_id.clone(), other)),
        }
    }
    let grouped = futures::future::join_all(claims.into_values().map(|group| async move {
        let facts: Vec<RunnerFact> = group.iter().map(|(_, fact)| fact.clone()).collect();
        let results = adopt_claims(context, &facts).await;
        group.into_iter().map(|(id, _)| id).zip(results).collect::<Vec<_>>()
    }));
    let one_by_one = futures::future::join_all(singles.into_iter().map(|(id, fact)| async move {
        let result = match fact {
            Ok(fact) => adopt(context, &fact, "bus").await,
            Err(err) => Err(err),
        };
        (id, result)
    }));
    let (grouped, one_by_one) = futures::join!(grouped, one_by_one);
    report_failures(grouped.into_iter().flatten().chain(one_by_one))
}

fn read_fact(delivered: &Delivered) -> Result<RunnerFact, HandlerError> {
    match delivered.detail_type.as_str() {
        JobClaimed::DETAIL_TYPE => Ok(RunnerFact::claimed(&delivered.parse::<JobClaimed>()?.detail)),
        JobCompleted::DETAIL_TYPE => Ok(RunnerFact::completed(&delivered.parse::<JobCompleted>()?.detail)),
        JobLeaseExpired::DETAIL_TYPE => Ok(RunnerFact::lease_expired(&delivered.parse::<JobLeaseExpired>()?.detail)),
        other => Err(HandlerError::Permanent(format!("unexpected fact {other}"))),
    }
}
