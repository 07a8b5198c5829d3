//! Identifiers. Every id is a UUID v7 (time-ordered), so ids sort by creation
//! and make good sort keys.

use sha2::{Digest, Sha256};
use uuid::Uuid;

/// A new time-ordered id.
pub fn new_id() -> Uuid {
    Uuid::now_v7()
}

/// Parses an id from a path segment or a field; `None` when it is not a UUID.
pub fn parse_id(raw: &str) -> Option<Uuid> {
    Uuid::parse_str(raw).ok()
}

/// The id of step `index` of an execution. Derived (SHA-256 of the
/// execution id and the index) rather than stored, so the attempt item does
/// not grow with steps; the queued fact hands the ids to the runner, which
/// reports steps by them, and the step route knows a job's last step by it.
pub fn step_id(execution_id: Uuid, index: usize) -> Uuid {
    let mut hasher = Sha256::new();
    hasher.update(execution_id.as_bytes());
    hasher.update((index as u64).to_be_bytes());
    let digest = hasher.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

/// An id derived from `what` and `id` (SHA-256, as [`step_id`]): the same
/// for every try of one decision, so a fact written again by a retried
/// message finds its outbox item already there (one fact, not two).
pub fn derived_id(what: &str, id: Uuid) -> Uuid {
    let mut hasher = Sha256::new();
    hasher.update(what.as_bytes());
    hasher.update(id.as_bytes());
    let digest = hasher.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}
