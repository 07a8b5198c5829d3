//! Ships a job's output to the log store while it runs: lines go through a
//! bounded queue to one shipper task that cuts them into numbered chunks
//! (by size, or a few seconds after a chunk's first line) and uploads each with a URL the API issues
//! under the lease, straight to the bucket. The job never waits for it: the
//! queue holds up to a whole log's cap in bytes (a fast step prints
//! megabytes in a second, far faster than chunks upload, and a queue
//! counted in lines dropped thousands of them), and only past that drops
//! lines (saying how many); a failed upload is retried
//! within a budget and then given up. Secrets are masked before a line
//! leaves the step: values the job declares secret, and values a step
//! registers with an `::add-mask::` line.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_api::logs::{LogChunkRequest, LogLine, LogStream, LogUploadRequest};
use baton_client::error::ClientError;
use baton_client::retry::with_retries;
use baton_client::Client;
use chrono::Utc;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use uuid::Uuid;

/// What a step prints to register a secret: the rest of the line is masked
/// in every later line, and the line itself is neither printed nor stored.
pub const ADD_MASK: &str = "::add-mask::";
/// What a masked value becomes.
pub const MASKED: &str = "***";

/// How the shipper cuts and bounds a job's log.
#[derive(Debug, Clone)]
pub struct LogSettings {
    /// The most a job's log may weigh; past it one note says so and the
    /// rest is dropped.
    pub cap_bytes: u64,
    /// A chunk is cut at this size…
    pub chunk_bytes: usize,
    /// … or this long after its first line, whatever came since: a step
    /// that prints slowly gets a chunk every `max_age`, not one a line
    /// (each chunk is an object of the log store, and a read fetches them
    /// one by one).
    pub max_age: Duration,
    /// Bytes of lines waiting for the shipper; past this, lines are
    /// dropped. As much as a log may weigh: a queue that holds a whole log
    /// drops nothing that the cap would have kept, and bounds the memory.
    pub queue_bytes: u64,
    /// How long the end of a job waits for the last chunks.
    pub drain_timeout: Duration,
}

impl Default for LogSettings {
    fn default() -> Self {
        Self {
            cap_bytes: 32 * 1024 * 1024,
            chunk_bytes: 256 * 1024,
            max_age: Duration::from_secs(5),
            queue_bytes: 32 * 1024 * 1024,
            drain_timeout: Duration::from_secs(30),
        }
    }
}

/// What the shipper did, for the runner's own log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shipped {
    pub chunks: u64,
    pub bytes: u64,
    pub failed_chunks: u64,
    pub dropped_lines: u64,
    pub truncated: bool,
}

/// The step side of the log: cheap to clone, never blocks.
#[derive(Clone)]
pub struct LogSink {
    tx: mpsc::UnboundedSender<LogLine>,
    queue: Arc<Queue>,
    masks: Arc<Mutex<Vec<String>>>,
}

/// What waits for the shipper, in bytes, against its bound.
#[derive(Debug)]
struct Queue {
    bytes: AtomicU64,
    limit: u64,
    dropped: AtomicU64,
    /// Dropped lines no note has told of yet.
    unannounced: AtomicU64,
}

impl Queue {
    fn new(limit: u64) -> Arc<Self> {
        Arc::new(Self {
            bytes: AtomicU64::new(0),
            limit: limit.max(1),
            dropped: AtomicU64::new(0),
            unannounced: AtomicU64::new(0),
        })
    }

    /// Makes room for `line`, or counts it dropped.
    fn admit(&self, line: &LogLine) -> bool {
        let cost = cost(line);
        if self.bytes.fetch_add(cost, Ordering::AcqRel) + cost > self.limit {
            self.bytes.fetch_sub(cost, Ordering::AcqRel);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            self.unannounced.fetch_add(1, Ordering::AcqRel);
            return false;
        }
        true
    }

    /// Counts `line` in, room or not (a note about dropped lines is small
    /// and must not be dropped itself).
    fn charge(&self, line: &LogLine) {
        self.bytes.fetch_add(cost(line), Ordering::AcqRel);
    }

    fn release(&self, line: &LogLine) {
        self.bytes.fetch_sub(cost(line), Ordering::AcqRel);
    }
}

/// A queued line's weight: its text and the line's own fields.
fn cost(line: &LogLine) -> u64 {
    line.text.len() as u64 + 64
}

impl LogSink {
    /// `text` with every registered secret masked.
    pub fn mask(&self, text: &str) -> String {
        let masks = self.masks.lock().unwrap_or_else(|e| e.into_inner());
        mask_with(&masks, text)
    }

    /// Registers `value` as a secret (an `::add-mask::` line, a value of
    /// the job's `mask-env`). Output is masked a line at a time, so each
    /// line of a multi-line value is a secret of its own: the whole value
    /// never appears within one line. A blank line is no secret, as a blank
    /// value is not.
    pub fn add_mask(&self, value: &str) {
        let mut masks = self.masks.lock().unwrap_or_else(|e| e.into_inner());
        for line in value.lines().map(str::trim).filter(|line| !line.is_empty()) {
            if !masks.iter().any(|m| m == line) {
                masks.push(line.to_string());
            }
        }
    }

    /// Queues one line (already masked) of `step`; drops it if the shipper
    /// is a whole log's cap behind.
    pub fn line(&self, step_id: Uuid, stream: LogStream, text: String) {
        let line = LogLine { at: Utc::now(), step_id, stream, text };
        if !self.queue.admit(&line) {
            return;
        }
        // The note goes where the gap is: right before the first line kept
        // after it (a note written when the shipper noticed could land
        // before lines that came ahead of the gap).
        let unannounced = self.queue.unannounced.swap(0, Ordering::AcqRel);
        if unannounced > 0 {
            let note = dropped_note(step_id, unannounced);
            self.queue.charge(&note);
            self.send(note);
        }
        self.send(line);
    }

    fn send(&self, line: LogLine) {
        if let Err(unsent) = self.tx.send(line) {
            // The shipper is gone (the job is ending): nothing waits.
            self.queue.release(&unsent.0);
        }
    }
}

/// `text` with every byte that lies in some occurrence of some secret
/// masked: the union of all the matches (overlapping ones included) becomes
/// one [`MASKED`] per run. Replacing secret after secret would not do: once
/// one is replaced, the part of an overlapping one outside it no longer
/// matches and shows.
fn mask_with(masks: &[String], text: &str) -> String {
    let mut hidden: Vec<(usize, usize)> = Vec::new();
    for secret in masks.iter().filter(|s| !s.is_empty()) {
        let step = secret.chars().next().map_or(1, char::len_utf8);
        let mut from = 0;
        while let Some(at) = text[from..].find(secret.as_str()) {
            let start = from + at;
            hidden.push((start, start + secret.len()));
            // The next match may begin inside this one ("aa" twice in "aaa").
            from = start + step;
        }
    }
    if hidden.is_empty() {
        return text.to_string();
    }
    hidden.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut shown_from = 0;
    let mut runs = hidden.into_iter().peekable();
    while let Some((start, mut end)) = runs.next() {
        while let Some(&(next_start, next_end)) = runs.peek() {
            if next_start > end {
                break;
            }
            end = end.max(next_end);
            runs.next();
        }
        out.push_str(&text[shown_from..start]);
        out.push_str(MASKED);
        shown_from = end;
    }
    out.push_str(&text[shown_from..]);
    out
}

impl LogSettings {
    /// Whether the chunk being cut, of `bytes` so far, its first line
    /// queued at `since`, goes out at `now`.
    pub fn chunk_due(&self, bytes: usize, since: Instant, now: Instant) -> bool {
        bytes >= self.chunk_bytes || now >= self.chunk_deadline(since)
    }

    /// When a chunk whose first line was queued at `since` goes out at the latest.
    pub fn chunk_deadline(&self, since: Instant) -> Instant {
        since + self.max_age
    }
}

/// Where the shipper uploads: the lease it holds.
pub struct Lease {
    pub client: Client,
    pub token: String,
    pub execution: Uuid,
}

/// Starts the shipper of one job. Drop every [`LogSink`] clone, then await
/// the handle (within `drain_timeout`) to flush the last lines.
pub fn start(lease: Lease, settings: LogSettings, secrets: Vec<String>) -> (LogSink, JoinHandle<Shipped>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let sink = LogSink { tx, queue: Queue::new(settings.queue_bytes), masks: Arc::new(Mutex::new(Vec::new())) };
    for secret in &secrets {
        sink.add_mask(secret);
    }
    let queue = sink.queue.clone();
    let handle = tokio::spawn(ship(lease, settings, rx, queue));
    (sink, handle)
}

/// Cuts lines into chunks and uploads them, in order, until every sink is
/// dropped.
async fn ship(
    lease: Lease,
    settings: LogSettings,
    mut rx: mpsc::UnboundedReceiver<LogLine>,
    queue: Arc<Queue>,
) -> Shipped {
    let mut shipped = Shipped::default();
    let mut chunk = Vec::<u8>::new();
    // When the chunk's first line came (None while it is empty).
    let mut first_line_at: Option<Instant> = None;
    let mut seq = 0u64;
    let mut last_step = Uuid::nil();
    let note_room = 512u64;
    loop {
        let next = match first_line_at {
            None => rx.recv().await,
            Some(since) => match tokio::time::timeout_at(settings.chunk_deadline(since), rx.recv()).await {
                Ok(line) => line,
                Err(_) => {
                    upload(&lease, seq, std::mem::take(&mut chunk), &mut shipped).await;
                    seq += 1;
                    first_line_at = None;
                    continue;
                }
            },
        };
        let Some(line) = next else { break };
        queue.release(&line);
        last_step = line.step_id;
        if shipped.truncated {
            continue;
        }
        if let Some(bytes) = encoded(&line) {
            let total = shipped.bytes + chunk.len() as u64 + bytes.len() as u64;
            if total + note_room > settings.cap_bytes {
                let note = system_line(
                    line.step_id,
                    format!(
                        "[log truncated: the job's log reached its cap of {} bytes; later lines are not stored]",
                        settings.cap_bytes
                    ),
                );
                chunk.extend(encoded(&note).unwrap_or_default());
                shipped.truncated = true;
            } else {
                chunk.extend_from_slice(&bytes);
            }
        }
        if chunk.is_empty() {
            continue;
        }
        let now = Instant::now();
        let since = *first_line_at.get_or_insert(now);
        if shipped.truncated || settings.chunk_due(chunk.len(), since, now) {
            upload(&lease, seq, std::mem::take(&mut chunk), &mut shipped).await;
            seq += 1;
            first_line_at = None;
        }
    }
    // Lines dropped after the last one kept: told at the end.
    let unannounced = queue.unannounced.swap(0, Ordering::AcqRel);
    if unannounced > 0 && !shipped.truncated {
        chunk.extend(encoded(&dropped_note(last_step, unannounced)).unwrap_or_default());
    }
    if !chunk.is_empty() {
        upload(&lease, seq, chunk, &mut shipped).await;
    }
    shipped.dropped_lines = queue.dropped.load(Ordering::Relaxed);
    shipped
}

/// One line as the log store keeps it: JSON and a newline.
fn encoded(line: &LogLine) -> Option<Vec<u8>> {
    let mut encoded = serde_json::to_vec(line).ok()?;
    encoded.push(b'\n');
    Some(encoded)
}

fn dropped_note(step_id: Uuid, lines: u64) -> LogLine {
    system_line(step_id, format!("[{lines} lines dropped: the log store fell behind]"))
}

fn system_line(step_id: Uuid, text: String) -> LogLine {
    LogLine { at: Utc::now(), step_id, stream: LogStream::System, text }
}

/// How long one chunk may be retried before it is given up.
const UPLOAD_BUDGET: Duration = Duration::from_secs(20);

async fn upload(lease: &Lease, seq: u64, body: Vec<u8>, shipped: &mut Shipped) {
    let bytes = body.len() as u64;
    let request = LogUploadRequest { chunks: vec![LogChunkRequest { seq, bytes }] };
    let path = format!("/v1/runners/leases/{}/logs", lease.execution);
    let put = with_retries("log upload", UPLOAD_BUDGET, || async {
        let answer: baton_api::logs::LogUploadResponse =
            lease.client.send_for(reqwest::Method::POST, &path, &lease.token, Some(&request)).await?;
        let target = answer.uploads.into_iter().find(|u| u.seq == seq).ok_or_else(|| ClientError::Permanent {
            status: 200,
            code: "no-upload-url".into(),
            message: format!("no URL for chunk {seq}"),
        })?;
        lease.client.put_bytes(&target.url, &target.headers, body.clone()).await
    })
    .await;
    match put {
        Ok(()) => {
            shipped.chunks += 1;
            shipped.bytes += bytes;
        }
        Err(err) => {
            shipped.failed_chunks += 1;
            tracing::warn!(execution = %lease.execution, seq, error = %err, "log chunk not stored");
        }
    }
}

/// The values of the job's env named secret (`secret_names`), to mask.
pub fn secret_values(env: &BTreeMap<String, String>, secret_names: &[String]) -> Vec<String> {
    secret_names.iter().filter_map(|name| env.get(name)).filter(|v| !v.trim().is_empty()).cloned().collect()
}

/// A sink whose lines wait in the returned queue (of `queue_bytes`).
#[cfg(test)]
pub(crate) fn test_sink(queue_bytes: u64) -> (LogSink, mpsc::UnboundedReceiver<LogLine>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (LogSink { tx, queue: Queue::new(queue_bytes), masks: Arc::new(Mutex::new(Vec::new())) }, rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_containing_another_is_masked_whole_and_add_mask_registers_more() {
        let (sink, _rx) = test_sink(1024);
        sink.add_mask("hunter2");
        sink.add_mask("hunter2-extended");
        assert_eq!(sink.mask("pw=hunter2-extended and hunter2"), "pw=*** and ***");
        sink.add_mask("  ");
        assert_eq!(sink.mask("nothing  here"), "nothing  here");
    }

    #[test]
    fn each_line_of_a_multi_line_secret_is_masked_in_the_lines_it_is_printed_on() {
        let (sink, _rx) = test_sink(1024);
        sink.add_mask("-----BEGIN KEY-----\r\nMIIEpAIBAAKCAQEA\n\n  tail-of-the-key  \n");
        // Printed over its lines, as `echo "$KEY"` does.
        assert_eq!(sink.mask("-----BEGIN KEY-----"), "***");
        assert_eq!(sink.mask("key: MIIEpAIBAAKCAQEA"), "key: ***");
        assert_eq!(sink.mask("tail-of-the-key"), "***");
        assert_eq!(sink.mask(""), "", "the blank line is no secret");
        // A multi-line output carrying it is masked line by line.
        assert_eq!(sink.mask("-----BEGIN KEY-----\nMIIEpAIBAAKCAQEA"), "***\n***");
    }

    #[test]
    fn overlapping_secrets_are_masked_over_the_union_of_their_matches() {
        let masks = vec!["abcdef".to_string(), "cdefgh".to_string()];
        assert_eq!(mask_with(&masks, "xx abcdefgh yy"), "xx *** yy");
        assert_eq!(mask_with(&masks, "cdefgh-abcdef"), "***-***");
        assert_eq!(mask_with(&["aa".to_string()], "aaa b aa"), "*** b ***", "a secret overlapping itself");
        assert_eq!(mask_with(&["é1é".to_string()], "xé1é1éx"), "x***x", "matches start on char boundaries");
    }

    #[test]
    fn a_slow_step_gets_a_chunk_every_few_seconds_not_one_a_line() {
        let settings = LogSettings::default();
        let start = Instant::now();
        let line = 80;
        // A line every 1.5 s for 1,000 lines, cut as the shipper cuts:
        // at the chunk's deadline if it passed before the next line, or
        // when a line makes the chunk due.
        let (mut chunks, mut bytes, mut since) = (0, 0, None::<Instant>);
        for n in 0..1000u32 {
            let now = start + Duration::from_millis(1500) * n;
            if since.is_some_and(|since| now >= settings.chunk_deadline(since)) {
                (chunks, bytes, since) = (chunks + 1, 0, None);
            }
            bytes += line;
            let first = *since.get_or_insert(now);
            if settings.chunk_due(bytes, first, now) {
                (chunks, bytes, since) = (chunks + 1, 0, None);
            }
        }
        chunks += u32::from(bytes > 0);
        assert!(chunks <= 1000 * 3 / 2 / 5 + 1, "{chunks} chunks for 1,000 lines over 25 minutes");
        assert!(chunks >= 1000 * 3 / 2 / 10, "still live: a chunk at most every {:?}", settings.max_age);
    }

    #[test]
    fn a_chunk_goes_out_when_it_is_big_enough_or_its_first_line_old_enough() {
        let settings = LogSettings { chunk_bytes: 64 * 1024, max_age: Duration::from_secs(5), ..Default::default() };
        let since = Instant::now();
        let later = |ms| since + Duration::from_millis(ms);
        assert!(!settings.chunk_due(100, since, later(1500)), "a pause between lines does not cut a chunk");
        assert!(!settings.chunk_due(64 * 1024 - 1, since, later(4999)));
        assert!(settings.chunk_due(100, since, later(5000)), "a small chunk waits at most max_age");
        assert!(settings.chunk_due(64 * 1024, since, since), "a big chunk goes at once");
        assert_eq!(settings.chunk_deadline(since), later(5000));
    }

    #[test]
    fn a_full_queue_drops_lines_and_counts_them_instead_of_blocking() {
        // Room for two lines of this size, not three.
        let (sink, _rx) = test_sink(2 * (6 + 64) + 10);
        for n in 0..5 {
            sink.line(Uuid::nil(), LogStream::Stdout, format!("line {n}"));
        }
        assert_eq!(sink.queue.dropped.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn the_note_of_dropped_lines_stands_where_they_were_dropped() {
        // Room for two lines: the third and fourth are dropped, the fifth
        // kept once the shipper took the first two.
        let (sink, mut rx) = test_sink(2 * (6 + 64) + 10);
        for n in 0..4 {
            sink.line(Uuid::nil(), LogStream::Stdout, format!("line {n}"));
        }
        let mut texts = Vec::new();
        while let Ok(line) = rx.try_recv() {
            sink.queue.release(&line);
            texts.push(line.text);
        }
        sink.line(Uuid::nil(), LogStream::Stdout, "line 4".into());
        while let Ok(line) = rx.try_recv() {
            texts.push(line.text);
        }
        assert_eq!(texts, ["line 0", "line 1", "[2 lines dropped: the log store fell behind]", "line 4"]);
    }

    #[test]
    fn the_default_queue_holds_a_fast_steps_hundred_thousand_lines() {
        // `seq 1 100000` prints its ~1 MB in milliseconds, long before the
        // first chunk is uploaded: none of it may be dropped.
        let (sink, mut rx) = test_sink(LogSettings::default().queue_bytes);
        for n in 1..=100_000 {
            sink.line(Uuid::nil(), LogStream::Stdout, format!("line {n}"));
        }
        assert_eq!(sink.queue.dropped.load(Ordering::Relaxed), 0);
        let mut received = 0;
        while let Ok(line) = rx.try_recv() {
            sink.queue.release(&line);
            received += 1;
        }
        assert_eq!(received, 100_000);
        assert_eq!(sink.queue.bytes.load(Ordering::Relaxed), 0, "the shipper's reads give the room back");
    }
}
