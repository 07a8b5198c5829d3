//! The target of pipelines' schedules on Amazon EventBridge Scheduler
//! (behaviour.md §18, `domain::schedules`): one invocation a tick, its
//! input the pipeline, the cron's place and text, and the minute it was
//! due. The tick starts a run when:
//!
//! - the pipeline is still there and the cron is still its cron at that
//!   place (a schedule outliving a change, until `schedule-sync` removes
//!   it, starts nothing);
//! - the cron fires in that minute (a cron whose two day fields Amazon
//!   cannot combine wakes this on a superset of its minutes);
//! - it is reached within `MISSED_AFTER` of its minute: a tick the
//!   scheduler retried past that (the stack was down) is missed, not made
//!   up.
//!
//! The run is requested (`run.requested`, created by `run-requests`) in one
//! transaction with the tick's record, put only if absent: a tick the
//! scheduler delivers twice, or that both schedules of one cron wake for,
//! requests one run. A failure of the table is the invocation's failure,
//! which the scheduler retries.

use baton_api::pipelines::{RunTrigger, TriggerKind};
use baton_domain::pipelines;
use baton_domain::schedules::{self, ScheduledTick, Tick};
use baton_domain::triggers;
use baton_service::context::Context;
use baton_store::run_requests::NewRunRequest;
use baton_store::StoreError;
use baton_telemetry::metrics::{emit, Unit};
use chrono::{DateTime, Utc};

/// The function's name in its metrics.
const FUNCTION: &str = "schedules";

/// What one tick did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fired {
    /// Its run is requested.
    Fired,
    /// It fired already (a repeated delivery).
    Repeated,
    /// Reached too late: not made up.
    Missed,
    /// Not the pipeline's cron now, or not a minute it fires in.
    Dropped,
}

#[derive(Debug, thiserror::Error)]
pub enum TickError {
    #[error("a tick whose time is not RFC 3339: {0:?}")]
    Time(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub async fn handle(context: &Context, tick: ScheduledTick) -> Result<Fired, TickError> {
    let due = DateTime::parse_from_rfc3339(&tick.scheduled_time)
        .map_err(|_| TickError::Time(tick.scheduled_time.clone()))?
        .with_timezone(&Utc);
    let fired = fire(context, &tick, due, Utc::now()).await?;
    let (ws, pipeline, cron) = (&tick.workspace_id, &tick.pipeline, &tick.cron);
    match fired {
        Fired::Fired => tracing::info!(workspace_id = %ws, pipeline = %pipeline, cron = %cron, %due, "schedule fired"),
        Fired::Missed => {
            tracing::warn!(workspace_id = %ws, pipeline = %pipeline, cron = %cron, %due, "schedule tick missed (not made up)")
        }
        Fired::Repeated | Fired::Dropped => {
            tracing::info!(workspace_id = %ws, pipeline = %pipeline, cron = %cron, %due, ?fired, "schedule tick starts nothing")
        }
    }
    let count = |of: Fired| if fired == of { 1.0 } else { 0.0 };
    emit(
        FUNCTION,
        &[("ticks_fired", count(Fired::Fired), Unit::Count), ("ticks_missed", count(Fired::Missed), Unit::Count)],
    );
    Ok(fired)
}

async fn fire(
    context: &Context,
    tick: &ScheduledTick,
    due: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Fired, StoreError> {
    let Some(pipeline) = context.store.pipeline(&tick.workspace_id, &tick.pipeline).await? else {
        return Ok(Fired::Dropped);
    };
    let Ok(read) = triggers::read_triggers(&pipeline.definition) else {
        return Ok(Fired::Dropped);
    };
    let Some(cron) = read.schedule.get(tick.index).filter(|c| c.text() == tick.cron) else {
        return Ok(Fired::Dropped);
    };
    if !cron.fires_at(due) {
        return Ok(Fired::Dropped);
    }
    if schedules::tick(due, now) == Tick::Missed {
        return Ok(Fired::Missed);
    }
    let request = NewRunRequest {
        run_id: baton_domain::ids::new_id(),
        pipeline: pipeline.name.clone(),
        pipeline_version: pipeline.version.clone(),
        trigger: RunTrigger { kind: TriggerKind::Schedule, git_ref: None, sha: None, actor: None, delivery: None },
        github: serde_json::Value::Object(schedules::github_fields(&tick.cron)).to_string(),
        inputs: serde_json::Value::Object(pipelines::event_inputs(&read)).to_string(),
        idempotency_key: format!(
            "{}:{}",
            tick.workspace_id,
            schedules::idempotency_key(&tick.pipeline, tick.index, due)
        ),
    };
    let outbox_ttl = context.config.outbox_ttl_days;
    Ok(if context.store.fire_schedule(&tick.workspace_id, tick.index, due, &request, now, outbox_ttl).await? {
        Fired::Fired
    } else {
        Fired::Repeated
    })
}
