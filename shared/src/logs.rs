//! The log store: job logs as numbered chunks of JSON lines in the log
//! bucket, one object a chunk, `logs/<workspace>/<run>/<execution>/<seq>.ndjson`.
//! Runners write them with presigned URLs; the API reads them back in
//! order. A chunk is written whole or not at all (an S3 `PUT`), and a
//! retried upload rewrites the same object, so readers see each line once.

use std::fmt;
use std::time::Duration;

use aws_sdk_s3::presigning::PresigningConfig;
use baton_api::logs::{LogLine, LogUpload};
use uuid::Uuid;

/// How long an upload URL stays valid.
pub const UPLOAD_URL_TTL: Duration = Duration::from_secs(15 * 60);
/// The content type of a chunk.
pub const CHUNK_CONTENT_TYPE: &str = "application/x-ndjson";

/// Every chunk of one execution's log lies under this prefix.
pub fn execution_prefix(workspace_id: &str, run_id: Uuid, execution_id: Uuid) -> String {
    format!("logs/{workspace_id}/{run_id}/{execution_id}/")
}

/// Zero-padded so that keys sort as the chunks' numbers do.
pub fn chunk_key(workspace_id: &str, run_id: Uuid, execution_id: Uuid, seq: u64) -> String {
    format!("{}{seq:010}.ndjson", execution_prefix(workspace_id, run_id, execution_id))
}

fn seq_of(key: &str) -> Option<u64> {
    key.rsplit('/').next()?.strip_suffix(".ndjson")?.parse().ok()
}

/// Where a read starts: the chunk and the line in it. Shown to clients as
/// `<seq>.<line>`, an opaque token they send back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogCursor {
    pub seq: u64,
    pub line: usize,
}

impl LogCursor {
    pub fn parse(raw: &str) -> Option<Self> {
        let (seq, line) = raw.split_once('.')?;
        Some(Self { seq: seq.parse().ok()?, line: line.parse().ok()? })
    }
}

impl fmt::Display for LogCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.seq, self.line)
    }
}

/// A presigned `PUT` of chunk `seq`, bound to exactly `bytes` bytes.
pub async fn presign_put(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    seq: u64,
    bytes: u64,
) -> Result<LogUpload, String> {
    let config = PresigningConfig::expires_in(UPLOAD_URL_TTL).map_err(|e| e.to_string())?;
    let length = i64::try_from(bytes).map_err(|e| e.to_string())?;
    let presigned = s3
        .put_object()
        .bucket(bucket)
        .key(key)
        .content_length(length)
        .content_type(CHUNK_CONTENT_TYPE)
        .presigned(config)
        .await
        .map_err(|e| crate::store::display_sdk_error(&e))?;
    let headers = presigned.headers().map(|(name, value)| (name.to_string(), value.to_string())).collect();
    let expires_at = chrono::Utc::now() + chrono::Duration::from_std(UPLOAD_URL_TTL).unwrap_or_default();
    Ok(LogUpload { seq, url: presigned.uri().to_string(), headers, expires_at })
}

/// What a read found.
#[derive(Debug, Clone, PartialEq)]
pub struct LinesRead {
    pub lines: Vec<LogLine>,
    /// Where the next read starts.
    pub next: LogCursor,
    /// Every stored chunk has been read.
    pub at_end: bool,
}

/// Chunks listed a page.
const LIST_PAGE: i32 = 100;

/// Up to `max` lines from `cursor` on. Chunks are read in order and only up
/// to the first missing number (its upload may be in flight), unless
/// `skip_gaps` (the execution ended: a missing chunk is one whose upload
/// was given up, and what follows it is readable).
pub async fn read_lines(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    prefix: &str,
    cursor: LogCursor,
    max: usize,
    skip_gaps: bool,
) -> Result<LinesRead, String> {
    let mut next = cursor;
    let mut lines = Vec::new();
    let mut start_after = next.seq.checked_sub(1).map(|before| format!("{prefix}{before:010}.ndjson"));
    loop {
        let page = s3
            .list_objects_v2()
            .bucket(bucket)
            .prefix(prefix)
            .set_start_after(start_after.clone())
            .max_keys(LIST_PAGE)
            .send()
            .await
            .map_err(|e| crate::store::display_sdk_error(&e))?;
        let keys: Vec<String> = page.contents().iter().filter_map(|o| o.key().map(str::to_string)).collect();
        for key in &keys {
            let Some(seq) = seq_of(key) else { continue };
            if seq < next.seq {
                continue;
            }
            if seq > next.seq {
                if !skip_gaps {
                    return Ok(LinesRead { lines, next, at_end: false });
                }
                next = LogCursor { seq, line: 0 };
            }
            let object = s3
                .get_object()
                .bucket(bucket)
                .key(key)
                .send()
                .await
                .map_err(|e| crate::store::display_sdk_error(&e))?;
            let bytes = object.body.collect().await.map_err(|e| e.to_string())?.into_bytes();
            let text = String::from_utf8_lossy(&bytes);
            for (index, raw) in text.lines().enumerate().skip(next.line) {
                if lines.len() >= max {
                    next.line = index;
                    return Ok(LinesRead { lines, next, at_end: false });
                }
                if let Ok(line) = serde_json::from_str::<LogLine>(raw) {
                    lines.push(line);
                }
            }
            next = LogCursor { seq: seq + 1, line: 0 };
        }
        if page.is_truncated() != Some(true) || keys.is_empty() {
            return Ok(LinesRead { lines, next, at_end: true });
        }
        start_after = keys.last().cloned();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_as_chunk_numbers_and_cursors_round_trip() {
        let (run, execution) = (Uuid::now_v7(), Uuid::now_v7());
        let keys: Vec<String> = [2, 10, 1].iter().map(|seq| chunk_key("ws1", run, execution, *seq)).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(sorted.iter().map(|k| seq_of(k).unwrap()).collect::<Vec<_>>(), vec![1, 2, 10]);
        assert!(keys[0].starts_with(&execution_prefix("ws1", run, execution)));
        let cursor = LogCursor { seq: 12, line: 7 };
        assert_eq!(LogCursor::parse(&cursor.to_string()), Some(cursor));
        assert_eq!(LogCursor::parse("x.1"), None);
        assert_eq!(LogCursor::parse("3"), None);
    }
}
