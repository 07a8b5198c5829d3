//! Every limit a client can reach is a 400 with a stable code, checked before
//! anything is written (`baton_domain::limits`, the definition's limits):
//! never a 500 from an AWS limit met later, never a panic. docs/limits.md
//! lists each limit with the test here that proves it.

use baton_domain::limits::{MAX_INPUTS_BYTES, MAX_MESSAGE_BYTES, MAX_OUTPUTS_BYTES, MAX_TOKEN_EXPIRY_S};
use baton_domain::workflows::definition::{MAX_JOB_SPEC_BYTES, MAX_SNAPSHOT_BYTES, MAX_STEPS_PER_JOB};
use baton_tests::http::Answer;
use baton_tests::TestStack;
use chrono::{Duration as Span, Utc};
use serde_json::{json, Value};

/// The item types a rejected request must not have written.
const WRITTEN: &[&str] = &["run", "attempt", "registration_token", "session", "outbox", "steps"];

async fn counts(stack: &TestStack) -> Vec<usize> {
    let mut counts = Vec::new();
    for kind in WRITTEN {
        counts.push(stack.count_items(kind).await);
    }
    counts
}

fn assert_refused(answer: &Answer, code: &str, what: &str) {
    assert_eq!((answer.status, answer.code()), (400, code), "{what}: {}", answer.body);
    assert!(answer.body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}: a message");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_routes_refuse_what_cannot_be_stored_and_write_nothing() {
    let stack = TestStack::start().await;
    let admin = stack.admin_token.clone();
    let before = counts(&stack).await;

    // Bodies must be JSON objects, even where every field is optional.
    for body in ["[]", "false", "\"x\"", "1"] {
        let answer = stack
            .send(reqwest::Method::POST, "/v1/workspaces/ws1/registration-tokens", &admin, Some(body.into()))
            .await;
        assert_refused(&answer, "invalid-request", body);
    }
    // Workspace ids: no key separator, no control characters, bounded.
    let long = "w".repeat(3000);
    for ws in ["a%23b", "a%0Ab", "a%2Fb", "-ws", long.as_str()] {
        let answer = stack.post(&format!("/v1/workspaces/{ws}/registration-tokens"), &admin, json!({})).await;
        assert_refused(&answer, "invalid-request", ws);
        let answer = stack.post(&format!("/v1/workspaces/{ws}/runs"), &admin, json!({"definition": "jobs: {}"})).await;
        assert_refused(&answer, "invalid-request", ws);
    }
    // Token expiry: a second to a year (8.3e12 s used to overflow and abort).
    for expires in [0, MAX_TOKEN_EXPIRY_S + 1, 8_300_000_000_000, u64::MAX] {
        let answer =
            stack.post("/v1/workspaces/ws1/registration-tokens", &admin, json!({"expires_in_s": expires})).await;
        assert_refused(&answer, "invalid-request", &format!("expires_in_s {expires}"));
    }
    let name = "n".repeat(201);
    let answer = stack.post("/v1/workspaces/ws1/registration-tokens", &admin, json!({"name": name})).await;
    assert_refused(&answer, "invalid-request", "a long token name");

    // Runs: inputs bounded and storable.
    let one_job = "name: limits\njobs:\n  a:\n    runs-on: linux\n    steps: [{run: 'true'}]\n";
    let big = json!({"blob": "x".repeat(MAX_INPUTS_BYTES)});
    for (inputs, what) in [(big, "inputs over the limit"), (json!({"n": 1e200}), "a number DynamoDB cannot store")] {
        let answer =
            stack.post("/v1/workspaces/ws1/runs", &admin, json!({"definition": one_job, "inputs": inputs})).await;
        assert_refused(&answer, "invalid-request", what);
    }
    // Definitions inside the byte, job and step limits that would not fit
    // where they are stored: a job spec bloated by the workflow env, a
    // snapshot over its item.
    let env_value = "v".repeat(MAX_JOB_SPEC_BYTES);
    let bloated =
        format!("name: env\nenv:\n  BIG: {env_value}\njobs:\n  a:\n    runs-on: linux\n    steps: [{{run: 'true'}}]\n");
    let answer = stack.post("/v1/workspaces/ws1/runs", &admin, json!({"definition": bloated})).await;
    assert_refused(&answer, "invalid-definition", "a bloated job spec");
    assert!(answer.body["error"]["message"].as_str().unwrap_or_default().contains("`a`"), "{}", answer.body);
    // 180 jobs of 100 one-letter steps: under 256 KB of YAML, a megabyte parsed.
    let mut huge = String::from("name: huge\njobs:\n");
    let steps = vec!["{run: a}"; MAX_STEPS_PER_JOB].join(", ");
    for job in 0..180 {
        huge.push_str(&format!("  j{job}:\n    runs-on: linux\n    steps: [{steps}]\n"));
    }
    assert!(huge.len() < 256 * 1024 && huge.len() > MAX_SNAPSHOT_BYTES / 2, "{} bytes", huge.len());
    let answer = stack.post("/v1/workspaces/ws1/runs", &admin, json!({"definition": huge})).await;
    assert_refused(&answer, "invalid-definition", "a snapshot over its item");

    assert_eq!(counts(&stack).await, before, "no refused request wrote anything");
    // The dev host is still up: a valid request works.
    let answer = stack.post("/v1/workspaces/ws1/registration-tokens", &admin, json!({"expires_in_s": 60})).await;
    assert_eq!(answer.status, 201, "{}", answer.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runner_reports_are_bounded_and_a_refused_one_leaves_the_lease_usable() {
    let stack = TestStack::start().await;
    // Queued ten minutes ago with an hour's timeout: the claim hands the
    // runner what is left of it, not the whole hour.
    let queued = stack.queue_job("ws1", &["linux"], Utc::now() - Span::minutes(10)).await;
    let session = stack.runner("ws1", &["linux"]).await.session_token;
    let claim = stack.claim(&session).await.expect("the job");
    assert!(claim.job.work.timeout_s <= 3000 && claim.job.work.timeout_s > 2900, "{} s left", claim.job.work.timeout_s);
    let (id, token) = (queued.detail.job_execution_id, claim.lease.token.clone());
    let complete = |body: Value| stack.complete(&token, id, body);

    let outputs = json!({"k": "x".repeat(MAX_OUTPUTS_BYTES)});
    for (body, what) in [
        (json!({"status": "succeeded", "outputs": outputs}), "outputs over the limit"),
        (json!({"status": "succeeded", "outputs": {"n": 1e200}}), "an output DynamoDB cannot store"),
        (json!({"status": "succeeded", "message": "m".repeat(MAX_MESSAGE_BYTES + 1)}), "a long message"),
        (json!([{"status": "succeeded"}]), "an array body"),
    ] {
        assert_refused(&complete(body).await, "invalid-request", what);
    }
    // Step reports: every step id a job may have (Baton derives them from
    // the execution: `ids::step_id`), then an id of no step of the job,
    // refused before anything is recorded. (Running: no report settles it.)
    for i in 0..MAX_STEPS_PER_JOB {
        let path = format!("/v1/runners/leases/{id}/steps/{}", baton_domain::ids::step_id(id, i));
        let answer = stack.post(&path, &token, json!({"status": "running"})).await;
        assert_eq!(answer.status, 200, "step {i}: {}", answer.body);
    }
    for unknown in [uuid::Uuid::now_v7(), baton_domain::ids::step_id(id, MAX_STEPS_PER_JOB)] {
        let path = format!("/v1/runners/leases/{id}/steps/{unknown}");
        let answer = stack.post(&path, &token, json!({"status": "succeeded", "exit_code": 0})).await;
        assert_eq!((answer.status, answer.code()), (404, "not-found"), "a step of no step of the job: {}", answer.body);
    }
    // Nothing refused touched the lease: it completes.
    let done = complete(json!({"status": "succeeded", "outputs": {"version": "1.2.3"}})).await;
    assert_eq!(done.status, 200, "{}", done.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_valid_definition_runs_to_success_with_the_aws_limits_on() {
    // 256 jobs (the most), each with a 900-character step: 245 KB of YAML,
    // close to the 300 KiB snapshot limit. Every write the functions make
    // meets AWS's limits in the local stack (`aws_limits`).
    let stack = TestStack::start().await;
    let admin = stack.admin_token.clone();
    let script = format!("echo {}", "x".repeat(895));
    let mut yaml = String::from("name: largest\njobs:\n");
    for job in 0..baton_domain::workflows::definition::MAX_JOBS {
        yaml.push_str(&format!("  j{job:03}:\n    runs-on: linux\n    steps:\n      - run: {script}\n"));
    }
    assert!(yaml.len() <= 256 * 1024, "{} bytes of YAML", yaml.len());
    let definition = baton_domain::workflows::parse_definition(&yaml).expect("valid");
    let snapshot = serde_json::to_string(&definition).unwrap().len();
    assert!(snapshot > MAX_SNAPSHOT_BYTES * 4 / 5 && snapshot <= MAX_SNAPSHOT_BYTES, "{snapshot} bytes parsed");
    let created = stack.post("/v1/workspaces/ws1/runs", &admin, json!({ "definition": yaml })).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let run_id = created.body["id"].as_str().unwrap_or_default().to_string();

    let session = stack.runner("ws1", &["linux"]).await.session_token;
    let mut done = std::collections::HashSet::new();
    // A watchdog on progress, not a deadline on the whole drain: the drain's
    // length depends on how busy the shared emulator is (this test is one
    // of many on it); a stall is what must fail.
    let stall = std::time::Duration::from_secs(120);
    let mut last_progress = std::time::Instant::now();
    while done.len() < baton_domain::workflows::definition::MAX_JOBS {
        assert!(last_progress.elapsed() < stall, "no job became claimable in {stall:?} after {}", done.len());
        let Some(claim) = stack.claim(&session).await else {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            continue;
        };
        assert_eq!(claim.job.work.steps[0].run, script, "the spec reaches the runner whole");
        let steps: Vec<Value> =
            claim.job.work.steps.iter().map(|s| json!({"id": s.id, "status": "succeeded", "exit_code": 0})).collect();
        let answer = stack
            .complete(&claim.lease.token, claim.job_execution_id, json!({"status": "succeeded", "steps": steps}))
            .await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert!(done.insert(claim.job.work.key.clone()), "{} claimed twice", claim.job.work.key);
        last_progress = std::time::Instant::now();
    }
    let path = format!("/v1/workspaces/ws1/runs/{run_id}");
    let view = baton_tests::wait_for("the run to succeed", std::time::Duration::from_secs(120), || async {
        let view = stack.get(&path, &admin).await;
        (view.body["status"] == "succeeded").then_some(view.body)
    })
    .await;
    assert_eq!(view["attempts"][0]["jobs"].as_array().map(Vec::len), Some(256));
    eprintln!("largest definition: {} bytes of YAML, {snapshot} bytes parsed, 256 jobs succeeded", yaml.len());
}

/// Claims query every pending label set their runner fits, so a workspace
/// holds queued work for a bounded number of sets: a run needing one more
/// is refused with 409 and writes nothing; sets already pending, and other
/// workspaces, are unaffected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_with_work_queued_for_the_most_label_sets_refuses_a_run_needing_another() {
    use baton_domain::limits::MAX_PENDING_LABEL_SETS;
    let stack = TestStack::start().await;
    let stack = &stack;
    let now = Utc::now();
    let facts = futures::future::join_all((0..MAX_PENDING_LABEL_SETS).map(|i| {
        let label = format!("pool-{i}");
        let fact = baton_tests::runners::queued_fact("ws1", &[label.as_str()], now);
        async move { stack.publish(&fact).await }
    }));
    facts.await;
    baton_tests::wait_for("every label set registered", std::time::Duration::from_secs(120), || async {
        (stack.store.label_sets("ws1").await.ok()?.len() == MAX_PENDING_LABEL_SETS).then_some(())
    })
    .await;
    let run = move |workspace: &str, labels: &str| {
        let definition = format!("jobs:\n  a:\n    runs-on: [{labels}]\n    steps: [{{run: 'true'}}]\n");
        let path = format!("/v1/workspaces/{workspace}/runs");
        let admin = stack.admin_token.clone();
        async move { stack.post(&path, &admin, json!({ "definition": definition })).await }
    };
    let before = counts(stack).await;
    let refused = run("ws1", "gpu").await;
    assert_eq!((refused.status, refused.code()), (409, "too-many-label-sets"), "{}", refused.body);
    assert_eq!(counts(stack).await, before, "a refused run wrote");
    let same_set = run("ws1", "pool-7").await;
    assert_eq!(same_set.status, 201, "a set with pending work already: {}", same_set.body);
    let other_workspace = run("ws2", "gpu").await;
    assert_eq!(other_workspace.status, 201, "{}", other_workspace.body);
}
