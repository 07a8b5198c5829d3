//! Keeps one lease alive: a task of its own that heartbeats at the server's
//! interval (the first one at once), with at most one request in flight. It
//! turns the answers into a [`Stop`] for the job: `cancel: true` →
//! [`Stop::Cancel`]; `409 lease-lost` (or a lease token the server no
//! longer knows) → [`Stop::LeaseLost`]; while the job reports its result
//! the complete may have ended the lease, and the complete's answer decides.
//! A cancel nudge on the push socket (`nudged`) brings the next heartbeat
//! forward, so a cancelled job stops at once instead of at its interval.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use baton_client::backoff::Backoff;
use baton_client::Client;
use tokio::sync::watch;
use uuid::Uuid;

use crate::{escalate, Stop};

/// Heartbeats until the job's stop reason makes the lease moot (lease lost,
/// abandoned) or the task is aborted by the job when it ends.
pub async fn keep_alive(
    client: Client,
    lease_token: String,
    execution: Uuid,
    mut interval: Duration,
    stop: Arc<watch::Sender<Stop>>,
    reporting: Arc<AtomicBool>,
    nudged: Arc<tokio::sync::Notify>,
) {
    let mut stop_rx = stop.subscribe();
    let mut errors = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
    loop {
        let delay = match client.heartbeat(&lease_token, execution).await {
            Ok(answer) => {
                errors.reset();
                interval = Duration::from_secs(answer.heartbeat_interval_s.max(1));
                if answer.cancel && *stop_rx.borrow() < Stop::Cancel {
                    tracing::warn!(%execution, "the server cancelled the job: stopping its processes");
                    escalate(&stop, Stop::Cancel);
                }
                tracing::debug!(%execution, expires_at = %answer.expires_at, "heartbeat");
                interval
            }
            Err(err) if err.means_lease_gone() && reporting.load(Ordering::SeqCst) => {
                // The complete may have ended the lease, its answer lost:
                // the complete, told, tries once more and that answer decides.
                tracing::debug!(%execution, "the lease ended while the result was being reported");
                escalate(&stop, Stop::LeaseLost);
                return;
            }
            Err(err) if err.means_lease_gone() => {
                tracing::warn!(%execution, error = %err, "lease lost: stopping the job without a report");
                escalate(&stop, Stop::LeaseLost);
                return;
            }
            Err(err) => {
                // Retry sooner than the interval, so that one lost request
                // does not cost a whole interval of the lease.
                let delay = errors.next_delay().min(interval);
                tracing::warn!(%execution, error = %err, retry_in_ms = delay.as_millis() as u64, "heartbeat failed");
                delay
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = nudged.notified() => tracing::debug!(%execution, "heartbeat brought forward by a cancel nudge"),
            _ = stop_rx.wait_for(|s| *s >= Stop::LeaseLost) => return,
        }
    }
}
