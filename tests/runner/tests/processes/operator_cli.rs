//! The `baton` operator CLI against the local stack, end to end with a real
//! `baton-runner`: a registration token, a submitted run, watched to its end,
//! rerun and cancelled.

use std::process::Output;

use crate::support::*;
use baton_tests::{workspace, TestStack, WAIT};

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

const WORKFLOW: &str = "name: cli\njobs:\n  build:\n    runs-on: linux\n    steps:\n      - {name: compile, run: echo compiled > out.txt}\n      - {name: inspect, run: grep -q compiled out.txt}\n  test:\n    needs: build\n    runs-on: linux\n    steps: [{name: check, run: 'true'}]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_creates_a_token_submits_a_run_watches_it_succeed_and_reruns_it() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let created = baton(&stack, &["token", "create", "--workspace", &ws, "--max-claims", "2"]).await;
    assert!(created.status.success(), "{}", stderr(&created));
    let token = stdout(&created).trim().to_string();
    assert!(token.starts_with("brt_"), "only the secret on stdout: {token:?}");
    let mut runner = Runner::start(&stack, &token, "linux", &[]);

    let file = scratch().join("ci.yml");
    std::fs::write(&file, WORKFLOW).expect("write the workflow");
    let submitted = baton(&stack, &["run", "submit", "--workspace", &ws, &file.display().to_string()]).await;
    assert!(submitted.status.success(), "{}", stderr(&submitted));
    let run_id = stdout(&submitted).trim().to_string();
    assert!(uuid::Uuid::parse_str(&run_id).is_ok(), "the run id on stdout: {run_id:?}");

    let watched = baton(&stack, &["run", "watch", "--workspace", &ws, &run_id, "--interval-s", "1"]).await;
    let lines = stdout(&watched);
    assert!(watched.status.success(), "watch exits 0 on success:\n{lines}\n{}", stderr(&watched));
    // Finished jobs and steps say how long they took; no colour off a terminal.
    for expected in [
        "  job build: succeeded in ",
        "    step build/compile: succeeded (exit 0) in ",
        "    step build/inspect: succeeded (exit 0) in ",
        "  job test: succeeded in ",
    ] {
        assert!(
            lines.lines().any(|l| l.starts_with(expected) && l.ends_with('s')),
            "missing {expected:?} in:\n{lines}"
        );
    }
    assert!(lines.lines().any(|l| l == "run cli #1 (attempt 1): succeeded"), "{lines}");
    assert!(!lines.contains('\x1b'), "plain text when stdout is not a terminal:\n{lines}");

    // Listed newest first, as text and as JSON; the graph in both languages.
    let second = baton(&stack, &["run", "submit", "--workspace", &ws, &file.display().to_string()]).await;
    let second_id = stdout(&second).trim().to_string();
    let listed = baton(&stack, &["run", "list", "--workspace", &ws]).await;
    assert!(listed.status.success(), "{}", stderr(&listed));
    let rows: Vec<String> = stdout(&listed).lines().map(String::from).collect();
    assert!(rows.len() == 2 && rows[0].starts_with(&second_id) && rows[1].starts_with(&run_id), "{rows:#?}");
    assert!(rows[1].contains("cli #1  succeeded"), "{rows:#?}");
    let page =
        baton(&stack, &["--json", "run", "list", "--workspace", &ws, "--status", "succeeded", "--limit", "1"]).await;
    let page: serde_json::Value = serde_json::from_slice(&page.stdout).expect("a JSON run list");
    assert_eq!(page["items"][0]["id"], run_id.as_str(), "{page:#}");
    let mermaid = baton(&stack, &["run", "graph", "--workspace", &ws, &run_id]).await;
    assert!(stdout(&mermaid).contains("j_build --> j_test"), "{}", stdout(&mermaid));
    assert!(stdout(&mermaid).contains("j_test[\"test (succeeded)\"]:::succeeded"), "{}", stdout(&mermaid));
    let dot = baton(&stack, &["run", "graph", "--workspace", &ws, &run_id, "--format", "dot"]).await;
    assert!(
        stdout(&dot).starts_with("digraph run {") && stdout(&dot).contains("j_build -> j_test;"),
        "{}",
        stdout(&dot)
    );
    let cancelled_second = baton(&stack, &["run", "cancel", "--workspace", &ws, &second_id]).await;
    assert!(cancelled_second.status.success(), "{}", stderr(&cancelled_second));
    // The token capped the session at two claims: the runner stops claiming and exits 0.
    assert!(runner.exited(WAIT).await.success());

    let nothing_failed = baton(&stack, &["run", "rerun", "--workspace", &ws, &run_id, "--mode", "failed"]).await;
    assert!(!nothing_failed.status.success());
    assert!(stderr(&nothing_failed).contains("no-failed-jobs"), "{}", stderr(&nothing_failed));

    let rerun = baton(&stack, &["run", "rerun", "--workspace", &ws, &run_id, "--mode", "all"]).await;
    assert!(rerun.status.success(), "{}", stderr(&rerun));
    assert!(stdout(&rerun).contains("attempt 2"), "{}", stdout(&rerun));
    // No runner is left: cancel the new attempt, and watch reports it failed to succeed.
    let cancelled = baton(&stack, &["run", "cancel", "--workspace", &ws, &run_id]).await;
    assert!(cancelled.status.success(), "{}", stderr(&cancelled));
    let watched = baton(&stack, &["run", "watch", "--workspace", &ws, &run_id, "--interval-s", "1"]).await;
    assert!(!watched.status.success(), "a cancelled run exits non-zero:\n{}", stdout(&watched));
    assert!(stdout(&watched).contains("(attempt 2): cancelled"), "{}", stdout(&watched));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_reports_api_errors_with_their_code_and_a_non_zero_exit() {
    let stack = TestStack::start().await;
    let unknown = uuid::Uuid::now_v7().to_string();
    let missing = baton(&stack, &["run", "get", "--workspace", "ws1", &unknown]).await;
    assert!(!missing.status.success());
    assert!(stderr(&missing).contains("404 not-found"), "{}", stderr(&missing));

    let file = scratch().join("bad.yml");
    std::fs::write(&file, "name: bad\njobs: {}\n").expect("write");
    let invalid = baton(&stack, &["run", "submit", "--workspace", "ws1", &file.display().to_string()]).await;
    assert!(!invalid.status.success());
    assert!(stderr(&invalid).contains("invalid-definition"), "{}", stderr(&invalid));

    let refused = tokio::process::Command::new(env!("CARGO_BIN_EXE_baton-under-test"))
        .args(["token", "create", "--workspace", "ws1", "--api", &stack.api, "--token", "bat_wrong"])
        .output()
        .await
        .expect("baton runs");
    assert!(!refused.status.success());
    assert!(stderr(&refused).contains("unauthenticated"), "{}", stderr(&refused));
}

const PIPELINE: &str = "name: release\non:\n  workflow_dispatch:\n    inputs:\n      env: {type: choice, options: [staging, prod], required: true}\njobs:\n  ship:\n    runs-on: linux\n    steps:\n      - run: test \"${{ github.event_name }}/${{ github.event.inputs.env }}/${{ github.workflow }}\" = workflow_dispatch/prod/release\n";

/// An operator keeps a workflow as a pipeline and runs it from the CLI with
/// an input; a real runner runs it, its step reading the `github` context.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_stores_a_pipeline_and_runs_it_with_inputs_from_the_cli() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let file = scratch().join("release.yml");
    std::fs::write(&file, PIPELINE).expect("write the pipeline");
    let path = file.display().to_string();
    let put = baton(&stack, &["pipeline", "put", "--workspace", &ws, "release", &path]).await;
    assert!(put.status.success(), "{}", stderr(&put));
    assert!(stdout(&put).starts_with("pipeline release stored: version sha256:"), "{}", stdout(&put));
    let listed = baton(&stack, &["pipeline", "list", "--workspace", &ws]).await;
    assert!(
        stdout(&listed).contains("release  sha256:") && stdout(&listed).contains("on: workflow_dispatch"),
        "{}",
        stdout(&listed)
    );
    let shown = baton(&stack, &["pipeline", "show", "--workspace", &ws, "release"]).await;
    assert_eq!(stdout(&shown), PIPELINE, "the text as stored");

    let refused = baton(&stack, &["pipeline", "run", "--workspace", &ws, "release"]).await;
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("invalid-inputs") && stderr(&refused).contains("inputs.env"),
        "{}",
        stderr(&refused)
    );

    let token = stdout(&baton(&stack, &["token", "create", "--workspace", &ws]).await).trim().to_string();
    let _runner = Runner::start(&stack, &token, "linux", &[]);
    let ran = tokio::time::timeout(
        WAIT,
        baton(&stack, &["pipeline", "run", "--workspace", &ws, "release", "--input", "env=prod", "--watch"]),
    )
    .await
    .expect("the run ends");
    let lines = stdout(&ran);
    assert!(ran.status.success(), "the dispatched run succeeds:\n{lines}\n{}", stderr(&ran));
    assert!(lines.lines().any(|l| l == "run release #1 (attempt 1): succeeded"), "{lines}");

    let deleted = baton(&stack, &["pipeline", "delete", "--workspace", &ws, "release"]).await;
    assert!(deleted.status.success(), "{}", stderr(&deleted));
    let gone = baton(&stack, &["pipeline", "show", "--workspace", &ws, "release"]).await;
    assert!(stderr(&gone).contains("404 not-found"), "{}", stderr(&gone));
}

/// An operator makes a GitHub hook from the CLI (the URL and the secret
/// printed once), GitHub delivers a signed push, and a real runner runs the
/// pipeline it started, which reads the push's ref and commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_creates_a_hook_from_the_cli_and_a_signed_push_runs_the_pipeline() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let file = scratch().join("ci.yml");
    std::fs::write(
        &file,
        "name: ci\non:\n  push:\n    branches: [main]\njobs:\n  test:\n    runs-on: linux\n    steps:\n      - run: test \"${{ github.ref_name }}@${{ github.sha }}\" = \"main@$EXPECTED\"\n        env: {EXPECTED: fbaef36f3f7a88143d85708201b2ec1d472061d4}\n",
    )
    .expect("write the pipeline");
    let set = baton(&stack, &["pipeline", "set", "--workspace", &ws, "ci", &file.display().to_string()]).await;
    assert!(set.status.success(), "{}", stderr(&set));

    let created = baton(&stack, &["hook", "create", "--workspace", &ws, "--provider", "github"]).await;
    assert!(created.status.success(), "{}", stderr(&created));
    let printed = stdout(&created);
    let field = |name: &str| {
        printed.lines().find_map(|l| l.strip_prefix(&format!("{name}: "))).map(str::to_string).unwrap_or_default()
    };
    let (url, secret) = (field("url"), field("secret"));
    let id = url.rsplit('/').next().unwrap_or_default().to_string();
    assert!(url.ends_with(&format!("/v1/hooks/{id}")) && !secret.is_empty(), "{printed}");
    let listed = baton(&stack, &["hook", "list", "--workspace", &ws]).await;
    assert!(stdout(&listed).contains(&id) && !stdout(&listed).contains(&secret), "{}", stdout(&listed));

    let token = stdout(&baton(&stack, &["token", "create", "--workspace", &ws]).await).trim().to_string();
    let _runner = Runner::start(&stack, &token, "linux", &[]);
    let hook = baton_tests::hooks::Hook { id: id.clone(), url, secret };
    let push = baton_tests::hooks::fixture("github/push.json");
    let answer = stack.github_delivery(&hook, "push", "cli-push-1", &push).await;
    assert_eq!(answer.status, 202, "{:#}", answer.body);
    let run_id = answer.body["runs"][0]["run_id"].as_str().unwrap_or_default().to_string();
    stack.wait_requested_runs(&ws, &answer.body).await;
    let done = stack.wait_run_status(&ws, &run_id, "succeeded").await;
    assert_eq!(done["trigger"]["kind"], "push");

    let rotated = baton(&stack, &["hook", "rotate", "--workspace", &ws, &id]).await;
    assert!(rotated.status.success() && stdout(&rotated).starts_with("secret: "), "{}", stderr(&rotated));
    let removed = baton(&stack, &["hook", "rm", "--workspace", &ws, &id]).await;
    assert!(removed.status.success(), "{}", stderr(&removed));
    assert_eq!(stack.github_delivery(&hook, "push", "cli-push-2", &push).await.status, 404);
}
