//! Reusable workflows (behaviour.md §8, issue 43) through the real
//! functions on the dev host: a pipeline with `on: workflow_call` is
//! stored, another workflow's job calls it with `uses:
//! ./.github/workflows/<name>.yml`, and its jobs run as jobs of the
//! caller's run, reading the caller's inputs and secrets, while the job
//! after the call reads the called workflow's output.

use baton_tests::http::Answer;
use baton_tests::runs::{job_in, Identified};
use baton_tests::{workspace, TestStack};
use reqwest::Method;
use serde_json::{json, Value};

async fn put(stack: &TestStack, ws: &str, name: &str, definition: &str) -> Answer {
    let body = json!({ "definition": definition }).to_string();
    stack.send(Method::PUT, &format!("/v1/workspaces/{ws}/pipelines/{name}"), &stack.admin_token, Some(body)).await
}

/// A shared build workflow as teams write one: typed inputs, a secret it
/// is passed under its own name, an output from its last job.
const BUILD: &str = r#"name: build
on:
  workflow_call:
    inputs:
      target: {type: string, required: true}
      release: {type: boolean, default: false}
    secrets:
      registry_token: {required: true}
    outputs:
      image:
        value: ${{ jobs.package.outputs.image }}
jobs:
  compile:
    runs-on: linux
    steps:
      - run: make ${{ inputs.target }} RELEASE=${{ inputs.release }}
  package:
    needs: compile
    runs-on: linux
    outputs: [image]
    env:
      TOKEN: ${{ secrets.registry_token }}
    steps:
      - run: ./package
"#;

const CI: &str = r#"name: ci
on:
  workflow_dispatch:
    inputs:
      target: {type: string, default: app}
jobs:
  build:
    name: Build
    uses: ./.github/workflows/build.yml
    with:
      target: ${{ inputs.target }}-linux
    secrets:
      registry_token: ${{ secrets.REGISTRY_TOKEN }}
  deploy:
    needs: build
    if: needs.build.result == 'success'
    runs-on: linux
    steps:
      - run: ./deploy ${{ needs.build.outputs.image }}
"#;

/// Sets the workspace secret `REGISTRY_TOKEN` the callers pass to `build`.
async fn set_registry_token(stack: &TestStack, ws: &str) {
    let secret = json!({"value": "reg-s3cr3t"}).to_string();
    let path = format!("/v1/workspaces/{ws}/secrets/REGISTRY_TOKEN");
    assert_eq!(stack.send(Method::PUT, &path, &stack.admin_token, Some(secret)).await.status, 204);
}

/// Each job of a run view's first attempt: its key and its name.
fn keys_and_names(view: &Value) -> Vec<(&str, Option<&str>)> {
    view["attempts"][0]["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|job| (job["key"].as_str().unwrap_or_default(), job["name"].as_str()))
        .collect()
}

/// Claims the next job and completes it as succeeded with `outputs`;
/// answers the job's key, first step and env as the runner got them.
async fn run_next(stack: &TestStack, session: &str, outputs: Value) -> (String, String, Value) {
    let claim = stack.wait_claim(session).await;
    let seen = (claim.job.work.key.clone(), claim.job.work.steps[0].run.clone(), json!(claim.job.work.env));
    let body = json!({"status": "succeeded", "steps": [], "outputs": outputs});
    let done = stack.complete(&claim.lease.token, claim.job_execution_id, body).await;
    assert_eq!(done.status, 200, "{:#}", done.body);
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_called_pipelines_jobs_run_in_the_callers_run_with_its_inputs_secrets_and_outputs() {
    let stack = TestStack::start().await;
    let ws = workspace();
    // Calling a pipeline not stored yet is refused naming the job, and
    // nothing is stored.
    let early = put(&stack, &ws, "ci", CI).await;
    assert_eq!((early.status, early.code()), (400, "invalid-definition"), "{:#}", early.body);
    let message = early.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("job `build`, field `uses`") && message.contains("no pipeline `build`"), "{message}");

    let stored = put(&stack, &ws, "build", BUILD).await;
    assert_eq!(stored.status, 201, "a pipeline with on: workflow_call is stored: {:#}", stored.body);
    assert_eq!(put(&stack, &ws, "ci", CI).await.status, 201);
    set_registry_token(&stack, &ws).await;

    let started =
        stack.post(&format!("/v1/workspaces/{ws}/pipelines/ci/runs"), &stack.admin_token, json!({"inputs": {}})).await;
    assert_eq!(started.status, 201, "{:#}", started.body);
    let run_id = started.body.id();
    let jobs = keys_and_names(&started.body);
    assert_eq!(
        jobs,
        [("build--compile", Some("Build / compile")), ("build--package", Some("Build / package")), ("deploy", None)],
        "the called jobs are the run's, named as GitHub names them"
    );

    let session = stack.runner(&ws, &["linux"]).await.session_token;
    let (key, run, _) = run_next(&stack, &session, json!({})).await;
    assert_eq!((key.as_str(), run.as_str()), ("build--compile", "make app-linux RELEASE=false"), "inputs as given");
    let claim = stack.wait_claim(&session).await;
    assert_eq!(claim.job.work.key, "build--package");
    assert_eq!(claim.job.work.env.get("TOKEN").map(String::as_str), Some("reg-s3cr3t"), "the secret it was passed");
    assert_eq!(claim.job.secret_values, ["reg-s3cr3t"], "and masked");
    let body = json!({"status": "succeeded", "steps": [], "outputs": {"image": "registry/app:41"}});
    assert_eq!(stack.complete(&claim.lease.token, claim.job_execution_id, body).await.status, 200);
    let (key, run, _) = run_next(&stack, &session, json!({})).await;
    assert_eq!((key.as_str(), run.as_str()), ("deploy", "./deploy registry/app:41"), "the call's output");

    let done = stack.wait_run_status(&ws, &run_id, "succeeded").await;
    assert_eq!(job_in(&done, 1, "deploy")["status"], "succeeded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_calls_only_its_own_pipelines() {
    let stack = TestStack::start().await;
    let (ours, theirs) = (workspace(), workspace());
    assert_eq!(put(&stack, &theirs, "build", BUILD).await.status, 201);
    let posted =
        stack.post(&format!("/v1/workspaces/{ours}/runs"), &stack.admin_token, json!({"definition": CI})).await;
    assert_eq!((posted.status, posted.code()), (400, "invalid-definition"), "{:#}", posted.body);
    let message = posted.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("no pipeline `build`"), "{message}");
    let runs = stack.get_ok(&format!("/v1/workspaces/{ours}/runs"), &stack.admin_token).await;
    assert_eq!(runs["items"], json!([]), "a refused call creates no run");
}

/// `build` called once a target, as a matrix of calls; `deploy` reads the
/// last call's image and the calls' result together.
const CI_MATRIX: &str = r#"name: ci-matrix
jobs:
  build:
    strategy:
      fail-fast: false
      matrix:
        target: [app, cli]
    uses: ./.github/workflows/build.yml
    with:
      target: ${{ matrix.target }}
      release: ${{ strategy.job-index == 1 }}
    secrets:
      registry_token: ${{ secrets.REGISTRY_TOKEN }}
  deploy:
    needs: build
    runs-on: linux
    steps:
      - run: ./deploy ${{ needs.build.outputs.image }} ${{ needs.build.result }}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_matrix_of_calls_runs_the_called_pipeline_once_a_combination() {
    let stack = TestStack::start().await;
    let ws = workspace();
    assert_eq!(put(&stack, &ws, "build", BUILD).await.status, 201);
    set_registry_token(&stack, &ws).await;
    let started =
        stack.post(&format!("/v1/workspaces/{ws}/runs"), &stack.admin_token, json!({"definition": CI_MATRIX})).await;
    assert_eq!(started.status, 201, "{:#}", started.body);
    let run_id = started.body.id();
    let jobs = keys_and_names(&started.body);
    assert_eq!(
        jobs,
        [
            ("build-1--compile", Some("build (app) / compile")),
            ("build-1--package", Some("build (app) / package")),
            ("build-2--compile", Some("build (cli) / compile")),
            ("build-2--package", Some("build (cli) / package")),
            ("deploy", None)
        ]
    );
    let session = stack.runner(&ws, &["linux"]).await.session_token;
    let mut compiled = Vec::new();
    for _ in 0..4 {
        let claim = stack.wait_claim(&session).await;
        let key = claim.job.work.key.clone();
        let outputs = if key.ends_with("--package") { json!({"image": format!("registry/{key}")}) } else { json!({}) };
        if key.ends_with("--compile") {
            compiled.push((key.clone(), claim.job.work.steps[0].run.clone()));
        }
        let body = json!({"status": "succeeded", "steps": [], "outputs": outputs});
        assert_eq!(stack.complete(&claim.lease.token, claim.job_execution_id, body).await.status, 200);
    }
    compiled.sort();
    assert_eq!(
        compiled,
        [
            ("build-1--compile".to_string(), "make app RELEASE=false".to_string()),
            ("build-2--compile".to_string(), "make cli RELEASE=true".to_string())
        ],
        "each call its matrix values and its place"
    );
    let (key, run, _) = run_next(&stack, &session, json!({})).await;
    assert_eq!((key.as_str(), run.as_str()), ("deploy", "./deploy registry/build-2--package success"));
    stack.wait_run_status(&ws, &run_id, "succeeded").await;
}
