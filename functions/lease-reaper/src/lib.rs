//! The lease reaper (scheduled): expires leases whose `expires_at` passed,
//! found through the sparse `leases-by-expiry` index (one query per shard,
//! never a Scan). Each expiry re-checks the expiry in its condition, so a
//! heartbeat between the read and the write saves the lease, and two reapers
//! at once produce one `lease_expired` fact per lease.
//!
//! Bounded work with continuation: each invocation takes pages of at most
//! `REAPER_PAGE` leases per shard until a page comes back short or the time
//! budget is spent; what is left waits for the next tick.

use std::time::{Duration, Instant};

use baton_shared::context::Context;
use baton_shared::error::StoreError;
use baton_shared::facts::{Fact, JobLeaseExpired};
use baton_shared::metrics::{emit, Unit};
use baton_shared::runners::lease::all_lease_shards;
use chrono::{DateTime, Utc};

/// Leases read per query.
pub const REAPER_PAGE: i32 = 100;
/// Wall-clock budget of one invocation (well under the function timeout).
pub const REAPER_BUDGET: Duration = Duration::from_secs(45);

/// Expires every lease that expired before `now` (within the budget);
/// returns how many it expired.
pub async fn handle(context: &Context, now: DateTime<Utc>) -> Result<usize, StoreError> {
    let started = Instant::now();
    let mut expired = 0;
    for shard in all_lease_shards() {
        loop {
            let page = context.store.expired_leases(&shard, now, REAPER_PAGE).await?;
            let mut saved_or_gone = 0;
            for lease in &page {
                let fact = Fact::new(
                    lease.workspace_id.clone(),
                    now,
                    JobLeaseExpired {
                        lease: lease.lease_ref(),
                        expired_at: now,
                        steps: lease.steps.values().cloned().collect(),
                    },
                );
                if context.store.expire_lease(lease, now, &fact, context.config.outbox_ttl_days).await? {
                    expired += 1;
                    tracing::info!(job_execution_id = %lease.execution_id, run_id = %lease.run_id, session_id = %lease.session_id, epoch = lease.epoch, "lease expired");
                } else {
                    saved_or_gone += 1;
                }
            }
            // A short page is the end of the shard's backlog; a page of only
            // saved leases would repeat itself, so move on.
            if page.len() < REAPER_PAGE as usize || saved_or_gone == page.len() || started.elapsed() > REAPER_BUDGET {
                break;
            }
        }
        if started.elapsed() > REAPER_BUDGET {
            tracing::warn!(expired, "reaper budget spent; the rest waits for the next tick");
            break;
        }
    }
    emit("lease-reaper", &[("leases_expired", expired as f64, Unit::Count)]);
    Ok(expired)
}
