//! Reruns — behaviour.md §11 and §13 scenario 22: attempt n+1 from the
//! frozen snapshot, carried-over jobs, both modes, the 409s and concurrent
//! reruns.

use crate::workflows_support::*;
use baton_api::facts::{FactDetail, JobOutcome, RunAttemptCreated};
use baton_tests::http::Answer;
use baton_tests::runs::{job_in, Identified};
use baton_tests::{workspace, TestStack, WAIT};
use serde_json::json;

/// §11's example: build ✓ → test-a ✓, test-b ✗ → report ✓ (`always()`).
const SPEC_EXAMPLE: &str = r#"
name: rerun
jobs:
  build: {runs-on: linux, steps: [{run: make}]}
  test-a: {needs: build, runs-on: linux, steps: [{run: make a}]}
  test-b: {needs: build, runs-on: linux, steps: [{run: make b}]}
  report: {needs: [test-a, test-b], if: always(), runs-on: linux, steps: [{run: ./report}]}
"#;

async fn failed_spec_example(stack: &baton_tests::TestStack, ws: &str) -> String {
    let run = stack.create_run(ws, SPEC_EXAMPLE).await;
    let run_id = run.id();
    run_job(stack, ws, &run_id, 1, "build", JobOutcome::Succeeded).await;
    run_job(stack, ws, &run_id, 1, "test-a", JobOutcome::Succeeded).await;
    run_job(stack, ws, &run_id, 1, "test-b", JobOutcome::Failed).await;
    run_job(stack, ws, &run_id, 1, "report", JobOutcome::Succeeded).await;
    stack.wait_run_status(ws, &run_id, "failed").await;
    run_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_rerun_carries_over_what_is_not_downstream_and_reruns_the_rest() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let run_id = failed_spec_example(&stack, &ws).await;
    let path = format!("/v1/workspaces/{ws}/runs/{run_id}/rerun");
    let Answer { status, body: view } = stack.post(&path, &stack.admin_token, json!({"mode": "failed"})).await;
    assert_eq!(status, 201, "{view:#}");
    assert_eq!(view["id"], run_id.as_str());
    assert_eq!(view["number"], 1, "same run, same number");
    assert_eq!(view["current_attempt"], 2);
    assert_eq!(view["attempts"].as_array().unwrap().len(), 2);
    assert_eq!(view["attempts"][1]["rerun_mode"], "failed");
    for key in ["build", "test-a"] {
        let carried = job_in(&view, 2, key);
        assert_eq!(carried["carried_over"], true, "{key}");
        assert_eq!(carried["status"], "succeeded", "{key}");
        assert_eq!(carried["executions"], json!([]), "{key} is not executed again");
        assert_eq!(carried["outputs"], json!({"job": key}), "{key}'s outputs are carried over");
    }
    for key in ["test-b", "report"] {
        assert_eq!(job_in(&view, 2, key)["carried_over"], false, "{key}");
        assert_eq!(job_in(&view, 2, key)["status"], "pending", "{key}");
    }
    stack
        .wait_fact(RunAttemptCreated::DETAIL_TYPE, WAIT, |d| {
            d["run_id"] == run_id.as_str() && d["attempt"] == 2 && d["rerun_mode"] == "failed"
        })
        .await;

    run_job(&stack, &ws, &run_id, 2, "test-b", JobOutcome::Succeeded).await;
    run_job(&stack, &ws, &run_id, 2, "report", JobOutcome::Succeeded).await;
    let view = stack.wait_run_status(&ws, &run_id, "succeeded").await;
    assert_eq!(view["attempts"][0]["status"], "failed", "attempt 1 keeps its history");
    assert_eq!(job_in(&view, 1, "test-b")["status"], "failed");
    assert_eq!(job_in(&view, 2, "test-b")["status"], "succeeded");
    let attempt_two: Vec<String> = stack
        .facts(baton_api::facts::JobExecutionQueued::DETAIL_TYPE)
        .into_iter()
        .filter(|d| d["run_id"] == run_id.as_str() && d["attempt"] == 2)
        .map(|d| d["job"]["key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(attempt_two, ["test-b", "report"], "carried-over jobs are never enqueued");
    stack.assert_all_facts_valid();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_all_rerun_runs_everything_again_and_of_two_concurrent_reruns_exactly_one_wins() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let run = stack.create_run(&ws, "name: green\njobs:\n  a:\n    runs-on: linux\n    steps: [{run: a}]\n  b:\n    needs: a\n    runs-on: linux\n    steps: [{run: b}]\n").await;
    let run_id = run.id();
    let path = format!("/v1/workspaces/{ws}/runs/{run_id}/rerun");

    // Not terminal yet.
    let Answer { status, body } = stack.post(&path, &stack.admin_token, json!({"mode": "all"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("run-not-terminal")));
    run_job(&stack, &ws, &run_id, 1, "a", JobOutcome::Succeeded).await;
    run_job(&stack, &ws, &run_id, 1, "b", JobOutcome::Succeeded).await;
    stack.wait_run_status(&ws, &run_id, "succeeded").await;

    // Nothing failed: a `failed` rerun has nothing to do.
    let Answer { status, body } = stack.post(&path, &stack.admin_token, json!({"mode": "failed"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("no-failed-jobs")));
    let Answer { status, body } = stack.post(&path, &stack.admin_token, json!({"mode": "some"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("invalid-request")));
    let unknown = format!("/v1/workspaces/{ws}/runs/{}/rerun", uuid::Uuid::now_v7());
    let Answer { status, body } = stack.post(&unknown, &stack.admin_token, json!({"mode": "all"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("not-found")));

    let (first, second) = futures::join!(
        stack.post(&path, &stack.admin_token, json!({"mode": "all"})),
        stack.post(&path, &stack.admin_token, json!({"mode": "all"})),
    );
    let mut statuses = [first.status, second.status];
    statuses.sort_unstable();
    assert_eq!(statuses, [201, 409], "{first:?} {second:?}");
    let loser = if first.status == 409 { &first.body } else { &second.body };
    assert_eq!(loser["error"]["code"], "run-not-terminal");

    let view = stack.run_view(&ws, &run_id).await;
    assert_eq!(view["current_attempt"], 2);
    assert_eq!(view["attempts"].as_array().unwrap().len(), 2);
    assert!(["a", "b"].iter().all(|key| job_in(&view, 2, key)["carried_over"] == false));
    run_job(&stack, &ws, &run_id, 2, "a", JobOutcome::Succeeded).await;
    run_job(&stack, &ws, &run_id, 2, "b", JobOutcome::Succeeded).await;
    let view = stack
        .wait_view(&ws, &run_id, "attempt 2 succeeded", |v| {
            v["status"] == "succeeded" && v["attempts"][1]["status"] == "succeeded"
        })
        .await;
    assert_eq!(view["attempts"][1]["rerun_mode"], "all");
    flush_pipeline(&stack, &ws).await;
    let created =
        stack.facts(RunAttemptCreated::DETAIL_TYPE).into_iter().filter(|d| d["run_id"] == run_id.as_str()).count();
    assert_eq!(created, 2, "one attempt_created per attempt");
    stack.assert_all_facts_valid();
}

/// A matrix decided from `plan`'s output: `test (2)` fails.
const MATRIX_FROM_PLAN: &str = r#"
name: from-plan
jobs:
  plan: {runs-on: linux, outputs: [matrix], steps: [{run: plan}]}
  test:
    needs: plan
    runs-on: linux
    strategy: {fail-fast: false, matrix: "${{ fromJSON(needs.plan.outputs.matrix) }}"}
    steps: [{run: "test ${{ matrix.n }}"}]
  report: {needs: test, if: always(), runs-on: linux, steps: [{run: report}]}
"#;

/// Job `key` of `attempt` claimed and succeeded with `outputs`.
async fn run_job_with_outputs(
    stack: &TestStack,
    ws: &str,
    run_id: &str,
    attempt: u32,
    key: &str,
    outputs: &[(&str, &str)],
) {
    let queued = queued(stack, run_id, attempt, key).await;
    let runner = Runner::for_queued(ws, &queued);
    runner.claim(stack).await;
    let mut completed = runner.completed(JobOutcome::Succeeded);
    completed.outputs = outputs.iter().map(|(name, value)| (name.to_string(), json!(value))).collect();
    publish(stack, ws, completed).await;
}

/// The job keys of `attempt` in the view, with whether each was carried over.
fn attempt_jobs(view: &serde_json::Value, attempt: usize) -> Vec<(String, bool)> {
    view["attempts"][attempt - 1]["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| (j["key"].as_str().unwrap_or_default().to_string(), j["carried_over"] == true))
        .collect()
}

/// A `failed` rerun of a run whose matrix came from an earlier job's
/// output carries the legs that succeeded and the matrix as decided, and
/// runs the failed leg again; an `all` rerun decides the matrix again from
/// what `plan` outputs this time. A matrix that comes out empty fails its
/// job, saying why in the view.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_matrix_from_outputs_is_kept_by_a_failed_rerun_and_decided_again_by_an_all_rerun() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let run_id = stack.create_run(&ws, MATRIX_FROM_PLAN).await.id();
    run_job_with_outputs(&stack, &ws, &run_id, 1, "plan", &[("matrix", r#"{"n":[1,2]}"#)]).await;
    run_job(&stack, &ws, &run_id, 1, "test (1)", JobOutcome::Succeeded).await;
    run_job(&stack, &ws, &run_id, 1, "test (2)", JobOutcome::Failed).await;
    run_job(&stack, &ws, &run_id, 1, "report", JobOutcome::Succeeded).await;
    let view = stack.wait_run_status(&ws, &run_id, "failed").await;
    assert_eq!(
        attempt_jobs(&view, 1),
        [("plan".into(), false), ("test (1)".into(), false), ("test (2)".into(), false), ("report".into(), false)]
    );
    assert_eq!(job_in(&view, 1, "report")["needs"], json!(["test (1)", "test (2)"]));

    let path = format!("/v1/workspaces/{ws}/runs/{run_id}/rerun");
    let Answer { status, body: view } = stack.post(&path, &stack.admin_token, json!({"mode": "failed"})).await;
    assert_eq!(status, 201, "{view:#}");
    assert_eq!(
        attempt_jobs(&view, 2),
        [("plan".into(), true), ("test (1)".into(), true), ("test (2)".into(), false), ("report".into(), false)],
        "the matrix as decided, its succeeded leg carried"
    );
    run_job(&stack, &ws, &run_id, 2, "test (2)", JobOutcome::Succeeded).await;
    run_job(&stack, &ws, &run_id, 2, "report", JobOutcome::Succeeded).await;
    stack.wait_view(&ws, &run_id, "attempt 2 succeeded", |v| v["attempts"][1]["status"] == "succeeded").await;

    let Answer { status, body: view } = stack.post(&path, &stack.admin_token, json!({"mode": "all"})).await;
    assert_eq!(status, 201, "{view:#}");
    assert_eq!(
        attempt_jobs(&view, 3),
        [("plan".into(), false), ("test".into(), false), ("report".into(), false)],
        "one job until plan's output decides it again"
    );
    run_job_with_outputs(&stack, &ws, &run_id, 3, "plan", &[("matrix", r#"{"n":[3]}"#)]).await;
    run_job(&stack, &ws, &run_id, 3, "test (3)", JobOutcome::Succeeded).await;
    run_job(&stack, &ws, &run_id, 3, "report", JobOutcome::Succeeded).await;
    let view =
        stack.wait_view(&ws, &run_id, "attempt 3 succeeded", |v| v["attempts"][2]["status"] == "succeeded").await;
    assert_eq!(
        attempt_jobs(&view, 3).iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        ["plan", "test (3)", "report"]
    );

    let run_id = stack.create_run(&ws, MATRIX_FROM_PLAN).await.id();
    run_job_with_outputs(&stack, &ws, &run_id, 1, "plan", &[("matrix", r#"{"n":[]}"#)]).await;
    run_job(&stack, &ws, &run_id, 1, "report", JobOutcome::Succeeded).await;
    let view = stack.wait_run_status(&ws, &run_id, "failed").await;
    let test = job_in(&view, 1, "test");
    assert_eq!((&test["status"], &test["status_reason"]), (&json!("failed"), &json!("invalid_matrix")), "{test:#}");
    assert_eq!(test["status_message"], "strategy.matrix.n: 1 to 256 values", "{test:#}");
    stack.assert_all_facts_valid();
}
