//! The lease reaper (scheduled): expires leases whose `expires_at` passed,
//! found through the sparse `leases-by-expiry` index (one query per shard,
//! never a Scan). Each expiry re-checks the expiry in its condition, so a
//! heartbeat between the read and the write saves the lease, and two reapers
//! at once produce one `lease_expired` fact per lease.
//!
//! Bounded work with continuation: an invocation takes pages of at most
//! [`REAPER_PAGE`] leases per shard and stops [`DEADLINE_MARGIN`] before the
//! invocation's deadline (Lambda's, whatever the function timeout is set
//! to), so on a backlog it ends by itself instead of being killed mid-write.
//! It visits the shards in turn from a starting shard that rotates: the next
//! invocation starts at the shard after the one this one stopped in (or
//! after the one it started at), so one busy shard cannot starve the others.
//!
//! Each tick is also the orchestrations' watchdog: an attempt whose
//! `run-attempt` execution died (its `Step`'s own service call failed past
//! its retries) gets the next generation of its execution
//! (`orchestration::revive_dead_executions`, which reads Step Functions'
//! lists of dead executions, and the table only for those).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime};

use baton_api::facts::{Fact, JobLeaseExpired};
use baton_domain::runners::lease::read_page_again;
use baton_service::context::{Context, Scheduled};
use baton_service::usecases::orchestration::revive_dead_executions;
use baton_store::keys::{lease_shard_key, LEASE_SHARDS};
use baton_store::StoreError;
use baton_telemetry::metrics::{emit, Unit};
use chrono::{DateTime, Utc};

/// Leases read per query.
pub const REAPER_PAGE: i32 = 100;
/// How long before the invocation's deadline the reaper stops starting new
/// pages: a page of expiries (one transaction each) must fit in it.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(5);

/// The shard the next invocation of this instance starts at.
static NEXT_SHARD: AtomicU32 = AtomicU32::new(0);

/// How one pass of the reaper is bounded.
#[derive(Debug, Clone, Copy)]
pub struct ReapLimits {
    /// Leases read per query.
    pub page: i32,
    /// No page is started after this instant (one page always is, so every
    /// invocation makes progress).
    pub stop_at: Instant,
}

/// What one pass did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reaped {
    /// Leases expired, by shard, in the order the shards were visited.
    pub expired_by_shard: Vec<(u32, usize)>,
    /// Whether the pass stopped at its time limit with shards left to visit
    /// or a shard's backlog left to drain.
    pub stopped_early: bool,
    /// Where the next pass starts.
    pub next_shard: u32,
}

impl Reaped {
    pub fn expired(&self) -> usize {
        self.expired_by_shard.iter().map(|(_, n)| n).sum()
    }
}

/// The instant to stop starting pages, for an invocation ending at `deadline`.
pub fn stop_at(deadline: SystemTime, now: SystemTime, now_instant: Instant) -> Instant {
    let left = deadline.duration_since(now).unwrap_or_default();
    now_instant + left.saturating_sub(DEADLINE_MARGIN)
}

/// The scheduled invocation: one pass, bounded by the invocation's deadline,
/// from the shard where the previous pass of this instance left off.
pub async fn handle(context: &Context, invocation: Scheduled) -> Result<usize, StoreError> {
    let limits =
        ReapLimits { page: REAPER_PAGE, stop_at: stop_at(invocation.deadline, SystemTime::now(), Instant::now()) };
    let start = NEXT_SHARD.load(Ordering::Relaxed) % LEASE_SHARDS;
    let reaped = reap(context, Utc::now(), start, limits).await;
    let revived = revive_orchestrations(context).await;
    let reaped = reaped?;
    NEXT_SHARD.store(reaped.next_shard, Ordering::Relaxed);
    if reaped.stopped_early {
        tracing::warn!(
            expired = reaped.expired(),
            next_shard = reaped.next_shard,
            "reaper stopped before its deadline; the rest waits for the next tick"
        );
    }
    emit(
        "lease-reaper",
        &[
            ("leases_expired", reaped.expired() as f64, Unit::Count),
            ("orchestrations_revived", revived as f64, Unit::Count),
        ],
    );
    Ok(reaped.expired())
}

/// The watchdog's pass: how many dead executions it replaced. Its failure
/// is the next tick's to retry; it never fails the reaper.
async fn revive_orchestrations(context: &Context) -> usize {
    let Some(arn) = context.config.run_state_machine_arn.as_deref() else { return 0 };
    let max_wait = context.config.orchestration.max_wait;
    match revive_dead_executions(&context.clients.sfn, &context.store, arn, Utc::now(), max_wait).await {
        Ok(revived) => revived,
        Err(err) => {
            tracing::warn!(error = %err, "orchestration watchdog failed; the next tick looks again");
            0
        }
    }
}

/// Expires the leases that expired before `now`, visiting every shard once
/// from `start`, within `limits`.
pub async fn reap(context: &Context, now: DateTime<Utc>, start: u32, limits: ReapLimits) -> Result<Reaped, StoreError> {
    let mut reaped =
        Reaped { expired_by_shard: Vec::new(), stopped_early: false, next_shard: (start + 1) % LEASE_SHARDS };
    let mut pages = 0;
    for offset in 0..LEASE_SHARDS {
        let shard = (start + offset) % LEASE_SHARDS;
        let mut expired = 0;
        // The leases this pass already handled in this shard: the index is
        // eventually consistent, so a page read again right after a write
        // may still list them.
        let mut handled = std::collections::HashSet::new();
        loop {
            if pages > 0 && Instant::now() >= limits.stop_at {
                reaped.stopped_early = true;
                reaped.next_shard = (shard + 1) % LEASE_SHARDS;
                reaped.expired_by_shard.push((shard, expired));
                return Ok(reaped);
            }
            pages += 1;
            let page = context.store.expired_leases(&lease_shard_key(shard), now, limits.page).await?;
            let mut saved_or_gone = 0;
            let mut seen_before = 0;
            for lease in &page {
                if !handled.insert(lease.execution_id) {
                    seen_before += 1;
                    continue;
                }
                if lease.expires_at > now {
                    // Heartbeated since its index entry was set: move the
                    // entry up; the lease leaves this range of the index.
                    if let Err(err) = context.store.advance_lease_index(lease).await {
                        if !err.is_retriable() {
                            return Err(err);
                        }
                        tracing::warn!(job_execution_id = %lease.execution_id, error = %err, "lease index left for the next pass");
                        saved_or_gone += 1;
                    }
                    continue;
                }
                // The step reports are on the runner record; the expiry
                // writes only if none landed since this read.
                let reported = match context.store.reported_steps(lease).await {
                    Ok(Some(reported)) => reported,
                    Ok(None) => {
                        saved_or_gone += 1;
                        continue;
                    }
                    Err(err) if err.is_retriable() => {
                        tracing::warn!(job_execution_id = %lease.execution_id, error = %err, "lease left for the next pass");
                        saved_or_gone += 1;
                        continue;
                    }
                    Err(err) => return Err(err),
                };
                let fact = Fact::new(
                    lease.workspace_id.clone(),
                    now,
                    JobLeaseExpired {
                        lease: lease.lease_ref(),
                        expired_at: now,
                        steps: reported.steps.values().cloned().collect(),
                        claimed_at: Some(lease.claimed_at),
                    },
                );
                match context.store.expire_lease(lease, &reported, now, &fact, context.config.outbox_ttl_days).await {
                    Ok(true) => {
                        expired += 1;
                        tracing::info!(job_execution_id = %lease.execution_id, run_id = %lease.run_id, session_id = %lease.session_id, epoch = lease.epoch, "lease expired");
                        if let Some(link) = &lease.reservation {
                            if let Err(err) = context.store.converge_reservation(link, now).await {
                                tracing::warn!(job_execution_id = %lease.execution_id, reservation_id = %link.reservation_id, error = %err, "fleet not converged; the next pass will");
                            }
                        }
                    }
                    Ok(false) => saved_or_gone += 1,
                    // A heartbeat or a complete kept holding the lease, or
                    // the table throttled: this lease waits for the next
                    // pass; the other leases and shards go on.
                    Err(err) if err.is_retriable() => {
                        tracing::warn!(job_execution_id = %lease.execution_id, error = %err, "lease left for the next pass");
                        saved_or_gone += 1;
                    }
                    Err(err) => return Err(err),
                }
            }
            if !read_page_again(page.len(), limits.page as usize, saved_or_gone, seen_before) {
                break;
            }
        }
        reaped.expired_by_shard.push((shard, expired));
    }
    Ok(reaped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reaper_stops_its_margin_before_the_deadline_and_at_once_when_it_is_that_close() {
        let (now, instant) = (SystemTime::now(), Instant::now());
        let in_thirty = stop_at(now + Duration::from_secs(30), now, instant);
        assert_eq!(in_thirty - instant, Duration::from_secs(30) - DEADLINE_MARGIN);
        assert_eq!(stop_at(now + Duration::from_secs(2), now, instant), instant);
        assert_eq!(stop_at(now - Duration::from_secs(2), now, instant), instant, "a deadline already passed");
    }
}
