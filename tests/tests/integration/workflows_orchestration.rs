//! Orchestration of an attempt on real Step Functions executions (moto):
//! the DAG, runner facts and their precedence, replays, lease expiry, job
//! timeouts, cancel — behaviour.md §9, §10 and §13 scenarios 17–21, 24, 25.

use crate::workflows_support::*;
use baton_api::facts::{
    FactDetail, JobExecutionTerminated, JobOutcome, JobTerminated, RunCancelled, RunTerminated, StepStatus,
};
use baton_tests::http::Answer;
use baton_tests::runs::{job_in, Identified};
use baton_tests::{workspace, TestStack, WAIT};
use serde_json::json;

const DAG: &str = r#"
name: dag
jobs:
  build:
    runs-on: linux
    steps: [{name: compile, run: make}, {name: package, run: make dist}]
  test:
    needs: build
    runs-on: linux
    steps: [{run: make test}]
  deploy:
    needs: test
    runs-on: linux
    steps: [{run: ./deploy}]
  report:
    needs: [test]
    if: always()
    runs-on: linux
    steps: [{run: ./report}]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dag_runs_job_after_job_to_success_with_few_state_transitions() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let run = stack.create_run(&ws, DAG).await;
    let run_id = run.id();
    for key in ["build", "test"] {
        run_job(&stack, &ws, &run_id, 1, key, JobOutcome::Succeeded).await;
    }
    // deploy and report start together once test succeeded.
    run_job(&stack, &ws, &run_id, 1, "deploy", JobOutcome::Succeeded).await;
    run_job(&stack, &ws, &run_id, 1, "report", JobOutcome::Succeeded).await;
    let view = stack.wait_run_status(&ws, &run_id, "succeeded").await;
    assert!(view["finished_at"].is_string());
    let build = job_in(&view, 1, "build");
    assert_eq!(build["status"], "succeeded");
    let execution = &build["executions"][0];
    assert_eq!(execution["status"], "succeeded");
    assert!(execution["started_at"].is_string() && execution["finished_at"].is_string());
    assert!(execution["runner_session_id"].is_string());
    assert_eq!(execution["steps"][1]["name"], "package");
    assert_eq!(execution["steps"][1]["status"], "succeeded");
    assert_eq!(execution["steps"][1]["exit_code"], 0);
    assert_eq!(build["outputs"], json!({"job": "build"}));
    let finished = stack.wait_fact(RunTerminated::DETAIL_TYPE, WAIT, |d| d["run_id"] == run_id.as_str()).await;
    assert_eq!(finished["status"], "succeeded");
    assert_eq!(count_facts(&stack, JobTerminated::DETAIL_TYPE, &run_id), 4);

    // The execution's history: transitions are paid per wake-up, not per job.
    let arn = execution_arn(&stack, &run_id, 1);
    let execution = wait_for_execution_end(&stack, &arn).await;
    assert_eq!(execution, "SUCCEEDED");
    let history =
        stack.clients.sfn().get_execution_history().execution_arn(&arn).max_results(1000).send().await.unwrap();
    let entered = history.events().iter().filter(|e| e.r#type().as_str().ends_with("StateEntered")).count();
    eprintln!("state transitions for 4 jobs: {entered} ({} history events)", history.events().len());
    assert!(entered <= 3 * 8 + 2, "{entered} transitions for 4 jobs");
    stack.assert_all_facts_valid();
}

/// The ARN of the orchestration of attempt `attempt` of run `run_id`.
fn execution_arn(stack: &baton_tests::TestStack, run_id: &str, attempt: u32) -> String {
    let machine = &stack.provisioned.state_machines["run-attempt"];
    format!("{}:{run_id}-{attempt}", machine.replace(":stateMachine:", ":execution:"))
}

async fn wait_for_execution_end(stack: &baton_tests::TestStack, arn: &str) -> String {
    baton_tests::wait_for("the execution to end", WAIT, || async {
        let out = stack.clients.sfn().describe_execution().execution_arn(arn).send().await.ok()?;
        let status = out.status().as_str().to_string();
        (status != "RUNNING").then_some(status)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_dependency_skips_its_dependents_runs_always_jobs_and_fails_the_run() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let run = stack.create_run(&ws, DAG).await;
    let run_id = run.id();
    run_job(&stack, &ws, &run_id, 1, "build", JobOutcome::Failed).await;
    // test and deploy are skipped; report (always) runs after the failure.
    run_job(&stack, &ws, &run_id, 1, "report", JobOutcome::Succeeded).await;
    let view = stack.wait_run_status(&ws, &run_id, "failed").await;
    assert_eq!(job_in(&view, 1, "build")["status"], "failed");
    assert_eq!(job_in(&view, 1, "build")["status_reason"], "step_failed");
    for key in ["test", "deploy"] {
        assert_eq!(job_in(&view, 1, key)["status"], "skipped", "{key}");
        assert_eq!(job_in(&view, 1, key)["status_reason"], "condition_rejected", "{key}");
    }
    assert_eq!(job_in(&view, 1, "report")["status"], "succeeded");
    assert_eq!(view["attempts"][0]["status"], "failed");
    let mut keys = queued_keys(&stack, &run_id);
    keys.sort();
    assert_eq!(keys, ["build", "report"], "skipped jobs are never enqueued");
    stack.assert_all_facts_valid();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_diamond_with_a_partial_failure_fails_and_an_all_skipped_run_succeeds() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let diamond = r#"
name: diamond
jobs:
  a: {runs-on: linux, steps: [{run: a}]}
  b: {needs: a, runs-on: linux, steps: [{run: b}]}
  c: {needs: a, runs-on: linux, steps: [{run: c}]}
  d: {needs: [b, c], runs-on: linux, steps: [{run: d}]}
"#;
    let run = stack.create_run(&ws, diamond).await;
    let run_id = run.id();
    run_job(&stack, &ws, &run_id, 1, "a", JobOutcome::Succeeded).await;
    run_job(&stack, &ws, &run_id, 1, "b", JobOutcome::Succeeded).await;
    run_job(&stack, &ws, &run_id, 1, "c", JobOutcome::Failed).await;
    let view = stack.wait_run_status(&ws, &run_id, "failed").await;
    assert_eq!(job_in(&view, 1, "d")["status"], "skipped");

    let skipped = "name: skipped\njobs:\n  on-failure:\n    if: failure()\n    runs-on: linux\n    steps: [{run: x}]\n  on-cancel:\n    if: cancelled()\n    runs-on: linux\n    steps: [{run: y}]\n";
    let run = stack.create_run(&ws, skipped).await;
    let run_id = run.id();
    let view = stack.wait_run_status(&ws, &run_id, "succeeded").await;
    assert_eq!(job_in(&view, 1, "on-failure")["status"], "skipped");
    assert_eq!(job_in(&view, 1, "on-cancel")["status"], "skipped");
}

/// The bus delivers a batch; the outcomes of one attempt in it are adopted
/// in one write of the attempt item (which holds every job of the run), a
/// claim is acknowledged without a write (the view reads it from the
/// runner record), and a fact that can never be adopted fails alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn facts_of_one_attempt_in_a_batch_are_adopted_in_one_write_and_a_bad_one_fails_alone() {
    use aws_lambda_events::sqs::{SqsEvent, SqsMessage};
    use baton_api::facts::Fact;

    let stack = TestStack::start().await;
    let ws = workspace();
    let yaml = "name: wide\njobs:\n  a: {runs-on: linux, steps: [{run: a}]}\n  b: {runs-on: linux, steps: [{run: b}]}\n  c: {runs-on: linux, steps: [{run: c}]}\n";
    // A linux runner is registered, so no job is flagged unschedulable: a
    // flag would be one more writer of the attempt.
    stack.runner(&ws, &["linux"]).await;
    let run = stack.create_run(&ws, yaml).await;
    let run_id = run.id();
    let mut runners = Vec::new();
    for key in ["a", "b", "c"] {
        runners.push(Runner::for_queued(&ws, &queued(&stack, &run_id, 1, key).await));
    }
    let run_uuid: uuid::Uuid = run_id.parse().unwrap();
    // The orchestration parks once it queued the jobs; from then on only
    // this batch writes the attempt (c's end wakes nothing: a and b run on).
    let parked = baton_tests::wait_for("the orchestration to park", WAIT, || async {
        let item = stack.store.get_attempt(run_uuid, 1).await.unwrap()?;
        item.wait_token.is_some().then_some(item)
    })
    .await;

    let claimed_at = chrono::Utc::now() - chrono::Duration::seconds(5);
    for runner in &mut runners {
        runner.claimed_at = claimed_at;
    }
    runners[1].claim(&stack).await;
    let mut stranger = Runner::for_queued(&ws, &queued(&stack, &run_id, 1, "a").await);
    stranger.lease.job_id = uuid::Uuid::now_v7();
    fn envelope<D: FactDetail>(ws: &str, detail: D) -> String {
        let fact = Fact::new(ws, chrono::Utc::now(), detail);
        json!({
            "version": "0", "id": fact.header.event_id.to_string(), "detail-type": D::DETAIL_TYPE,
            "source": "baton.runners", "time": fact.header.occurred_at, "region": "us-east-1", "resources": [],
            "detail": fact,
        })
        .to_string()
    }
    let bodies = [
        envelope(&ws, runners[0].claimed(claimed_at)),
        envelope(&ws, runners[1].claimed(claimed_at)),
        envelope(&ws, runners[2].claimed(claimed_at)),
        envelope(&ws, runners[2].completed(JobOutcome::Succeeded)),
        envelope(&ws, stranger.completed(JobOutcome::Succeeded)),
    ];
    let mut event = SqsEvent::default();
    for (index, body) in bodies.into_iter().enumerate() {
        let mut message = SqsMessage::default();
        message.message_id = Some(format!("m{index}"));
        message.body = Some(body);
        event.records.push(message);
    }
    let response = baton_job_outcomes::handle(&stack.context(), event).await;
    let failed: Vec<_> = response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
    assert_eq!(failed, ["m4"], "only the fact about a job the attempt does not have");

    let item = stack.store.get_attempt(run_uuid, 1).await.unwrap().unwrap();
    assert_eq!(item.version, parked.version + 1, "three claims and an outcome, one write: the outcome's");
    let view = stack.run_view(&ws, &run_id).await;
    // a's claim fact came without its claim (nothing on the runners' side):
    // a stays queued. b was claimed there: running, from its runner record.
    assert_eq!(job_in(&view, 1, "a")["executions"][0]["status"], "queued");
    assert_eq!(job_in(&view, 1, "a")["status"], "queued");
    for (key, status) in [("b", "running"), ("c", "succeeded")] {
        let execution = &job_in(&view, 1, key)["executions"][0];
        assert_eq!(
            (job_in(&view, 1, key)["status"].as_str(), execution["status"].as_str()),
            (Some(status), Some(status))
        );
        let started: chrono::DateTime<chrono::Utc> = serde_json::from_value(execution["started_at"].clone()).unwrap();
        assert_eq!(started, claimed_at, "{key}: the claim's instant");
        assert_eq!(
            execution["runner_session_id"],
            runners[if key == "b" { 1 } else { 2 }].lease.session_id.to_string()
        );
    }
    assert_eq!(job_in(&view, 1, "c")["outputs"], json!({"job": "c"}), "the outcome's result was written with it");
    stack.wait_fact(JobTerminated::DETAIL_TYPE, WAIT, |d| d["run_id"] == run_id.as_str() && d["job_key"] == "c").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runner_facts_delivered_twice_and_out_of_order_reach_the_same_end_state() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let run = stack.create_run(&ws, "name: one\njobs:\n  a:\n    runs-on: linux\n    steps: [{run: a}]\n  b:\n    runs-on: linux\n    steps: [{run: b}]\n").await;
    let run_id = run.id();
    let queued_a = queued(&stack, &run_id, 1, "a").await;
    let queued_b = queued(&stack, &run_id, 1, "b").await;
    let (mut a, mut b) = (Runner::for_queued(&ws, &queued_a), Runner::for_queued(&ws, &queued_b));

    // a: the complete arrives before its claim; then everything again, and a
    // lease expiry that lost the race to the finish.
    let claimed_at = chrono::Utc::now() - chrono::Duration::seconds(5);
    (a.claimed_at, b.claimed_at) = (claimed_at, claimed_at);
    let completed = a.completed(JobOutcome::Succeeded);
    let claimed = a.claimed(claimed_at);
    publish(&stack, &ws, completed.clone()).await;
    stack.wait_view(&ws, &run_id, "a finished", |v| job_in(v, 1, "a")["status"] == "succeeded").await;
    publish(&stack, &ws, claimed.clone()).await;
    publish(&stack, &ws, a.lease_expired(a.steps(StepStatus::Running))).await;
    publish(&stack, &ws, completed.clone()).await;
    publish(&stack, &ws, claimed.clone()).await;
    // b: claimed twice (the first claim's instant wins), then a failed
    // complete, delivered twice.
    publish(&stack, &ws, b.claimed(claimed_at)).await;
    publish(&stack, &ws, b.claimed(claimed_at + chrono::Duration::seconds(3))).await;
    let failed = b.completed(JobOutcome::Failed);
    publish(&stack, &ws, failed.clone()).await;
    publish(&stack, &ws, failed).await;

    let view = stack.wait_run_status(&ws, &run_id, "failed").await;
    flush_pipeline(&stack, &ws).await;
    let view_after = stack.run_view(&ws, &run_id).await;
    assert_eq!(view["attempts"], view_after["attempts"], "late replays changed nothing");
    let exec_a = &job_in(&view, 1, "a")["executions"][0];
    assert_eq!(exec_a["status"], "succeeded", "finished beats a later lease expiry");
    let started: chrono::DateTime<chrono::Utc> = serde_json::from_value(exec_a["started_at"].clone()).unwrap();
    assert_eq!(started, claimed_at, "the outcome brings the claim's instant; no claim reopens it");
    let exec_b = &job_in(&view, 1, "b")["executions"][0];
    assert_eq!((exec_b["status"].as_str(), exec_b["status_reason"].as_str()), (Some("failed"), Some("step_failed")));
    let started: chrono::DateTime<chrono::Utc> = serde_json::from_value(exec_b["started_at"].clone()).unwrap();
    assert_eq!(started, claimed_at, "the claim's instant the outcome carries");
    assert_eq!(count_facts(&stack, JobExecutionTerminated::DETAIL_TYPE, &run_id), 2, "one terminated fact each");
    assert_eq!(count_facts(&stack, JobTerminated::DETAIL_TYPE, &run_id), 2);
    assert_eq!(count_facts(&stack, RunTerminated::DETAIL_TYPE, &run_id), 1);
    stack.assert_all_facts_valid();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_adopts_the_steps_outcome_when_every_step_finished_else_fails_as_runner_lost() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let yaml = "name: lost\njobs:\n  done:\n    runs-on: linux\n    steps: [{run: a}, {run: b}]\n  lost:\n    runs-on: linux\n    steps: [{run: a}, {run: b}]\n";
    let run = stack.create_run(&ws, yaml).await;
    let run_id = run.id();
    let done = Runner::for_queued(&ws, &queued(&stack, &run_id, 1, "done").await);
    let lost = Runner::for_queued(&ws, &queued(&stack, &run_id, 1, "lost").await);
    done.claim(&stack).await;
    lost.claim(&stack).await;
    stack
        .wait_view(&ws, &run_id, "both running", |v| {
            job_in(v, 1, "done")["status"] == "running" && job_in(v, 1, "lost")["status"] == "running"
        })
        .await;
    publish(&stack, &ws, done.lease_expired(done.steps(StepStatus::Succeeded))).await;
    let mut partial = lost.steps(StepStatus::Succeeded);
    partial[1].status = StepStatus::Running;
    publish(&stack, &ws, lost.lease_expired(partial)).await;
    let view = stack.wait_run_status(&ws, &run_id, "failed").await;
    assert_eq!(job_in(&view, 1, "done")["executions"][0]["status"], "succeeded");
    let lost_execution = &job_in(&view, 1, "lost")["executions"][0];
    assert_eq!(lost_execution["status"], "failed");
    assert_eq!(lost_execution["status_reason"], "runner_lost");
    assert_eq!(lost_execution["steps"][1]["status"], "running");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_timeout_fails_the_execution_and_a_claim_does_not_extend_it() {
    // One timeout minute lasts 2 s here.
    let stack = start_with_minute(2).await;
    let ws = workspace();
    let yaml =
        "name: slow\njobs:\n  slow:\n    runs-on: linux\n    timeout-minutes: 2\n    steps: [{run: sleep 600}]\n";
    let run = stack.create_run(&ws, yaml).await;
    let run_id = run.id();
    let queued = queued(&stack, &run_id, 1, "slow").await;
    assert_eq!(queued.detail.job.timeout_s, 4);
    let runner = Runner::for_queued(&ws, &queued);
    runner.claim(&stack).await;
    let terminated =
        stack.wait_fact(JobExecutionTerminated::DETAIL_TYPE, WAIT, |d| d["run_id"] == run_id.as_str()).await;
    assert_eq!(terminated["status"], "failed");
    assert_eq!(terminated["reason"], "timed_out", "the runners side flags the lease from this fact");
    let view = stack.wait_run_status(&ws, &run_id, "failed").await;
    let execution = &job_in(&view, 1, "slow")["executions"][0];
    assert_eq!(execution["status_reason"], "timed_out");
    let elapsed = queued_to_finished(execution);
    assert!(elapsed >= chrono::Duration::seconds(4), "timed out after {elapsed}: counted from queueing");
    assert!(elapsed < chrono::Duration::seconds(30), "timed out after {elapsed}");
    // The runner's late complete changes nothing.
    runner.complete(&stack, JobOutcome::Succeeded).await;
    flush_pipeline(&stack, &ws).await;
    assert_eq!(job_in(&stack.run_view(&ws, &run_id).await, 1, "slow")["status"], "failed");
}

/// How long an execution of a run view took from queueing to its end.
fn queued_to_finished(execution: &serde_json::Value) -> chrono::Duration {
    let at = |field: &str| -> chrono::DateTime<chrono::Utc> {
        serde_json::from_value(execution[field].clone()).unwrap_or_else(|e| panic!("{field}: {e}: {execution}"))
    };
    at("finished_at") - at("queued_at")
}

/// A job that a completion makes ready is queued where that completion is
/// adopted, while the orchestration is parked with a timeout far longer than
/// the new job's: its timeout must still end it on time, not at the park's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_queued_by_its_needs_completion_still_times_out_on_time() {
    // One timeout minute lasts 2 s here.
    let stack = start_with_minute(2).await;
    let ws = workspace();
    let yaml = "name: chained\njobs:\n  first:\n    runs-on: linux\n    steps: [{run: 'true'}]\n  slow:\n    needs: first\n    runs-on: linux\n    timeout-minutes: 2\n    steps: [{run: sleep 600}]\n";
    let run = stack.create_run(&ws, yaml).await;
    let run_id = run.id();
    run_job(&stack, &ws, &run_id, 1, "first", JobOutcome::Succeeded).await;
    let queued = queued(&stack, &run_id, 1, "slow").await;
    assert_eq!(queued.detail.job.timeout_s, 4);
    Runner::for_queued(&ws, &queued).claim(&stack).await;
    let view = stack.wait_run_status(&ws, &run_id, "failed").await;
    let execution = &job_in(&view, 1, "slow")["executions"][0];
    assert_eq!(execution["status_reason"], "timed_out");
    let elapsed = queued_to_finished(execution);
    // The first Step parks for 300 s (orchestration::FIRST_STEP_WAIT_S).
    assert!(elapsed < chrono::Duration::seconds(60), "timed out after {elapsed}, not at the parked Step's timeout");
    // The wake-up that made the orchestration look again before its timeout
    // was not the attempt's end: the execution went on, then ended with it.
    let arn = execution_arn(&stack, &run_id, 1);
    assert_eq!(wait_for_execution_end(&stack, &arn).await, "SUCCEEDED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_ends_non_terminal_jobs_lets_always_jobs_run_and_refuses_a_finished_run() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let with_lint = format!("{DAG}  lint:\n    runs-on: linux\n    steps: [{{run: lint}}]\n");
    let run = stack.create_run(&ws, &with_lint).await;
    let run_id = run.id();
    run_job(&stack, &ws, &run_id, 1, "lint", JobOutcome::Succeeded).await;
    let build = Runner::for_queued(&ws, &queued(&stack, &run_id, 1, "build").await);
    build.claim(&stack).await;
    stack
        .wait_view(&ws, &run_id, "build running, lint done", |v| {
            job_in(v, 1, "build")["status"] == "running" && job_in(v, 1, "lint")["status"] == "succeeded"
        })
        .await;

    let path = format!("/v1/workspaces/{ws}/runs/{run_id}/cancel");
    let Answer { status, body: view } = stack.post(&path, &stack.admin_token, json!({})).await;
    assert_eq!(status, 202, "{view:#}");
    assert_eq!(view["status"], "cancelled");
    assert_eq!(view["attempts"][0]["status"], "cancelled");
    let build_view = job_in(&view, 1, "build");
    assert_eq!(
        (build_view["status"].as_str(), build_view["status_reason"].as_str()),
        (Some("cancelled"), Some("run_cancelled"))
    );
    assert_eq!(build_view["executions"][0]["status"], "cancelled");
    assert_eq!(job_in(&view, 1, "test")["status"], "cancelled");
    assert_eq!(job_in(&view, 1, "report")["status"], "pending", "always() is spared");
    let lint = job_in(&view, 1, "lint");
    assert_eq!(
        (lint["status"].as_str(), lint["executions"][0]["status"].as_str()),
        (Some("succeeded"), Some("succeeded")),
        "finished jobs are left alone"
    );
    stack.wait_fact(RunCancelled::DETAIL_TYPE, WAIT, |d| d["run_id"] == run_id.as_str()).await;
    let terminated = stack
        .wait_fact(JobExecutionTerminated::DETAIL_TYPE, WAIT, |d| {
            d["job_execution_id"] == build.lease.job_execution_id.to_string()
        })
        .await;
    assert_eq!(terminated["reason"], "run_cancelled");

    // report (always) runs after the cancel; the run stays cancelled.
    run_job(&stack, &ws, &run_id, 1, "report", JobOutcome::Succeeded).await;
    let view = stack.wait_view(&ws, &run_id, "report done", |v| job_in(v, 1, "report")["status"] == "succeeded").await;
    assert_eq!(view["status"], "cancelled");
    // The runner's complete after the cancel does not downgrade it.
    build.complete(&stack, JobOutcome::Failed).await;
    let Answer { status, body } = stack.post(&path, &stack.admin_token, json!({})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("run-already-finished")));
    flush_pipeline(&stack, &ws).await;
    let view = stack.run_view(&ws, &run_id).await;
    assert_eq!(job_in(&view, 1, "build")["status"], "cancelled");
    assert_eq!(job_in(&view, 1, "deploy")["status"], "cancelled");
    assert!(!queued_keys(&stack, &run_id).contains(&"test".to_string()));
    let lint_terminated = stack
        .facts(JobTerminated::DETAIL_TYPE)
        .into_iter()
        .filter(|d| d["run_id"] == run_id.as_str() && d["job_key"] == "lint")
        .count();
    assert_eq!(lint_terminated, 1, "the cancel emitted nothing for a finished job");
    // The cancel woke the orchestration with the always() job left to run:
    // it went on, and ended with the attempt.
    assert_eq!(wait_for_execution_end(&stack, &execution_arn(&stack, &run_id, 1)).await, "SUCCEEDED");
    stack.assert_all_facts_valid();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_jobs_finishing_together_share_wake_ups_instead_of_paying_transitions_each() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let jobs: String = (0..20).map(|i| format!("  j{i}: {{runs-on: linux, steps: [{{run: x}}]}}\n")).collect();
    let run = stack.create_run(&ws, &format!("name: wide\njobs:\n{jobs}")).await;
    let run_id = run.id();
    let mut runners = Vec::new();
    for i in 0..20 {
        runners.push(Runner::for_queued(&ws, &queued(&stack, &run_id, 1, &format!("j{i}")).await));
    }
    futures::future::join_all(runners.iter().map(|r| r.complete(&stack, JobOutcome::Succeeded))).await;
    stack.wait_run_status(&ws, &run_id, "succeeded").await;
    let arn = execution_arn(&stack, &run_id, 1);
    assert_eq!(wait_for_execution_end(&stack, &arn).await, "SUCCEEDED");
    let history =
        stack.clients.sfn().get_execution_history().execution_arn(&arn).max_results(1000).send().await.unwrap();
    let entered = history.events().iter().filter(|e| e.r#type().as_str().ends_with("StateEntered")).count();
    eprintln!("state transitions for 20 parallel jobs: {entered} ({} history events)", history.events().len());
    assert!(entered < 3 * 20, "{entered} transitions: more than a per-job state machine would cost");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_runner_fact_is_dead_lettered_while_the_run_keeps_flowing() {
    let stack = TestStack::start().await;
    let ws = workspace();
    // An outcome of an attempt that does not exist can never be applied.
    let poison = baton_api::facts::JobCompleted {
        lease: baton_api::facts::LeaseRef {
            run_id: uuid::Uuid::now_v7(),
            attempt: 1,
            job_id: uuid::Uuid::now_v7(),
            job_execution_id: uuid::Uuid::now_v7(),
            session_id: uuid::Uuid::now_v7(),
            epoch: 1,
        },
        status: JobOutcome::Succeeded,
        steps: vec![],
        outputs: Default::default(),
        message: None,
        settled_by: Default::default(),
        completed_at: chrono::Utc::now(),
        claimed_at: None,
    };
    publish(&stack, &ws, poison.clone()).await;
    let run_id =
        stack.create_run(&ws, "name: flowing\njobs:\n  a:\n    runs-on: linux\n    steps: [{run: a}]\n").await.id();
    run_job(&stack, &ws, &run_id, 1, "a", JobOutcome::Succeeded).await;
    stack.wait_run_status(&ws, &run_id, "succeeded").await;

    let envelope = stack.wait_dead_letter("job-outcomes").await;
    assert_eq!(envelope["detail"]["run_id"], poison.lease.run_id.to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_timeout_ends_the_attempt_as_failed_and_timed_out() {
    // One timeout minute lasts 2 s: the run may last 6 s, its job 2 min.
    let stack = start_with_minute(2).await;
    let ws = workspace();
    let yaml = "name: capped\ntimeout-minutes: 3\njobs:\n  long:\n    runs-on: linux\n    timeout-minutes: 60\n    steps: [{run: sleep 600}]\n  after:\n    needs: long\n    runs-on: linux\n    steps: [{run: 'true'}]\n";
    let run = stack.create_run(&ws, yaml).await;
    let run_id = run.id();
    let runner = Runner::for_queued(&ws, &queued(&stack, &run_id, 1, "long").await);
    runner.claim(&stack).await;
    let view = stack.wait_run_status(&ws, &run_id, "failed").await;
    assert_eq!(view["attempts"][0]["status_reason"], "timed_out");
    let long = job_in(&view, 1, "long");
    assert_eq!((long["status"].as_str(), long["status_reason"].as_str()), (Some("failed"), Some("timed_out")));
    assert_eq!(long["executions"][0]["status"], "failed");
    assert_eq!(job_in(&view, 1, "after")["status"], "skipped");
    let finished = stack.wait_fact(RunTerminated::DETAIL_TYPE, WAIT, |d| d["run_id"] == run_id.as_str()).await;
    assert_eq!(finished["reason"], "timed_out");
    // The Step that looked at the deadline timed out waiting for it (and
    // entered Step again): the orchestration still ends with the attempt.
    assert_eq!(wait_for_execution_end(&stack, &execution_arn(&stack, &run_id, 1)).await, "SUCCEEDED");
    stack.assert_all_facts_valid();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_attempt_created_starts_one_orchestration_and_a_pending_run_can_be_cancelled() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let run = stack.create_run(&ws, "name: once\njobs:\n  a:\n    runs-on: linux\n    steps: [{run: a}]\n").await;
    let run_id = run.id();
    let created = stack
        .wait_fact(baton_api::facts::RunAttemptCreated::DETAIL_TYPE, WAIT, |d| d["run_id"] == run_id.as_str())
        .await;
    queued(&stack, &run_id, 1, "a").await;
    stack.redeliver_event(created["event_id"].as_str().unwrap()).await;
    stack.redeliver_event(created["event_id"].as_str().unwrap()).await;
    run_job(&stack, &ws, &run_id, 1, "a", JobOutcome::Succeeded).await;
    stack.wait_run_status(&ws, &run_id, "succeeded").await;
    flush_pipeline(&stack, &ws).await;
    let executions = stack
        .clients
        .sfn()
        .list_executions()
        .state_machine_arn(&stack.provisioned.state_machines["run-attempt"])
        .send()
        .await
        .unwrap();
    let mine = executions.executions().iter().filter(|e| e.name().starts_with(&run_id)).count();
    assert_eq!(mine, 1, "one execution per attempt, whatever the deliveries");
    assert_eq!(queued_keys(&stack, &run_id), ["a"], "the job was queued once");

    // A run cancelled before anything ran: pending → cancelled.
    let run = stack.create_run(&ws, "name: early\njobs:\n  a:\n    runs-on: linux\n    steps: [{run: a}]\n").await;
    let run_id = run.id();
    let Answer { status, body: view } =
        stack.post(&format!("/v1/workspaces/{ws}/runs/{run_id}/cancel"), &stack.admin_token, json!({})).await;
    assert_eq!(status, 202, "{view:#}");
    assert_eq!(view["status"], "cancelled");
    let view = stack
        .wait_view(&ws, &run_id, "the orchestration to finish", |v| job_in(v, 1, "a")["status"] == "cancelled")
        .await;
    assert_eq!(view["status"], "cancelled");
    let arn = execution_arn(&stack, &run_id, 1);
    assert_eq!(wait_for_execution_end(&stack, &arn).await, "SUCCEEDED", "the orchestration ends too");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_jobs_start_and_cancel_across_several_transactions_of_at_most_a_hundred_items() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let jobs: String = (0..60).map(|i| format!("  j{i}: {{runs-on: linux, steps: [{{run: x}}]}}\n")).collect();
    let run = stack.create_run(&ws, &format!("name: many\njobs:\n{jobs}")).await;
    let run_id = run.id();
    baton_tests::wait_for("sixty queued facts", WAIT, || async {
        (queued_keys(&stack, &run_id).len() == 60).then_some(())
    })
    .await;
    let view = stack
        .wait_view(&ws, &run_id, "every job queued", |v| {
            v["attempts"][0]["jobs"].as_array().unwrap().iter().all(|j| j["status"] == "queued")
        })
        .await;
    assert_eq!(view["status"], "running");

    let Answer { status, body: view } =
        stack.post(&format!("/v1/workspaces/{ws}/runs/{run_id}/cancel"), &stack.admin_token, json!({})).await;
    assert_eq!(status, 202, "{view:#}");
    assert_eq!(view["status"], "cancelled");
    // The cancel's transaction holds what fits; the orchestration cancels the rest.
    let view = stack
        .wait_view(&ws, &run_id, "every job cancelled", |v| {
            v["attempts"][0]["jobs"].as_array().unwrap().iter().all(|j| j["status"] == "cancelled")
        })
        .await;
    assert_eq!(view["status"], "cancelled");
    baton_tests::wait_for("sixty terminated facts", WAIT, || async {
        (count_facts(&stack, JobExecutionTerminated::DETAIL_TYPE, &run_id) == 60).then_some(())
    })
    .await;
    flush_pipeline(&stack, &ws).await;
    assert_eq!(count_facts(&stack, JobExecutionTerminated::DETAIL_TYPE, &run_id), 60, "one each, no more");
    stack.assert_all_facts_valid();
}

/// A cancel ends a queued job in its own write, but its pending item leaves
/// the queue only when the terminated fact is reconciled, a trip through
/// the bus. A runner claiming in between must not get the cancelled job
/// (a deploy step could start after its run was cancelled). Here the
/// reconciliation never comes (its subscriber only acknowledges): the
/// claim alone must refuse the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_cancelled_while_its_terminated_fact_is_in_flight_is_never_claimed() {
    let options = baton_tests::options_without_subscriber("reconcile");
    let stack = baton_tests::TestStack::start_custom(|_| {}, std::collections::HashMap::new(), options).await;
    let ws = workspace();
    let yaml = "name: deploy\njobs:\n  deploy:\n    runs-on: linux\n    steps: [{run: ./deploy}]\n";
    let run_id = stack.create_run(&ws, yaml).await.id();
    queued(&stack, &run_id, 1, "deploy").await;
    let Answer { status, body } =
        stack.post(&format!("/v1/workspaces/{ws}/runs/{run_id}/cancel"), &stack.admin_token, json!({})).await;
    assert_eq!(status, 202, "{body:#}");
    let session = stack.runner(&ws, &["linux"]).await.session_token;
    assert!(stack.claim(&session).await.is_none(), "the cancelled job is not claimable");
    let view = stack.run_view(&ws, &run_id).await;
    assert_eq!(job_in(&view, 1, "deploy")["status"], "cancelled", "{view:#}");
}

/// A seed whose plan throttles the first `n` decisions of Step Functions'
/// own `sqs:sendMessage` at `rate`: the first `Step` and every retry of it
/// fail, so the first execution dies for sure.
fn seed_throttling_the_first(n: usize, rate: f64) -> u64 {
    let (service, operation) = baton_localstack::faults::INTEGRATION;
    (0..100_000)
        .find(|seed| {
            let plan = baton_localstack::faults::FaultPlan::parse(&format!(
                "seed={seed};{service}.{operation}:integration-throttled={rate}"
            ))
            .expect("valid")
            .expect("rules");
            (0..n).all(|_| plan.decide(service, operation).is_some())
        })
        .expect("some seed throttles them")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_step_integration_is_throttled_still_times_out_runs_its_always_job_and_finishes() {
    // Step's sendMessage is throttled: the first Step and its three retries
    // (the state machine's Retry), so the first execution dies; a third of
    // the later ones too. One timeout minute lasts 2 s; the watchdog (the
    // reaper's tick) looks every second.
    let (service, operation) = baton_localstack::faults::INTEGRATION;
    let rate = 0.3;
    let seed = seed_throttling_the_first(4, rate);
    let faults = format!("seed={seed};{service}.{operation}:integration-throttled={rate}");
    let plan = std::sync::Arc::new(baton_localstack::faults::FaultPlan::parse(&faults).unwrap().unwrap());
    let options = baton_devhost::HostOptions { faults: Some(plan.clone()), ..baton_devhost::HostOptions::default() };
    let overrides = std::collections::HashMap::from([
        ("BATON_TIMEOUT_MINUTE_S".to_string(), "2".to_string()),
        ("BATON_REAPER_PERIOD_S".to_string(), "1".to_string()),
    ]);
    let stack = baton_tests::TestStack::start_custom(|_| {}, overrides, options).await;
    let ws = workspace();
    let yaml = "name: throttled\njobs:\n  slow:\n    runs-on: linux\n    timeout-minutes: 2\n    steps: [{run: sleep 600}]\n  after:\n    needs: slow\n    if: always()\n    runs-on: linux\n    steps: [{run: ./report}]\n";
    let run = stack.create_run(&ws, yaml).await;
    let run_id = run.id();
    queued(&stack, &run_id, 1, "slow").await;
    // Nobody claims `slow`: only the orchestration can end it, by its timeout.
    let view = stack.wait_view(&ws, &run_id, "slow to time out", |v| job_in(v, 1, "slow")["status"] == "failed").await;
    assert_eq!(job_in(&view, 1, "slow")["status_reason"], "timed_out");
    run_job(&stack, &ws, &run_id, 1, "after", JobOutcome::Succeeded).await;
    let view = stack.wait_run_status(&ws, &run_id, "failed").await;
    assert_eq!(job_in(&view, 1, "after")["status"], "succeeded", "the always() job ran after the timeout");
    assert!(plan.injected_by_kind().get("integration-throttled").copied().unwrap_or(0) >= 4);
    // The first execution died of it; a later generation carried the attempt to its end.
    assert_eq!(wait_for_execution_end(&stack, &execution_arn(&stack, &run_id, 1)).await, "FAILED");
    let machine = &stack.provisioned.state_machines["run-attempt"];
    // The run's status is written before the generation that wrote it
    // reports the end to its state machine: wait for that report.
    let ends = baton_tests::wait_for("a generation to end the attempt", WAIT, || async {
        let succeeded = stack
            .clients
            .sfn()
            .list_executions()
            .state_machine_arn(machine)
            .status_filter("SUCCEEDED".into())
            .send()
            .await
            .unwrap();
        let ends: Vec<String> = succeeded
            .executions()
            .iter()
            .filter(|e| e.name().starts_with(&run_id))
            .map(|e| e.name().to_string())
            .collect();
        (!ends.is_empty()).then_some(ends)
    })
    .await;
    assert_eq!(ends.len(), 1, "one generation ended the attempt: {ends:?}");
    assert!(ends[0].starts_with(&format!("{run_id}-1-g")), "{}", ends[0]);
    stack.assert_all_facts_valid();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_attempt_created_replaces_a_dead_orchestration_and_the_run_still_finishes() {
    // The watchdog looks only once an hour here: the delivery alone must do it.
    let overrides = std::collections::HashMap::from([("BATON_REAPER_PERIOD_S".to_string(), "3600".to_string())]);
    let stack = baton_tests::TestStack::start_with(|_| {}, overrides).await;
    let ws = workspace();
    let run = stack.create_run(&ws, "name: dies\njobs:\n  a:\n    runs-on: linux\n    steps: [{run: a}]\n").await;
    let run_id = run.id();
    let created = stack
        .wait_fact(baton_api::facts::RunAttemptCreated::DETAIL_TYPE, WAIT, |d| d["run_id"] == run_id.as_str())
        .await;
    queued(&stack, &run_id, 1, "a").await;
    // The parked Step fails with an error nothing catches: the execution dies.
    let run_uuid = run_id.parse().unwrap();
    let token = baton_tests::wait_for("the first Step to park", WAIT, || async {
        stack.store.get_attempt(run_uuid, 1).await.unwrap().and_then(|item| item.wait_token)
    })
    .await;
    stack.clients.sfn().send_task_failure().task_token(token).error("Test.Died").send().await.unwrap();
    let first = execution_arn(&stack, &run_id, 1);
    assert_eq!(wait_for_execution_end(&stack, &first).await, "FAILED");
    // The fact delivered again finds the execution dead: the next generation starts.
    stack.redeliver_event(created["event_id"].as_str().unwrap()).await;
    let second = format!("{first}-g1");
    baton_tests::wait_for("the next generation", WAIT, || async {
        stack.clients.sfn().describe_execution().execution_arn(&second).send().await.ok()
    })
    .await;
    run_job(&stack, &ws, &run_id, 1, "a", JobOutcome::Succeeded).await;
    stack.wait_run_status(&ws, &run_id, "succeeded").await;
    assert_eq!(wait_for_execution_end(&stack, &second).await, "SUCCEEDED", "the new generation ends the attempt");
    // Delivered once more, it starts nothing: the second generation succeeded.
    stack.redeliver_event(created["event_id"].as_str().unwrap()).await;
    flush_pipeline(&stack, &ws).await;
    let third = format!("{first}-g2");
    assert!(
        stack.clients.sfn().describe_execution().execution_arn(&third).send().await.is_err(),
        "no third generation"
    );
}

/// When the execution of job `key` of a run's first attempt was queued and
/// when it finished.
fn ran_between(view: &serde_json::Value, key: &str) -> (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>) {
    let execution = &job_in(view, 1, key)["executions"][0];
    let at = |field: &str| {
        execution[field].as_str().and_then(|t| t.parse().ok()).unwrap_or_else(|| panic!("{field} of {execution:#}"))
    };
    (at("queued_at"), at("finished_at"))
}

/// A stack whose concurrency group writes meet faults: the group item's
/// single PutItems lose their answers (applied, then retried against the
/// state they made) or are throttled; the attempts' transactions conflict.
async fn stack_with_group_faults(
    seed: u64,
) -> (baton_tests::TestStack, std::sync::Arc<baton_localstack::faults::FaultPlan>) {
    let faults = format!(
        "seed={seed};dynamodb.PutItem:lost=0.3;dynamodb.PutItem:throttle=0.2;dynamodb.TransactWriteItems:conflict=0.2"
    );
    let plan = std::sync::Arc::new(baton_localstack::faults::FaultPlan::parse(&faults).unwrap().unwrap());
    let options = baton_devhost::HostOptions { faults: Some(plan.clone()), ..baton_devhost::HostOptions::default() };
    (baton_tests::TestStack::start_custom(|_| {}, std::collections::HashMap::new(), options).await, plan)
}

/// Creates a run of `yaml` with the input `env`; its id.
async fn create_for_env(stack: &baton_tests::TestStack, ws: &str, yaml: &str, env: &str) -> String {
    let body = json!({"definition": yaml, "inputs": {"env": env}});
    let Answer { status, body } = stack.post(&format!("/v1/workspaces/{ws}/runs"), &stack.admin_token, body).await;
    assert_eq!(status, 201, "{body:#}");
    body.id()
}

/// Plays `runs`, whose job `deploy` is in group `deploy-prod`, to their
/// ends as the group lets them: each time exactly one of those left has its
/// deploy queued, `waiting` checks each of the others, and `jobs` of the one
/// are run to success (`concurrency` reads where its view shows the group).
/// Then the members ran one at a time (each started after the one before
/// it finished), the group is left empty (by the write that ended the last,
/// or a retried message's if that leave met a fault), the stack's lost
/// answers were met, and every fact is valid.
async fn play_in_turns(
    stack: &baton_tests::TestStack,
    plan: &baton_localstack::faults::FaultPlan,
    ws: &str,
    mut runs: Vec<String>,
    jobs: &[&str],
    concurrency: impl Fn(&serde_json::Value) -> &serde_json::Value,
    waiting: impl AsyncFn(&str),
) {
    let mut order = Vec::new();
    while !runs.is_empty() {
        let next = baton_tests::wait_for("a deploy of the group to be queued", WAIT, || async {
            let started: Vec<&String> = runs.iter().filter(|run| was_queued(stack, run, "deploy")).collect();
            assert!(started.len() <= 1, "two deploys of one group queued: {started:?}");
            started.first().map(|run| (*run).clone())
        })
        .await;
        for other in runs.iter().filter(|run| **run != next) {
            waiting(other).await;
        }
        for key in jobs {
            run_job(stack, ws, &next, 1, key, JobOutcome::Succeeded).await;
        }
        let view = stack.wait_run_status(ws, &next, "succeeded").await;
        assert_eq!(concurrency(&view), &json!({"group": "deploy-prod", "waiting": false}));
        order.push(ran_between(&view, "deploy"));
        runs.retain(|run| *run != next);
    }
    for pair in order.windows(2) {
        assert!(pair[1].0 >= pair[0].1, "overlapping members of group deploy-prod: {order:?}");
    }
    baton_tests::wait_for("the group to be left empty", WAIT, || async {
        let state = stack.store.concurrency_group(ws, "deploy-prod").await.unwrap();
        (state.holders.is_empty() && state.queue.is_empty()).then_some(())
    })
    .await;
    let injected = plan.injected_by_kind();
    assert!(injected.get("lost").copied().unwrap_or(0) > 0, "{injected:?}");
    stack.assert_all_facts_valid();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_racing_into_one_concurrency_group_under_faults_run_one_at_a_time_and_leave_it_empty() {
    let (stack, plan) = stack_with_group_faults(17).await;
    let ws = workspace();
    let yaml = "name: deploy\nconcurrency: {group: 'deploy-${{ inputs.env }}', queue: max}\njobs:\n  deploy:\n    runs-on: linux\n    steps: [{run: ./deploy}]\n";
    let create = |env: &'static str| create_for_env(&stack, &ws, yaml, env);
    // Four creates at once into `deploy-prod`, one into another group.
    let runs = futures::future::join_all((0..4).map(|_| create("prod"))).await;
    let staging = create("staging").await;

    // Another group's run is not held back by this one's.
    run_job(&stack, &ws, &staging, 1, "deploy", JobOutcome::Succeeded).await;
    stack.wait_run_status(&ws, &staging, "succeeded").await;

    // Exactly one of the runs left gets its job queued; the others wait
    // (their one job is their deploy: the whole run waits for the group).
    let waiting = async |other: &str| {
        let view = stack.run_view(&ws, other).await;
        let attempt = &view["attempts"][0];
        assert_eq!(attempt["concurrency"], json!({"group": "deploy-prod", "waiting": true}), "{view:#}");
        assert_eq!(job_in(&view, 1, "deploy")["status"], "pending", "{view:#}");
    };
    play_in_turns(&stack, &plan, &ws, runs, &["deploy"], |view| &view["attempts"][0]["concurrency"], waiting).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_with_a_limit_of_two_runs_two_at_once_and_starts_the_oldest_waiting_one_when_one_ends() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let yaml = "name: e2e\nconcurrency: {group: e2e, limit: 2, queue: 5}\njobs:\n  suite:\n    runs-on: linux\n    steps: [{run: ./e2e}]\n";
    let mut runs = Vec::new();
    for _ in 0..3 {
        runs.push(stack.create_run(&ws, yaml).await.id());
    }
    let started = |runs: &[String]| -> Vec<String> {
        runs.iter().filter(|run| !queued_keys(&stack, run).is_empty()).cloned().collect()
    };
    baton_tests::wait_for("two runs of the group to start", WAIT, || async {
        let now = started(&runs);
        assert!(now.len() <= 2, "three runs of a group of two started: {now:?}");
        (now.len() == 2).then_some(())
    })
    .await;
    // (The orchestrations join in the order they get to it, not the creates'.)
    let running = started(&runs);
    let waiting = runs.iter().find(|run| !running.contains(run)).expect("one waits").clone();
    let view = stack.run_view(&ws, &waiting).await;
    assert_eq!(view["attempts"][0]["concurrency"], json!({"group": "e2e", "waiting": true}), "{view:#}");

    // One ends: the waiting one starts while the other still runs.
    run_job(&stack, &ws, &running[1], 1, "suite", JobOutcome::Succeeded).await;
    stack.wait_run_status(&ws, &running[1], "succeeded").await;
    baton_tests::wait_for("the waiting run to start", WAIT, || async {
        (!queued_keys(&stack, &waiting).is_empty()).then_some(())
    })
    .await;
    let group = stack.store.concurrency_group(&ws, "e2e").await.unwrap();
    assert_eq!(group.holders.len(), 2, "{group:?}");
    assert!(group.queue.is_empty());
    for run in [&running[0], &waiting] {
        run_job(&stack, &ws, run, 1, "suite", JobOutcome::Succeeded).await;
        stack.wait_run_status(&ws, run, "succeeded").await;
    }
    baton_tests::wait_for("the group to be left empty", WAIT, || async {
        let group = stack.store.concurrency_group(&ws, "e2e").await.unwrap();
        (group.holders.is_empty() && group.queue.is_empty()).then_some(())
    })
    .await;
}

/// Whether `run`'s job `key` has been queued (its fact published).
fn was_queued(stack: &baton_tests::TestStack, run: &str, key: &str) -> bool {
    queued_keys(stack, run).iter().any(|queued| queued == key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_concurrency_group_runs_one_deploy_at_a_time_across_runs_under_faults_while_the_rest_goes_on() {
    let (stack, plan) = stack_with_group_faults(29).await;
    let ws = workspace();
    let yaml = "name: ship\njobs:\n  build:\n    runs-on: linux\n    steps: [{run: make}]\n  deploy:\n    needs: build\n    runs-on: linux\n    concurrency: {group: 'deploy-${{ inputs.env }}', queue: max}\n    steps: [{run: ./deploy}]\n  notify:\n    needs: deploy\n    runs-on: linux\n    steps: [{run: ./notify}]\n";
    let create = || create_for_env(&stack, &ws, yaml, "prod");
    let runs = futures::future::join_all((0..3).map(|_| create())).await;
    // Every run's build runs at once: only the deploys take turns.
    for run in &runs {
        run_job(&stack, &ws, run, 1, "build", JobOutcome::Succeeded).await;
    }
    // Once its orchestration has joined, the view says what it waits for.
    let waiting = async |other: &str| {
        stack
            .wait_view(&ws, other, "a deploy waiting for its group", |view| {
                job_in(view, 1, "deploy")["concurrency"] == json!({"group": "deploy-prod", "waiting": true})
            })
            .await;
    };
    let jobs = ["deploy", "notify"];
    play_in_turns(&stack, &plan, &ws, runs, &jobs, |view| &job_in(view, 1, "deploy")["concurrency"], waiting).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_deploy_cancels_the_one_in_progress_and_its_run_goes_on_without_it() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let yaml = "name: ship\njobs:\n  deploy:\n    runs-on: linux\n    concurrency: {group: prod, cancel-in-progress: true}\n    steps: [{run: ./deploy}]\n  notify:\n    needs: deploy\n    runs-on: linux\n    steps: [{run: ./notify}]\n  report:\n    needs: deploy\n    if: always()\n    runs-on: linux\n    steps: [{run: ./report}]\n";
    let first = stack.create_run(&ws, yaml).await.id();
    let deploying = queued(&stack, &first, 1, "deploy").await;
    let runner = stack.runner(&ws, &["linux"]).await;
    let claimed = stack.claim(&runner.session_token).await.expect("the first deploy is claimed");
    assert_eq!(claimed.job_execution_id, deploying.fact.detail.job_execution_id);

    let second = stack.create_run(&ws, yaml).await.id();
    // The newer deploy replaces the running one: cancelled, its runner told
    // at a heartbeat, and its run goes on as after any cancelled job.
    let view = stack
        .wait_view(&ws, &first, "the first deploy replaced", |view| job_in(view, 1, "deploy")["status"] == "cancelled")
        .await;
    assert_eq!(job_in(&view, 1, "deploy")["status_reason"], "concurrency_replaced", "{view:#}");
    baton_tests::wait_for("the replaced deploy's runner told", WAIT, || async {
        let answer = stack.heartbeat(&claimed.lease.token, claimed.job_execution_id).await;
        (answer.body["cancel"] == true).then_some(())
    })
    .await;
    run_job(&stack, &ws, &first, 1, "report", JobOutcome::Succeeded).await;
    let view = stack.wait_run_status(&ws, &first, "succeeded").await;
    assert_eq!(job_in(&view, 1, "notify")["status"], "skipped", "{view:#}");
    // The newer one runs once the replaced one has left.
    run_job(&stack, &ws, &second, 1, "deploy", JobOutcome::Succeeded).await;
    run_job(&stack, &ws, &second, 1, "notify", JobOutcome::Succeeded).await;
    run_job(&stack, &ws, &second, 1, "report", JobOutcome::Succeeded).await;
    stack.wait_run_status(&ws, &second, "succeeded").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_retried_after_its_runner_was_lost_goes_to_another_runner_first() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let yaml = "name: lost\njobs:\n  build:\n    runs-on: linux\n    retry: {max: 1, when: [runner_lost]}\n    steps: [{run: make}]\n";
    let run_id = stack.create_run(&ws, yaml).await.id();
    queued(&stack, &run_id, 1, "build").await;
    let lost = stack.runner(&ws, &["linux"]).await;
    let other = stack.runner(&ws, &["linux"]).await;
    let first = stack.claim(&lost.session_token).await.expect("the first runner takes the job");
    // It never heartbeats: past its grace the reaper expires the lease.
    assert_eq!(stack.reap_at(first.lease.expires_at + chrono::Duration::seconds(1)).await, 1);
    let retry = baton_tests::wait_for("the retry to be queued", WAIT, || async {
        stack
            .facts(baton_api::facts::JobExecutionQueued::DETAIL_TYPE)
            .into_iter()
            .find(|d| d["run_id"] == run_id.as_str() && d["retry"] == 1)
    })
    .await;
    assert_eq!(retry["job"]["avoid_session"], json!(lost.session_id), "{retry:#}");
    let execution: uuid::Uuid = retry["job_execution_id"].as_str().unwrap().parse().unwrap();
    baton_tests::wait_for("the retry to be claimable", WAIT, || async {
        stack.store.runner_record(execution).await.unwrap().map(|_| ())
    })
    .await;
    // The runner that lost it is passed over while another fits ...
    assert!(stack.claim(&lost.session_token).await.is_none(), "the lost runner does not take it back at once");
    // ... and the other takes it.
    let second = stack.claim(&other.session_token).await.expect("the other runner takes the retry");
    assert_eq!(second.job_execution_id, execution);
    stack.assert_all_facts_valid();
}
