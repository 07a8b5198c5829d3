//! Both contexts together, through facts only: a run's jobs are enqueued by
//! the runners side from `job_execution.queued`, claimed and completed by a
//! runner over HTTP, and the run finishes; a cancel reaches the runner on
//! its next heartbeat — behaviour.md §13 scenarios 17 and 21 end to end.

use crate::workflows_support::*;
use baton_api::runners::ClaimResponse;
use baton_tests::http::Answer;
use baton_tests::runs::{job_in, Identified, LeasedRun};
use baton_tests::{wait_for, workspace, TestStack, WAIT};
use serde_json::json;

/// Heartbeats `claim`'s lease until the answer tells the runner to stop,
/// then completes it `failed`, as the runner does when it stopped its steps.
async fn stop_when_told(stack: &TestStack, claim: &ClaimResponse) {
    wait_for("the runner to be told to stop", WAIT, || async {
        let beat = stack.heartbeat(&claim.lease.token, claim.job_execution_id).await;
        (beat.body["cancel"] == true).then_some(())
    })
    .await;
    let answer =
        stack.complete(&claim.lease.token, claim.job_execution_id, json!({"status": "failed", "steps": []})).await;
    assert!(answer.status == 200 || answer.status == 409, "{}", answer.body);
}

fn succeeded_steps(claim: &ClaimResponse) -> serde_json::Value {
    claim.job.work.steps.iter().map(|s| json!({"id": s.id, "status": "succeeded", "exit_code": 0})).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_claims_and_completes_every_job_of_a_run_over_http() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let yaml = "name: e2e\njobs:\n  build:\n    runs-on: [linux, x64]\n    steps: [{name: compile, run: make}]\n  test:\n    needs: build\n    runs-on: linux\n    steps: [{run: make test}]\n";
    let run = stack.create_run(&ws, yaml).await;
    let run_id = run.id();
    let runner = stack.runner(&ws, &["linux", "x64"]).await;

    for key in ["build", "test"] {
        let claim = stack.wait_claim(&runner.session_token).await;
        assert_eq!(claim.job.work.key, key);
        assert_eq!(claim.run_id.to_string(), run_id);
        let view =
            stack.wait_view(&ws, &run_id, "the claim recorded", |v| job_in(v, 1, key)["status"] == "running").await;
        assert_eq!(job_in(&view, 1, key)["executions"][0]["runner_session_id"], runner.session_id.to_string());
        let answer = complete(&stack, &claim).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    let view = stack.wait_run_status(&ws, &run_id, "succeeded").await;
    assert_eq!(job_in(&view, 1, "build")["executions"][0]["steps"][0]["status"], "succeeded");
    assert!(stack.claim(&runner.session_token).await.is_none(), "nothing left to claim");
    stack.assert_all_facts_valid();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_tells_its_runner_to_stop_on_the_next_heartbeat() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let yaml = "name: e2e-cancel\njobs:\n  long:\n    runs-on: linux\n    steps: [{run: sleep 600}]\n";
    let LeasedRun { view, claim, .. } = stack.leased_run(&ws, yaml).await;
    let run_id = view.id();
    let beat = stack.heartbeat(&claim.lease.token, claim.job_execution_id).await;
    assert_eq!((beat.status, beat.body["cancel"].as_bool()), (200, Some(false)), "{}", beat.body);

    let Answer { status, body: view } =
        stack.post(&format!("/v1/workspaces/{ws}/runs/{run_id}/cancel"), &stack.admin_token, json!({})).await;
    assert_eq!(status, 202, "{view:#}");
    // The runner stops and completes with `failed`; the cancellation stands.
    stop_when_told(&stack, &claim).await;
    flush_pipeline(&stack, &ws).await;
    let view = stack.run_view(&ws, &run_id).await;
    assert_eq!(view["status"], "cancelled");
    assert_eq!(job_in(&view, 1, "long")["status"], "cancelled");
    stack.assert_all_facts_valid();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_timeout_reaches_the_runner_as_cancel_and_its_complete_does_not_undo_it() {
    // One timeout minute lasts 10 s: the job may run 20 s from queueing,
    // time enough for the runners side to enqueue it even on a busy emulator.
    let stack = start_with_minute(10).await;
    let ws = workspace();
    let yaml = "name: e2e-timeout\njobs:\n  slow:\n    runs-on: linux\n    timeout-minutes: 2\n    steps: [{run: sleep 600}]\n";
    let LeasedRun { view, claim, .. } = stack.leased_run(&ws, yaml).await;
    let run_id = view.id();
    assert_eq!(claim.job.work.timeout_s, 20);
    stop_when_told(&stack, &claim).await;
    let view = stack.wait_run_status(&ws, &run_id, "failed").await;
    let execution = &job_in(&view, 1, "slow")["executions"][0];
    assert_eq!(
        (execution["status"].as_str(), execution["status_reason"].as_str()),
        (Some("failed"), Some("timed_out"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_env_and_scripts_reach_its_runner_and_no_fact() {
    // Secrets live in env; scripts can be large: neither may travel on the
    // bus (and its archive). The runner gets both with its claim.
    let stack = TestStack::start().await;
    let ws = workspace();
    let secret = format!("s3cret-{}", uuid::Uuid::now_v7().simple());
    let script = format!("echo marker-{}", uuid::Uuid::now_v7().simple());
    let yaml = format!(
        "name: secrets\nenv:\n  DEPLOY_TOKEN: {secret}\njobs:\n  deploy:\n    runs-on: linux\n    \
         env: {{JOB_TOKEN: job-{secret}}}\n    steps: [{{run: '{script}', env: {{STEP_TOKEN: step-{secret}}}}}]\n"
    );
    let run = stack.create_run(&ws, &yaml).await;
    let run_id = run.id();
    let runner = stack.runner(&ws, &["linux"]).await;
    let claim = stack.wait_claim(&runner.session_token).await;
    assert_eq!(claim.job.work.env["DEPLOY_TOKEN"], secret, "the workflow env, merged in");
    assert_eq!(claim.job.work.env["JOB_TOKEN"], format!("job-{secret}"));
    assert_eq!(claim.job.work.steps[0].run, script);
    assert_eq!(claim.job.work.steps[0].env["STEP_TOKEN"], format!("step-{secret}"));
    let answer = complete(&stack, &claim).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    stack.wait_run_status(&ws, &run_id, "succeeded").await;
    flush_pipeline(&stack, &ws).await;
    let mut seen = 0;
    for detail_type in baton_api::facts::ALL_DETAIL_TYPES {
        for fact in stack.facts(detail_type) {
            seen += 1;
            let text = fact.to_string();
            assert!(!text.contains(&secret), "{detail_type} carries the secret: {text}");
            assert!(!text.contains(&script), "{detail_type} carries the script: {text}");
        }
    }
    assert!(seen >= 6, "the run's facts were all looked at ({seen})");
    stack.assert_all_facts_valid();
}

/// Completes the claimed job with every step succeeded.
async fn complete(stack: &TestStack, claim: &ClaimResponse) -> Answer {
    let body = json!({"status": "succeeded", "steps": succeeded_steps(claim)});
    stack.complete(&claim.lease.token, claim.job_execution_id, body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_finishes_after_the_dev_host_crashed_mid_run_and_restarted_over_the_same_emulator() {
    let mut stack = TestStack::start().await;
    let ws = workspace();
    let yaml = "name: restart\njobs:\n  build:\n    runs-on: linux\n    steps: [{run: make}]\n  test:\n    needs: build\n    \
                runs-on: linux\n    steps: [{run: make test}]\n  ship:\n    needs: test\n    runs-on: linux\n    steps: [{run: ./ship}]\n";
    let run = stack.create_run(&ws, yaml).await;
    let run_id = run.id();
    let runner = stack.runner(&ws, &["linux"]).await;
    let build = stack.wait_claim(&runner.session_token).await;
    assert_eq!(complete(&stack, &build).await.status, 200);
    let test = stack.wait_claim(&runner.session_token).await;
    assert_eq!(test.job.work.key, "test");

    // The host dies while `test` runs; a new one starts over the same
    // emulator (the stage, its items, its queues and executions are kept).
    stack.crash_and_restart_host().await;

    let answer = complete(&stack, &test).await;
    assert_eq!(answer.status, 200, "the lease and session survive the restart: {}", answer.body);
    // A message the dead host had received comes back after the queue's
    // visibility timeout (180 s), as on Lambda: allow for it.
    let after_crash = std::time::Duration::from_secs(240);
    let started = std::time::Instant::now();
    let ship = wait_for("ship to claim", after_crash, || async { stack.claim(&runner.session_token).await }).await;
    assert_eq!(ship.job.work.key, "ship");
    assert_eq!(complete(&stack, &ship).await.status, 200);
    let path = format!("/v1/workspaces/{ws}/runs/{run_id}");
    let view = wait_for("the run to succeed", after_crash, || async {
        let Answer { status: _, body: view } = stack.get(&path, &stack.admin_token).await;
        (view["status"] == "succeeded").then_some(view)
    })
    .await;
    eprintln!("restart: the run finished {:?} after the crash", started.elapsed());
    assert_eq!(job_in(&view, 1, "ship")["status"], "succeeded");
}
