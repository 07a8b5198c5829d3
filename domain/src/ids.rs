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

/// The index of the step `id` names among an execution's, if it is one of
/// the ids [`step_id`] derives for it (no job has more than
/// `MAX_STEPS_PER_JOB` steps). Pure, so the step route can refuse an id of
/// no step without reading the job (100 hashes at most, microseconds).
pub fn step_index(execution_id: Uuid, id: Uuid) -> Option<usize> {
    (0..crate::workflows::definition::MAX_STEPS_PER_JOB).find(|&index| step_id(execution_id, index) == id)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_id_is_known_for_its_execution_only() {
        let (execution, other) = (Uuid::now_v7(), Uuid::now_v7());
        assert_eq!(step_index(execution, step_id(execution, 0)), Some(0));
        assert_eq!(step_index(execution, step_id(execution, 99)), Some(99));
        assert_eq!(step_index(execution, step_id(execution, 100)), None, "past the most steps a job has");
        assert_eq!(step_index(execution, step_id(other, 3)), None, "another execution's step");
        assert_eq!(step_index(execution, Uuid::now_v7()), None);
    }
}
