//! Identifiers. Every id is a UUID v7 (time-ordered), so ids sort by creation
//! and make good sort keys.

use uuid::Uuid;

/// A new time-ordered id.
pub fn new_id() -> Uuid {
    Uuid::now_v7()
}

/// Parses an id from a path segment or a field; `None` when it is not a UUID.
pub fn parse_id(raw: &str) -> Option<Uuid> {
    Uuid::parse_str(raw).ok()
}
