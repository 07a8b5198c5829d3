//! Runs: creation, the run view, idempotency, run numbers, validation and
//! scoping — behaviour.md §8 and §13 scenarios 23 and 6 (reads), 25.

use crate::workflows_support::*;
use baton_api::facts::{FactDetail, RunAttemptCreated};
use baton_tests::http::Answer;
use baton_tests::runs::{job_in, Identified};
use baton_tests::{workspace, TestStack};
use serde_json::json;

const SPEC_EXAMPLE: &str = include_str!("../../../domain/tests/fixtures/workflows/spec_example.yml");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creating_a_run_answers_its_view_and_orchestrates_attempt_one() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let created = stack.create_run(&ws, SPEC_EXAMPLE).await;
    let run_id = created.id();
    assert_eq!(created["workspace_id"], ws.as_str());
    assert_eq!(created["name"], "ci");
    assert_eq!(created["number"], 1);
    assert_eq!(created["status"], "pending");
    assert_eq!(created["current_attempt"], 1);
    assert!(created["finished_at"].is_null());
    let build = job_in(&created, 1, "build");
    assert_eq!(build["labels"], json!(["linux", "x64"]));
    assert_eq!(build["needs"], json!([]));
    assert_eq!(build["carried_over"], false);
    assert_eq!(build["status"], "pending");
    assert_eq!(build["executions"].as_array().unwrap().len(), 1, "one execution per job");
    assert_eq!(build["executions"][0]["steps"][0]["name"], "compile");
    assert_eq!(job_in(&created, 1, "report")["needs"], json!(["build", "test"]));

    // The orchestration starts the attempt and queues the root job only.
    let queued = queued(&stack, &run_id, 1, "build").await;
    assert_eq!(queued.detail.job.labels, ["linux", "x64"]);
    assert_eq!(queued.detail.job.timeout_s, 30 * 60);
    assert_eq!(queued.spec.work.env.get("RUST_LOG").map(String::as_str), Some("info"), "the spec in the table");
    let view = stack.wait_view(&ws, &run_id, "build queued", |v| job_in(v, 1, "build")["status"] == "queued").await;
    assert_eq!(view["status"], "running");
    assert!(view["started_at"].is_string());
    let execution = &job_in(&view, 1, "build")["executions"][0];
    assert_eq!(execution["status"], "queued", "an execution stays queued until claimed");
    assert!(execution["queued_at"].is_string() && execution["started_at"].is_null());
    assert_eq!(execution["steps"][0]["id"], queued.spec.work.steps[0].id.to_string());
    assert_eq!(job_in(&view, 1, "test")["status"], "pending");
    assert_eq!(queued_keys(&stack, &run_id), ["build"]);
    assert_has_keys(
        &view,
        &[
            "id",
            "workspace_id",
            "name",
            "number",
            "status",
            "current_attempt",
            "created_at",
            "started_at",
            "finished_at",
            "attempts",
        ],
    );
    assert_has_keys(&view["attempts"][0], &["attempt", "status", "rerun_mode", "started_at", "finished_at", "jobs"]);
    let build = job_in(&view, 1, "build");
    assert_has_keys(build, &["id", "key", "status", "status_reason", "labels", "needs", "carried_over", "executions"]);
    assert_has_keys(
        &build["executions"][0],
        &["id", "status", "status_reason", "queued_at", "started_at", "finished_at", "runner_session_id", "steps"],
    );
    assert_has_keys(&build["executions"][0]["steps"][0], &["id", "name", "status", "exit_code"]);
    stack.assert_all_facts_valid();
}

/// Every field api.md shows is present (null or not).
fn assert_has_keys(value: &serde_json::Value, keys: &[&str]) {
    let object = value.as_object().expect("an object");
    for key in keys {
        assert!(object.contains_key(*key), "missing `{key}` in {value:#}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_idempotency_key_returns_the_same_run_and_writes_nothing() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let body = json!({"definition": SPEC_EXAMPLE, "idempotency_key": "deploy-42", "inputs": {"sha": "abc123"}});
    let Answer { status: first_status, body: first } =
        stack.post(&format!("/v1/workspaces/{ws}/runs"), &stack.admin_token, body.clone()).await;
    assert_eq!(first_status, 201, "{first:#}");
    let run_id = first.id();
    let Answer { status: again_status, body: again } =
        stack.post(&format!("/v1/workspaces/{ws}/runs"), &stack.admin_token, body).await;
    assert_eq!(again_status, 200, "{again:#}");
    assert_eq!(again["id"], first["id"]);
    assert_eq!(again["number"], 1);
    assert_eq!(again["inputs"], json!({"sha": "abc123"}));

    // Four concurrent creates with one new key: one run, the same for all.
    let body = json!({"definition": SPEC_EXAMPLE, "idempotency_key": "deploy-43"});
    let path = format!("/v1/workspaces/{ws}/runs");
    let answers = futures::future::join_all((0..4).map(|_| stack.post(&path, &stack.admin_token, body.clone()))).await;
    let mut statuses: Vec<u16> = answers.iter().map(|answer| answer.status).collect();
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 200, 200, 201], "{answers:?}");
    assert!(answers.iter().all(|answer| answer.body["id"] == answers[0].body["id"]));
    assert_eq!(answers[0].body["number"], 2);

    flush_pipeline(&stack, &ws).await;
    assert_eq!(count_facts(&stack, RunAttemptCreated::DETAIL_TYPE, &run_id), 1, "no second fact");
    let Answer { status: _, body: list } = stack.get(&format!("/v1/workspaces/{ws}/runs"), &stack.admin_token).await;
    let ci_runs = list["items"].as_array().unwrap().iter().filter(|r| r["name"] == "ci").count();
    assert_eq!(ci_runs, 2, "one run per key");
}

/// GitHub's `run-name`: the title a run is listed under, expanded from its
/// inputs when it is created; an expression reading what is only known
/// later (a job's outputs) is refused naming the field, and nothing runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_titled_by_its_run_name_expanded_from_its_inputs() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let path = format!("/v1/workspaces/{ws}/runs");
    let definition = "name: deploy\nrun-name: deploy ${{ inputs.version }} to ${{ inputs.environment }}\n\
                      jobs:\n  go:\n    runs-on: linux\n    steps: [{run: 'true'}]\n";
    let inputs = json!({"version": "1.4.2", "environment": "production"});
    let body = json!({"definition": definition, "inputs": inputs});
    let Answer { status, body: created } = stack.post(&path, &stack.admin_token, body).await;
    assert_eq!(status, 201, "{created:#}");
    assert_eq!(
        (created["name"].as_str(), created["title"].as_str()),
        (Some("deploy"), Some("deploy 1.4.2 to production"))
    );
    let Answer { status: _, body: list } = stack.get(&path, &stack.admin_token).await;
    assert_eq!(list["items"][0]["title"], "deploy 1.4.2 to production", "{list:#}");
    let view = stack.get(&format!("{path}/{}", created.id()), &stack.admin_token).await;
    assert_eq!(view.body["title"], "deploy 1.4.2 to production");

    let later = "name: deploy\nrun-name: ${{ needs.go.outputs.v }}\njobs:\n  go:\n    runs-on: linux\n    steps: [{run: 'true'}]\n";
    let Answer { status, body } = stack.post(&path, &stack.admin_token, json!({"definition": later})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("invalid-definition")), "{body:#}");
    assert!(body["error"]["message"].as_str().unwrap().contains("run-name"), "{body:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_numbers_are_consecutive_under_eight_concurrent_creates() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let creates = (0..8).map(|_| {
        let stack = &stack;
        let ws = ws.clone();
        async move {
            let Answer { status, body } = stack
                .post(&format!("/v1/workspaces/{ws}/runs"), &stack.admin_token, json!({"definition": SPEC_EXAMPLE}))
                .await;
            assert_eq!(status, 201, "{body:#}");
            body["number"].as_u64().unwrap()
        }
    });
    let mut numbers = futures::future::join_all(creates).await;
    numbers.sort_unstable();
    assert_eq!(numbers, (1..=8).collect::<Vec<u64>>());
    // Another workflow of the workspace has its own numbers.
    let other =
        stack.create_run(&ws, "name: other\njobs:\n  a:\n    runs-on: linux\n    steps: [{run: 'true'}]\n").await;
    assert_eq!(other["number"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_definition_is_refused_naming_job_and_field_and_nothing_is_written() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let path = format!("/v1/workspaces/{ws}/runs");
    let Answer { status, body } = stack.post(&path, &stack.admin_token, json!({"definition": "jobs: [unclosed"})).await;
    assert_eq!(status, 400, "{body:#}");
    assert_eq!(body["error"]["code"], "invalid-definition");

    let unknown_need = "name: bad\njobs:\n  test:\n    needs: biuld\n    runs-on: linux\n    steps: [{run: 'true'}]\n";
    let Answer { status, body } = stack.post(&path, &stack.admin_token, json!({"definition": unknown_need})).await;
    assert_eq!(status, 400, "{body:#}");
    assert_eq!(body["error"]["code"], "invalid-definition");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("test") && message.contains("needs") && message.contains("biuld"), "{message}");

    let no_runs_on = "name: bad\njobs:\n  a:\n    steps: [{run: 'true'}]\n";
    let Answer { status, body } = stack.post(&path, &stack.admin_token, json!({"definition": no_runs_on})).await;
    assert_eq!(status, 400, "{body:#}");
    assert!(body["error"]["message"].as_str().unwrap().contains("runs-on"), "{body:#}");

    let Answer { status, body } = stack.post(&path, &stack.admin_token, json!({"inputs": {}})).await;
    assert_eq!(status, 400, "{body:#}");
    assert_eq!(body["error"]["code"], "invalid-request");

    flush_pipeline(&stack, &ws).await;
    let Answer { status: _, body: list } = stack.get(&path, &stack.admin_token).await;
    let names: Vec<&str> = list["items"].as_array().unwrap().iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(names, ["sentinel"], "only the sentinel run was written");
    let created: Vec<_> = stack.facts(RunAttemptCreated::DETAIL_TYPE);
    assert!(created.iter().all(|d| d["workflow_name"] == "sentinel"), "no fact for a refused definition");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_not_found_when_unknown_or_read_from_another_workspace() {
    let stack = TestStack::start().await;
    let (ws_a, ws_b) = (workspace(), workspace());
    let run = stack.create_run(&ws_a, SPEC_EXAMPLE).await;
    let run_id = run["id"].as_str().unwrap();
    let token_b = stack.workspace_token(&ws_b).await;

    let Answer { status, body } =
        stack.get(&format!("/v1/workspaces/{ws_a}/runs/{}", uuid::Uuid::now_v7()), &stack.admin_token).await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("not-found")));
    let Answer { status, body: _ } =
        stack.get(&format!("/v1/workspaces/{ws_a}/runs/not-a-uuid"), &stack.admin_token).await;
    assert_eq!(status, 404);
    // Workspace B's token can neither read A's run through A nor through B.
    let Answer { status, body: _ } = stack.get(&format!("/v1/workspaces/{ws_a}/runs/{run_id}"), &token_b).await;
    assert_eq!(status, 404);
    let Answer { status, body: _ } = stack.get(&format!("/v1/workspaces/{ws_b}/runs/{run_id}"), &token_b).await;
    assert_eq!(status, 404);
    let Answer { status, body: _ } =
        stack.post(&format!("/v1/workspaces/{ws_b}/runs/{run_id}/cancel"), &token_b, json!({})).await;
    assert_eq!(status, 404);
    let Answer { status, body: _ } =
        stack.post(&format!("/v1/workspaces/{ws_b}/runs/{run_id}/rerun"), &token_b, json!({"mode": "all"})).await;
    assert_eq!(status, 404);
    let Answer { status, body: list } = stack.get(&format!("/v1/workspaces/{ws_b}/runs"), &token_b).await;
    assert_eq!(status, 200);
    assert_eq!(list["items"], json!([]));
    // Without a token: 401.
    let response = stack.http.get(stack.url(&format!("/v1/workspaces/{ws_a}/runs/{run_id}"))).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 401);
    // A's run is still there for A.
    assert_eq!(stack.run_view(&ws_a, run_id).await["id"], run["id"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_are_listed_newest_first_in_pages_and_filtered_by_status() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(stack.create_run(&ws, SPEC_EXAMPLE).await.id());
    }
    let path = format!("/v1/workspaces/{ws}/runs");
    let Answer { status, body: page } = stack.get(&format!("{path}?limit=2"), &stack.admin_token).await;
    assert_eq!(status, 200, "{page:#}");
    let first: Vec<&str> = page["items"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(first, [ids[2].as_str(), ids[1].as_str()]);
    let cursor = page["next_cursor"].as_str().expect("a next page");
    let Answer { status: _, body: page } =
        stack.get(&format!("{path}?limit=2&cursor={cursor}"), &stack.admin_token).await;
    let second: Vec<&str> = page["items"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(second, [ids[0].as_str()]);
    assert!(page["next_cursor"].is_null());

    let Answer { status: _, body: cancelled } =
        stack.get(&format!("{path}?status=cancelled"), &stack.admin_token).await;
    assert_eq!(cancelled["items"], json!([]));
    let Answer { status, body: _ } =
        stack.post(&format!("{path}/{}/cancel", ids[1]), &stack.admin_token, json!({})).await;
    assert_eq!(status, 202);
    let Answer { status: _, body: cancelled } =
        stack.get(&format!("{path}?status=cancelled"), &stack.admin_token).await;
    let only: Vec<&str> = cancelled["items"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(only, [ids[1].as_str()]);

    let long = "w".repeat(201);
    for bad in ["limit=0", "limit=1000", "status=done", "cursor=zzz", &format!("workflow={long}")] {
        let Answer { status, body } = stack.get(&format!("{path}?{bad}"), &stack.admin_token).await;
        assert_eq!(status, 400, "{bad}: {body:#}");
    }
}

/// The workflow filter is the API's, so a page holds a page of matching
/// runs however many others came between them (a filter of the page the
/// console had read would show an empty page and a "next").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_are_filtered_by_workflow_across_pages_and_with_status() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let run_of = |name: &str| format!("name: {name}\njobs:\n  a: {{runs-on: linux, steps: [{{run: x}}]}}\n");
    let mut deploys = Vec::new();
    for n in 0..6 {
        if n % 3 == 0 {
            deploys.push(stack.create_run(&ws, &run_of("deploy-prod")).await.id());
        } else {
            stack.create_run(&ws, &run_of("ci")).await;
        }
    }
    let path = format!("/v1/workspaces/{ws}/runs");
    let ids = |page: &serde_json::Value| -> Vec<String> {
        page["items"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_string()).collect()
    };
    let Answer { status, body: page } = stack.get(&format!("{path}?workflow=deploy&limit=1"), &stack.admin_token).await;
    assert_eq!(status, 200, "{page:#}");
    assert_eq!(ids(&page), [deploys[1].clone()], "newest first, the ci runs between skipped");
    let cursor = page["next_cursor"].as_str().expect("a next page");
    let page = stack.get_ok(&format!("{path}?workflow=deploy&limit=1&cursor={cursor}"), &stack.admin_token).await;
    assert_eq!(ids(&page), [deploys[0].clone()]);
    let page = stack.get_ok(&format!("{path}?workflow=Deploy"), &stack.admin_token).await;
    assert_eq!(ids(&page), Vec::<String>::new(), "the name as written, case included");

    stack.post(&format!("{path}/{}/cancel", deploys[0]), &stack.admin_token, json!({})).await;
    let page = stack.get_ok(&format!("{path}?workflow=deploy&status=cancelled"), &stack.admin_token).await;
    assert_eq!(ids(&page), [deploys[0].clone()], "both filters hold");
    let page = stack.get_ok(&format!("{path}?workflow=ci&status=cancelled"), &stack.admin_token).await;
    assert_eq!(ids(&page), Vec::<String>::new());
}

/// A claim is not written to the attempt: the view reads the runner
/// records of every unfinished execution (100 to a request) and shows the
/// claimed ones running, with the claim's instant and session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_view_of_a_wide_run_shows_which_queued_jobs_runners_have_claimed() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let jobs: String = (0..130).map(|i| format!("  j{i:03}: {{runs-on: linux, steps: [{{run: 'true'}}]}}\n")).collect();
    let run = stack.create_run(&ws, &format!("name: wide\njobs:\n{jobs}")).await;
    let run_id = run.id();
    let view = stack
        .wait_view(&ws, &run_id, "every job queued", |v| {
            v["attempts"][0]["jobs"].as_array().is_some_and(|jobs| jobs.iter().all(|j| j["status"] == "queued"))
        })
        .await;
    assert_eq!(view["attempts"][0]["jobs"].as_array().map(Vec::len), Some(130));

    let runner = stack.runner(&ws, &["linux"]).await;
    let mut claimed = Vec::new();
    for _ in 0..3 {
        let before = chrono::Utc::now();
        let job = stack.claim(&runner.session_token).await.expect("a queued job");
        claimed.push((job.job_execution_id.to_string(), before));
    }
    let view = stack.run_view(&ws, &run_id).await;
    let executions: Vec<&serde_json::Value> =
        view["attempts"][0]["jobs"].as_array().unwrap().iter().map(|j| &j["executions"][0]).collect();
    let running: Vec<&&serde_json::Value> = executions.iter().filter(|e| e["status"] == "running").collect();
    assert_eq!(running.len(), 3, "exactly the claimed ones run");
    for (id, before) in &claimed {
        let execution = executions.iter().find(|e| e["id"] == id.as_str()).expect("in the view");
        assert_eq!(execution["status"], "running");
        assert_eq!(execution["runner_session_id"], runner.session_id.to_string());
        let started: chrono::DateTime<chrono::Utc> = serde_json::from_value(execution["started_at"].clone()).unwrap();
        assert!(started >= *before, "started when claimed");
    }
    assert_eq!(executions.iter().filter(|e| e["status"] == "queued").count(), 127);
}
