//! Pipelines' schedules (behaviour.md §18), run by the cloud's own
//! scheduler every minute (`BATON_SCHEDULES_PERIOD_S`): each minute since
//! the last sweep is read (`domain::schedules::minutes_to_sweep`, one
//! `Query` a minute, never a Scan), and each tick due in it is settled:
//!
//! - a tick of a pipeline deleted or put again since (another revision) is
//!   dropped, its cron no longer the pipeline's;
//! - a tick reached in time requests its run (`run.requested`, created by
//!   `run-requests` with the key of the pipeline, the cron and the
//!   minute), and keeps the cron's next tick after now;
//! - a tick reached after an outage is missed, not made up: only the next
//!   tick after now is kept.
//!
//! Each tick is settled in one transaction conditioned on it still being
//! there, so two sweeps at once (a slow one and the next minute's) settle
//! it once.

use std::time::{Duration, Instant, SystemTime};

use baton_api::pipelines::{RunTrigger, TriggerKind};
use baton_domain::pipelines;
use baton_domain::schedules::{self, Tick};
use baton_domain::triggers;
use baton_service::context::{Context, Scheduled};
use baton_store::run_requests::NewRunRequest;
use baton_store::schedules::ScheduleTick;
use baton_store::StoreError;
use baton_telemetry::metrics::{emit, Unit};
use chrono::{DateTime, Utc};

/// How long before the invocation's deadline no further minute is read.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(5);

/// The function's name in its metrics.
const FUNCTION: &str = "schedules";

/// What one sweep did.
#[derive(Debug, Default, serde::Serialize)]
pub struct Swept {
    pub minutes: usize,
    pub fired: usize,
    pub missed: usize,
    pub dropped: usize,
}

pub async fn handle(context: &Context, invocation: Scheduled) -> Result<Swept, StoreError> {
    let left = invocation.deadline.duration_since(SystemTime::now()).unwrap_or_default();
    let stop_at = Instant::now() + left.saturating_sub(DEADLINE_MARGIN);
    let now = Utc::now();
    let mut swept = Swept::default();
    for minute in schedules::minutes_to_sweep(context.store.schedules_swept().await?, now) {
        if Instant::now() >= stop_at {
            // The next sweep goes on from the last minute marked.
            break;
        }
        for tick in context.store.schedule_ticks(minute).await? {
            settle(context, &tick, now, &mut swept).await?;
        }
        context.store.mark_schedules_swept(minute).await?;
        swept.minutes += 1;
    }
    if swept.fired + swept.missed + swept.dropped > 0 {
        tracing::info!(
            minutes = swept.minutes,
            fired = swept.fired,
            missed = swept.missed,
            dropped = swept.dropped,
            "schedules swept"
        );
    }
    emit(
        FUNCTION,
        &[("ticks_fired", swept.fired as f64, Unit::Count), ("ticks_missed", swept.missed as f64, Unit::Count)],
    );
    Ok(swept)
}

async fn settle(
    context: &Context,
    tick: &ScheduleTick,
    now: DateTime<Utc>,
    swept: &mut Swept,
) -> Result<(), StoreError> {
    let outbox_ttl = context.config.outbox_ttl_days;
    let pipeline = context.store.pipeline(&tick.workspace_id, &tick.pipeline).await?;
    let current = pipeline.as_ref().filter(|p| p.revision == tick.revision);
    let cron = current.and_then(|p| {
        let read = triggers::read_triggers(&p.definition).ok()?;
        read.schedule.get(tick.index).filter(|c| c.text() == tick.cron).cloned().map(|cron| (read, cron))
    });
    let (Some(pipeline), Some((read, cron))) = (current, cron) else {
        // Deleted, or put again: its ticks are the new revision's.
        if context.store.settle_tick(tick, None, None, now, outbox_ttl).await? {
            swept.dropped += 1;
        }
        return Ok(());
    };
    let next = cron
        .next_after(now.max(tick.due))
        .map(|due| ScheduleTick::new(&tick.workspace_id, &tick.pipeline, tick.index, &tick.cron, tick.revision, due));
    let request = match schedules::tick(tick.due, now) {
        Tick::Missed => None,
        Tick::Fire => Some(NewRunRequest {
            run_id: baton_domain::ids::new_id(),
            pipeline: pipeline.name.clone(),
            pipeline_version: pipeline.version.clone(),
            trigger: RunTrigger { kind: TriggerKind::Schedule, git_ref: None, sha: None, actor: None, delivery: None },
            github: serde_json::Value::Object(schedules::github_fields(&tick.cron)).to_string(),
            inputs: serde_json::Value::Object(pipelines::event_inputs(&read)).to_string(),
            idempotency_key: format!(
                "{}:{}",
                tick.workspace_id,
                schedules::idempotency_key(&tick.pipeline, tick.index, tick.due)
            ),
        }),
    };
    if context.store.settle_tick(tick, request.as_ref(), next.as_ref(), now, outbox_ttl).await? {
        match &request {
            Some(request) => {
                tracing::info!(workspace_id = %tick.workspace_id, pipeline = %tick.pipeline, cron = %tick.cron, due = %tick.due, run_id = %request.run_id, "schedule fired");
                swept.fired += 1;
            }
            None => {
                tracing::warn!(workspace_id = %tick.workspace_id, pipeline = %tick.pipeline, cron = %tick.cron, due = %tick.due, "schedule tick missed (not made up)");
                swept.missed += 1;
            }
        }
    }
    Ok(())
}
