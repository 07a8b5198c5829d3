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
//! The shards are read side by side, each from its first page: a shard with
//! a backlog, or one whose reads are throttled and retried with the SDK's
//! backoff, never delays the leases of another. (Read one after the other,
//! a pass on a busy table took seconds per shard, and a dead runner's lease
//! in the last shard waited minutes past its expiry.)
//!
//! Each tick is also the orchestrations' watchdog: an attempt whose
//! `run-attempt` execution died (its `Step`'s own service call failed past
//! its retries) gets the next generation of its execution
//! (`orchestration::revive_dead_executions`, which reads Step Functions'
//! lists of dead executions, and the table only for those).

use std::time::{Duration, Instant, SystemTime};

use baton_api::facts::{Fact, JobLeaseExpired};
use baton_domain::runners::lease::read_page_again;
use baton_service::context::{Context, Scheduled};
use baton_service::usecases::orchestration::revive_dead_executions;
use baton_store::keys::{lease_shard_key, LEASE_SHARDS};
use baton_store::runner_items::LeaseItem;
use baton_store::StoreError;
use baton_telemetry::metrics::{emit, Unit};
use chrono::{DateTime, Utc};

/// Leases read per query.
pub const REAPER_PAGE: i32 = 100;
/// How long before the invocation's deadline the reaper stops starting new
/// pages: a page of expiries (one transaction each) must fit in it.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(5);

/// How one pass of the reaper is bounded.
#[derive(Debug, Clone, Copy)]
pub struct ReapLimits {
    /// Leases read per query.
    pub page: i32,
    /// No page is started after this instant (each shard's first page
    /// always is, so every invocation makes progress everywhere).
    pub stop_at: Instant,
}

/// What one pass did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reaped {
    /// Leases expired, by shard, in shard order.
    pub expired_by_shard: Vec<(u32, usize)>,
    /// Whether the pass stopped at its time limit with a shard's backlog
    /// left to drain.
    pub stopped_early: bool,
    /// Shards whose expiry index could not be read this pass.
    pub shards_skipped: u32,
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

/// The scheduled invocation: one pass, bounded by the invocation's
/// deadline, and the orchestrations' watchdog beside it (neither waits for
/// the other: the next tick comes no later for the watchdog's reads).
pub async fn handle(context: &Context, invocation: Scheduled) -> Result<usize, StoreError> {
    let limits =
        ReapLimits { page: REAPER_PAGE, stop_at: stop_at(invocation.deadline, SystemTime::now(), Instant::now()) };
    let began = Instant::now();
    let timed = |future| async move {
        let out = future.await;
        (out, began.elapsed())
    };
    let ((reaped, reaping), (revived, reviving)) = tokio::join!(timed(reap(context, Utc::now(), limits)), async {
        let revived = revive_orchestrations(context).await;
        (revived, began.elapsed())
    });
    // How long a lease that expired waits past its expiry is this pass's
    // time plus the schedule's period: the figure to watch on a busy table.
    tracing::info!(
        reap_ms = reaping.as_millis() as u64,
        revive_ms = reviving.as_millis() as u64,
        expired = reaped.as_ref().map_or(0, Reaped::expired),
        revived,
        "reaper pass"
    );
    let reaped = reaped?;
    if reaped.stopped_early {
        tracing::warn!(
            expired = reaped.expired(),
            "reaper stopped before its deadline; the rest waits for the next tick"
        );
    }
    emit(
        "lease-reaper",
        &[
            ("leases_expired", reaped.expired() as f64, Unit::Count),
            // Watched by the `reaper-shards-skipped` alarm: a shard skipped
            // tick after tick holds its dead runners' jobs.
            ("expiry_shards_skipped", f64::from(reaped.shards_skipped), Unit::Count),
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
    match revive_dead_executions(context.clients.sfn(), &context.store, arn, Utc::now(), max_wait).await {
        Ok(revived) => revived,
        Err(err) => {
            tracing::warn!(error = %err, "orchestration watchdog failed; the next tick looks again");
            0
        }
    }
}

/// Expires the leases that expired before `now`, reading every shard side
/// by side, within `limits`.
pub async fn reap(context: &Context, now: DateTime<Utc>, limits: ReapLimits) -> Result<Reaped, StoreError> {
    let shards =
        futures::future::join_all((0..LEASE_SHARDS).map(|shard| reap_shard(context, now, shard, limits))).await;
    let mut reaped = Reaped { expired_by_shard: Vec::new(), stopped_early: false, shards_skipped: 0 };
    for (shard, outcome) in (0..LEASE_SHARDS).zip(shards) {
        match outcome? {
            ShardPass::Read { expired, stopped_early } => {
                reaped.expired_by_shard.push((shard, expired));
                reaped.stopped_early |= stopped_early;
            }
            ShardPass::Skipped => reaped.shards_skipped += 1,
        }
    }
    Ok(reaped)
}

/// What a pass did in one shard.
enum ShardPass {
    /// Its expiry index was read: the leases expired, and whether its
    /// backlog was left for the next pass at the time limit.
    Read { expired: usize, stopped_early: bool },
    /// Its first read failed past the SDK's retries (throttled): the shard
    /// waits for the next tick.
    Skipped,
}

/// One shard's part of a pass: pages of its expiry index until its backlog
/// is drained or the time is up (its first page is always read).
async fn reap_shard(
    context: &Context,
    now: DateTime<Utc>,
    shard: u32,
    limits: ReapLimits,
) -> Result<ShardPass, StoreError> {
    let mut expired = 0;
    // The leases this pass already handled in this shard: the index is
    // eventually consistent, so a page read again right after a write may
    // still list them.
    let mut handled = std::collections::HashSet::new();
    let mut first = true;
    loop {
        if !first && Instant::now() >= limits.stop_at {
            return Ok(ShardPass::Read { expired, stopped_early: true });
        }
        let page = match context.store.expired_leases(&lease_shard_key(shard), now, limits.page).await {
            Ok(page) => page,
            // A throttled shard waits for the next tick; the others are read
            // beside it all the same.
            Err(err) if err.is_retriable() => {
                tracing::warn!(shard, error = %err, "expiry index read failed; the shard waits for the next tick");
                return Ok(if first { ShardPass::Skipped } else { ShardPass::Read { expired, stopped_early: true } });
            }
            Err(err) => return Err(err),
        };
        first = false;
        let mut saved_or_gone = 0;
        let mut seen_before = 0;
        for lease in &page {
            if !handled.insert(lease.execution.id) {
                seen_before += 1;
                continue;
            }
            match expire(context, now, lease).await? {
                Handled::Expired => expired += 1,
                Handled::MovedOn => {}
                Handled::Stays => saved_or_gone += 1,
            }
        }
        if !read_page_again(page.len(), limits.page as usize, saved_or_gone, seen_before) {
            return Ok(ShardPass::Read { expired, stopped_early: false });
        }
    }
}

/// What became of a lease read from the expiry index.
enum Handled {
    Expired,
    /// Heartbeated since: its index entry moved up, out of the page's range.
    MovedOn,
    /// Saved by a write in between, gone, or left for the next pass: a page
    /// read again would list it again.
    Stays,
}

/// Expires one lease read from the index, unless it was heartbeated since.
async fn expire(context: &Context, now: DateTime<Utc>, lease: &LeaseItem) -> Result<Handled, StoreError> {
    if lease.expires_at > now {
        // Heartbeated since its index entry was set: move the entry up; the
        // lease leaves this range of the index.
        if let Err(err) = context.store.advance_lease_index(lease).await {
            if !err.is_retriable() {
                return Err(err);
            }
            tracing::warn!(job_execution_id = %lease.execution.id, error = %err, "lease index left for the next pass");
            return Ok(Handled::Stays);
        }
        return Ok(Handled::MovedOn);
    }
    // The step reports are on the runner record; the expiry writes only if
    // none landed since this read.
    let reported = match context.store.reported_steps(lease).await {
        Ok(Some(reported)) => reported,
        Ok(None) => return Ok(Handled::Stays),
        Err(err) if err.is_retriable() => {
            tracing::warn!(job_execution_id = %lease.execution.id, error = %err, "lease left for the next pass");
            return Ok(Handled::Stays);
        }
        Err(err) => return Err(err),
    };
    let fact = Fact::new(
        lease.execution.workspace_id.clone(),
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
            tracing::info!(job_execution_id = %lease.execution.id, run_id = %lease.execution.run_id, session_id = %lease.session_id, epoch = lease.epoch, "lease expired");
            if let Some(link) = &lease.reservation {
                if let Err(err) = context.store.converge_reservation(link, now).await {
                    tracing::warn!(job_execution_id = %lease.execution.id, reservation_id = %link.reservation_id, error = %err, "fleet not converged; the next pass will");
                }
            }
            Ok(Handled::Expired)
        }
        Ok(false) => Ok(Handled::Stays),
        // A heartbeat or a complete kept holding the lease, or the table
        // throttled: this lease waits for the next pass; the other leases
        // and shards go on.
        Err(err) if err.is_retriable() => {
            tracing::warn!(job_execution_id = %lease.execution.id, error = %err, "lease left for the next pass");
            Ok(Handled::Stays)
        }
        Err(err) => Err(err),
    }
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
