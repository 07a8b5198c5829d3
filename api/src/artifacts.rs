//! Artifacts (behaviour.md §17): files a job hands to later jobs of its run.
//! A step archives them (`baton-runner artifact upload`, or the `upload:`
//! step), and the runner sends the archive's bytes straight to S3 with
//! presigned multipart-upload URLs the API issues under the job's lease; a
//! later job (`download:`) or an operator (`baton artifact download`) gets a
//! presigned `GET`. No byte passes through Lambda.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// An artifact's name: 1 to this many of `A-Z a-z 0-9 . _ -`, not starting
/// with `.`; unique in a run.
pub const MAX_ARTIFACT_NAME_LEN: usize = 100;
/// The size of every part of an upload but the last (S3's minimum is 5 MiB):
/// a 100 MB archive is 6 `PUT`s, each retried alone.
pub const ARTIFACT_PART_BYTES: u64 = 16 * 1024 * 1024;
/// The most artifacts one job may store.
pub const MAX_ARTIFACTS_PER_JOB: u32 = 20;

/// Whether `name` is a valid artifact name.
pub fn valid_artifact_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_ARTIFACT_NAME_LEN
        && !name.starts_with('.')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// How many parts an archive of `bytes` is uploaded in.
pub fn artifact_parts(bytes: u64) -> u64 {
    bytes.div_ceil(ARTIFACT_PART_BYTES).max(1)
}

/// `POST /v1/runners/leases/{execution_id}/artifacts`: start (or resume)
/// the upload of one artifact.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ArtifactUploadRequest {
    pub name: String,
    /// The archive's size in bytes (1 or more): charged to the job's and the
    /// run's caps now, and every part URL is bound to its exact share.
    pub bytes: u64,
    /// The archive's SHA-256, lowercase hex: a downloader checks it.
    pub sha256: String,
    /// The first part whose URL is wanted (default 1): an answer holds the
    /// URLs of a window of parts, and a big archive's later parts are asked
    /// for by the same request from the part after the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_part: Option<u32>,
}

/// The upload's answer: one presigned `PUT` a part of a window of the
/// archive's parts (`first_part` on, at most the deployment's
/// `BATON_UPLOAD_URLS_PER_ANSWER`), valid no longer than the lease. Asking
/// again (same name, size and digest) gives fresh URLs for the same upload
/// and charges nothing twice.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ArtifactUploadResponse {
    /// The artifact is stored already (a repeat after a lost answer to its
    /// complete): nothing is left to send.
    pub stored: bool,
    #[serde(default)]
    pub parts: Vec<ArtifactPartUpload>,
    /// How many parts the archive has in all (`parts` may hold fewer).
    #[serde(default)]
    pub part_count: u32,
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ArtifactPartUpload {
    /// 1, 2, …: bytes `(n-1)·ARTIFACT_PART_BYTES` on of the archive.
    pub part_number: u32,
    /// Exactly this many bytes go in the part.
    pub bytes: u64,
    pub url: String,
}

/// `POST /v1/runners/leases/{execution_id}/artifacts/{name}/complete`: every
/// part was sent; S3's `ETag` of each, in part order.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ArtifactCompleteRequest {
    pub parts: Vec<ArtifactPartDone>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ArtifactPartDone {
    pub part_number: u32,
    pub etag: String,
}

/// One artifact of a run, as the run view and the artifact routes show it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Artifact {
    pub name: String,
    pub bytes: u64,
    pub sha256: String,
    /// The job that made it (its key, id, and the execution and attempt
    /// that uploaded it).
    pub job_key: String,
    pub job_id: Uuid,
    pub job_execution_id: Uuid,
    pub attempt: u32,
    pub status: ArtifactStatus,
    pub created_at: DateTime<Utc>,
    #[serde(default)]
    pub stored_at: Option<DateTime<Utc>>,
    /// When the bucket's lifecycle rule deletes it.
    pub expires_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ArtifactStatus {
    /// Its parts are being sent; not downloadable yet (and never, if its
    /// job's lease ends first).
    Uploading,
    Stored,
}

/// `GET …/runs/{run_id}/artifacts`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ArtifactList {
    pub artifacts: Vec<Artifact>,
}

/// A stored artifact and a presigned `GET` of its archive (a gzipped tar).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ArtifactDownload {
    pub artifact: Artifact,
    pub url: String,
    pub expires_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_and_bounded() {
        for good in ["dist", "build-output_1.2", "A"] {
            assert!(valid_artifact_name(good), "{good}");
        }
        for bad in ["", ".hidden", "a/b", "a b", "ü", &"x".repeat(MAX_ARTIFACT_NAME_LEN + 1)] {
            assert!(!valid_artifact_name(bad), "{bad}");
        }
    }

    #[test]
    fn an_archive_is_cut_in_parts_of_the_part_size() {
        assert_eq!(artifact_parts(1), 1);
        assert_eq!(artifact_parts(ARTIFACT_PART_BYTES), 1);
        assert_eq!(artifact_parts(ARTIFACT_PART_BYTES + 1), 2);
        assert_eq!(artifact_parts(100_000_000), 6);
    }
}
