//! Delivering an event to a listening job (behaviour.md §16), the one path
//! both ways in take: the events route (`POST …/jobs/{job_id}/events`) and
//! the bus (`baton.external.job_event`, the `job-events` subscriber).
//!
//! A delivery is one compare-and-set on the attempt: the event waits on the
//! job, its `ref` remembered, and the attempt advances in the same write
//! (`outcomes::advance_in_write`, as an outcome's adoption does): an idle
//! job starts the event's execution (a fire) or ends (a resolve), and what
//! that made ready is queued and its runners nudged. The parked
//! orchestration is woken only for what is left. A repeated `ref`, a job
//! that ended, or a run of another workspace change nothing.

use chrono::Utc;

use crate::context::Context;
use crate::usecases::orchestration::JOBS_PER_TRANSACTION;
use crate::usecases::outcomes::{advance_in_write, after_progress};
use baton_api::runs::EventDelivery;
use baton_domain::error::{ApiError, ErrorCode};
use baton_domain::workflows::attempt::EventError;
use baton_domain::workflows::listening::{DeliveryError, JobEvent};
use baton_store::attempts::{AttemptStep, AttemptWrite};

/// Delivers `delivery` to job `job_id` of run `run_id` in `workspace_id`:
/// whether it changed the job (`false`: a repeated ref, or the job ended).
/// A run that is not the workspace's is 404, as a run that does not exist.
pub async fn deliver(
    context: &Context,
    workspace_id: &str,
    run_id: uuid::Uuid,
    job: &JobRef,
    delivery: EventDelivery,
) -> Result<bool, ApiError> {
    let store = &context.store;
    let run = store.get_run(workspace_id, run_id).await?.ok_or_else(|| ApiError::not_found("run"))?;
    let event = JobEvent {
        name: delivery.name,
        reference: delivery.reference,
        disposition: delivery.disposition,
        payload: delivery.payload,
        delivered_at: Utc::now(),
    };
    let mut delivered = false;
    let minute = context.config.orchestration.timeout_minute;
    let updated = store
        .update_attempt(run_id, run.current_attempt, context.config.outbox_ttl_days, |next, definition| {
            let job_id = match job {
                JobRef::Id(id) => *id,
                JobRef::Key(key) => next
                    .state
                    .jobs
                    .iter()
                    .find(|j| &j.key == key)
                    .map(|j| j.id)
                    .ok_or(EventError::NoSuchJob)
                    .map_err(refusal)?,
            };
            delivered = next.state.deliver_event(definition, job_id, event.clone()).map_err(refusal)?;
            if !delivered {
                return Ok(AttemptStep::Done);
            }
            let (emitted, wake) = advance_in_write(next, definition, minute, JOBS_PER_TRANSACTION);
            Ok::<_, ApiError>(AttemptStep::Write(AttemptWrite { emitted, progressed: wake, ..AttemptWrite::default() }))
        })
        .await?
        .ok_or_else(|| ApiError::not_found("run"))?;
    tracing::info!(workspace_id, %run_id, job = %job, event = %event.name, event_ref = %event.reference, disposition = ?event.disposition, delivered, "event delivered");
    // Also when this try changed nothing: an earlier try of the same
    // delivery (same ref) may have written its progress and lost its answer
    // before its wake; this one owes that wake. `after_progress` wakes only
    // a step parked for progress that happened, so this costs nothing else.
    if let Err(err) = after_progress(context, &updated).await {
        tracing::warn!(%run_id, error = %err, "could not wake the orchestration; its parked step looks again");
    }
    Ok(delivered)
}

/// Which job an event is for: its id (the route's path), or its key or id
/// (a bus event's `job`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobRef {
    Id(uuid::Uuid),
    Key(String),
}

impl JobRef {
    /// A bus event's `job`: an id if it reads as one, else a key.
    pub fn parse(raw: &str) -> Self {
        baton_domain::ids::parse_id(raw).map_or_else(|| JobRef::Key(raw.to_string()), JobRef::Id)
    }
}

impl std::fmt::Display for JobRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JobRef::Id(id) => write!(f, "{id}"),
            JobRef::Key(key) => f.write_str(key),
        }
    }
}

fn refusal(err: EventError) -> ApiError {
    match err {
        EventError::NoSuchJob => ApiError::not_found("job"),
        EventError::NotListening => {
            ApiError::new(ErrorCode::NotListening, "the job is not a listening job, or does not listen yet")
        }
        EventError::Refused(DeliveryError::Invalid(message)) => ApiError::invalid_request(message),
        EventError::Refused(DeliveryError::TooMany(message)) => ApiError::new(ErrorCode::TooManyEvents, message),
    }
}
