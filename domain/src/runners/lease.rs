//! Lease decisions (behaviour.md §5, §6): expiry instants, and when the
//! reaper reads a shard of the expiry index again. The lease token is
//! minted in `tokens`, the live-lease index's shards are keys
//! (`store::keys`).

use chrono::{DateTime, Duration, Utc};

/// When a lease that was just claimed expires: after the first-heartbeat
/// grace, shorter than a full lease, so a runner that died right after the
/// claim gives the job back quickly.
pub fn expiry_after_claim(now: DateTime<Utc>, config: &LeaseConfig) -> DateTime<Utc> {
    now + Duration::from_std(config.first_heartbeat_grace).unwrap_or_else(|_| Duration::seconds(60))
}

/// When a lease expires after a heartbeat at `now`.
pub fn expiry_after_heartbeat(now: DateTime<Utc>, config: &LeaseConfig) -> DateTime<Utc> {
    now + Duration::from_std(config.duration).unwrap_or_else(|_| Duration::seconds(180))
}

/// Lease timings (behaviour.md §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseConfig {
    /// `BATON_LEASE_DURATION_S` (default 180): how far a heartbeat extends a lease.
    pub duration: std::time::Duration,
    /// `BATON_HEARTBEAT_INTERVAL_S` (default 15): the interval runners are told to use.
    pub heartbeat_interval: std::time::Duration,
    /// `BATON_FIRST_HEARTBEAT_GRACE_S` (default 60): life of a lease that never heartbeated.
    pub first_heartbeat_grace: std::time::Duration,
}

impl Default for LeaseConfig {
    fn default() -> Self {
        Self {
            duration: std::time::Duration::from_secs(180),
            heartbeat_interval: std::time::Duration::from_secs(15),
            first_heartbeat_grace: std::time::Duration::from_secs(60),
        }
    }
}

/// Whether the reaper reads a shard's page again after handling one: only
/// a full page that moved something on. A short page is the end of the
/// shard's backlog; a page of only saved leases, or of leases this pass
/// handled already (the index lags behind the writes that moved them out
/// of the range), would come back the same and spin until the deadline.
pub fn read_page_again(read: usize, page: usize, saved_or_gone: usize, seen_before: usize) -> bool {
    read >= page && saved_or_gone + seen_before < read
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_page_is_read_again_only_when_it_moved_something_on() {
        assert!(read_page_again(100, 100, 0, 0), "a full page of work: more may follow");
        assert!(read_page_again(100, 100, 60, 39), "one lease moved on");
        assert!(!read_page_again(99, 100, 0, 0), "a short page ends the backlog");
        assert!(!read_page_again(100, 100, 100, 0), "only saved leases: the same page again");
        assert!(!read_page_again(100, 100, 0, 100), "only leases handled already: the index lags");
        assert!(!read_page_again(100, 100, 40, 60), "nothing new: the index lags");
    }

    #[test]
    fn a_fresh_lease_lives_only_the_grace_and_a_heartbeat_extends_it_by_the_duration() {
        let now = Utc::now();
        let config = LeaseConfig::default();
        assert_eq!(expiry_after_claim(now, &config) - now, Duration::seconds(60));
        assert_eq!(expiry_after_heartbeat(now, &config) - now, Duration::seconds(180));
    }
}
