//! Tool capabilities with a real runner: it finds what the machine has (a
//! `node` of the test's own, first on its `PATH`), registers it, and takes
//! only the jobs whose `tools:` it has; a job needing a tool nobody has is
//! flagged unschedulable, as `baton run get` shows.

use std::os::unix::fs::PermissionsExt;

use crate::support::*;
use baton_tests::runs::Identified;
use baton_tests::TestStack;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_detects_its_tools_and_runs_only_the_jobs_it_has_them_for() {
    let stack = TestStack::start().await;
    let (ws, token) = stack.new_workspace().await;
    // A `node` that says it is 99.1.2, found before any real one.
    let bin = scratch().join("bin");
    std::fs::create_dir_all(&bin).expect("a bin directory");
    let node = bin.join("node");
    std::fs::write(&node, "#!/bin/sh\necho v99.1.2\n").expect("a fake node");
    std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o755)).expect("executable");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut runner = Runner::start_with_env(&stack, &token, "linux", &["--tools", "auto"], &[("PATH", path)]);

    let yaml = "name: tools\njobs:\n  web:\n    runs-on: linux\n    tools: [node@99]\n    steps: [{run: node --version}]\n  legacy:\n    runs-on: linux\n    tools: [node@98]\n    steps: [{run: 'true'}]\n";
    let run_id = stack.create_run(&ws, yaml).await.id();
    let view = stack
        .wait_view(&ws, &run_id, "web to succeed and legacy to be flagged", |view| {
            let jobs = view["attempts"][0]["jobs"].as_array().cloned().unwrap_or_default();
            let web = jobs.iter().find(|j| j["key"] == "web").cloned().unwrap_or_default();
            let legacy = jobs.iter().find(|j| j["key"] == "legacy").cloned().unwrap_or_default();
            web["status"] == "succeeded" && !legacy["executions"][0]["unschedulable"].is_null()
        })
        .await;
    let jobs = view["attempts"][0]["jobs"].as_array().cloned().unwrap_or_default();
    let legacy = jobs.iter().find(|j| j["key"] == "legacy").cloned().unwrap_or_default();
    assert_eq!(legacy["status"], "queued", "no runner has node@98: {view:#}");
    assert_eq!(legacy["labels"], json!(["linux", "tool:node@98"]));

    // The operator sees what it waits for.
    let shown = baton(&stack, &["run", "get", &run_id, "--workspace", &ws]).await;
    let out = text(&shown.stdout);
    assert!(shown.status.success(), "{out}{}", text(&shown.stderr));
    assert!(out.contains("unschedulable: no runner or provisioner offers linux, tool:node@98"), "{out}");
    runner.stop().await;
}
