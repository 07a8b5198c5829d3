//! Push dispatch end to end: real `baton-runner` processes hold the dev
//! host's push socket (API Gateway's WebSocket API locally), the functions
//! post nudges through the real `aws-sdk-apigatewaymanagement` client, and
//! runs go through the whole stack. A nudge is only ever a hint: these tests
//! show it brings a job in one claim, that a dead socket costs latency and
//! not the job, and that a cancel reaches a running job at once.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::*;
use baton_devhost::push::PushGateway;
use baton_tests::http::Answer;
use baton_tests::runs::Identified;
use baton_tests::{wait_for, workspace, TestStack, WAIT};
use serde_json::json;

async fn stack_with(overrides: &[(&str, &str)]) -> TestStack {
    let overrides: HashMap<String, String> = overrides.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    TestStack::start_with(|_| {}, overrides).await
}

fn gateway(stack: &TestStack) -> &PushGateway {
    stack.host.push.as_deref().expect("the dev host serves the push socket")
}

/// Waits until `log` has a line containing `needle`.
async fn wait_log(log: &Path, needle: &str) {
    wait_for(&format!("{needle:?} in the runner's log"), WAIT, || async {
        std::fs::read_to_string(log).ok().filter(|text| text.contains(needle)).map(|_| ())
    })
    .await
}

/// A `linux` runner logging to `log`, once its socket is open and recorded.
async fn connected_runner(
    stack: &TestStack,
    ws: &str,
    token: &str,
    args: &[&str],
    log: &Path,
) -> (Runner, baton_store::connections::PushConnection) {
    let runner = Runner::start_logged(stack, token, "linux", args, log);
    wait_log(log, "push socket connected").await;
    let connection = wait_for("the socket's connection item", WAIT, || async {
        stack.store.push_connections(ws, chrono::Utc::now()).await.expect("read").into_iter().next()
    })
    .await;
    (runner, connection)
}

fn one_job(name: &str, run: &str) -> String {
    format!("name: {name}\njobs:\n  only:\n    runs-on: linux\n    steps:\n      - run: {run}\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connected_runner_is_nudged_and_its_next_claim_brings_the_job() {
    // The server's safety poll is an hour: only a nudge can bring the job.
    let stack = stack_with(&[("BATON_PUSH_SAFETY_POLL_S", "3600")]).await;
    let (ws, token) = stack.new_workspace().await;
    let log = scratch().join("runner.log");
    let (mut runner, connection) = connected_runner(&stack, &ws, &token, &[], &log).await;
    assert_eq!(connection.labels, ["linux"], "the session's labels, for matching nudges");
    let connected_at = Instant::now();

    let mark = stack.host.invocations.mark();
    let run_id = stack.create_run(&ws, &one_job("pushed", "echo pushed")).await.id();
    let view = stack.wait_view(&ws, &run_id, "the run to succeed", |v| v["status"] == "succeeded").await;
    assert_eq!(view["attempts"][0]["jobs"][0]["status"], "succeeded", "{view:#}");

    // The nudge, then exactly one claim: it brought the job.
    let (nudged_at, message) = gateway(&stack)
        .deliveries()
        .into_iter()
        .find(|(at, message)| *at > connected_at && message.contains("\"work\""))
        .expect("a work nudge was delivered");
    assert_eq!(message, r#"{"type":"work"}"#);
    let claims_after_nudge: Vec<Option<u16>> = stack
        .host
        .invocations
        .since(mark)
        .into_iter()
        .filter(|r| r.function == "claim")
        .filter(|r| {
            r.finished.checked_sub(Duration::from_secs_f64(r.handler_ms / 1000.0)).is_some_and(|s| s >= nudged_at)
        })
        .map(|r| r.status)
        .collect();
    assert_eq!(
        claims_after_nudge.first(),
        Some(&Some(200)),
        "the first claim after the nudge got the job: {claims_after_nudge:?}"
    );
    let text = std::fs::read_to_string(&log).expect("the runner's log");
    let nudged = text.find("nudged: work is claimable").expect("the runner heard the nudge");
    let claimed = text.find("job claimed").expect("the runner claimed");
    assert!(nudged < claimed, "nudged, then claimed");
    runner.stop().await;
}

/// Every function that makes work claimable nudges: with each function
/// limited to its grants (as IAM limits it on AWS), a job made ready by its
/// need's completion (the complete function adopts the outcome and queues
/// it) reaches a runner that only claims when nudged. The runner that ran
/// the need claims again by itself; the job needs another one (`gpu`), so
/// only the completion's nudge can bring it. (The enqueue subscriber's
/// second nudge, which follows the `queued` fact through the bus, is
/// replaced by one that only acknowledges, so it cannot stand in.) Before
/// `complete` and `job-outcomes` had `push:post`, the CDK stack gave them no
/// push endpoint and the job waited for that runner's safety poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_made_ready_by_a_completion_reaches_a_connected_runner_by_a_nudge() {
    let options = baton_tests::options_without_subscriber("enqueue");
    let overrides = HashMap::from([("BATON_PUSH_SAFETY_POLL_S".to_string(), "3600".to_string())]);
    let stack = TestStack::start_custom(|_| {}, overrides, options).await;
    let (ws, token) = stack.new_workspace().await;
    let (cpu_log, gpu_log) = (scratch().join("cpu.log"), scratch().join("gpu.log"));
    let mut cpu = Runner::start_logged(&stack, &token, "linux,cpu", &[], &cpu_log);
    let mut gpu = Runner::start_logged(&stack, &token, "linux,gpu", &[], &gpu_log);
    wait_log(&cpu_log, "push socket connected").await;
    wait_log(&gpu_log, "push socket connected").await;
    wait_for("both sockets' connection items", WAIT, || async {
        let connections = stack.store.push_connections(&ws, chrono::Utc::now()).await.expect("read");
        (connections.len() == 2).then_some(())
    })
    .await;

    let chain = "name: chain\njobs:\n  build:\n    runs-on: [cpu]\n    steps:\n      - run: echo build\n  \
                 train:\n    runs-on: [gpu]\n    needs: [build]\n    steps:\n      - run: echo train\n";
    let run_id = stack.create_run(&ws, chain).await.id();
    let view = stack.wait_view(&ws, &run_id, "both jobs to succeed", |v| v["status"] == "succeeded").await;
    let jobs = view["attempts"][0]["jobs"].as_array().expect("jobs");
    assert!(jobs.iter().all(|j| j["status"] == "succeeded"), "{view:#}");
    let text = std::fs::read_to_string(&gpu_log).expect("the gpu runner's log");
    let nudged = text.find("nudged: work is claimable").expect("the gpu runner was nudged");
    let claimed = text.find("job claimed").expect("the gpu runner claimed train");
    assert!(nudged < claimed, "nudged by the completion, then claimed: {text}");
    cpu.stop().await;
    gpu.stop().await;
}

/// TTL deletes late (days on AWS, never on the emulator): a workspace's
/// connection partition fills with items of sockets long gone. 1,200 of
/// them sort before the live runner's; a nudge still finds it. A read that
/// stopped at the first 1,000 items and filtered expired ones out after
/// found no live runner, and the job waited for the safety poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_runner_behind_a_thousand_expired_connections_is_still_nudged() {
    let stack = stack_with(&[("BATON_PUSH_SAFETY_POLL_S", "3600")]).await;
    let ws = workspace();
    let long_ago = chrono::Utc::now() - chrono::Duration::hours(3);
    let stale: Vec<_> = (0..1_200)
        .map(|i| {
            baton_store::connections::PushConnection::new(
                &ws,
                uuid::Uuid::now_v7(),
                &format!("gone{i}"),
                &["linux".to_string()],
                long_ago,
                chrono::Duration::hours(2),
            )
        })
        .collect();
    futures::future::join_all(stale.chunks(75).map(|chunk| {
        let store = stack.store.clone();
        let chunk = chunk.to_vec();
        async move {
            for connection in &chunk {
                store.put_push_connection(connection).await.expect("an expired connection item");
            }
        }
    }))
    .await;
    let token = stack.registration_token(&ws, json!({})).await;
    let log = scratch().join("runner.log");
    let mut runner = Runner::start_logged(&stack, &token, "linux", &[], &log);
    wait_log(&log, "push socket connected").await;
    wait_for("the live connection item", WAIT, || async {
        let live = stack.store.push_connections(&ws, chrono::Utc::now()).await.expect("read");
        (live.len() == 1).then_some(())
    })
    .await;

    let run_id = stack.create_run(&ws, &one_job("behind", "echo behind")).await.id();
    stack.wait_view(&ws, &run_id, "the run to succeed", |v| v["status"] == "succeeded").await;
    let text = std::fs::read_to_string(&log).expect("the runner's log");
    assert!(text.contains("nudged: work is claimable"), "the live runner was nudged: {text}");
    runner.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_whose_socket_died_silently_gets_its_job_from_the_safety_poll() {
    // No grace for young sockets: this one is forgotten at its first gone post.
    let stack = stack_with(&[("BATON_PUSH_CONNECTING_GRACE_S", "0")]).await;
    let (ws, token) = stack.new_workspace().await;
    let log = scratch().join("runner.log");
    let (mut runner, _) = connected_runner(&stack, &ws, &token, &["--safety-poll-s", "2"], &log).await;
    // The gateway forgets the socket; the runner is not told (a dropped flow).
    gateway(&stack).sever_silently();

    let run_id = stack.create_run(&ws, &one_job("severed", "echo severed")).await.id();
    let view = stack.wait_view(&ws, &run_id, "the run to succeed", |v| v["status"] == "succeeded").await;
    assert_eq!(view["attempts"][0]["jobs"][0]["status"], "succeeded", "{view:#}");
    let text = std::fs::read_to_string(&log).expect("the runner's log");
    assert!(!text.contains("nudged: work"), "no nudge reached the runner; its safety poll found the job");
    assert!(gateway(&stack).gone.load(std::sync::atomic::Ordering::Relaxed) >= 1, "the nudge found the socket gone");
    let left = stack.store.push_connections(&ws, chrono::Utc::now()).await.expect("read");
    assert!(left.is_empty(), "a gone socket's item is deleted: {left:?}");
    runner.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_reaches_a_pushed_runner_long_before_its_next_heartbeat() {
    // Heartbeats every 60 s: only the cancel nudge can stop the step sooner.
    let stack = stack_with(&[("BATON_HEARTBEAT_INTERVAL_S", "60"), ("BATON_LEASE_DURATION_S", "180")]).await;
    let (ws, token) = stack.new_workspace().await;
    let shared = scratch();
    let log = shared.join("runner.log");
    let mut runner = Runner::start_logged(&stack, &token, "linux", &[], &log);
    wait_log(&log, "push socket connected").await;
    let yaml = format!(
        "name: cancelled\nenv:\n  SHARED: {}\njobs:\n  soak:\n    runs-on: linux\n    steps:\n      - run: |\n          echo $$ > \"$SHARED/pgid\"\n          sleep 600 & sleep 600\n",
        shared.display()
    );
    let run_id = stack.create_run(&ws, &yaml).await.id();
    let pgid = pgid_from(&shared.join("pgid")).await;
    let _leftovers = GroupGuard(pgid);
    stack.wait_view(&ws, &run_id, "soak to be running", |v| v["attempts"][0]["jobs"][0]["status"] == "running").await;

    let asked = Instant::now();
    let Answer { status, body } =
        stack.post(&format!("/v1/workspaces/{ws}/runs/{run_id}/cancel"), &stack.admin_token, json!({})).await;
    assert_eq!(status, 202, "{body:#}");
    group_gone(pgid, Duration::from_secs(40)).await;
    let stopped_after = asked.elapsed();
    let view = stack.wait_view(&ws, &run_id, "the run to be cancelled", |v| v["status"] == "cancelled").await;
    assert_eq!(view["status"], "cancelled");
    let text = std::fs::read_to_string(&log).expect("the runner's log");
    assert!(text.contains("nudged: a lease was cancelled"), "the cancel came over the socket");
    let cancelled = gateway(&stack).deliveries().iter().filter(|(_, m)| m.contains("\"cancel\"")).count();
    assert!(cancelled >= 1, "a cancel nudge was posted");
    eprintln!("push cancel: the step was gone {stopped_after:?} after the cancel request (heartbeats every 60 s)");
    runner.stop().await;
}
