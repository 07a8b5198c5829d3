//! The log store: job logs as numbered chunks of JSON lines in the log
//! bucket, one object a chunk, `logs/<workspace>/<run>/<execution>/<seq>.ndjson`.
//! Runners write them with presigned URLs; the API reads them back in
//! order. A chunk is written whole or not at all (an S3 `PUT`), and only
//! if its object does not exist yet (`If-None-Match: *`, signed into the
//! URL), so a chunk once stored never changes and readers see each line
//! once, however often its upload is retried.

use std::fmt;
use std::time::Duration;

use aws_sdk_s3::presigning::PresigningConfig;
use baton_api::logs::{LogLine, LogUpload};
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// How long an upload URL stays valid at most (never past its lease).
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

/// How long an upload URL issued at `now` under a lease expiring at
/// `lease_expires_at` may stay valid: `UPLOAD_URL_TTL`, cut to the whole
/// seconds left of the lease (a presigned URL counts its validity in
/// seconds from its signing instant), so it never outlives the lease.
/// `None` when less than a second is left.
pub fn upload_url_ttl(now: DateTime<Utc>, lease_expires_at: DateTime<Utc>) -> Option<Duration> {
    let left = u64::try_from((lease_expires_at - now).num_seconds()).ok().filter(|s| *s >= 1)?;
    Some(Duration::from_secs(left).min(UPLOAD_URL_TTL))
}

/// A presigned `PUT` of chunk `seq`, signed at `now` and valid for
/// `valid_for`, bound to exactly `bytes` bytes and to an object that does
/// not exist yet: S3 refuses (412) a `PUT` over a stored chunk, whoever
/// got the URL and whenever.
pub async fn presign_put(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    chunk: (u64, u64),
    now: DateTime<Utc>,
    valid_for: Duration,
) -> Result<LogUpload, String> {
    let (seq, bytes) = chunk;
    let config =
        PresigningConfig::builder().start_time(now.into()).expires_in(valid_for).build().map_err(|e| e.to_string())?;
    let length = i64::try_from(bytes).map_err(|e| e.to_string())?;
    let presigned = s3
        .put_object()
        .bucket(bucket)
        .key(key)
        .content_length(length)
        .content_type(CHUNK_CONTENT_TYPE)
        .if_none_match("*")
        .presigned(config)
        .await
        .map_err(|e| baton_store::display_sdk_error(&e))?;
    let headers = presigned.headers().map(|(name, value)| (name.to_string(), value.to_string())).collect();
    let expires_at = now + chrono::Duration::from_std(valid_for).map_err(|e| e.to_string())?;
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

/// Chunks listed a page (S3's most).
const LIST_PAGE: i32 = 1000;
/// Chunks fetched at once: a log written a line a chunk (a slow printer)
/// is read in parallel, not one object after another.
pub const FETCH_CONCURRENCY: usize = 16;
/// How long a read goes on fetching chunks before it answers what it has:
/// with a follow's wait (at most 20 s) well inside the HTTP API's 30 s.
pub const READ_TIME_BUDGET: Duration = Duration::from_secs(5);
/// Appended to a line cut to fit a read's byte budget.
pub const TRUNCATION_NOTE: &str = " [line truncated by the log read]";

/// What one read may still answer: lines, and bytes of lines as JSON (what
/// the response carries, escapes included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadBudget {
    pub lines: usize,
    pub bytes: usize,
}

impl ReadBudget {
    fn spent(&self) -> bool {
        self.lines == 0 || self.bytes == 0
    }
}

/// The bytes `line` takes in a response (and the comma before it).
fn json_size(line: &LogLine) -> usize {
    serde_json::to_string(line).map_or(0, |json| json.len()) + 1
}

/// The bytes `c` takes inside a JSON string, as serde_json escapes it.
fn json_char_size(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// `line` cut (at a character) so that it takes at most `bytes` in a
/// response, with a note saying so.
fn truncate_to_fit(mut line: LogLine, bytes: usize) -> LogLine {
    let text = std::mem::take(&mut line.text);
    let note: usize = TRUNCATION_NOTE.chars().map(json_char_size).sum();
    let room = bytes.saturating_sub(json_size(&line) + note);
    let mut used = 0;
    let end = text
        .char_indices()
        .find(|(_, c)| {
            used += json_char_size(*c);
            used > room
        })
        .map_or(text.len(), |(at, _)| at);
    line.text = format!("{}{TRUNCATION_NOTE}", &text[..end]);
    line
}

/// Takes the lines of one chunk from line `from` on into `taken` while
/// `budget` lasts, and says where the chunk stopped: `None` when every line
/// was taken, else the first line left for the next read.
///
/// The cursor always moves: a line larger than the whole budget is taken
/// cut to fit when it would be the read's first, never left where it is.
/// A line that is not a log line (a torn write) is passed over.
pub fn take_lines(text: &str, from: usize, budget: &mut ReadBudget, taken: &mut Vec<LogLine>) -> Option<usize> {
    for (index, raw) in text.lines().enumerate().skip(from) {
        if budget.spent() {
            return Some(index);
        }
        let Ok(line) = serde_json::from_str::<LogLine>(raw) else { continue };
        let size = json_size(&line);
        let line = if size <= budget.bytes {
            line
        } else if taken.is_empty() {
            truncate_to_fit(line, budget.bytes)
        } else {
            return Some(index);
        };
        budget.bytes = budget.bytes.saturating_sub(json_size(&line));
        budget.lines -= 1;
        taken.push(line);
    }
    None
}

/// The chunks of one listed page to read from `next` on, in order, and
/// whether a missing number stopped them (its upload may be in flight).
fn chunks_to_read(keys: &[String], next: LogCursor, skip_gaps: bool) -> (Vec<(u64, String)>, bool) {
    let mut wanted = Vec::new();
    let mut expected = next.seq;
    for key in keys {
        let Some(seq) = seq_of(key) else { continue };
        if seq < expected {
            continue;
        }
        if seq > expected && !skip_gaps {
            return (wanted, true);
        }
        wanted.push((seq, key.clone()));
        expected = seq + 1;
    }
    (wanted, false)
}

async fn fetch_chunk(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<String, String> {
    let object =
        s3.get_object().bucket(bucket).key(key).send().await.map_err(|e| baton_store::display_sdk_error(&e))?;
    let bytes = object.body.collect().await.map_err(|e| e.to_string())?.into_bytes();
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The lines from `cursor` on, within `budget`. Chunks are read in order
/// and only up to the first missing number (its upload may be in flight),
/// unless `skip_gaps` (the execution ended: a missing chunk is one whose
/// upload was given up, and what follows it is readable).
///
/// Bounded in size and time, so a response always fits Lambda's 6 MB and
/// the HTTP API's 30 s: chunks are fetched `FETCH_CONCURRENCY` at a time,
/// and past `deadline` the read answers what it has with a cursor after it.
/// The first chunk is always read, so the cursor moves whenever there is a
/// chunk to read.
pub async fn read_lines(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    prefix: &str,
    cursor: LogCursor,
    mut budget: ReadBudget,
    deadline: tokio::time::Instant,
    skip_gaps: bool,
) -> Result<LinesRead, String> {
    use futures::StreamExt;

    let mut next = cursor;
    let mut lines = Vec::new();
    let mut read_any = false;
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
            .map_err(|e| baton_store::display_sdk_error(&e))?;
        let keys: Vec<String> = page.contents().iter().filter_map(|o| o.key().map(str::to_string)).collect();
        let (wanted, gap) = chunks_to_read(&keys, next, skip_gaps);
        let mut fetched = futures::stream::iter(
            wanted
                .into_iter()
                .map(|(seq, key)| async move { fetch_chunk(s3, bucket, &key).await.map(|text| (seq, text)) }),
        )
        .buffered(FETCH_CONCURRENCY);
        loop {
            if budget.spent() || (read_any && tokio::time::Instant::now() >= deadline) {
                return Ok(LinesRead { lines, next, at_end: false });
            }
            let chunk = if read_any {
                match tokio::time::timeout_at(deadline, fetched.next()).await {
                    Ok(chunk) => chunk,
                    Err(_) => return Ok(LinesRead { lines, next, at_end: false }),
                }
            } else {
                fetched.next().await
            };
            let Some(chunk) = chunk else { break };
            let (seq, text) = chunk?;
            read_any = true;
            if seq > next.seq {
                next = LogCursor { seq, line: 0 };
            }
            match take_lines(&text, next.line, &mut budget, &mut lines) {
                Some(line) => {
                    next.line = line;
                    return Ok(LinesRead { lines, next, at_end: false });
                }
                None => next = LogCursor { seq: seq + 1, line: 0 },
            }
        }
        if gap {
            return Ok(LinesRead { lines, next, at_end: false });
        }
        if page.is_truncated() != Some(true) || keys.is_empty() {
            return Ok(LinesRead { lines, next, at_end: true });
        }
        if read_any && tokio::time::Instant::now() >= deadline {
            return Ok(LinesRead { lines, next, at_end: false });
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

    fn chunk(texts: &[&str]) -> String {
        let step = Uuid::nil();
        texts
            .iter()
            .map(|text| {
                let line = LogLine {
                    at: chrono::DateTime::UNIX_EPOCH,
                    step_id: step,
                    stream: baton_api::logs::LogStream::Stdout,
                    text: text.to_string(),
                };
                serde_json::to_string(&line).unwrap() + "\n"
            })
            .collect()
    }

    #[test]
    fn a_read_takes_lines_while_its_byte_budget_lasts_and_says_where_it_stopped() {
        let text = chunk(&["a".repeat(400).as_str(), "b".repeat(400).as_str(), "c"]);
        let one: LogLine = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        // Room for the two long lines, not for the short one after them.
        let room = 2 * json_size(&one) + 10;
        let mut budget = ReadBudget { lines: 100, bytes: room };
        let mut taken = Vec::new();
        assert_eq!(take_lines(&text, 0, &mut budget, &mut taken), Some(2));
        assert_eq!(taken.len(), 2);
        let answered: usize = taken.iter().map(json_size).sum();
        assert!(answered <= room, "{answered} bytes answered");
        // The next read goes on from there and finishes the chunk.
        let mut budget = ReadBudget { lines: 100, bytes: room };
        let mut rest = Vec::new();
        assert_eq!(take_lines(&text, 2, &mut budget, &mut rest), None);
        assert_eq!(rest.iter().map(|l| l.text.as_str()).collect::<Vec<_>>(), ["c"]);
    }

    #[test]
    fn a_read_stops_at_its_line_budget() {
        let text = chunk(&["1", "2", "3"]);
        let mut budget = ReadBudget { lines: 2, bytes: 1 << 20 };
        let mut taken = Vec::new();
        assert_eq!(take_lines(&text, 0, &mut budget, &mut taken), Some(2));
        assert_eq!(taken.len(), 2);
    }

    #[test]
    fn a_line_larger_than_the_whole_budget_comes_alone_cut_to_fit_so_the_cursor_moves() {
        // Control characters: six bytes each once escaped in JSON.
        let huge = "\u{1}".repeat(5000);
        let text = chunk(&[huge.as_str(), "next"]);
        let mut budget = ReadBudget { lines: 100, bytes: 4096 };
        let mut taken = Vec::new();
        assert_eq!(take_lines(&text, 0, &mut budget, &mut taken), Some(1));
        assert_eq!(taken.len(), 1);
        assert!(taken[0].text.ends_with(TRUNCATION_NOTE));
        assert!(json_size(&taken[0]) <= 4096, "{} bytes", json_size(&taken[0]));
        assert!(taken[0].text.len() > 4096 / 6 - 200, "cut no shorter than needed: {}", taken[0].text.len());
        // Not the read's first line: left whole for the next read.
        let mut budget = ReadBudget { lines: 100, bytes: 4096 };
        let mut taken = Vec::new();
        let text = chunk(&["small", huge.as_str()]);
        assert_eq!(take_lines(&text, 0, &mut budget, &mut taken), Some(1));
        assert_eq!(taken.len(), 1);
    }

    #[test]
    fn a_cut_line_stays_valid_text_at_a_character_boundary() {
        let text = chunk(&["é".repeat(3000).as_str()]);
        let mut budget = ReadBudget { lines: 10, bytes: 1001 };
        let mut taken = Vec::new();
        assert_eq!(take_lines(&text, 0, &mut budget, &mut taken), None);
        assert!(json_size(&taken[0]) <= 1001);
        assert!(taken[0].text.trim_end_matches(TRUNCATION_NOTE).chars().all(|c| c == 'é'));
    }

    #[test]
    fn chunks_are_read_up_to_the_first_missing_number_unless_gaps_are_skipped() {
        let (run, execution) = (Uuid::nil(), Uuid::nil());
        let keys: Vec<String> = [1, 2, 4].iter().map(|seq| chunk_key("ws", run, execution, *seq)).collect();
        let from = LogCursor { seq: 1, line: 0 };
        let (wanted, gap) = chunks_to_read(&keys, from, false);
        assert_eq!(wanted.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), [1, 2]);
        assert!(gap);
        let (wanted, gap) = chunks_to_read(&keys, from, true);
        assert_eq!(wanted.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), [1, 2, 4]);
        assert!(!gap);
        let (wanted, gap) = chunks_to_read(&keys, LogCursor { seq: 0, line: 0 }, false);
        assert!(wanted.is_empty() && gap);
    }

    #[test]
    fn an_upload_url_never_outlives_its_lease() {
        let now = chrono::Utc::now();
        assert_eq!(upload_url_ttl(now, now + chrono::Duration::hours(1)), Some(UPLOAD_URL_TTL));
        assert_eq!(upload_url_ttl(now, now + chrono::Duration::milliseconds(90_900)), Some(Duration::from_secs(90)));
        assert_eq!(upload_url_ttl(now, now + chrono::Duration::milliseconds(999)), None);
        assert_eq!(upload_url_ttl(now, now - chrono::Duration::seconds(5)), None);
    }
}
