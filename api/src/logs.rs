//! Job logs (api.md "Routes being added"): the runner ships each step's
//! output in numbered chunks straight to the log bucket, with upload URLs
//! the API issues under the lease; operators read the lines back, in order,
//! and may follow a running job.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The most chunks one upload request may ask URLs for.
pub const MAX_CHUNKS_PER_REQUEST: usize = 10;
/// The largest chunk accepted, in bytes.
pub const MAX_CHUNK_BYTES: u64 = 1024 * 1024;
/// The highest chunk number accepted: a million chunks, far more than a
/// log's cap holds, and within the ten digits chunk keys sort by.
pub const MAX_CHUNK_SEQ: u64 = 999_999;
/// The most lines one read answers. Short lines are the rule (a build's
/// output), and a reader going through a 100,000-line log pays a request
/// (and a read of the run) a page: 5,000 keeps that to 20, while the byte
/// budget below still bounds the answer.
pub const MAX_LINES_PER_READ: usize = 5000;
/// The most bytes of lines (as JSON) one read answers, well inside what a
/// response may carry; a single line larger than that comes alone, cut to
/// fit, with a note at its end.
pub const MAX_READ_BYTES: usize = 1024 * 1024;
/// The longest a read may wait for new lines (`wait_s`).
pub const MAX_LOG_WAIT_S: u64 = 20;

/// One line of a step's output, as stored (one JSON object a line in a
/// chunk) and as read.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LogLine {
    pub at: DateTime<Utc>,
    pub step_id: Uuid,
    pub stream: LogStream,
    pub text: String,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum LogStream {
    Stdout,
    Stderr,
    /// A line of the runner's own (a truncation note, dropped lines).
    System,
}

/// `POST /v1/runners/leases/{execution_id}/logs`: upload URLs for chunks.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LogUploadRequest {
    pub chunks: Vec<LogChunkRequest>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LogChunkRequest {
    /// The chunk's number: 0, 1, 2 … in the order of its lines, at most
    /// `MAX_CHUNK_SEQ`. Asking again for a number gives a URL for the same
    /// object, which stores it only if it is not stored yet (the `PUT`
    /// carries `If-None-Match: *`; S3 answers 412 when it is): a chunk is
    /// written once and never replaced, so a retried upload never
    /// duplicates or changes lines.
    pub seq: u64,
    /// The chunk's exact size: the URL accepts only that many bytes.
    pub bytes: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LogUploadResponse {
    pub uploads: Vec<LogUpload>,
}

/// A presigned `PUT` of one chunk.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LogUpload {
    pub seq: u64,
    pub url: String,
    /// Headers the `PUT` must carry as they are (they are signed).
    pub headers: std::collections::BTreeMap<String, String>,
    /// When the URL stops working: never after the lease's expiry.
    pub expires_at: DateTime<Utc>,
}

/// `GET …/jobs/{job_id}/logs`: lines from `cursor` on, at most
/// `MAX_LINES_PER_READ` of them and `MAX_READ_BYTES` of JSON. A read may
/// answer fewer (even none) while lines remain: `complete` says when the
/// log is done, never an empty page.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LogPage {
    pub lines: Vec<LogLine>,
    /// Where the next read starts (send it back as `cursor`).
    pub next_cursor: String,
    /// The execution has ended and every line it shipped has been read.
    pub complete: bool,
}
