//! Contention: R runners drain a queue of N jobs with HTTP claim + complete
//! in a loop; failed conditional writes per successful claim, over the whole
//! drain and split at the claim window.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use baton_domain::runners::claim::HEAD_READ;
use baton_tests::{unique_stage, TestStack};
use chrono::Utc;
use serde::Serialize;
use serde_json::json;

use crate::claim_path::{enqueue_direct, LABELS};
use crate::recorder::Recorder;
use crate::windows::{dynamodb, percentile, settle};

#[derive(Debug, Serialize)]
pub(crate) struct ContentionFigures {
    pub(crate) runners: usize,
    pub(crate) workspaces: usize,
    pub(crate) jobs: usize,
    pub(crate) claims: usize,
    pub(crate) empty_claims: usize,
    pub(crate) claim_errors: usize,
    pub(crate) failed_conditional_writes: usize,
    pub(crate) failed_conditional_writes_per_claim: f64,
    pub(crate) failed_claim_transactions: usize,
    pub(crate) dynamodb_requests: usize,
    pub(crate) dynamodb_requests_per_claim: f64,
    pub(crate) read_units_per_claim: f64,
    pub(crate) write_units_per_claim: f64,
    /// Failed conditional writes per claim while the backlog was at least
    /// the claim window (`HEAD_READ`), and in the drain's tail below it.
    pub(crate) failed_per_claim_backlog: f64,
    pub(crate) failed_per_claim_tail: f64,
    pub(crate) claims_in_tail: usize,
    /// The emulator's median answer time per DynamoDB operation.
    pub(crate) median_ms_by_operation: BTreeMap<String, f64>,
    pub(crate) claim_http_median_ms: f64,
    pub(crate) claim_http_p95_ms: f64,
    pub(crate) wall_seconds: f64,
    pub(crate) target: Option<String>,
    pub(crate) meets_target: Option<bool>,
}

/// R runners drain `jobs` jobs spread evenly over `workspaces` workspaces;
/// each runner belongs to one workspace (round robin), and every workspace
/// gets at least one, so `runners` grows to `workspaces` if it is smaller.
pub(crate) async fn contention(
    stack: Arc<TestStack>,
    recorder: &Recorder,
    runners: usize,
    jobs: usize,
    workspaces: usize,
    priority_spread: i32,
) -> ContentionFigures {
    let workspaces = workspaces.max(1);
    let runners = runners.max(workspaces);
    let tag = &unique_stage()[1..];
    let names: Vec<String> = (0..workspaces).map(|w| format!("bench-r{runners}-w{w}-{tag}")).collect();
    let start = Utc::now() - chrono::Duration::seconds(jobs as i64 + 1);
    // Enqueue straight into the store (the bench is about claims), a few at a time.
    let store = stack.store.clone();
    futures::future::join_all((0..jobs).collect::<Vec<_>>().chunks(jobs.div_ceil(8).max(1)).map(|chunk| {
        let store = store.clone();
        let names = names.clone();
        let chunk = chunk.to_vec();
        async move {
            for i in chunk {
                let ws = &names[i % names.len()];
                // Deterministic, spread over -N..=N, unrelated to the order of queueing.
                let priority = if priority_spread == 0 {
                    0
                } else {
                    (i as i32 * 7).rem_euclid(2 * priority_spread + 1) - priority_spread
                };
                enqueue_direct(&store, ws, start + chrono::Duration::milliseconds(i as i64 * 10), priority).await;
            }
        }
    }))
    .await;
    let mut sessions = Vec::new();
    for r in 0..runners {
        sessions.push(stack.runner(&names[r % names.len()], LABELS).await.session_token);
    }
    settle(recorder).await;

    let claimed = Arc::new(AtomicUsize::new(0));
    let empty = Arc::new(AtomicUsize::new(0));
    let errors = Arc::new(AtomicUsize::new(0));
    let latencies = Arc::new(Mutex::new(Vec::new()));
    // When the backlog fell below the claim window (jobs left < HEAD_READ).
    let tail_from: Arc<Mutex<Option<Instant>>> =
        Arc::new(Mutex::new(if jobs <= HEAD_READ { Some(Instant::now()) } else { None }));
    let mark = recorder.mark();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(1800);
    let tasks: Vec<_> = sessions
        .into_iter()
        .map(|session| {
            let (stack, claimed, empty, errors, latencies, tail_from) =
                (stack.clone(), claimed.clone(), empty.clone(), errors.clone(), latencies.clone(), tail_from.clone());
            tokio::spawn(async move {
                while claimed.load(Ordering::SeqCst) < jobs && Instant::now() < deadline {
                    let t = Instant::now();
                    let answer = stack.post("/v1/runners/claim", &session, json!({})).await;
                    latencies.lock().unwrap_or_else(|e| e.into_inner()).push(t.elapsed().as_secs_f64() * 1000.0);
                    match answer.status {
                        200 => {
                            let n = claimed.fetch_add(1, Ordering::SeqCst) + 1;
                            if n + HEAD_READ == jobs.max(HEAD_READ) {
                                *tail_from.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
                            }
                            let id = answer.body["job_execution_id"].as_str().unwrap_or_default().to_string();
                            let token = answer.body["lease"]["token"].as_str().unwrap_or_default().to_string();
                            let done = stack
                                .post(
                                    &format!("/v1/runners/leases/{id}/complete"),
                                    &token,
                                    json!({"status": "succeeded", "steps": []}),
                                )
                                .await;
                            if done.status != 200 {
                                errors.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                        204 => {
                            empty.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        _ => {
                            errors.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
    let wall = started.elapsed().as_secs_f64();
    let window = recorder.since(mark);
    let ddb = dynamodb(&window);
    let claims = claimed.load(Ordering::SeqCst);
    let failed = ddb.iter().filter(|r| r.failed_condition).count();
    let per = |x: f64| if claims == 0 { 0.0 } else { x / claims as f64 };
    let tail_at = tail_from.lock().unwrap_or_else(|e| e.into_inner()).unwrap_or_else(Instant::now);
    let claims_in_tail = jobs.min(HEAD_READ);
    let failed_tail = ddb.iter().filter(|r| r.failed_condition && r.at.is_some_and(|at| at >= tail_at)).count();
    let ratio = |x: usize, n: usize| if n == 0 { 0.0 } else { x as f64 / n as f64 };
    let mut times: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in &ddb {
        times.entry(r.operation.clone()).or_default().push(r.millis);
    }
    let median_ms_by_operation = times
        .into_iter()
        .map(|(op, mut t)| {
            t.sort_by(|a, b| a.total_cmp(b));
            (op, percentile(&t, 0.5))
        })
        .collect();
    let mut lat = latencies.lock().unwrap_or_else(|e| e.into_inner()).clone();
    lat.sort_by(|a, b| a.total_cmp(b));
    ContentionFigures {
        runners,
        workspaces,
        jobs,
        claims,
        empty_claims: empty.load(Ordering::SeqCst),
        claim_errors: errors.load(Ordering::SeqCst),
        failed_conditional_writes: failed,
        failed_conditional_writes_per_claim: per(failed as f64),
        failed_claim_transactions: ddb
            .iter()
            .filter(|r| r.failed_condition && r.operation == "TransactWriteItems")
            .count(),
        dynamodb_requests: ddb.len(),
        dynamodb_requests_per_claim: per(ddb.len() as f64),
        read_units_per_claim: per(ddb.iter().map(|r| r.read_units).sum()),
        write_units_per_claim: per(ddb.iter().map(|r| r.write_units).sum()),
        failed_per_claim_backlog: ratio(failed - failed_tail, claims.saturating_sub(claims_in_tail)),
        failed_per_claim_tail: ratio(failed_tail, claims_in_tail),
        claims_in_tail,
        median_ms_by_operation,
        claim_http_median_ms: percentile(&lat, 0.5),
        claim_http_p95_ms: percentile(&lat, 0.95),
        wall_seconds: wall,
        target: (runners == 32).then(|| "≤ 0.2 failed conditional writes per claim".into()),
        meets_target: (runners == 32).then_some(per(failed as f64) <= 0.2),
    }
}
