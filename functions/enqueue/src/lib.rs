//! Enqueue: consumes `workflows.job_execution.queued` and makes the execution
//! claimable. Idempotent through the runners' record of the execution (a
//! durable tombstone): a replay, before or after a claim, an expiry or the
//! end of the execution, writes nothing. Invalid labels are a permanent
//! failure: the message is retried, then dead-lettered (and alarmed on).
//! The orchestrator usually made the execution claimable already; if it is
//! still unclaimed, the fitting runners are nudged again, and if no
//! registered runner and no provisioner offers its labels, it is flagged
//! `runners.job.unschedulable` (one fact, whatever the redeliveries: its id
//! is derived from the execution's).

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use baton_api::facts::{Fact, FactDetail, JobExecutionQueued, JobUnschedulable};
use baton_domain::ids::derived_id;
use baton_domain::runners::labels::{canonicalize, labelset_id};
use baton_domain::runners::schedulable::who_serves;
use baton_service::context::Context;
use baton_service::facts::subscriber::{consume, Delivered, HandlerError};
use baton_store::queue::Enqueued;
use baton_store::TxOutcome;
use baton_telemetry::metrics::{emit, Unit};

pub async fn handle(context: &Context, event: SqsEvent) -> SqsBatchResponse {
    consume(event, |delivered| enqueue(context, delivered)).await
}

async fn enqueue(context: &Context, delivered: Delivered) -> Result<(), HandlerError> {
    let fact = delivered.parse::<JobExecutionQueued>()?;
    let labels = canonicalize(&fact.detail.job.labels)
        .map_err(|e| HandlerError::Permanent(format!("execution {}: {e}", fact.detail.job_execution_id)))?;
    let labelset = labelset_id(&labels);
    let outcome = context.store.enqueue(&fact, labels.clone(), &labelset).await?;
    // Still pending when its fact arrives: the orchestrator's nudge may
    // have been lost (a crash right after its commit, a failed post), and a
    // redelivered advance finds nothing new to nudge for. This second nudge
    // spares the job a wait for the runners' safety poll; a job claimed
    // meanwhile (the usual case) costs nothing more.
    if matches!(outcome, Enqueued::Queued | Enqueued::StillPending) {
        context.push().nudge_work(&context.store, &fact.header.workspace_id, std::slice::from_ref(&labels)).await;
        flag_if_unschedulable(context, &fact, labels).await?;
    }
    tracing::info!(
        job_execution_id = %fact.detail.job_execution_id,
        run_id = %fact.detail.run_id,
        job_id = %fact.detail.job_id,
        event_id = %fact.header.event_id,
        replay = outcome != Enqueued::Queued,
        "execution enqueued"
    );
    Ok(())
}

/// Flags the execution unschedulable when nothing registered can serve it:
/// two reads (the workspace's offers and provisioners, side by side), and
/// a fact only when both come back empty-handed.
async fn flag_if_unschedulable(
    context: &Context,
    fact: &Fact<JobExecutionQueued>,
    labels: Vec<String>,
) -> Result<(), HandlerError> {
    let workspace_id = &fact.header.workspace_id;
    let store = &context.store;
    let key = (workspace_id.clone(), labels.clone());
    if served_lately(&key) {
        return Ok(());
    }
    let (offers, provisioners) = tokio::try_join!(store.offers(workspace_id), store.list_provisioners(workspace_id))?;
    let provisioners: Vec<_> = provisioners.into_iter().map(|p| (p.id, p.settings.label_sets)).collect();
    if who_serves(&labels, &offers, &provisioners, chrono::Utc::now()).is_some() {
        remember_served(key);
        return Ok(());
    }
    let detail = &fact.detail;
    let fails_at = detail.queued_at
        + chrono::Duration::from_std(context.config.unschedulable_fail_after).unwrap_or(chrono::Duration::zero());
    let mut flag = Fact::new(
        workspace_id.clone(),
        chrono::Utc::now(),
        JobUnschedulable {
            run_id: detail.run_id,
            attempt: detail.attempt,
            job_id: detail.job_id,
            job_execution_id: detail.job_execution_id,
            labels,
            fails_at,
        },
    );
    flag.header.event_id = derived_id(JobUnschedulable::DETAIL_TYPE, detail.job_execution_id);
    let put = store.outbox_put(&flag, context.config.outbox_ttl_days)?;
    // Already there: a redelivery of this queued fact flagged it before.
    let written = matches!(store.transact(vec![put]).await?, TxOutcome::Committed);
    if written {
        emit("enqueue", &[("unschedulable_jobs", 1.0, Unit::Count)]);
    }
    tracing::warn!(
        job_execution_id = %detail.job_execution_id,
        run_id = %detail.run_id,
        labels = ?flag.detail.labels,
        %fails_at,
        written,
        "no registered runner and no provisioner offers this job's labels: flagged unschedulable"
    );
    Ok(())
}

/// How long a label set found served stays known to be (per process): a
/// burst of jobs on one label set costs its two reads once, not once a job.
/// Only a "served" answer is remembered: a stale one can at worst leave a
/// job unflagged (as before the flag existed), never flag a servable one.
const SERVED_MEMORY: std::time::Duration = std::time::Duration::from_secs(60);

type Served = std::sync::Mutex<std::collections::HashMap<(String, Vec<String>), std::time::Instant>>;

fn served() -> &'static Served {
    static SERVED: std::sync::OnceLock<Served> = std::sync::OnceLock::new();
    SERVED.get_or_init(Served::default)
}

fn served_lately(key: &(String, Vec<String>)) -> bool {
    let served = served().lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    served.get(key).is_some_and(|at| at.elapsed() < SERVED_MEMORY)
}

fn remember_served(key: (String, Vec<String>)) {
    let mut served = served().lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    // Bounded: a process that has seen many sets forgets the stale ones.
    if served.len() >= 1_000 {
        served.retain(|_, at| at.elapsed() < SERVED_MEMORY);
    }
    served.insert(key, std::time::Instant::now());
}
