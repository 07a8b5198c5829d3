//! Lease decisions (behaviour.md §5, §6): expiry instants. The lease token
//! is minted in `tokens`, the live-lease index's shards are keys
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_lease_lives_only_the_grace_and_a_heartbeat_extends_it_by_the_duration() {
        let now = Utc::now();
        let config = LeaseConfig::default();
        assert_eq!(expiry_after_claim(now, &config) - now, Duration::seconds(60));
        assert_eq!(expiry_after_heartbeat(now, &config) - now, Duration::seconds(180));
    }
}
