//! Jobs nothing can serve (behaviour.md §15, the seed's unschedulable
//! jobs): flagged when queued, in a fact and the view, and failed after
//! `BATON_UNSCHEDULABLE_FAIL_S` unless a runner claims them first.

use std::collections::HashMap;

use baton_api::facts::{FactDetail, JobUnschedulable};
use baton_tests::runs::{job_in, Identified};
use baton_tests::{workspace, TestStack, WAIT};
use serde_json::json;

use crate::workflows_support::*;

/// A stack whose unschedulable jobs fail after `seconds`.
async fn stack_failing_after(seconds: u64) -> TestStack {
    let overrides = HashMap::from([("BATON_UNSCHEDULABLE_FAIL_S".to_string(), seconds.to_string())]);
    TestStack::start_with(|_| {}, overrides).await
}

const YAML: &str = "name: train\njobs:\n  build:\n    runs-on: linux\n    steps: [{run: make}]\n  train:\n    runs-on: [gpu, linux]\n    steps: [{run: ./train}]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_labels_nobody_offers_is_flagged_at_once_and_fails_unschedulable_after_its_time() {
    let stack = stack_failing_after(10).await;
    let ws = workspace();
    // A linux runner is registered; nobody offers gpu.
    stack.runner(&ws, &["linux", "x64"]).await;
    let run_id = stack.create_run(&ws, YAML).await.id();

    let flag = stack.wait_fact(JobUnschedulable::DETAIL_TYPE, WAIT, |d| d["run_id"] == run_id.as_str()).await;
    assert_eq!(flag["labels"], json!(["gpu", "linux"]), "{flag:#}");
    let view = stack
        .wait_view(&ws, &run_id, "the job flagged in the view", |view| {
            !job_in(view, 1, "train")["executions"][0]["unschedulable"].is_null()
        })
        .await;
    let shown = &job_in(&view, 1, "train")["executions"][0]["unschedulable"];
    assert_eq!((&shown["labels"], &shown["fails_at"]), (&flag["labels"], &flag["fails_at"]));
    assert!(job_in(&view, 1, "build")["executions"][0]["unschedulable"].is_null(), "a linux runner serves build");

    // Delivered again (at least once), the flag changes nothing.
    let typed: baton_api::facts::Fact<JobUnschedulable> =
        serde_json::from_value(flag.clone()).expect("the flag as Rust reads it");
    stack.redeliver(&typed).await;
    flush_pipeline(&stack, &ws).await;
    let again = stack.run_view(&ws, &run_id).await;
    assert_eq!(job_in(&again, 1, "train")["executions"][0]["unschedulable"], *shown, "{again:#}");

    // The build runs; the train job fails `unschedulable`, and so its run.
    run_job(&stack, &ws, &run_id, 1, "build", baton_api::facts::JobOutcome::Succeeded).await;
    let view = stack.wait_run_status(&ws, &run_id, "failed").await;
    let train = job_in(&view, 1, "train");
    assert_eq!((&train["status"], &train["status_reason"]), (&json!("failed"), &json!("unschedulable")), "{view:#}");
    // One flag (one event id), whatever the redeliveries of its queued fact;
    // the bus carried it twice only because this test delivered it again.
    let flags: std::collections::BTreeSet<String> = stack
        .facts(JobUnschedulable::DETAIL_TYPE)
        .iter()
        .filter(|d| d["run_id"] == run_id.as_str())
        .map(|d| d["event_id"].to_string())
        .collect();
    assert_eq!(flags.len(), 1, "{flags:?}");
    stack.assert_all_facts_valid();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_that_registers_after_the_flag_runs_the_job_and_a_provisioner_serving_it_means_no_flag() {
    let stack = stack_failing_after(20).await;
    let ws = workspace();
    let flagged = stack.create_run(&ws, YAML).await.id();
    stack.wait_fact(JobUnschedulable::DETAIL_TYPE, WAIT, |d| d["run_id"] == flagged.as_str()).await;

    run_job(&stack, &ws, &flagged, 1, "build", baton_api::facts::JobOutcome::Succeeded).await;
    // A gpu runner comes: it claims the flagged job, which then runs to the end.
    let gpu = stack.runner(&ws, &["gpu", "linux"]).await;
    let claimed = stack.claim(&gpu.session_token).await.expect("the gpu runner claims the flagged job");
    let answer = stack
        .complete(&claimed.lease.token, claimed.job_execution_id, json!({"status": "succeeded", "steps": []}))
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let view = stack.wait_run_status(&ws, &flagged, "succeeded").await;
    assert!(
        job_in(&view, 1, "train")["executions"][0]["unschedulable"].is_null(),
        "a claimed job is no longer flagged"
    );

    // A provisioner that serves a set including the job's: nothing is flagged.
    let other = workspace();
    let body = json!({"name": "gpus", "label_sets": [["gpu", "linux", "x64"]], "max_instances": 2});
    stack.create_provisioner(&other, body).await;
    stack.runner(&other, &["linux"]).await;
    let served = stack.create_run(&other, YAML).await.id();
    queued(&stack, &served, 1, "train").await;
    flush_pipeline(&stack, &other).await;
    assert_eq!(count_facts(&stack, JobUnschedulable::DETAIL_TYPE, &served), 0);
}
