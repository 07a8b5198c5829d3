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
