//! Pipelines' schedules (behaviour.md §18) on the dev host, as `make dev`
//! runs them: the sweep fires on its own scheduler (here every second, the
//! test's knob; the crons themselves are evaluated as on AWS, by the
//! minute), and a pipeline scheduled every minute gets a run each minute,
//! each a `schedule` event naming its cron.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use baton_tests::{wait_for, workspace, TestStack};
use reqwest::Method;
use serde_json::{json, Value};

const EVERY_MINUTE: &str = "name: heartbeat
on:
  schedule:
    - cron: '* * * * *'
jobs:
  beat:
    runs-on: linux
    steps:
      - run: echo ${{ github.event_name }} '${{ github.event.schedule }}'
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_scheduled_every_minute_starts_a_run_each_minute() {
    let overrides = HashMap::from([("BATON_SCHEDULES_PERIOD_S".to_string(), "1".to_string())]);
    let stack = TestStack::start_with(|_| {}, overrides).await;
    let ws = workspace();
    let body = json!({ "definition": EVERY_MINUTE }).to_string();
    let path = format!("/v1/workspaces/{ws}/pipelines/heartbeat");
    let put = stack.send(Method::PUT, &path, &stack.admin_token, Some(body)).await;
    assert_eq!(put.status, 201, "{:#}", put.body);
    assert_eq!(put.body["triggers"]["schedule"], json!([{"cron": "* * * * *"}]));

    // Two ticks: within two minutes and a few seconds of the put.
    let runs: Vec<Value> = wait_for("two scheduled runs", Duration::from_secs(150), || async {
        let list = stack.get_ok(&format!("/v1/workspaces/{ws}/runs"), &stack.admin_token).await;
        let items = list["items"].as_array().cloned().unwrap_or_default();
        (items.len() >= 2).then_some(items)
    })
    .await;
    let mut minutes = BTreeSet::new();
    for run in &runs {
        let view = stack.run_view(&ws, run["id"].as_str().unwrap_or_default()).await;
        assert_eq!(view["trigger"]["kind"], "schedule", "{view:#}");
        assert_eq!(view["pipeline"]["name"], "heartbeat");
        let created = view["created_at"].as_str().unwrap_or_default();
        minutes.insert(created.get(..16).unwrap_or_default().to_string());
    }
    assert_eq!(minutes.len(), runs.len(), "one run a minute: {minutes:?}");
    let session = stack.runner(&ws, &["linux"]).await.session_token;
    let claim = stack.wait_claim(&session).await;
    assert_eq!(claim.job.steps[0].run, "echo schedule '* * * * *'");
}
