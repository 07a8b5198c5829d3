//! Lease decisions (behaviour.md §5, §6): expiry instants, the shard of the
//! live-lease index, and the lease token that names the lease it fences.

use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

use crate::auth::{new_token, TokenKind};
use crate::config::LeaseConfig;

/// Shards of the live-lease index: expiring leases spread over this many
/// partitions so one partition never takes every heartbeat of a fleet.
pub const LEASE_SHARDS: u32 = 8;

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

/// The index shard of an execution's lease (stable for the execution).
pub fn lease_shard(execution_id: Uuid) -> String {
    let bytes = execution_id.as_bytes();
    // The low bytes of a v7 id are random; the high ones are time.
    format!("L#{}", u32::from(bytes[15]) % LEASE_SHARDS)
}

/// Every shard name, for the reaper.
pub fn all_lease_shards() -> impl Iterator<Item = String> {
    (0..LEASE_SHARDS).map(|n| format!("L#{n}"))
}

/// A lease token names its execution and epoch in the clear (so heartbeat
/// and complete need no lookup) followed by a secret; only its hash is stored.
pub fn new_lease_token(execution_id: Uuid, epoch: u64) -> String {
    let secret = new_token(TokenKind::Lease);
    format!("blt_{}.{epoch}.{}", execution_id.simple(), &secret[4..])
}

/// The execution and epoch a lease token names, if it is well formed.
pub fn parse_lease_token(token: &str) -> Option<(Uuid, u64)> {
    let rest = token.strip_prefix("blt_")?;
    let mut parts = rest.splitn(3, '.');
    let execution = Uuid::parse_str(parts.next()?).ok()?;
    let epoch = parts.next()?.parse().ok()?;
    let secret = parts.next()?;
    (secret.len() >= 32).then_some((execution, epoch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_token_names_its_execution_and_epoch_and_nothing_else_parses() {
        let id = Uuid::now_v7();
        let token = new_lease_token(id, 7);
        assert_eq!(parse_lease_token(&token), Some((id, 7)));
        assert_eq!(parse_lease_token("blt_nope"), None);
        assert_eq!(parse_lease_token(&format!("blt_{}.7.short", id.simple())), None);
        assert_eq!(parse_lease_token(&token.replacen("blt_", "bst_", 1)), None);
    }

    #[test]
    fn a_fresh_lease_lives_only_the_grace_and_a_heartbeat_extends_it_by_the_duration() {
        let now = Utc::now();
        let config = LeaseConfig::default();
        assert_eq!(expiry_after_claim(now, &config) - now, Duration::seconds(60));
        assert_eq!(expiry_after_heartbeat(now, &config) - now, Duration::seconds(180));
    }

    #[test]
    fn shards_are_stable_and_in_range() {
        let id = Uuid::now_v7();
        assert_eq!(lease_shard(id), lease_shard(id));
        assert!(all_lease_shards().any(|s| s == lease_shard(id)));
    }
}
