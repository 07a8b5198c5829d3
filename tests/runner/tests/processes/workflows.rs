//! Real YAML workflows through the whole local stack: a run is created over
//! the HTTP API (or with the `baton` CLI), orchestrated by Step Functions on
//! the emulator, its jobs are enqueued, claimed and executed by real
//! `baton-runner` processes running shell steps, and the results come back
//! through the orchestration to the run view, which every test asserts on.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::*;
use baton_tests::http::Answer;
use baton_tests::runs::{job_in, log_texts, Identified, RUN_WAIT};
use baton_tests::{wait_for, workspace, TestStack, WAIT};
use chrono::{DateTime, Duration as Span, Utc};
use serde_json::{json, Value};

/// Workflows these tests share with the domain's and the integration
/// tests: one definition of each, in the domain's fixtures.
const MATRIX: &str = include_str!("../../../../domain/tests/fixtures/workflows/matrix.yml");
const RELEASE_SIGN_OFF: &str = include_str!("../../../../domain/tests/fixtures/workflows/release_sign_off.yml");
const MATRIX_FROM_OUTPUTS: &str = include_str!("../../../../domain/tests/fixtures/workflows/matrix_from_outputs.yml");

/// The lease settings of [`fast_lease_stack`].
const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);
const LEASE_DURATION_S: i64 = 3;

// ---- the operator side: HTTP API and `baton` CLI ----

/// The only execution of job `key` of `attempt`.
fn execution_of<'a>(view: &'a Value, attempt: u32, key: &str) -> &'a Value {
    let executions = job_in(view, attempt, key)["executions"].as_array().expect("executions");
    assert_eq!(executions.len(), 1, "one execution of {key}: {executions:#?}");
    &executions[0]
}

fn time(value: &Value) -> DateTime<Utc> {
    value.as_str().and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("a timestamp, got {value}"))
}

/// `(status, exit_code)` of each step of an execution, in order.
fn step_outcomes(execution: &Value) -> Vec<(String, Value)> {
    execution["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| (s["status"].as_str().unwrap_or_default().to_string(), s["exit_code"].clone()))
        .collect()
}

/// Starts a `linux` runner of the scene's, creates the run of `workflow`,
/// and waits for its step to write its process group to `$SHARED/pgid`:
/// the runner, the run's id and the group (killed, if still there, when
/// its guard drops).
async fn run_to_step(scene: &Scene, workflow: &str) -> (Runner, String, GroupGuard) {
    let (runner, run_id) = scene.run(workflow, "linux", &[]).await;
    let pgid = pgid_from(&scene.shared.join("pgid")).await;
    (runner, run_id, GroupGuard(pgid))
}

/// Runs `workflow` (its job `long` running a step that hangs on its first
/// try, writing its process group to `$SHARED/pgid`, and passes at once on
/// the next) on a first runner, SIGKILLs that runner while `long` runs,
/// and has the reaper expire the lost lease: the run's id and the lost
/// execution's.
async fn lose_runner_mid_job(scene: &Scene, workflow: &str) -> (String, String) {
    let (mut first, run_id, orphans) = run_to_step(scene, workflow).await;
    let Scene { stack, ws, .. } = scene;
    let view =
        stack.wait_view(ws, &run_id, "long to be running", |v| job_in(v, 1, "long")["status"] == "running").await;
    let lost_execution = execution_of(&view, 1, "long")["id"].as_str().unwrap().to_string();
    first.signal(libc::SIGKILL);
    assert!(!first.exited(WAIT).await.success());
    // The orphaned step: on a real machine it would have gone with the runner's host.
    kill_group(orphans.0);
    // The reaper, as if past the last heartbeat plus the lease (and the
    // first-heartbeat grace): repeated until it took the lease.
    wait_for("the reaper to expire the lost lease", WAIT, || async {
        let reaped = stack.reap_at(Utc::now() + Span::seconds(LEASE_DURATION_S + 1)).await;
        let expired = stack
            .facts("baton.runners.job.lease_expired")
            .iter()
            .any(|d| d["job_execution_id"] == lost_execution.as_str());
        (reaped > 0 || expired).then_some(())
    })
    .await;
    (run_id, lost_execution)
}

/// Asserts job `key` of `attempt` succeeded through one execution whose
/// `steps` steps all exited 0.
fn assert_job_succeeded(view: &Value, attempt: u32, key: &str, steps: usize) {
    let job = job_in(view, attempt, key);
    assert_eq!(job["status"], "succeeded", "{job:#}");
    let execution = execution_of(view, attempt, key);
    assert_eq!(execution["status"], "succeeded", "{execution:#}");
    assert!(execution["runner_session_id"].is_string(), "{execution:#}");
    assert_eq!(step_outcomes(execution), vec![("succeeded".to_string(), json!(0)); steps], "{execution:#}");
}

// ---- the tests ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_diamond_workflow_runs_each_job_after_its_needs_and_succeeds() {
    let scene = Scene::start().await;
    // Each job records that it ran in `order` and checks what the jobs it
    // needs wrote; a job started too early fails. `LEVEL` checks that a
    // step's env overrides its job's, which overrides the workflow's.
    let (mut runner, run_id) =
        scene.run(include_str!("fixtures/diamond.yml"), "linux,x64", &["--concurrency", "2"]).await;
    let Scene { stack, ws, shared, .. } = scene;

    let view = stack.wait_run_status(&ws, &run_id, "succeeded").await;
    assert_eq!(view["current_attempt"], 1);
    assert_job_succeeded(&view, 1, "build", 2);
    assert_job_succeeded(&view, 1, "test-a", 1);
    assert_job_succeeded(&view, 1, "test-b", 1);
    assert_job_succeeded(&view, 1, "report", 1);
    let names: Vec<_> =
        execution_of(&view, 1, "build")["steps"].as_array().unwrap().iter().map(|s| &s["name"]).collect();
    assert_eq!(names, vec!["compile", "inspect"]);
    assert_eq!(job_in(&view, 1, "report")["needs"], json!(["test-a", "test-b"]));

    // The dependencies held: each job started after its needs finished.
    for (job, need) in [("test-a", "build"), ("test-b", "build"), ("report", "test-a"), ("report", "test-b")] {
        let started = time(&execution_of(&view, 1, job)["started_at"]);
        let need_done = time(&execution_of(&view, 1, need)["finished_at"]);
        assert!(started >= need_done, "{job} started at {started} before {need} finished at {need_done}");
    }
    let order = std::fs::read_to_string(shared.join("order")).expect("the jobs wrote the order file");
    let order: Vec<_> = order.lines().collect();
    assert_eq!(order.len(), 4, "{order:?}");
    assert_eq!((order[0], order[3]), ("build", "report"), "{order:?}");
    assert_eq!(std::fs::read_to_string(shared.join("report.out")).unwrap(), "a-passed\nb-passed\n");
    stop_and_check_facts(&stack, &mut [&mut runner]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_step_fails_its_job_skips_the_dependents_and_an_always_job_still_runs() {
    let scene = Scene::start().await;
    let (mut runner, run_id) = scene.run(include_str!("fixtures/broken.yml"), "linux", &[]).await;
    let Scene { stack, ws, shared, .. } = scene;

    let view = stack.wait_run_status(&ws, &run_id, "failed").await;
    let build = execution_of(&view, 1, "build");
    assert_eq!(job_in(&view, 1, "build")["status"], "failed");
    assert_eq!((&build["status"], &build["status_reason"]), (&json!("failed"), &json!("step_failed")), "{build:#}");
    assert_eq!(
        step_outcomes(build),
        vec![("succeeded".into(), json!(0)), ("failed".into(), json!(3)), ("skipped".into(), Value::Null)]
    );
    for key in ["test", "deploy"] {
        let job = job_in(&view, 1, key);
        assert_eq!(job["status"], "skipped", "{job:#}");
        assert_eq!(job["status_reason"], "condition_rejected", "{job:#}");
        assert!(
            job["executions"].as_array().unwrap().iter().all(|e| e["started_at"].is_null()),
            "a skipped job never runs: {job:#}"
        );
    }
    assert_job_succeeded(&view, 1, "report", 1);
    assert!(shared.join("reported").exists(), "the always() job ran on the runner");
    for never in ["packaged", "tested", "deployed"] {
        assert!(!shared.join(never).exists(), "{never}: a skipped step or job ran");
    }
    stop_and_check_facts(&stack, &mut [&mut runner]).await;
}

/// `continue-on-error` on a job and on a step, run by a real runner: the
/// step's failure lets the next step run; the job's failure leaves the run
/// `succeeded`, the job `succeeded` marked `soft_failed`, and its dependant
/// reads `needs.lint.result` 'success' and `needs.lint.outcome` 'failure'.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_and_a_step_with_continue_on_error_fail_visibly_and_the_run_succeeds() {
    let scene = Scene::start().await;
    let (mut runner, run_id) = scene.run(include_str!("fixtures/tolerant.yml"), "linux", &[]).await;
    let Scene { stack, ws, shared, .. } = scene;

    let view = stack.wait_run_status(&ws, &run_id, "succeeded").await;
    let lint = job_in(&view, 1, "lint");
    assert_eq!(
        (&lint["status"], &lint["status_reason"], &lint["soft_failed"]),
        (&json!("succeeded"), &json!("step_failed"), &json!(true)),
        "{lint:#}"
    );
    let lint_run = execution_of(&view, 1, "lint");
    assert_eq!(lint_run["status"], "failed", "the execution says what happened: {lint_run:#}");
    assert_eq!(step_outcomes(lint_run), vec![("failed".into(), json!(4)), ("skipped".into(), Value::Null)]);
    assert!(!shared.join("lint-after").exists(), "a job's continue-on-error does not run the steps after a failure");

    let build = job_in(&view, 1, "build");
    assert_eq!((&build["status"], &build["soft_failed"]), (&json!("succeeded"), &Value::Null), "{build:#}");
    let build_run = execution_of(&view, 1, "build");
    assert_eq!(step_outcomes(build_run), vec![("failed".into(), json!(7)), ("succeeded".into(), json!(0))]);
    assert_eq!(build_run["steps"][0]["soft_failed"], true, "{build_run:#}");
    assert!(shared.join("compiled").exists(), "the step after a continue-on-error step ran");

    assert_eq!(job_in(&view, 1, "report")["outputs"]["seen"], "success/failure/success");
    let lint_facts: Vec<Value> =
        stack.facts("baton.workflows.job.terminated").into_iter().filter(|f| f["job_key"] == "lint").collect();
    assert!(!lint_facts.is_empty());
    assert!(lint_facts.iter().all(|f| f["soft_failed"] == true && f["status"] == "succeeded"), "{lint_facts:#?}");

    let shown = baton(&stack, &["run", "get", &run_id, "--workspace", &ws]).await;
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains("succeeded (soft-failed: step_failed)"), "{text}");
    assert!(text.contains("[continued]"), "{text}");
    stop_and_check_facts(&stack, &mut [&mut runner]).await;
}

/// `retry:` by exit code, with a real runner: a step exiting 75 (a flaky
/// service, say) is tried again as a new execution and passes; a step
/// exiting 3 under the same policy is not retried and fails its run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_is_retried_on_the_exit_codes_it_names_only_on_those_and_after_its_backoff() {
    let scene = Scene::start().await;
    let (mut runner, run_id) = scene.run(include_str!("fixtures/retried.yml"), "linux", &[]).await;
    let Scene { stack, ws, shared, .. } = scene;

    let view = stack.wait_run_status(&ws, &run_id, "failed").await;
    let flaky = job_in(&view, 1, "flaky");
    assert_eq!((&flaky["status"], &flaky["max_retries"]), (&json!("succeeded"), &json!(2)), "{flaky:#}");
    let tries: Vec<(Value, Value)> = flaky["executions"]
        .as_array()
        .expect("executions")
        .iter()
        .map(|e| (e["status"].clone(), e["steps"][0]["exit_code"].clone()))
        .collect();
    assert_eq!(tries, vec![(json!("failed"), json!(75)), (json!("succeeded"), json!(0))], "{flaky:#}");
    // `backoff: 2`: the retry was queued no sooner than 2 s after the try it replaces ended.
    let executions = flaky["executions"].as_array().unwrap();
    let waited = time(&executions[1]["queued_at"]) - time(&executions[0]["finished_at"]);
    assert!(waited >= Span::seconds(2), "the retry waited {waited} for its backoff: {flaky:#}");
    let ran = std::fs::read_to_string(shared.join("flaky-tries")).unwrap();
    let ids: Vec<&str> = flaky["executions"].as_array().unwrap().iter().filter_map(|e| e["id"].as_str()).collect();
    assert_eq!(ran.lines().collect::<Vec<_>>(), ids, "each try ran as its own execution");
    // Each try's log: the latest by default, an earlier one by its id.
    let flaky_job = flaky["id"].as_str().unwrap();
    let log_of = |execution: Option<&str>| {
        let query = execution.map(|e| format!("?execution={e}")).unwrap_or_default();
        let path = format!("/v1/workspaces/{ws}/runs/{run_id}/jobs/{flaky_job}/logs{query}");
        let stack = &stack;
        async move { log_texts(&stack.get_ok(&path, &stack.admin_token).await) }
    };
    assert_eq!(log_of(None).await, [format!("try {}", ids[1])]);
    assert_eq!(log_of(Some(ids[0])).await, [format!("try {}", ids[0])]);
    let broken = job_in(&view, 1, "broken");
    assert_eq!(broken["status"], "failed", "{broken:#}");
    assert_eq!(broken["executions"].as_array().unwrap().len(), 1, "exit 3 is not retried: {broken:#}");
    assert_eq!(std::fs::read_to_string(shared.join("broken-tries")).unwrap(), "x\n");

    let flaky_id = flaky["id"].as_str().unwrap();
    let mut queued: Vec<u64> = stack
        .facts("baton.workflows.job_execution.queued")
        .iter()
        .filter(|f| f["job_id"] == flaky_id)
        .filter_map(|f| f["retry"].as_u64())
        .collect();
    queued.sort();
    queued.dedup();
    assert_eq!(queued, vec![0, 1], "the retry is a fact of its own");
    let shown = baton(&stack, &["run", "get", &run_id, "--workspace", &ws]).await;
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains("[try 2 of 3]"), "{text}");
    stop_and_check_facts(&stack, &mut [&mut runner]).await;
}

/// `retry:` on runner_lost: the runner is SIGKILLed mid-job, the reaper
/// expires its lease, and the job runs again, as a new execution, on the
/// runner still there; the run succeeds without a rerun.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_runner_is_killed_is_retried_on_another_runner_and_the_run_succeeds() {
    let scene = Scene::on(fast_lease_stack().await).await;
    let (run_id, lost_execution) = lose_runner_mid_job(&scene, include_str!("fixtures/lost_and_found.yml")).await;
    let Scene { stack, ws, token, .. } = scene;
    // Only now a second runner: the retry cannot go back to the first.
    let mut second = Runner::start(&stack, &token, "linux", &[]);

    let view = stack.wait_run_status(&ws, &run_id, "succeeded").await;
    let executions = job_in(&view, 1, "long")["executions"].as_array().expect("executions").clone();
    assert_eq!(executions.len(), 2, "{executions:#?}");
    assert_eq!(executions[0]["id"], lost_execution.as_str());
    assert_eq!((&executions[0]["status"], &executions[0]["status_reason"]), (&json!("failed"), &json!("runner_lost")));
    assert_eq!(executions[1]["status"], "succeeded");
    assert_ne!(executions[1]["runner_session_id"], executions[0]["runner_session_id"], "another runner ran it");
    assert_eq!(view["attempts"].as_array().unwrap().len(), 1, "no rerun was needed");
    stop_and_check_facts(&stack, &mut [&mut second]).await;
}

/// `priority` set per run through an input: of two jobs queued together,
/// the one the run made urgent is claimed first by the one runner; without
/// the input the same definition runs them in queue order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_made_urgent_by_its_runs_input_is_claimed_before_the_job_queued_with_it() {
    let Scene { stack, ws, token, .. } = Scene::start().await;
    for (urgency, expected) in [("10", "release\nroutine\n"), ("0", "routine\nrelease\n")] {
        // A directory of each run's own: each writes its `order` afresh.
        let shared = scratch();
        let yaml = with_shared(include_str!("fixtures/prioritised.yml"), &shared);
        let body = json!({"definition": yaml, "inputs": {"urgency": urgency}});
        let Answer { status, body: created } =
            stack.post(&format!("/v1/workspaces/{ws}/runs"), &stack.admin_token, body).await;
        assert_eq!(status, 201, "{created:#}");
        let run_id = created.id();
        // Both queued before any runner exists: the order is the queue's.
        stack
            .wait_view(&ws, &run_id, "both jobs queued", |v| {
                ["routine", "release"].iter().all(|key| job_in(v, 1, key)["status"] == "queued")
            })
            .await;
        let mut runner = Runner::start(&stack, &token, "linux", &["--concurrency", "1"]);
        stack.wait_run_status(&ws, &run_id, "succeeded").await;
        assert_eq!(std::fs::read_to_string(shared.join("order")).unwrap(), expected, "urgency {urgency}");
        runner.stop().await;
    }
    stack.assert_all_facts_valid();
}

/// `concurrency:` with real runners (two, so a run held back is held by its
/// group, not by capacity): a second run of the group waits while the
/// first runs, a third replaces it (it ends `cancelled`, reason
/// `concurrency_replaced`) and runs once the first is done, while a run of
/// another group runs at once; then `cancel-in-progress` stops the running
/// run's step within a heartbeat and the new run takes the group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_of_one_concurrency_group_take_turns_and_cancel_in_progress_stops_the_running_one() {
    let Scene { stack, ws, token, shared } = Scene::on(fast_lease_stack().await).await;
    let yaml = with_shared(include_str!("fixtures/concurrency_deploy.yml"), &shared);
    let create = |name: &str, env: &str, urgent: bool| {
        let body = json!({"definition": yaml, "inputs": {"name": name, "env": env, "urgent": urgent}});
        let stack = &stack;
        let path = format!("/v1/workspaces/{ws}/runs");
        async move {
            let Answer { status, body: created } = stack.post(&path, &stack.admin_token, body).await;
            assert_eq!(status, 201, "{created:#}");
            created.id()
        }
    };
    let started = |name: &str| shared.join(format!("started-{name}")).exists();
    let go = |name: &str| std::fs::write(shared.join(format!("go-{name}")), "").expect("go");
    let mut runners = [Runner::start(&stack, &token, "linux", &[]), Runner::start(&stack, &token, "linux", &[])];

    let first = create("first", "prod", false).await;
    stack.wait_view(&ws, &first, "first to run", |v| job_in(v, 1, "deploy")["status"] == "running").await;
    let second = create("second", "prod", false).await;
    let view = stack
        .wait_view(&ws, &second, "second to wait for the group", |v| {
            v["attempts"][0]["concurrency"] == json!({"group": "deploy-prod", "waiting": true})
        })
        .await;
    assert_eq!(job_in(&view, 1, "deploy")["status"], "pending", "{view:#}");
    // Another group's run runs now, on the other runner.
    let other = create("other", "staging", false).await;
    go("other");
    stack.wait_run_status(&ws, &other, "succeeded").await;
    // A third run of the group replaces the waiting second one.
    let third = create("third", "prod", false).await;
    let replaced = stack.wait_run_status(&ws, &second, "cancelled").await;
    assert_eq!(replaced["attempts"][0]["status_reason"], "concurrency_replaced", "{replaced:#}");
    assert_eq!(job_in(&replaced, 1, "deploy")["status"], "cancelled");
    assert!(!started("second"), "the replaced run never ran");
    let watched = text(&baton(&stack, &["run", "get", &third, "--workspace", &ws]).await.stdout);
    assert!(watched.contains("waiting for concurrency group deploy-prod"), "{watched}");
    // The first ends; the third takes the group.
    assert!(!started("third"));
    go("first");
    stack.wait_run_status(&ws, &first, "succeeded").await;
    stack.wait_view(&ws, &third, "third to run", |v| job_in(v, 1, "deploy")["status"] == "running").await;

    // An urgent run cancels the running third: its step is stopped.
    let pgid = pgid_from(&shared.join("pgid-third")).await;
    let _leftovers = GroupGuard(pgid);
    let urgent = create("urgent", "prod", true).await;
    let cancelled = stack.wait_run_status(&ws, &third, "cancelled").await;
    assert_eq!(cancelled["attempts"][0]["status_reason"], "concurrency_replaced", "{cancelled:#}");
    group_gone(pgid, WAIT).await;
    go("urgent");
    let view = stack.wait_run_status(&ws, &urgent, "succeeded").await;
    let urgent_queued = time(&execution_of(&view, 1, "deploy")["queued_at"]);
    let third_view = stack.run_view(&ws, &third).await;
    let third_ended = time(&execution_of(&third_view, 1, "deploy")["finished_at"]);
    assert!(urgent_queued >= third_ended, "the urgent run started only once the cancelled one was done");
    for runner in &mut runners {
        assert!(runner.child.try_wait().unwrap().is_none(), "runners survive a replaced run");
        runner.stop().await;
    }
    stack.assert_all_facts_valid();
}

/// `strategy.matrix` with real runners: a 2×3 matrix less one exclude plus
/// one include is six legs named by their values, never more than
/// `max-parallel: 2` of them running at once (counted from the executions'
/// start and end), each leg's outputs reaching the job that needs the
/// matrix, keyed by leg. Then `fail-fast`: a failing leg cancels its
/// running siblings, which their runners stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_matrix_runs_its_legs_within_max_parallel_hands_on_every_legs_outputs_and_fails_fast() {
    // Heartbeats every second: the cancelled legs' runners hear it at once.
    let Scene { stack, ws, token, .. } = Scene::on(fast_lease_stack().await).await;
    let mut x64 = Runner::start(&stack, &token, "linux,x64", &["--concurrency", "4"]);
    let mut arm = Runner::start(&stack, &token, "linux,arm64", &["--concurrency", "4"]);
    let run_id = stack.create_run(&ws, MATRIX).await.id();
    let view = stack.wait_run_status(&ws, &run_id, "succeeded").await;
    let jobs = view["attempts"][0]["jobs"].as_array().expect("jobs").clone();
    let legs: Vec<&str> = jobs.iter().filter_map(|j| j["key"].as_str()).filter(|k| k.starts_with("test")).collect();
    assert_eq!(
        legs,
        [
            "test (x64, stable)",
            "test (x64, beta)",
            "test (x64, nightly)",
            "test (arm64, stable)",
            "test (arm64, beta)",
            "test (x64, 1.70)"
        ]
    );
    // At each leg's start, how many legs had started and not yet ended.
    let spans: Vec<(DateTime<Utc>, DateTime<Utc>)> = jobs
        .iter()
        .filter(|j| j["key"].as_str().is_some_and(|k| k.starts_with("test")))
        .map(|j| (time(&j["executions"][0]["started_at"]), time(&j["executions"][0]["finished_at"])))
        .collect();
    let most = spans.iter().map(|(start, _)| spans.iter().filter(|(s, e)| s <= start && start < e).count()).max();
    assert!(most.is_some_and(|m| m <= 2), "max-parallel 2 exceeded: {most:?} of {spans:?}");
    let report = job_in(&view, 1, "report");
    let all: Value = serde_json::from_str(report["outputs"]["all"].as_str().expect("all")).expect("a JSON object");
    assert_eq!(all["test (arm64, beta)"], "arm64/beta");
    assert_eq!(all["test (x64, 1.70)"], "x64/1.70");
    assert_eq!(all.as_object().map(|o| o.len()), Some(6), "{all}");
    assert_eq!(report["outputs"]["result"], "success");

    // fail-fast (the default): one leg fails at once, the others are stopped.
    let run_id = stack.create_run(&ws, include_str!("fixtures/fail_fast.yml")).await.id();
    let view = stack
        .wait_view(&ws, &run_id, "every leg ended", |v| {
            v["status"] == "failed"
                && v["attempts"][0]["jobs"].as_array().is_some_and(|jobs| {
                    jobs.iter().all(|j| ["failed", "cancelled"].contains(&j["status"].as_str().unwrap_or_default()))
                })
        })
        .await;
    assert_eq!(job_in(&view, 1, "test (2)")["status"], "failed");
    for leg in ["test (1)", "test (3)"] {
        let job = job_in(&view, 1, leg);
        assert_eq!((&job["status"], &job["status_reason"]), (&json!("cancelled"), &json!("fail_fast")), "{job:#}");
    }
    stop_and_check_facts(&stack, &mut [&mut x64, &mut arm]).await;
}

/// Matrices decided by what a real step wrote: `plan` writes a matrix and a
/// list to `$GITHUB_OUTPUT`; `test`'s legs are made from the one, each on
/// the runner its `runs-on` asks for, and `package`'s from the other, after
/// them; `report` reads every leg's output. The view shows the legs where
/// the matrix job stood.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_matrix_from_an_earlier_jobs_output_runs_the_legs_that_output_says() {
    let Scene { stack, ws, token, .. } = Scene::start().await;
    let mut x64 = Runner::start(&stack, &token, "linux,x64", &["--concurrency", "2"]);
    let mut arm = Runner::start(&stack, &token, "linux,arm64", &["--concurrency", "2"]);
    let run_id = stack.create_run(&ws, MATRIX_FROM_OUTPUTS).await.id();
    let view = stack.wait_run_status(&ws, &run_id, "succeeded").await;
    let jobs = view["attempts"][0]["jobs"].as_array().expect("jobs").clone();
    let keys: Vec<&str> = jobs.iter().filter_map(|j| j["key"].as_str()).collect();
    assert_eq!(
        keys,
        ["plan", "test (x64, lint)", "test (arm64)", "package (wasm, stable)", "package (musl, stable)", "report"]
    );
    // Each `test` leg ran on a runner with its `os` label.
    let runner_of = |key: &str| execution_of(&view, 1, key)["runner_session_id"].clone();
    assert_ne!(runner_of("test (x64, lint)"), runner_of("test (arm64)"), "{view:#}");
    assert_eq!(job_in(&view, 1, "test (arm64)")["labels"], json!(["arm64", "linux"]));
    let report = job_in(&view, 1, "report");
    let all: Value = serde_json::from_str(report["outputs"]["all"].as_str().expect("all")).expect("a JSON object");
    assert_eq!(all, json!({"test (x64, lint)": "x64+lint", "test (arm64)": "arm64"}));
    assert_eq!(report["outputs"]["result"], "success");
    assert_eq!(job_in(&view, 1, "report")["needs"].as_array().map(Vec::len), Some(4), "{report:#}");
    stop_and_check_facts(&stack, &mut [&mut x64, &mut arm]).await;
}

/// A secret set with the CLI (its value on stdin) reaches the job that
/// names it, masked in its log; a job naming a secret its workspace lacks
/// fails at once, saying which, and runs no step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_set_with_the_cli_reaches_its_job_masked_and_a_missing_one_fails_the_job() {
    use tokio::io::AsyncWriteExt;
    let Scene { stack, ws, token, shared } = Scene::start().await;
    let mut set = tokio::process::Command::new(env!("CARGO_BIN_EXE_baton-under-test"))
        .args(["secret", "set", "DEPLOY_TOKEN", "--workspace", &ws])
        .env("BATON_API", &stack.api)
        .env("BATON_ADMIN_TOKEN", &stack.admin_token)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("baton starts");
    set.stdin.take().expect("stdin").write_all(b"hunter2-s3cr3t\n").await.expect("the value is written");
    let done = set.wait_with_output().await.expect("baton ends");
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let listed = baton(&stack, &["secret", "list", "--workspace", &ws]).await;
    let listed = String::from_utf8_lossy(&listed.stdout).to_string();
    assert!(listed.contains("DEPLOY_TOKEN") && !listed.contains("hunter2"), "{listed}");

    let mut runner = Runner::start(&stack, &token, "linux", &[]);
    let run_id = stack.create_run(&ws, &with_shared(include_str!("fixtures/secrets_deploy.yml"), &shared)).await.id();
    let view = stack.wait_run_status(&ws, &run_id, "failed").await;
    assert_eq!(job_in(&view, 1, "ship")["status"], "succeeded", "{view:#}");
    assert!(shared.join("had-it").exists(), "the job got the value");
    let unsigned = execution_of(&view, 1, "unsigned");
    assert_eq!(unsigned["status"], "failed", "{unsigned:#}");
    assert!(!shared.join("ran-without").exists(), "no step runs without its secret");

    let log_of = |key: &str| {
        let job_id = job_in(&view, 1, key)["id"].as_str().unwrap().to_string();
        let path = format!("/v1/workspaces/{ws}/runs/{run_id}/jobs/{job_id}/logs");
        let stack = &stack;
        async move { log_texts(&stack.get_ok(&path, &stack.admin_token).await) }
    };
    assert_eq!(log_of("ship").await, ["token is ***"], "the runner masks the secret");
    let said = log_of("unsigned").await.join("\n");
    assert!(said.contains("secrets not set in this workspace: SIGNING_KEY"), "{said}");
    let everything = format!("{} {}", serde_json::to_string(&stack.all_facts()).unwrap(), view);
    assert!(!everything.contains("hunter2"), "never in a fact or the view");
    stop_and_check_facts(&stack, &mut [&mut runner]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_killed_mid_job_fails_the_run_as_runner_lost_and_a_failed_rerun_completes_it_elsewhere() {
    let scene = Scene::on(fast_lease_stack().await).await;
    // First attempt: the step hangs (and is lost with its runner). Second
    // attempt: the marker of the first makes it pass at once.
    let (run_id, lost_execution) = lose_runner_mid_job(&scene, include_str!("fixtures/flaky.yml")).await;
    let Scene { stack, ws, token, shared } = scene;

    let view = stack.wait_run_status(&ws, &run_id, "failed").await;
    let lost = execution_of(&view, 1, "long");
    assert_eq!((&lost["status"], &lost["status_reason"]), (&json!("failed"), &json!("runner_lost")), "{lost:#}");
    assert_eq!(job_in(&view, 1, "long")["status"], "failed");
    assert_job_succeeded(&view, 1, "prepare", 1);
    let lost_session = lost["runner_session_id"].clone();

    let rerun = baton(&stack, &["run", "rerun", "--workspace", &ws, &run_id, "--mode", "failed"]).await;
    assert!(rerun.status.success(), "{}", text(&rerun.stderr));
    assert!(text(&rerun.stdout).contains("attempt 2"), "{}", text(&rerun.stdout));
    let mut second = Runner::start(&stack, &token, "linux", &[]);

    let view = stack
        .wait_view(&ws, &run_id, "attempt 2 to succeed", |v| v["current_attempt"] == 2 && v["status"] == "succeeded")
        .await;
    let attempts = view["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2);
    assert_eq!((&attempts[1]["status"], &attempts[1]["rerun_mode"]), (&json!("succeeded"), &json!("failed")));
    assert_job_succeeded(&view, 2, "long", 1);
    assert_ne!(execution_of(&view, 2, "long")["runner_session_id"], lost_session, "another runner ran it");
    let prepare = job_in(&view, 2, "prepare");
    assert_eq!((&prepare["status"], &prepare["carried_over"]), (&json!("succeeded"), &json!(true)), "{prepare:#}");
    assert_eq!(
        std::fs::read_to_string(shared.join("prepared")).unwrap(),
        "1\n",
        "the carried-over job did not run again"
    );
    // Attempt 1 keeps its history.
    assert_eq!(attempts[0]["status"], "failed");
    let lost = execution_of(&view, 1, "long");
    assert_eq!((&lost["status"], &lost["status_reason"]), (&json!("failed"), &json!("runner_lost")), "{lost:#}");
    assert_eq!(lost["id"], lost_execution.as_str());
    assert_eq!(job_in(&view, 1, "long")["status"], "failed");
    stop_and_check_facts(&stack, &mut [&mut second]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_stops_the_running_step_within_a_heartbeat() {
    let scene = Scene::on(fast_lease_stack().await).await;
    let (mut runner, run_id, leftovers) = run_to_step(&scene, include_str!("fixtures/long.yml")).await;
    let Scene { stack, ws, shared, .. } = scene;
    let pgid = leftovers.0;
    let view =
        stack.wait_view(&ws, &run_id, "soak to be running", |v| job_in(v, 1, "soak")["status"] == "running").await;
    let execution: uuid::Uuid = execution_of(&view, 1, "soak")["id"].as_str().unwrap().parse().unwrap();

    let asked = Instant::now();
    let Answer { status, body } =
        stack.post(&format!("/v1/workspaces/{ws}/runs/{run_id}/cancel"), &stack.admin_token, json!({})).await;
    assert_eq!(status, 202, "{body:#}");
    // The cancel reaches the lease through the pipeline (emulator time) and
    // flags it; from then on the runner must see it on its next heartbeat.
    // Watch both the flag and the step's process group.
    let deadline = Instant::now() + WAIT;
    let mut flagged_at: Option<DateTime<Utc>> = None;
    loop {
        if flagged_at.is_none() {
            if let Some(lease) = stack.store.lease(execution).await.expect("read the lease") {
                flagged_at = lease.cancel_requested_at;
            }
        }
        if baton_runner::process::live_members(pgid).is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "the step still runs {WAIT:?} after the cancel");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let gone_at = Utc::now();
    let view = stack.wait_run_status(&ws, &run_id, "cancelled").await;

    // If the runner completed (which ends the lease) between two looks, the
    // execution's cancellation instant stands in: it precedes the flag.
    let since = flagged_at.unwrap_or_else(|| time(&execution_of(&view, 1, "soak")["finished_at"]));
    let stopped_after = (gone_at - since).to_std().unwrap_or_default();
    // One heartbeat interval, plus the time to act on it and slack for a
    // loaded machine (the step dies on SIGTERM, well within the 2 s grace).
    let budget = HEARTBEAT_INTERVAL + Duration::from_secs(5);
    assert!(stopped_after <= budget, "the step stopped {stopped_after:?} after the lease was flagged");
    eprintln!(
        "cancel: step gone {:?} after the request, {stopped_after:?} after the flag (seen: {})",
        asked.elapsed(),
        flagged_at.is_some()
    );

    let job = job_in(&view, 1, "soak");
    assert_eq!((&job["status"], &job["status_reason"]), (&json!("cancelled"), &json!("run_cancelled")), "{job:#}");
    let cancelled = execution_of(&view, 1, "soak");
    assert_eq!(
        (&cancelled["status"], &cancelled["status_reason"]),
        (&json!("cancelled"), &json!("run_cancelled")),
        "the runner's failed complete does not undo the cancel: {cancelled:#}"
    );
    assert!(!shared.join("after").exists(), "the step after the cancelled one never ran");
    // The runner reported the stopped job: failed, the rest skipped.
    let done = completed(&stack, execution).await;
    assert_eq!(done["status"], "failed", "{done:#}");
    assert_eq!(
        (&done["steps"][0]["exit_code"], &done["steps"][1]["status"]),
        (&json!(128 + libc::SIGTERM), &json!("skipped"))
    );
    let view = stack.run_view(&ws, &run_id).await;
    assert_eq!((&view["status"], &job_in(&view, 1, "soak")["status"]), (&json!("cancelled"), &json!("cancelled")));
    // The failed complete after the cancel is not a failure to retry
    // (`retry: 2`): one execution.
    let soak = job_in(&view, 1, "soak");
    assert_eq!(soak["executions"].as_array().map(Vec::len), Some(1), "a cancelled job is never retried: {soak:#}");
    // It is back to claiming: still alive.
    assert!(runner.child.try_wait().unwrap().is_none(), "the runner survives a cancelled job");
    stop_and_check_facts(&stack, &mut [&mut runner]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_with_labels_no_runner_has_stay_queued_while_the_others_run_and_finish() {
    let Scene { stack, ws, token, .. } = Scene::start().await;
    let mut runner = Runner::start(&stack, &token, "linux,x64", &[]);
    let run_id = stack.create_run(&ws, include_str!("fixtures/mixed.yml")).await.id();

    // `train` was queued at the start; `test` only after `build` finished.
    let view = stack
        .wait_view(&ws, &run_id, "build and test to succeed", |v| {
            job_in(v, 1, "build")["status"] == "succeeded" && job_in(v, 1, "test")["status"] == "succeeded"
        })
        .await;
    assert_job_succeeded(&view, 1, "build", 1);
    assert_job_succeeded(&view, 1, "test", 1);
    let train = execution_of(&view, 1, "train");
    assert_eq!(job_in(&view, 1, "train")["status"], "queued");
    assert_eq!(train["status"], "queued", "{train:#}");
    assert!(train["queued_at"].is_string() && train["started_at"].is_null(), "{train:#}");
    assert!(time(&train["queued_at"]) <= time(&execution_of(&view, 1, "test")["queued_at"]));
    assert_eq!(view["status"], "running", "the run waits for the gpu job");
    let pending = stack.pending_of(&ws).await;
    assert_eq!(pending.len(), 1, "only the gpu job waits in the queue: {pending:?}");

    // Cancelling the run removes the job nobody could take from the queue.
    let Answer { status, body } =
        stack.post(&format!("/v1/workspaces/{ws}/runs/{run_id}/cancel"), &stack.admin_token, json!({})).await;
    assert_eq!(status, 202, "{body:#}");
    let view = stack.wait_run_status(&ws, &run_id, "cancelled").await;
    assert_eq!(job_in(&view, 1, "train")["status"], "cancelled");
    assert_eq!(job_in(&view, 1, "build")["status"], "succeeded", "finished jobs keep their outcome");
    wait_for("the gpu job to leave the queue", WAIT, || async { stack.pending_of(&ws).await.is_empty().then_some(()) })
        .await;
    runner.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_workflow_in_examples_ci_yml_succeeds_on_a_linux_x64_runner() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ci.yml");
    assert!(file.exists(), "{}", file.display());
    let created = baton(&stack, &["token", "create", "--workspace", &ws]).await;
    assert!(created.status.success(), "{}", text(&created.stderr));
    let token = text(&created.stdout).trim().to_string();
    let mut runner = Runner::start(&stack, &token, "linux,x64", &[]);

    // The README's commands: submit the file, then watch the run to its end.
    let submitted = baton(&stack, &["run", "submit", "--workspace", &ws, &file.display().to_string()]).await;
    assert!(submitted.status.success(), "{}", text(&submitted.stderr));
    let run_id = text(&submitted.stdout).trim().to_string();
    let watched = tokio::time::timeout(
        RUN_WAIT,
        baton(&stack, &["run", "watch", "--workspace", &ws, &run_id, "--interval-s", "1"]),
    )
    .await
    .expect("`baton run watch` ends with the run");
    let lines = text(&watched.stdout);
    assert!(watched.status.success(), "watch exits 0 when the run succeeded:\n{lines}\n{}", text(&watched.stderr));
    assert!(lines.lines().any(|l| l == "run ci #1 (attempt 1): succeeded"), "{lines}");

    let view = stack.run_view(&ws, &run_id).await;
    assert_eq!(view["status"], "succeeded", "{view:#}");
    assert_job_succeeded(&view, 1, "build", 3);
    assert_job_succeeded(&view, 1, "test", 2);
    assert_job_succeeded(&view, 1, "report", 1);
    stop_and_check_facts(&stack, &mut [&mut runner]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_cancel_the_always_and_cancelled_jobs_still_run_on_the_runner() {
    let scene = Scene::on(fast_lease_stack().await).await;
    let (mut runner, run_id, leftovers) = run_to_step(&scene, include_str!("fixtures/cleanup.yml")).await;
    let Scene { stack, ws, shared, .. } = scene;
    let pgid = leftovers.0;
    stack.wait_view(&ws, &run_id, "soak to be running", |v| job_in(v, 1, "soak")["status"] == "running").await;

    let Answer { status, body } =
        stack.post(&format!("/v1/workspaces/{ws}/runs/{run_id}/cancel"), &stack.admin_token, json!({})).await;
    assert_eq!(status, 202, "{body:#}");
    assert_eq!(body["status"], "cancelled", "{body:#}");
    group_gone(pgid, WAIT).await;
    let view = stack
        .wait_view(&ws, &run_id, "cleanup and notify to run", |v| {
            job_in(v, 1, "cleanup")["status"] == "succeeded" && job_in(v, 1, "notify")["status"] == "succeeded"
        })
        .await;
    assert_eq!(view["status"], "cancelled", "{view:#}");
    assert_job_succeeded(&view, 1, "cleanup", 1);
    assert_job_succeeded(&view, 1, "notify", 1);
    for key in ["soak", "deploy"] {
        let job = job_in(&view, 1, key);
        assert_eq!((&job["status"], &job["status_reason"]), (&json!("cancelled"), &json!("run_cancelled")), "{job:#}");
    }
    assert!(shared.join("cleaned").exists() && shared.join("notified").exists());
    assert!(!shared.join("deployed").exists(), "a success() job does not run after a cancel");
    stop_and_check_facts(&stack, &mut [&mut runner]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_rerun_of_the_diamond_carries_over_what_succeeded_and_runs_the_rest_again() {
    let scene = Scene::start().await;
    // behaviour.md §11: build ✓ → test-a ✓, test-b ✗ → report ✓ (always()).
    // Each job appends its attempt to its own file, so what ran is visible.
    let (mut runner, run_id) = scene.run(include_str!("fixtures/diamond_rerun.yml"), "linux", &[]).await;
    let Scene { stack, ws, shared, .. } = scene;
    let view = stack.wait_run_status(&ws, &run_id, "failed").await;
    assert_eq!(job_in(&view, 1, "test-b")["status"], "failed");
    assert_eq!(step_outcomes(execution_of(&view, 1, "test-b")), vec![("failed".to_string(), json!(1))]);
    for key in ["build", "test-a", "report"] {
        assert_job_succeeded(&view, 1, key, 1);
    }

    let Answer { status, body } = stack
        .post(&format!("/v1/workspaces/{ws}/runs/{run_id}/rerun"), &stack.admin_token, json!({"mode": "failed"}))
        .await;
    assert_eq!(status, 201, "{body:#}");
    assert_eq!(body["current_attempt"], 2, "{body:#}");
    let view = stack
        .wait_view(&ws, &run_id, "attempt 2 to succeed", |v| v["current_attempt"] == 2 && v["status"] == "succeeded")
        .await;
    for key in ["build", "test-a"] {
        let job = job_in(&view, 2, key);
        assert_eq!((&job["status"], &job["carried_over"]), (&json!("succeeded"), &json!(true)), "{job:#}");
    }
    for key in ["test-b", "report"] {
        assert_job_succeeded(&view, 2, key, 1);
        assert_eq!(job_in(&view, 2, key)["carried_over"], false);
    }
    let ran = |key: &str| std::fs::read_to_string(shared.join(format!("{key}.ran"))).unwrap_or_default();
    assert_eq!((ran("build"), ran("test-a")), ("1\n".into(), "1\n".into()), "carried over, not run again");
    assert_eq!((ran("test-b"), ran("report")), ("1\n2\n".into(), "1\n2\n".into()), "run again in attempt 2");
    // Attempt 1 keeps its own history.
    assert_eq!(job_in(&view, 1, "test-b")["status"], "failed");
    assert_eq!(execution_of(&view, 1, "test-b")["status"], "failed");
    stop_and_check_facts(&stack, &mut [&mut runner]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_and_jobs_past_their_timeout_minutes_are_stopped_and_fail_the_run() {
    // One timeout minute lasts 5 s here: the step may run 5 s, the job 10 s.
    let minute = HashMap::from([("BATON_TIMEOUT_MINUTE_S".into(), "5".into())]);
    let scene = Scene::on(TestStack::start_with(|_| {}, minute).await).await;
    let (mut runner, run_id) = scene.run(include_str!("fixtures/timeouts.yml"), "linux", &["--concurrency", "2"]).await;
    let Scene { stack, ws, shared, .. } = scene;
    let step_pgid = pgid_from(&shared.join("step.pgid")).await;
    let _step_leftovers = GroupGuard(step_pgid);
    let job_pgid = pgid_from(&shared.join("job.pgid")).await;
    let _job_leftovers = GroupGuard(job_pgid);
    // 5 s and 10 s limits, plus the 2 s kill grace and slack.
    group_gone(step_pgid, Duration::from_secs(20)).await;
    group_gone(job_pgid, Duration::from_secs(30)).await;

    let view = stack.wait_run_status(&ws, &run_id, "failed").await;
    let step_limited = execution_of(&view, 1, "step-limited");
    assert_eq!(job_in(&view, 1, "step-limited")["status"], "failed");
    assert_eq!(step_limited["status"], "failed", "{step_limited:#}");
    assert_eq!(
        step_outcomes(step_limited),
        vec![("failed".to_string(), json!(128 + libc::SIGTERM)), ("skipped".to_string(), Value::Null)]
    );
    let job_limited = execution_of(&view, 1, "job-limited");
    assert_eq!(job_in(&view, 1, "job-limited")["status"], "failed");
    assert_eq!(job_limited["status"], "failed", "{job_limited:#}");
    // The runner's own step timeout: an ordinary failed step.
    assert_eq!(step_limited["status_reason"], "step_failed", "{step_limited:#}");
    // The job timeout counts from queueing on the server, from the claim on
    // the runner: the server's comes first and stands, unless the runner's
    // complete won the race (then the step's kill is the reason).
    assert!(
        job_limited["status_reason"] == "timed_out" || job_limited["status_reason"] == "step_failed",
        "{job_limited:#}"
    );
    // Whichever side's timeout won, the runner's report of what its steps
    // did reaches the view (the status stands; the steps are recorded).
    let steps = wait_for("the job-limited steps in the view", Duration::from_secs(60), || async {
        let view = stack.run_view(&ws, &run_id).await;
        let outcomes = step_outcomes(execution_of(&view, 1, "job-limited"));
        (outcomes.first().map(|o| o.0.as_str()) == Some("failed")).then_some(outcomes)
    })
    .await;
    assert_eq!(steps, vec![("failed".to_string(), json!(128 + libc::SIGTERM)), ("skipped".to_string(), Value::Null)]);
    assert!(!shared.join("step.after").exists() && !shared.join("job.after").exists());
    stop_and_check_facts(&stack, &mut [&mut runner]).await;
}

/// Outputs flow build → test → report through `$BATON_OUTPUT` and
/// `${{ needs.<job>.outputs.<name> }}` in env, run and `if:`; inputs, the
/// workflow's env and the baton context resolve; a job whose `if:` over an
/// output is false is skipped; a `failed` rerun carries the build's outputs
/// over to the jobs it runs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_flow_between_jobs_into_env_run_and_if_and_a_failed_rerun_carries_them_over() {
    let Scene { stack, ws, token, shared } = Scene::start().await;
    let yaml = with_shared(include_str!("fixtures/outputs.yml"), &shared);
    // An input the definition reads must be given.
    let Answer { status, body } =
        stack.post(&format!("/v1/workspaces/{ws}/runs"), &stack.admin_token, json!({"definition": yaml})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("invalid-definition")), "{body:#}");
    assert!(body["error"]["message"].as_str().unwrap_or_default().contains("inputs.channel"), "{body:#}");

    let mut runner = Runner::start(&stack, &token, "linux", &[]);
    let Answer { status, body } = stack
        .post(
            &format!("/v1/workspaces/{ws}/runs"),
            &stack.admin_token,
            json!({"definition": yaml, "inputs": {"channel": "beta"}}),
        )
        .await;
    assert_eq!(status, 201, "{body:#}");
    let run_id = body["id"].as_str().unwrap_or_default().to_string();
    let view = stack.wait_run_status(&ws, &run_id, "failed").await;
    let build = job_in(&view, 1, "build");
    assert_eq!(build["outputs"], json!({"version": "1.1.0", "notes": "first line\nsecond=line"}), "{build:#}");
    assert_eq!(job_in(&view, 1, "test")["status"], "failed");
    // The verdict was never written: report's condition does not hold.
    assert_eq!(job_in(&view, 1, "report")["status"], "skipped");
    assert_eq!(job_in(&view, 1, "hold")["status"], "skipped");
    assert_eq!(job_in(&view, 1, "hold")["status_reason"], "condition_rejected");
    let ran = |key: &str| std::fs::read_to_string(shared.join(format!("{key}.ran"))).unwrap_or_default();
    assert_eq!(ran("test"), "1.1.0 beta test 1\n");

    let Answer { status, body } = stack
        .post(&format!("/v1/workspaces/{ws}/runs/{run_id}/rerun"), &stack.admin_token, json!({"mode": "failed"}))
        .await;
    assert_eq!(status, 201, "{body:#}");
    let view = stack
        .wait_view(&ws, &run_id, "attempt 2 to succeed", |v| v["current_attempt"] == 2 && v["status"] == "succeeded")
        .await;
    let build = job_in(&view, 2, "build");
    assert_eq!((&build["carried_over"], &build["outputs"]["version"]), (&json!(true), &json!("1.1.0")), "{build:#}");
    assert_eq!(job_in(&view, 2, "test")["outputs"], json!({"verdict": "ship"}));
    // The carried build's version (from attempt 1) reaches the jobs run again.
    assert_eq!(ran("test"), "1.1.0 beta test 1\n1.1.0 beta test 2\n");
    assert_eq!(ran("report"), "1.1.0 ship success\n");
    assert!(!shared.join("hold.ran").exists());
    // Each attempt's log of the job run twice stays readable.
    for attempt in [1, 2] {
        let test_id = job_in(&view, attempt, "test")["id"].as_str().unwrap_or_default().to_string();
        let path = format!("/v1/workspaces/{ws}/runs/{run_id}/jobs/{test_id}/logs?attempt={attempt}");
        let page = stack.get_ok(&path, &stack.admin_token).await;
        let first = page["lines"][0]["text"].as_str().unwrap_or_default().to_string();
        assert_eq!(first, format!("test attempt {attempt}"), "{page:#}");
    }
    stop_and_check_facts(&stack, &mut [&mut runner]).await;
}

/// The run view shows a step running (with its start and a growing
/// duration) while the job is still on the runner, not only once it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_view_shows_steps_live_with_their_durations() {
    let scene = Scene::start().await;
    let (mut runner, run_id) = scene.run(include_str!("fixtures/live.yml"), "linux", &[]).await;
    let Scene { stack, ws, shared, .. } = scene;
    let view = stack
        .wait_view(&ws, &run_id, "the second step to show running", |v| {
            let steps = &execution_of(v, 1, "slow")["steps"];
            steps[0]["status"] == "succeeded" && steps[1]["status"] == "running"
        })
        .await;
    let execution = execution_of(&view, 1, "slow");
    let (quick, wait) = (&execution["steps"][0], &execution["steps"][1]);
    assert!(quick["started_at"].is_string() && quick["finished_at"].is_string(), "{quick:#}");
    assert!(quick["duration_ms"].is_u64(), "{quick:#}");
    assert!(wait["started_at"].is_string() && wait["finished_at"].is_null(), "{wait:#}");
    assert_eq!(job_in(&view, 1, "slow")["status"], "running");
    assert!(job_in(&view, 1, "slow")["duration_ms"].is_u64());
    std::fs::write(shared.join("go"), b"").unwrap();
    let view = stack.wait_run_status(&ws, &run_id, "succeeded").await;
    let wait = &execution_of(&view, 1, "slow")["steps"][1];
    assert_eq!((&wait["status"], wait["finished_at"].is_string()), (&json!("succeeded"), true), "{wait:#}");
    runner.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_given_with_the_cli_by_two_people_hands_its_inputs_to_the_deploy_a_runner_runs() {
    let Scene { stack, ws, token, shared } = Scene::start().await;
    let mut approvers = Vec::new();
    for (name, groups) in [("alice", &[][..]), ("bob", &["release-managers"][..])] {
        approvers.push(stack.approver_token(&ws, name, groups).await);
    }
    let mut runner = Runner::start(&stack, &token, "linux", &[]);
    let run_id = stack.create_run(&ws, &with_shared(RELEASE_SIGN_OFF, &shared)).await.id();
    stack.wait_view(&ws, &run_id, "sign-off waiting", |v| job_in(v, 1, "sign-off")["status"] == "waiting").await;
    let shown = baton(&stack, &["run", "get", "--workspace", &ws, &run_id]).await;
    let shown = text(&shown.stdout);
    assert!(shown.contains("job sign-off: waiting (approvals 0 of 2 from alice, release-managers; until "), "{shown}");

    // The creator (the admin token) is refused; each approver counts once.
    let refused = baton(&stack, &["run", "approve", "--workspace", &ws, &run_id, "sign-off"]).await;
    assert!(!refused.status.success() && text(&refused.stderr).contains("self-approval"), "{}", text(&refused.stderr));
    let args = ["run", "approve", "--workspace", &ws, &run_id, "sign-off", "--input", "channel=stable"];
    let first =
        baton_as(&stack, &approvers[0], &[&args[..], &["--input", "dry_run=false", "--comment", "rc ok"]].concat())
            .await;
    assert!(first.status.success(), "{}", text(&first.stderr));
    assert!(text(&first.stdout).contains("job sign-off: waiting (1 of 2 approvals)"), "{}", text(&first.stdout));
    let second = baton_as(&stack, &approvers[1], &["run", "approve", "--workspace", &ws, &run_id, "sign-off"]).await;
    assert!(text(&second.stdout).contains("job sign-off: succeeded (2 of 2 approvals)"), "{}", text(&second.stdout));

    let view = stack.wait_run_status(&ws, &run_id, "succeeded").await;
    assert_eq!(job_in(&view, 1, "sign-off")["outputs"], json!({"channel": "stable", "dry_run": false}));
    let deployed = std::fs::read_to_string(shared.join("deployed")).expect("the deploy ran");
    assert_eq!(deployed.trim(), "stable false", "the approvers' inputs reached the deploy's env");
    let shown = text(&baton(&stack, &["run", "get", "--workspace", &ws, &run_id]).await.stdout);
    assert!(shown.contains("approved by alice: at ") && shown.contains(": rc ok"), "{shown}");
    runner.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listening_job_runs_once_per_event_in_order_ignores_a_repeated_ref_and_its_dependant_runs_after_resolve() {
    let scene = Scene::start().await;
    let (mut runner, run_id) = scene.run(include_str!("fixtures/reviews.yml"), "linux", &[]).await;
    let Scene { stack, ws, shared, .. } = scene;
    stack.wait_view(&ws, &run_id, "on-review listening", |v| job_in(v, 1, "on-review")["status"] == "waiting").await;
    let shown = text(&baton(&stack, &["run", "get", "--workspace", &ws, &run_id]).await.stdout);
    assert!(shown.contains("job on-review: waiting (listening for pull_request_review; 0 waiting; until "), "{shown}");

    let event = |reference: &str, extra: &[&str]| {
        let mut args: Vec<String> = [
            "run",
            "event",
            "--workspace",
            &ws,
            &run_id,
            "on-review",
            "--name",
            "pull_request_review",
            "--ref",
            reference,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };
    for (reference, state) in [("r1", "approved"), ("r2", "changes_requested"), ("r3", "commented")] {
        let payload = json!({"review": {"state": state}}).to_string();
        let args = event(reference, &["--payload", &payload]);
        let out = baton(&stack, &args.iter().map(String::as_str).collect::<Vec<_>>()).await;
        assert_eq!(text(&out.stdout).trim(), "delivered", "{}", text(&out.stderr));
    }
    let again = event("r1", &["--payload", r#"{"review": {"state": "replayed"}}"#]);
    let out = baton(&stack, &again.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert!(text(&out.stdout).starts_with("not delivered"), "a repeated ref: {}", text(&out.stdout));
    let resolve = event("r4", &["--resolve"]);
    let out = baton(&stack, &resolve.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert_eq!(text(&out.stdout).trim(), "delivered");

    let view = stack.wait_run_status(&ws, &run_id, "succeeded").await;
    let handled = std::fs::read_to_string(shared.join("handled")).expect("the events were handled");
    assert_eq!(
        handled.lines().collect::<Vec<_>>(),
        [
            "pull_request_review r1 approved",
            "pull_request_review r2 changes_requested",
            "pull_request_review r3 commented"
        ],
        "once each, in delivery order, the replay ignored"
    );
    assert!(shared.join("after").exists(), "its dependant ran after the resolve");
    let listening = job_in(&view, 1, "on-review");
    let events: Vec<&str> =
        listening["executions"].as_array().unwrap().iter().map(|e| e["event"]["ref"].as_str().unwrap_or("")).collect();
    assert_eq!(events, ["r1", "r2", "r3"], "one execution an event, each in the view: {listening:#}");
    let logs = text(&baton(&stack, &["run", "logs", "--workspace", &ws, &run_id, "--job", "on-review"]).await.stdout);
    let at = |line: &str| logs.find(line).unwrap_or_else(|| panic!("{line:?} not in the logs:\n{logs}"));
    assert!(at("review r1 is approved") < at("review r2 is changes_requested"));
    assert!(at("review r2 is changes_requested") < at("review r3 is commented"));

    // After the end: acknowledged, nothing changes.
    let late = event("r5", &["--payload", r#"{"review": {"state": "late"}}"#]);
    let out = baton(&stack, &late.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert!(text(&out.stdout).starts_with("not delivered"), "{}", text(&out.stdout));
    assert_eq!(stack.run_view(&ws, &run_id).await, view, "a delivery after the end changes nothing");
    runner.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_a_producer_puts_on_the_bus_run_a_listening_job_on_a_runner_once_each_and_resolve_it() {
    let scene = Scene::start().await;
    let (mut runner, run_id) = scene.run(include_str!("fixtures/reviews_from_the_bus.yml"), "linux", &[]).await;
    let Scene { stack, ws, shared, .. } = scene;
    stack.wait_view(&ws, &run_id, "listening", |v| job_in(v, 1, "on-review")["status"] == "waiting").await;
    // What a webhook bridge puts on the stack's bus.
    let put = |reference: &str, disposition: &str, state: &str| {
        let detail = json!({"workspace_id": ws, "run_id": run_id, "job": "on-review", "name": "pull_request_review",
                            "disposition": disposition, "ref": reference, "payload": {"review": {"state": state}}});
        let entry = aws_sdk_eventbridge::types::PutEventsRequestEntry::builder()
            .event_bus_name(&stack.provisioned.bus)
            .source("acme.github-bridge")
            .detail_type("baton.external.job_event")
            .detail(detail.to_string())
            .build();
        let client = stack.clients.eventbridge().clone();
        async move {
            let out = client.put_events().entries(entry).send().await.expect("PutEvents");
            assert_eq!(out.failed_entry_count, 0);
        }
    };
    let handled = |n: usize| {
        let file = shared.join("handled");
        async move {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            (text.lines().count() >= n).then_some(text)
        }
    };
    for (n, (reference, state)) in [("r1", "approved"), ("r2", "commented")].into_iter().enumerate() {
        put(reference, "fire", state).await;
        wait_for("the bus event to run on the runner", Duration::from_secs(60), || handled(n + 1)).await;
    }
    // The producer's retry of r1 (at least once, as buses are) is ignored.
    put("r1", "fire", "replayed").await;
    put("done", "resolve", "").await;
    let view = stack.wait_run_status(&ws, &run_id, "succeeded").await;
    let text = std::fs::read_to_string(shared.join("handled")).expect("the events ran");
    assert_eq!(text.lines().collect::<Vec<_>>(), ["r1 approved", "r2 commented"], "once each, in order");
    assert!(shared.join("after").exists(), "its dependant ran after the resolve");
    let refs: Vec<&str> = job_in(&view, 1, "on-review")["executions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"]["ref"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(refs, ["r1", "r2"]);
    runner.stop().await;
}

/// `shell:`, `working-directory:` and `defaults.run` as on GitHub: the
/// workflow's defaults, a job's over them, a step's over both; each shell
/// runs with GitHub's template (`sh -e`, `python`, a custom `perl {0}`,
/// `bash` with `pipefail`), a step without `shell` as before (`sh -c`),
/// and a missing directory fails its step saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shells_and_working_directories_run_as_on_github_with_defaults_applied() {
    let Scene { stack, ws, token, .. } = Scene::start().await;
    let mut runner = Runner::start(&stack, &token, "linux", &[]);
    let run_id = stack.create_run(&ws, include_str!("fixtures/shells.yml")).await.id();
    let view = stack
        .wait_view(&ws, &run_id, "the run to end", |v| matches!(v["status"].as_str(), Some("succeeded" | "failed")))
        .await;
    let logs = text(&baton(&stack, &["run", "logs", "--workspace", &ws, &run_id]).await.stdout);
    assert_eq!(view["status"], "succeeded", "{view:#}\n{logs}");

    // The workflow's defaults: `sh -e` in `app`; a step's own shell wins.
    assert!(logs.contains("sh -e in app"), "{logs}");
    assert!(logs.contains("python in app"), "{logs}");
    assert!(logs.contains("perl says 42"), "{logs}");
    assert_eq!(job_in(&view, 1, "inherits")["outputs"]["where"], "app", "{view:#}");
    // The job's defaults over the workflow's, the directory's expression resolved.
    assert!(logs.contains("bash pipefail in overrides/lib"), "{logs}");
    // `bash` fails on a failing command in a pipe; `sh` does not.
    let failures = execution_of(&view, 1, "failures");
    let steps = failures["steps"].as_array().expect("steps");
    let soft: Vec<(&Value, &Value, &Value)> =
        steps.iter().map(|s| (&s["status"], &s["soft_failed"], &s["exit_code"])).collect();
    assert_eq!(soft[0], (&json!("failed"), &json!(true), &json!(1)), "{failures:#}");
    assert_eq!(soft[1].0, "succeeded", "{failures:#}");
    // A directory that is not there fails its step, saying so.
    assert_eq!((soft[2].0, soft[2].1), (&json!("failed"), &json!(true)), "{failures:#}");
    assert!(logs.contains("working-directory `missing/dir` does not exist in the job's directory"), "{logs}");
    assert!(!logs.contains("never"), "{logs}");
    runner.stop().await;
}

/// A step's `if:`, decided by a real runner as GitHub's does: an earlier
/// step's outcome (under `continue-on-error`) and outputs, a matrix value
/// resolved at queue time, a plain step skipped after a real failure, and
/// `failure()` and `always()` steps that still run; the job ends failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steps_if_reads_earlier_steps_and_the_queues_values_and_failure_and_always_steps_run() {
    let scene = Scene::start().await;
    let (mut runner, run_id) = scene.run(include_str!("fixtures/conditions.yml"), "linux", &[]).await;
    let Scene { stack, ws, shared, .. } = scene;

    let view = stack.wait_run_status(&ws, &run_id, "failed").await;
    let job = job_in(&view, 1, "checks (linux)");
    assert_eq!(job["status"], "failed", "an `if: failure()` step that succeeds does not make the job succeed: {job:#}");
    let execution = execution_of(&view, 1, "checks (linux)");
    assert_eq!((&execution["status"], &execution["status_reason"]), (&json!("failed"), &json!("step_failed")));
    let ran = |code: i64| ("succeeded".to_string(), json!(code));
    assert_eq!(
        step_outcomes(execution),
        vec![
            ("failed".into(), json!(5)),
            ran(0),
            ("skipped".into(), Value::Null),
            ran(0),
            ("failed".into(), json!(3)),
            ("skipped".into(), Value::Null),
            ran(0),
            ran(0),
        ],
        "{execution:#}"
    );
    assert_eq!(execution["steps"][0]["soft_failed"], true, "{execution:#}");
    for (file, exists) in
        [("never", false), ("read-output", true), ("after-failure", false), ("on-failure", true), ("always", true)]
    {
        assert_eq!(shared.join(file).exists(), exists, "{file}");
    }
    stop_and_check_facts(&stack, &mut [&mut runner]).await;
}

/// A step's `run`, `env` and `with` read what only the runner knows (an
/// earlier step's outputs, `runner.os`) beside the workflow's values (a
/// matrix value), as GitHub's runner lets them; each expression is
/// evaluated once, so an output that looks like an expression stays text.
/// A matrix given as `include` entries whose values are mappings (an
/// Elixir/OTP pair per leg): each leg reads into its pair in `run` (resolved
/// when queued) and in a step's `if:` (decided on the runner).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matrix_legs_read_into_mapping_values() {
    let scene = Scene::start().await;
    let (mut runner, run_id) = scene.run(include_str!("fixtures/pairs.yml"), "linux", &["--concurrency", "2"]).await;
    let Scene { stack, ws, shared, .. } = scene;
    let view = stack.wait_run_status(&ws, &run_id, "succeeded").await;
    for key in ["test (1.15, 25)", "test (1.17, 27)"] {
        assert_eq!(job_in(&view, 1, key)["status"], "succeeded", "{key}: {view:#}");
    }
    let read = |name: &str| std::fs::read_to_string(shared.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!((read("otp-25"), read("otp-27")), ("1.15\n".to_string(), "1.17\n".to_string()));
    assert!(
        shared.join("newest-27").exists() && !shared.join("newest-25").exists(),
        "the step ran on the newest pair only"
    );
    runner.stop().await;
}

/// GitHub's all-green gate: a job that needs the others reads their results
/// through the `needs` context's object filter, in a step's `if:` (decided
/// on the runner from the queue's values) and in its `run` (resolved when
/// the job is queued).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_job_filters_its_needs_results_in_its_steps() {
    let scene = Scene::start().await;
    let (mut runner, run_id) = scene.run(include_str!("fixtures/gate.yml"), "linux", &[]).await;
    let Scene { stack, ws, shared, .. } = scene;
    let view = stack.wait_run_status(&ws, &run_id, "failed").await;
    assert_eq!(job_in(&view, 1, "gate")["status"], "succeeded", "{view:#}");
    let results = std::fs::read_to_string(shared.join("results")).expect("the failure step ran");
    assert_eq!(results, "success,failure\n", "each need's result, in the needs' order by name");
    assert!(!shared.join("all-green").exists(), "a need failed: not all green");
    runner.stop().await;
}

/// What GitHub workflows read that is set on the runner or stored as a
/// secret: `env.NAME` an earlier step exported through `$GITHUB_ENV` (as
/// setup-python's `env.pythonLocation`), in a step's `if:`, `run` and
/// `env`, and `github.token`, which is the workspace's `GITHUB_TOKEN`
/// secret (masked like any secret).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_reads_what_an_earlier_step_exported_and_github_token_is_the_workspaces_secret() {
    let Scene { stack, ws, token, shared } = Scene::start().await;
    let body = json!({ "value": "ghs_s3cr3t-t0ken" }).to_string();
    let set = stack
        .send(
            reqwest::Method::PUT,
            &format!("/v1/workspaces/{ws}/secrets/GITHUB_TOKEN"),
            &stack.admin_token,
            Some(body),
        )
        .await;
    assert!(set.status < 300, "{}", set.body);
    let mut runner = Runner::start(&stack, &token, "linux", &[]);
    let run_id = stack.create_run(&ws, &with_shared(include_str!("fixtures/exported.yml"), &shared)).await.id();
    let view = stack.wait_run_status(&ws, &run_id, "succeeded").await;
    let read = |name: &str| std::fs::read_to_string(shared.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(read("said"), "/opt/python/3.12\n");
    assert_eq!(read("env"), "/opt/python/3.12/bin\n");
    assert!(!shared.join("ran-unset").exists(), "a variable no step exported reads as empty");
    let job_id = job_in(&view, 1, "build")["id"].as_str().unwrap().to_string();
    let logs = stack.get_ok(&format!("/v1/workspaces/{ws}/runs/{run_id}/jobs/{job_id}/logs"), &stack.admin_token).await;
    let logs = log_texts(&logs);
    assert!(logs.iter().any(|line| line == "token ***"), "the token is masked: {logs:?}");
    runner.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_reads_an_earlier_steps_outputs_and_the_runner_in_its_run_and_env() {
    let scene = Scene::start().await;
    let (mut runner, run_id) = scene.run(include_str!("fixtures/runner_side.yml"), "linux", &[]).await;
    let Scene { stack, ws, shared, .. } = scene;
    let view = stack.wait_run_status(&ws, &run_id, "succeeded").await;
    assert_eq!(view["status"], "succeeded");
    let read = |name: &str| std::fs::read_to_string(shared.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(read("said"), format!("v1.2-{}-x64\n", baton_runner::step::runner_os()));
    assert_eq!(read("env"), "v1.2\n");
    assert_eq!(read("sly"), "${{ runner.arch }}\n", "an output is text, never evaluated");
    runner.stop().await;
}
