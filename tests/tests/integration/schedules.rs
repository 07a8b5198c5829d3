//! Pipelines' schedules (behaviour.md §18) on the dev host, as `make dev`
//! runs them: the pipeline's schedules are kept on the emulated
//! EventBridge Scheduler, the dev host fires them (looking every second
//! here, the test's knob; the crons themselves are evaluated as on AWS, by
//! the minute), and a pipeline scheduled every minute gets a run each
//! minute, each a `schedule` event naming its cron.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use baton_api::facts::FactDetail;
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
    // And no minute skipped between them.
    let minute = |text: &str| chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M").ok();
    let first = minutes.first().and_then(|m| minute(m)).expect("a minute");
    let last = minutes.last().and_then(|m| minute(m)).expect("a minute");
    assert_eq!((last - first).num_minutes() + 1, minutes.len() as i64, "consecutive minutes: {minutes:?}");
    let session = stack.runner(&ws, &["linux"]).await.session_token;
    let claim = stack.wait_claim(&session).await;
    assert_eq!(claim.job.work.steps[0].run, "echo schedule '* * * * *'");
}

/// The schedules in the stack's group whose names start with `prefix`:
/// name → expression.
async fn schedules_named(stack: &TestStack, prefix: &str) -> BTreeMap<String, String> {
    let scheduler = stack.clients.scheduler();
    let group = &stack.provisioned.plan.scheduler.group;
    let listed = scheduler.list_schedules().group_name(group).name_prefix(prefix).send().await.unwrap();
    let mut found = BTreeMap::new();
    for summary in listed.schedules() {
        let name = summary.name().unwrap_or_default().to_string();
        // The sync may delete a schedule between the list and this read: it
        // is gone, and the caller's wait looks again.
        match scheduler.get_schedule().group_name(group).name(&name).send().await {
            Ok(schedule) => {
                found.insert(name, schedule.schedule_expression().unwrap_or_default().to_string());
            }
            Err(err) if err.as_service_error().is_some_and(|e| e.is_resource_not_found_exception()) => {}
            Err(err) => panic!("reading schedule {name}: {err:?}"),
        }
    }
    found
}

fn with_crons(crons: &[&str]) -> String {
    let lines: String = crons.iter().map(|c| format!("    - cron: '{c}'\n")).collect();
    format!(
        "name: nightly\non:\n  schedule:\n{lines}jobs:\n  build:\n    runs-on: linux\n    steps:\n      - run: make\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipelines_schedules_on_the_scheduler_follow_it_through_changes_and_its_deletion() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let path = format!("/v1/workspaces/{ws}/pipelines/nightly");
    let put = |definition: String| {
        let body = json!({ "definition": definition }).to_string();
        stack.send(Method::PUT, &path, &stack.admin_token, Some(body))
    };
    let prefix = baton_domain::schedules::name_prefix(&ws, "nightly");
    let wait_schedules = |want: BTreeMap<String, String>| {
        let prefix = prefix.clone();
        let stack = &stack;
        async move {
            wait_for("the pipeline's schedules", Duration::from_secs(30), || {
                let (prefix, want) = (prefix.clone(), want.clone());
                async move { (schedules_named(stack, &prefix).await == want).then_some(()) }
            })
            .await
        }
    };
    let named = |entries: &[(&str, &str)]| -> BTreeMap<String, String> {
        entries.iter().map(|(suffix, expression)| (format!("{prefix}{suffix}"), expression.to_string())).collect()
    };

    // Weekdays at 03:00, and the 13th or any Friday (two schedules).
    assert_eq!(put(with_crons(&["0 3 * * 1-5", "0 0 13 * 5"])).await.status, 201);
    wait_schedules(named(&[
        ("0-0", "cron(0 3 ? * MON,TUE,WED,THU,FRI *)"),
        ("1-0", "cron(0 0 13 * ? *)"),
        ("1-1", "cron(0 0 ? * FRI *)"),
    ]))
    .await;

    // One cron, changed: the others go, the first is updated.
    assert_eq!(put(with_crons(&["30 4 * * *"])).await.status, 200);
    wait_schedules(named(&[("0-0", "cron(30 4 * * ? *)")])).await;

    // The same fact delivered again changes nothing.
    // (The facts' capture is a subscriber of its own, which may trail
    // schedule-sync's.)
    wait_for("a fact for each change", Duration::from_secs(30), || async {
        (stack.facts(baton_api::facts::PipelineChanged::DETAIL_TYPE).len() >= 2).then_some(())
    })
    .await;
    let synced = baton_service::usecases::schedules::sync(&stack.context(), &ws, "nightly").await.unwrap();
    assert_eq!((synced.created, synced.updated, synced.deleted), (0, 0, 0), "{synced:?}");

    // Deleted: no schedule is left.
    let deleted = stack.send(Method::DELETE, &path, &stack.admin_token, None).await;
    assert_eq!(deleted.status, 204, "{:#}", deleted.body);
    wait_schedules(BTreeMap::new()).await;
}
