//! Artifacts and caches (behaviour.md §17): what moving a 100 MB archive
//! costs per job, counted: API requests and Lambda invocations (the dev
//! host's), the functions' own S3 and DynamoDB requests (the recorder's),
//! the runner's S3 requests (each presigned `PUT` or `GET`, counted here),
//! and the bytes that passed through the functions (request and answer
//! bodies): none of the archive's.

use std::collections::BTreeMap;

use baton_api::runners::ClaimResponse;
use baton_runner::artifacts::sha256_hex;
use baton_tests::{unique_stage, TestStack};
use serde::Serialize;
use serde_json::json;

use crate::claim_path::{enqueue_direct, LABELS};
use crate::recorder::Recorder;
use crate::windows::{figures, settle};

/// The archive moved: 100 MB, as the figure asks.
pub const ARCHIVE_BYTES: usize = 100_000_000;

#[derive(Debug, Serialize)]
pub struct TransferFigures {
    pub name: String,
    pub archive_bytes: usize,
    pub api_requests: usize,
    pub lambda_invocations: usize,
    /// The functions' own S3 requests, by operation.
    pub function_s3_requests: BTreeMap<String, usize>,
    /// The runner's requests straight to S3 (presigned).
    pub runner_s3_requests: usize,
    pub dynamodb_requests: usize,
    pub read_units: f64,
    pub write_units: f64,
    /// Request and answer bodies the functions handled.
    pub bytes_through_lambda: usize,
}

/// What one operation did, from marks taken before it.
struct Window {
    requests: usize,
    invocations: usize,
}

fn window(stack: &TestStack, recorder: &Recorder) -> Window {
    Window { requests: recorder.mark(), invocations: stack.host.invocations.mark() }
}

fn close(
    stack: &TestStack,
    recorder: &Recorder,
    from: Window,
    name: &str,
    runner_s3_requests: usize,
) -> TransferFigures {
    let requests = recorder.since(from.requests);
    let invocations = stack.host.invocations.since(from.invocations);
    let ddb = figures(name, &requests);
    let function_s3_requests =
        requests.iter().filter(|r| r.service.eq_ignore_ascii_case("s3")).fold(BTreeMap::new(), |mut m, r| {
            *m.entry(r.operation.clone()).or_insert(0) += 1;
            m
        });
    TransferFigures {
        name: name.into(),
        archive_bytes: ARCHIVE_BYTES,
        api_requests: invocations.iter().filter(|r| r.status.is_some()).count(),
        lambda_invocations: invocations.len(),
        function_s3_requests,
        runner_s3_requests,
        dynamodb_requests: ddb.requests,
        read_units: ddb.read_units,
        write_units: ddb.write_units,
        bytes_through_lambda: invocations.iter().map(|r| r.body_bytes).sum(),
    }
}

async fn get_object(stack: &TestStack, url: &str) -> usize {
    stack.http.get(url).send().await.expect("S3").bytes().await.expect("the archive").len()
}

async fn leased(stack: &TestStack, ws: &str, session: &str) -> ClaimResponse {
    enqueue_direct(&stack.store, ws, chrono::Utc::now(), 0).await;
    stack.claim(session).await.expect("the queued job is claimed")
}

pub async fn measure(stack: &TestStack, recorder: &Recorder) -> Vec<TransferFigures> {
    let ws = format!("bench-artifacts-{}", &unique_stage()[1..]);
    let token = stack.registration_token(&ws, json!({})).await;
    let session = stack.register(&token, LABELS).await.session_token;
    let archive: Vec<u8> = (0..ARCHIVE_BYTES).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let digest = sha256_hex(&archive);
    let mut all = Vec::new();

    // An artifact: begin, the parts, complete; then its download.
    let job = leased(stack, &ws, &session).await;
    let base = format!("/v1/runners/leases/{}", job.job_execution_id);
    settle(recorder).await;
    let from = window(stack, recorder);
    let body = json!({"name": "app", "bytes": ARCHIVE_BYTES, "sha256": digest});
    let begun = stack.post(&format!("{base}/artifacts"), &job.lease.token, body).await;
    assert_eq!(begun.status, 200, "{}", begun.body);
    let parts = stack.put_parts(&begun.body, &archive).await;
    let puts = parts.len();
    let done = stack.post(&format!("{base}/artifacts/app/complete"), &job.lease.token, json!({"parts": parts})).await;
    assert_eq!(done.status, 200, "{}", done.body);
    all.push(close(stack, recorder, from, "artifact upload (100 MB)", puts));

    // (The bench's jobs are each of their own run: the download is the
    // uploading job's own, priced as a later job's would be.)
    settle(recorder).await;
    let from = window(stack, recorder);
    let path = format!("{base}/artifacts/app");
    let download = stack.get(&path, &job.lease.token).await;
    assert_eq!(download.status, 200, "{}", download.body);
    assert_eq!(get_object(stack, download.body["url"].as_str().expect("a URL")).await, ARCHIVE_BYTES);
    all.push(close(stack, recorder, from, "artifact download (100 MB)", 1));

    // A cache: the miss's save (restore, save, parts, complete), then a hit.
    let cached = leased(stack, &ws, &session).await;
    let base = format!("/v1/runners/leases/{}", cached.job_execution_id);
    settle(recorder).await;
    let from = window(stack, recorder);
    let miss = stack.post(&format!("{base}/caches/restore"), &cached.lease.token, json!({"key": "deps-1"})).await;
    assert_eq!(miss.body["hit"], "miss", "{}", miss.body);
    let body = json!({"key": "deps-1", "bytes": ARCHIVE_BYTES, "sha256": digest});
    let begun = stack.post(&format!("{base}/caches"), &cached.lease.token, body).await;
    assert_eq!(begun.status, 200, "{}", begun.body);
    let parts = stack.put_parts(&begun.body, &archive).await;
    let puts = parts.len();
    let done = stack
        .post(&format!("{base}/caches/complete"), &cached.lease.token, json!({"key": "deps-1", "parts": parts}))
        .await;
    assert_eq!(done.status, 200, "{}", done.body);
    all.push(close(stack, recorder, from, "cache miss, then its save (100 MB)", puts));

    let hit = leased(stack, &ws, &session).await;
    settle(recorder).await;
    let from = window(stack, recorder);
    let path = format!("/v1/runners/leases/{}/caches/restore", hit.job_execution_id);
    let restored = stack.post(&path, &hit.lease.token, json!({"key": "deps-1", "restore_keys": ["deps-"]})).await;
    assert_eq!(restored.body["hit"], "exact", "{}", restored.body);
    assert_eq!(get_object(stack, restored.body["url"].as_str().expect("a URL")).await, ARCHIVE_BYTES);
    all.push(close(stack, recorder, from, "cache hit (100 MB)", 1));
    all
}

pub fn render(all: &[TransferFigures]) -> String {
    let mut s = format!(
        "{:<36} {:>4} {:>5} {:>6} {:>5} {:>5} {:>5}  {:>10}  {}\n",
        "per job", "API", "invoc", "S3 run", "DDB", "RCU", "WCU", "via Lambda", "the functions' S3 requests"
    );
    for f in all {
        let s3: Vec<String> = f.function_s3_requests.iter().map(|(op, n)| format!("{op}×{n}")).collect();
        s.push_str(&format!(
            "{:<36} {:>4} {:>5} {:>6} {:>5} {:>5.1} {:>5.1}  {:>8} B  {}\n",
            f.name,
            f.api_requests,
            f.lambda_invocations,
            f.runner_s3_requests,
            f.dynamodb_requests,
            f.read_units,
            f.write_units,
            f.bytes_through_lambda,
            if s3.is_empty() { "none (a presigned URL is signed locally)".to_string() } else { s3.join(", ") }
        ));
    }
    let moved: usize = all.iter().map(|f| f.archive_bytes).sum();
    let through: usize = all.iter().map(|f| f.bytes_through_lambda).sum();
    s.push_str(&format!(
        "archives moved: {moved} bytes; bodies the functions handled meanwhile: {through} bytes ({:.4} % of it, URLs and JSON only)\n",
        through as f64 * 100.0 / moved.max(1) as f64
    ));
    s
}
