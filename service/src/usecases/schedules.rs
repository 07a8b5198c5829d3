//! Pipelines' schedules on Amazon EventBridge Scheduler (behaviour.md §18,
//! `domain::schedules`), brought in line with a pipeline's `on.schedule`
//! each time it changes (its `pipeline.changed` fact, `schedule-sync`).
//!
//! A pass reads the pipeline as it is now, lists the schedules under its
//! name prefix, and creates, updates and deletes until they are the
//! pipeline's; a repeated fact finds nothing to do. The scheduler's calls
//! cannot be conditioned on the table, so two passes may interleave (two
//! quick changes, a redelivery beside the first delivery): each pass reads
//! the pipeline again at its end and goes round once more if it changed
//! meanwhile, so every stale write is followed by the same pass writing
//! what the pipeline is now. A schedule left over for a moment starts
//! nothing: the target checks the cron against the pipeline at each tick.

use aws_sdk_scheduler::types::{FlexibleTimeWindow, FlexibleTimeWindowMode, RetryPolicy, ScheduleState, Target};
use baton_domain::schedules::{self, Schedule, MISSED_AFTER};
use baton_domain::triggers;
use baton_store::error::StoreError;

use crate::config::SchedulerConfig;
use crate::context::Context;

/// Passes one sync makes at most before leaving the rest to a redelivery.
const MAX_PASSES: usize = 4;

/// What a sync changed.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Synced {
    pub created: usize,
    pub updated: usize,
    pub deleted: usize,
    pub passes: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("the table: {0}")]
    Store(#[from] StoreError),
    #[error("the scheduler: {0}")]
    Scheduler(String),
    #[error("pipeline {0} kept changing during {MAX_PASSES} passes")]
    Unsettled(String),
    #[error("this function has no schedule group (BATON_SCHEDULE_GROUP and its two companions)")]
    NotConfigured,
}

fn scheduler_failed<E: std::error::Error + 'static>(
    what: &str,
    err: aws_sdk_scheduler::error::SdkError<E>,
) -> SyncError {
    let err = aws_sdk_scheduler::error::DisplayErrorContext(err);
    SyncError::Scheduler(format!("{what}: {err}"))
}

/// Brings the schedules of `pipeline` in `workspace_id` in line with it.
pub async fn sync(context: &Context, workspace_id: &str, pipeline: &str) -> Result<Synced, SyncError> {
    let config = context.config.scheduler.as_ref().ok_or(SyncError::NotConfigured)?;
    let mut synced = Synced::default();
    let mut read = context.store.pipeline(workspace_id, pipeline).await?;
    while synced.passes < MAX_PASSES {
        synced.passes += 1;
        let wanted = match &read {
            // A definition refused now (it was accepted when stored) keeps
            // no schedule: a run of it would be refused as well.
            Some(item) => triggers::read_triggers(&item.definition)
                .map(|triggers| schedules::schedules(workspace_id, pipeline, &triggers.schedule))
                .unwrap_or_default(),
            None => Vec::new(),
        };
        apply(context, config, &schedules::name_prefix(workspace_id, pipeline), &wanted, &mut synced).await?;
        let now = context.store.pipeline(workspace_id, pipeline).await?;
        if now.as_ref().map(|p| p.revision) == read.as_ref().map(|p| p.revision) {
            return Ok(synced);
        }
        read = now;
    }
    Err(SyncError::Unsettled(pipeline.to_string()))
}

/// A create or an update of schedule `$schedule` (the two requests' builders
/// are distinct types with the same fields): in the group, at its minute in
/// UTC, enabled, invoking the target with the tick's input.
macro_rules! as_wanted {
    ($request:expr, $config:expr, $schedule:expr) => {
        $request
            .group_name(&$config.group)
            .name(&$schedule.name)
            .schedule_expression(&$schedule.expression)
            .schedule_expression_timezone("UTC")
            .flexible_time_window(off()?)
            .state(ScheduleState::Enabled)
            .target(target($config, $schedule)?)
    };
}

/// Makes the schedules named `prefix…` exactly `wanted`.
async fn apply(
    context: &Context,
    config: &SchedulerConfig,
    prefix: &str,
    wanted: &[Schedule],
    synced: &mut Synced,
) -> Result<(), SyncError> {
    let scheduler = context.clients.scheduler();
    let mut existing = Vec::new();
    let mut pages =
        scheduler.list_schedules().group_name(&config.group).name_prefix(prefix).into_paginator().items().send();
    while let Some(summary) = pages.next().await {
        let summary = summary.map_err(|e| scheduler_failed("listing schedules", e))?;
        existing.extend(summary.name);
    }
    for schedule in wanted {
        if !existing.contains(&schedule.name) {
            let created = as_wanted!(scheduler.create_schedule(), config, schedule).send().await;
            match created {
                Ok(_) => {
                    synced.created += 1;
                    continue;
                }
                // Created by a pass racing this one: compared below.
                Err(err) if err.as_service_error().is_some_and(|e| e.is_conflict_exception()) => {}
                Err(err) => return Err(scheduler_failed("creating a schedule", err)),
            }
        }
        if is_as_wanted(context, config, schedule).await? {
            continue;
        }
        as_wanted!(scheduler.update_schedule(), config, schedule)
            .send()
            .await
            .map_err(|e| scheduler_failed("updating a schedule", e))?;
        synced.updated += 1;
    }
    for name in existing.iter().filter(|name| !wanted.iter().any(|w| &w.name == *name)) {
        match scheduler.delete_schedule().group_name(&config.group).name(name).send().await {
            Ok(_) => synced.deleted += 1,
            // Deleted by a pass racing this one.
            Err(err) if err.as_service_error().is_some_and(|e| e.is_resource_not_found_exception()) => {}
            Err(err) => return Err(scheduler_failed("deleting a schedule", err)),
        }
    }
    Ok(())
}

/// Whether schedule `wanted.name` is there with `wanted`'s expression and
/// input.
async fn is_as_wanted(context: &Context, config: &SchedulerConfig, wanted: &Schedule) -> Result<bool, SyncError> {
    let found = context.clients.scheduler().get_schedule().group_name(&config.group).name(&wanted.name).send().await;
    match found {
        Ok(found) => Ok(found.schedule_expression.as_deref() == Some(wanted.expression.as_str())
            && found.target.as_ref().and_then(|t| t.input.as_deref()) == Some(wanted.input.as_str())),
        Err(err) if err.as_service_error().is_some_and(|e| e.is_resource_not_found_exception()) => Ok(false),
        Err(err) => Err(scheduler_failed("reading a schedule", err)),
    }
}

/// At its minute, not in a window after it.
fn off() -> Result<FlexibleTimeWindow, SyncError> {
    FlexibleTimeWindow::builder()
        .mode(FlexibleTimeWindowMode::Off)
        .build()
        .map_err(|e| SyncError::Scheduler(format!("a flexible time window: {e}")))
}

/// The `schedules` function, with the tick's input; the scheduler retries
/// a failed invocation only as long as the tick would still fire.
fn target(config: &SchedulerConfig, schedule: &Schedule) -> Result<Target, SyncError> {
    let retry = RetryPolicy::builder()
        .maximum_event_age_in_seconds(MISSED_AFTER.num_seconds() as i32)
        .maximum_retry_attempts(10)
        .build();
    Target::builder()
        .arn(&config.target_arn)
        .role_arn(&config.role_arn)
        .input(&schedule.input)
        .retry_policy(retry)
        .build()
        .map_err(|e| SyncError::Scheduler(format!("a schedule's target: {e}")))
}
