//! Caches (behaviour.md §17): files a job restores by key before its work
//! and saves after it succeeded, shared by the runs of a workspace. The
//! `cache:` step restores the exact key or the newest entry under a
//! prefix (`restore-keys`), in the step's scope then the workspace-wide
//! one; the runner saves the paths when the job succeeded and the key was a
//! miss. The bytes move as artifacts' do: presigned URLs under the lease.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A cache key or restore prefix: 1 to this many printable ASCII
/// characters, no spaces or commas.
pub const MAX_CACHE_KEY_LEN: usize = 256;
/// A scope: 0 (the workspace-wide scope) to this many characters, as a key.
pub const MAX_CACHE_SCOPE_LEN: usize = 128;
/// The most restore prefixes a restore may try.
pub const MAX_RESTORE_KEYS: usize = 10;

/// Whether `text` may be a cache key, restore prefix or (non-empty) scope.
pub fn valid_cache_key(text: &str, max: usize) -> bool {
    !text.is_empty() && text.len() <= max && text.chars().all(|c| c.is_ascii_graphic() && c != ',')
}

/// `POST /v1/runners/leases/{execution_id}/caches/restore`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CacheRestoreRequest {
    pub key: String,
    /// Prefixes tried in order when `key` itself is not stored; each gives
    /// the newest entry whose key starts with it.
    #[serde(default)]
    pub restore_keys: Vec<String>,
    /// Where to look first (a branch, say); the workspace-wide scope (`""`)
    /// is tried after it. Default: the workspace-wide scope only.
    #[serde(default)]
    pub scope: String,
}

/// How a restore went.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum CacheHit {
    /// The key itself: nothing to save after the job.
    Exact,
    /// The newest entry under one of the prefixes: the job saves its key.
    Prefix,
    Miss,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CacheRestoreResponse {
    pub hit: CacheHit,
    /// The entry restored, with a presigned `GET` of its archive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<CacheEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// One stored cache entry.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CacheEntry {
    pub key: String,
    pub scope: String,
    pub bytes: u64,
    pub sha256: String,
    pub stored_at: DateTime<Utc>,
    /// When it is evicted (its age, not its use).
    pub expires_at: DateTime<Utc>,
}

/// `POST /v1/runners/leases/{execution_id}/caches`: save an entry (the
/// answer is an artifact upload's: parts' URLs, or `stored: true` when the
/// key is saved already and nothing is sent).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CacheSaveRequest {
    pub key: String,
    #[serde(default)]
    pub scope: String,
    pub bytes: u64,
    pub sha256: String,
    /// The first part whose URL is wanted (default 1), as an artifact's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_part: Option<u32>,
}

/// `POST /v1/runners/leases/{execution_id}/caches/complete`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CacheCompleteRequest {
    pub key: String,
    #[serde(default)]
    pub scope: String,
    pub parts: Vec<crate::artifacts::ArtifactPartDone>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_printable_without_spaces_or_commas() {
        assert!(valid_cache_key("cargo-linux-3f2a/v1:x", MAX_CACHE_KEY_LEN));
        for bad in ["", "a b", "a,b", "tab\t", "é"] {
            assert!(!valid_cache_key(bad, MAX_CACHE_KEY_LEN), "{bad:?}");
        }
        assert!(!valid_cache_key(&"k".repeat(MAX_CACHE_KEY_LEN + 1), MAX_CACHE_KEY_LEN));
    }
}
