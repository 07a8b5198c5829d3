//! Job logs end to end: a real `baton-runner` ships each step's output to
//! the log bucket (moto's S3) with URLs the API issues under its lease, and
//! an operator reads the lines back through the API, in order, while the job
//! runs (following) and after it; secrets never reach a stored byte.

use std::time::Duration;

use crate::support::*;
use baton_tests::runs::{log_texts, Identified};
use baton_tests::TestStack;
use serde_json::{json, Value};

/// Every object of the log bucket, as text.
async fn stored_logs(stack: &TestStack) -> Vec<String> {
    let objects = stack.objects(&stack.provisioned.buckets["BATON_LOGS_BUCKET"]).await;
    objects.into_iter().map(|(_, bytes)| String::from_utf8_lossy(&bytes).into_owned()).collect()
}

const SECRET: &str = "s3cr3t-value-123";
const RUNTIME_SECRET: &str = "runtime-secret-9";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_log_is_read_in_order_while_it_runs_and_after_followed_as_written_and_masked_everywhere() {
    let stack = TestStack::start().await;
    let (ws, token) = stack.new_workspace().await;
    let shared = scratch();
    let yaml = format!(
        r#"name: logs
env:
  SHARED: {shared}
  API_TOKEN: {SECRET}
mask-env: [API_TOKEN]
jobs:
  build:
    runs-on: linux
    outputs: [version]
    steps:
      - name: one
        run: |
          echo "first line"
          echo "token is $API_TOKEN"
          echo "::add-mask::{RUNTIME_SECRET}"
          echo "runtime {RUNTIME_SECRET} here"
          echo "to stderr" >&2
      - name: two
        run: |
          for i in 1 2 3; do echo "two $i"; done
          while [ ! -e "$SHARED/go" ]; do sleep 0.1; done
          echo "after go"
      - name: three
        run: |
          echo third
          echo "version={RUNTIME_SECRET}" >> "$BATON_OUTPUT"
"#,
        shared = shared.display()
    );
    let mut runner = Runner::start(&stack, &token, "linux", &[]);
    let view = stack.create_run(&ws, &yaml).await;
    let run_id = view.id();
    let job_id = view["attempts"][0]["jobs"][0]["id"].as_str().unwrap_or_default().to_string();
    let logs = format!("/v1/workspaces/{ws}/runs/{run_id}/jobs/{job_id}/logs");

    // While step two waits: the lines so far, in order, secrets masked.
    let mut seen: Vec<String> = Vec::new();
    let mut cursor = "0.0".to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !seen.iter().any(|l| l == "two 3") {
        assert!(std::time::Instant::now() < deadline, "lines so far: {seen:#?}");
        let page = stack.get_ok(&format!("{logs}?cursor={cursor}&wait_s=5"), &stack.admin_token).await;
        assert_eq!(page["complete"], false, "the job still runs: {page:#}");
        seen.extend(log_texts(&page));
        cursor = page["next_cursor"].as_str().unwrap_or_default().to_string();
    }
    let mut expected = vec!["first line", "token is ***", "runtime *** here", "to stderr", "two 1", "two 2", "two 3"];
    // stdout and stderr are read side by side: only their order within a stream is fixed.
    let stderr_at = seen.iter().position(|l| l == "to stderr").expect("the stderr line");
    let mut without_stderr = seen.clone();
    without_stderr.remove(stderr_at);
    expected.retain(|l| *l != "to stderr");
    assert_eq!(without_stderr, expected);
    let view = stack.run_view(&ws, &run_id).await;
    assert_eq!(view["attempts"][0]["jobs"][0]["status"], "running");

    // A follow started now receives the line written after it started.
    let follow = {
        let (api, admin, path) =
            (stack.api.clone(), stack.admin_token.clone(), format!("{logs}?cursor={cursor}&wait_s=20"));
        tokio::spawn(async move {
            let response = reqwest::Client::new().get(format!("{api}{path}")).bearer_auth(admin).send().await;
            response.expect("the follow answers").json::<Value>().await.expect("a page")
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::fs::write(shared.join("go"), b"").expect("release step two");
    let followed = follow.await.expect("the follow");
    assert_eq!(log_texts(&followed).first().map(String::as_str), Some("after go"), "{followed:#}");

    let view = stack.wait_run_status(&ws, &run_id, "succeeded").await;
    // After the job: the whole log from the start, complete, each line under its step.
    let page = stack.get_ok(&logs, &stack.admin_token).await;
    assert_eq!(page["complete"], true, "{page:#}");
    let all = log_texts(&page);
    assert_eq!(all.last().map(String::as_str), Some("third"), "{all:#?}");
    assert_eq!(all.len(), 9, "{all:#?}");
    let steps = &view["attempts"][0]["jobs"][0]["executions"][0]["steps"];
    let step_of = |text: &str| {
        page["lines"].as_array().unwrap().iter().find(|l| l["text"] == text).map(|l| l["step_id"].clone()).unwrap()
    };
    assert_eq!(step_of("first line"), steps[0]["id"]);
    assert_eq!(step_of("after go"), steps[1]["id"]);
    assert_eq!(step_of("third"), steps[2]["id"]);
    let only_two = stack.get_ok(&format!("{logs}?step={}", steps[1]["id"].as_str().unwrap()), &stack.admin_token).await;
    assert_eq!(log_texts(&only_two), ["two 1", "two 2", "two 3", "after go"]);
    assert_eq!(page["lines"][3]["stream"], if all[3] == "to stderr" { "stderr" } else { "stdout" });

    // The secrets are nowhere: not in a stored byte, the run view or a fact.
    assert_eq!(view["attempts"][0]["jobs"][0]["outputs"]["version"], "***");
    let objects = stored_logs(&stack).await;
    assert!(!objects.is_empty());
    let facts: Vec<String> = {
        let captured = stack.captured.lock().unwrap_or_else(|e| e.into_inner());
        captured.iter().map(|c| c.detail.to_string()).collect()
    };
    for (what, text) in objects
        .iter()
        .map(|o| ("a log object", o.clone()))
        .chain(std::iter::once(("the run view", view.to_string())))
        .chain(facts.iter().map(|f| ("a fact", f.clone())))
    {
        assert!(!text.contains(SECRET) && !text.contains(RUNTIME_SECRET), "a secret in {what}: {text}");
    }
    runner.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_over_its_cap_is_truncated_with_a_note_and_the_job_still_succeeds() {
    let stack = TestStack::start().await;
    let (ws, token) = stack.new_workspace().await;
    let yaml = "name: chatty\njobs:\n  chatty:\n    runs-on: linux\n    steps:\n      - run: |\n          i=0; while [ $i -lt 2000 ]; do echo \"line $i of a chatty step\"; i=$((i+1)); done\n";
    let cap = 8 * 1024;
    let mut runner = Runner::start(&stack, &token, "linux", &["--log-cap-bytes", &cap.to_string()]);
    let view = stack.create_run(&ws, yaml).await;
    let run_id = view.id();
    let job_id = view["attempts"][0]["jobs"][0]["id"].as_str().unwrap_or_default().to_string();
    stack.wait_run_status(&ws, &run_id, "succeeded").await;
    let page = stack.get_ok(&format!("/v1/workspaces/{ws}/runs/{run_id}/jobs/{job_id}/logs"), &stack.admin_token).await;
    let lines = log_texts(&page);
    assert_eq!(lines.first().map(String::as_str), Some("line 0 of a chatty step"));
    let note = lines.last().cloned().unwrap_or_default();
    assert!(note.contains("log truncated") && note.contains(&cap.to_string()), "{note}");
    assert_eq!(page["lines"].as_array().and_then(|l| l.last()).map(|l| l["stream"].clone()), Some(json!("system")));
    assert!(lines.len() < 2000, "{} lines stored", lines.len());
    let stored: usize = stored_logs(&stack).await.iter().map(String::len).sum();
    assert!(stored as u64 <= cap, "{stored} bytes stored, over the cap of {cap}");

    // Query parameters out of range are refused, naming what is wrong.
    let logs = format!("/v1/workspaces/{ws}/runs/{run_id}/jobs/{job_id}/logs");
    for query in ["cursor=nonsense", "wait_s=21", "attempt=x", "step=not-a-step"] {
        let refused = stack.get(&format!("{logs}?{query}"), &stack.admin_token).await;
        assert_eq!((refused.status, refused.code()), (400, "invalid-request"), "{query}: {}", refused.body);
    }

    // The CLI prints the same lines, `[job/step] text`, and a follow of a
    // finished job ends by itself.
    for follow in [false, true] {
        let mut args = vec!["run", "logs", "--workspace", ws.as_str(), run_id.as_str(), "--job", "chatty"];
        if follow {
            args.push("--follow");
        }
        let output = baton(&stack, &args).await;
        let printed = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let printed: Vec<&str> = printed.lines().collect();
        assert_eq!(printed.first().copied(), Some("[chatty/step-1] line 0 of a chatty step"));
        assert_eq!(printed.len(), lines.len());
        assert!(printed.last().is_some_and(|l| l.contains("log truncated")));
    }
    runner.stop().await;
}
