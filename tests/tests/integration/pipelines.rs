//! Pipelines (behaviour.md §18) through the real functions on the dev
//! host: a definition kept under a name, versioned by its text's digest,
//! refused when its `on:` cannot be honoured, and dispatched with typed
//! inputs into a run whose jobs read the `github` context as a ported
//! GitHub workflow reads it.

use baton_tests::http::Answer;
use baton_tests::runs::{job_in, Identified};
use baton_tests::{workspace, TestStack};
use reqwest::Method;
use serde_json::{json, Value};

async fn put(stack: &TestStack, ws: &str, name: &str, definition: &str) -> Answer {
    let body = json!({ "definition": definition }).to_string();
    stack.send(Method::PUT, &format!("/v1/workspaces/{ws}/pipelines/{name}"), &stack.admin_token, Some(body)).await
}

async fn dispatch(stack: &TestStack, ws: &str, name: &str, inputs: Value) -> Answer {
    stack
        .post(&format!("/v1/workspaces/{ws}/pipelines/{name}/runs"), &stack.admin_token, json!({ "inputs": inputs }))
        .await
}

const BUILD: &str = "name: build
on:
  push:
    branches: [main, 'release/**']
    paths-ignore: ['docs/**']
  schedule:
    - cron: '30 5 * * 1-5'
  workflow_dispatch:
jobs:
  build:
    runs-on: linux
    steps:
      - run: make
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelines_are_put_versioned_listed_read_and_deleted_and_a_bad_on_is_refused_naming_the_field() {
    let stack = TestStack::start().await;
    let (ws, other) = (workspace(), workspace());
    let created = put(&stack, &ws, "build", BUILD).await;
    assert_eq!(created.status, 201, "{:#}", created.body);
    let version = created.body["version"].as_str().expect("a version").to_string();
    assert!(version.starts_with("sha256:"), "{version}");
    let triggers = &created.body["triggers"];
    assert_eq!(triggers["push"]["branches"], json!({"patterns": ["main", "release/**"], "ignore": false}));
    assert_eq!(triggers["push"]["paths"], json!({"patterns": ["docs/**"], "ignore": true}));
    assert_eq!(triggers["schedule"], json!([{"cron": "30 5 * * 1-5"}]));
    assert_eq!(triggers["workflow_dispatch"], json!({"inputs": []}));

    let same = put(&stack, &ws, "build", BUILD).await;
    assert_eq!((same.status, &same.body["version"]), (200, &json!(version)), "the same text is no new version");
    assert_eq!(same.body["updated_at"], created.body["updated_at"], "and writes nothing");
    let changed_text = BUILD.replace("make", "make all");
    let changed = put(&stack, &ws, "build", &changed_text).await;
    assert_eq!(changed.status, 200);
    assert_ne!(changed.body["version"], json!(version), "an edit is a new version");
    assert_eq!(put(&stack, &ws, "deploy", "jobs:\n  d: {runs-on: linux, steps: [{run: ship}]}\n").await.status, 201);

    let listed = stack.get_ok(&format!("/v1/workspaces/{ws}/pipelines"), &stack.admin_token).await;
    let names: Vec<&str> = listed["items"].as_array().unwrap().iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, ["build", "deploy"]);
    assert_eq!(listed["items"][1]["triggers"], json!({}), "no on: starts only when asked");
    let read = stack.get_ok(&format!("/v1/workspaces/{ws}/pipelines/build"), &stack.admin_token).await;
    assert_eq!(read["definition"], json!(changed_text));
    assert_eq!(read["version"], changed.body["version"]);

    // Another workspace sees none of them.
    let theirs = stack.get_ok(&format!("/v1/workspaces/{other}/pipelines"), &stack.admin_token).await;
    assert_eq!(theirs["items"], json!([]));
    assert_eq!(stack.get(&format!("/v1/workspaces/{other}/pipelines/build"), &stack.admin_token).await.status, 404);

    // Bad input is refused with the field it is about, and writes nothing.
    for (name, definition, code, field) in [
        ("nightly", "on:\n  schedule:\n    - cron: '61 * * * *'\njobs:\n  a: {runs-on: linux, steps: [{run: x}]}\n", "invalid-definition", "on.schedule[0].cron"),
        ("nightly", "on:\n  release:\n    types: [published]\njobs:\n  a: {runs-on: linux, steps: [{run: x}]}\n", "invalid-definition", "on.release"),
        ("nightly", "on:\n  push:\n    branches: [main]\n    branches-ignore: [dev]\njobs:\n  a: {runs-on: linux, steps: [{run: x}]}\n", "invalid-definition", "on.push.branches-ignore"),
        ("nightly", "jobs:\n  a: {runs-on: linux}\n", "invalid-definition", "steps"),
        ("bad name", BUILD, "invalid-request", "pipeline names"),
        ("-x", BUILD, "invalid-request", "pipeline names"),
    ] {
        let refused = put(&stack, &ws, &name.replace(' ', "%20"), definition).await;
        assert_eq!((refused.status, refused.code()), (400, code), "{name}: {:#}", refused.body);
        assert!(refused.body["error"]["message"].as_str().unwrap_or("").contains(field), "{field}: {:#}", refused.body);
    }
    assert_eq!(stack.get(&format!("/v1/workspaces/{ws}/pipelines/nightly"), &stack.admin_token).await.status, 404);

    let path = format!("/v1/workspaces/{ws}/pipelines/deploy");
    assert_eq!(stack.send(Method::DELETE, &path, &stack.admin_token, None).await.status, 204);
    assert_eq!(stack.send(Method::DELETE, &path, &stack.admin_token, None).await.status, 404);
    let gone = dispatch(&stack, &ws, "deploy", json!({})).await;
    assert_eq!((gone.status, gone.code()), (404, "not-found"));
}

const RELEASE: &str = "name: release
on:
  workflow_dispatch:
    inputs:
      env:
        type: choice
        options: [staging, prod]
        required: true
      dry:
        type: boolean
        default: true
      count:
        type: number
concurrency:
  group: ${{ github.workflow }}-${{ github.event.inputs.env }}
jobs:
  ship:
    runs-on: linux
    if: github.event_name == 'workflow_dispatch'
    steps:
      - run: echo ${{ github.event_name }} ${{ github.event.inputs.env }} dry=${{ inputs.dry }} ${{ github.workflow }}#${{ github.run_number }} by ${{ github.actor }}
  typed:
    runs-on: linux
    if: github.event.inputs.dry == true && github.event.inputs.count == 3
    steps:
      - run: echo typed
  never:
    runs-on: linux
    if: github.event.inputs.dry == 'yes'
    steps:
      - run: echo never
";

/// A dispatch is typed by the pipeline's declared inputs (defaults filled
/// in, a bad one refused naming it), the run says what started it and which
/// version it runs, and its jobs read `github.*` with its types (a boolean
/// compares as one, as on GitHub).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatch_types_its_inputs_and_its_jobs_read_the_github_context() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let stored = put(&stack, &ws, "release", RELEASE).await;
    assert_eq!(stored.status, 201, "{:#}", stored.body);
    let inputs = &stored.body["triggers"]["workflow_dispatch"]["inputs"];
    assert_eq!(inputs[0], json!({"id": "env", "type": "choice", "required": true, "options": ["staging", "prod"]}));
    assert_eq!(inputs[1]["default"], json!(true));

    for (given, input, why) in [
        (json!({}), "inputs.env", "is required"),
        (json!({"env": "qa"}), "inputs.env", "not one of the options"),
        (json!({"env": "prod", "count": "many"}), "inputs.count", "not a number"),
        (json!({"env": "prod", "colour": "red"}), "inputs.colour", "not an input"),
    ] {
        let refused = dispatch(&stack, &ws, "release", given).await;
        assert_eq!((refused.status, refused.code()), (400, "invalid-inputs"), "{:#}", refused.body);
        let message = refused.body["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains(input) && message.contains(why), "{message}");
    }
    let runs = stack.get_ok(&format!("/v1/workspaces/{ws}/runs"), &stack.admin_token).await;
    assert_eq!(runs["items"], json!([]), "a refused dispatch creates no run");

    let started = dispatch(&stack, &ws, "release", json!({"env": "prod", "count": "3"})).await;
    assert_eq!(started.status, 201, "{:#}", started.body);
    let view = &started.body;
    assert_eq!(view["inputs"], json!({"env": "prod", "dry": true, "count": 3}), "typed, the default filled in");
    assert_eq!(view["trigger"]["kind"], "dispatch");
    assert_eq!(view["trigger"]["actor"], view["created_by"]);
    assert_eq!(view["pipeline"], json!({"name": "release", "version": stored.body["version"]}));
    assert_eq!(view["attempts"][0]["concurrency"]["group"], "release-prod", "the group read github.*");

    let session = stack.runner(&ws, &["linux"]).await.session_token;
    let mut ran = Vec::new();
    for _ in 0..2 {
        let claim = stack.wait_claim(&session).await;
        ran.push(claim.job.work.steps[0].run.clone());
        let done = stack
            .complete(&claim.lease.token, claim.job_execution_id, json!({"status": "succeeded", "steps": []}))
            .await;
        assert_eq!(done.status, 200, "{:#}", done.body);
    }
    ran.sort();
    let actor = view["created_by"].as_str().unwrap_or_default();
    assert_eq!(ran, ["echo typed".to_string(), format!("echo workflow_dispatch prod dry=true release#1 by {actor}")]);
    let run_id = view.id();
    let done = stack.wait_run_status(&ws, &run_id, "succeeded").await;
    assert_eq!(job_in(&done, 1, "never")["status"], "skipped", "'yes' is not the boolean true");

    // A whole file posted is a run the API started.
    let posted =
        stack.create_run(&ws, "jobs:\n  a: {runs-on: linux, steps: [{run: 'echo ${{ github.event_name }}'}]}\n").await;
    assert_eq!(posted["trigger"]["kind"], "api");
    assert!(posted.get("pipeline").is_none());
}
