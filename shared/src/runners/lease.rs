//! Lease decisions (behaviour.md §5, §6): expiry instants. The lease token
//! is minted in `tokens`, the live-lease index's shards are keys
//! (`store::keys`).

use chrono::{DateTime, Duration, Utc};

use crate::config::LeaseConfig;

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
