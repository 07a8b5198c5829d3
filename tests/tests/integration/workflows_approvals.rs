//! Approval jobs (behaviour.md §16) through the real functions: a job that
//! waits for people, N of M named tokens or groups, the run's creator
//! refused, typed inputs that become the job's outputs, a rejection that
//! skips its dependants, each `on-timeout`, and the decision facts.

use crate::workflows_support::*;
use baton_api::facts::JobOutcome;
use baton_tests::http::Answer;
use baton_tests::runs::{job_in, Identified};
use baton_tests::{workspace, TestStack, WAIT};
use serde_json::{json, Value};

/// `sign-off` waits for two approvals from alice and release-managers,
/// whose typed inputs reach `deploy`'s env (the runner tests run it too).
const RELEASE: &str = include_str!("../../../domain/tests/fixtures/workflows/release_sign_off.yml");

async fn decide(stack: &TestStack, ws: &str, run: &str, job: &str, token: &str, body: Value) -> Answer {
    stack.post(&format!("/v1/workspaces/{ws}/runs/{run}/jobs/{job}/approval"), token, body).await
}

/// A run of `yaml` created by `creator`, its build run to success, its
/// `sign-off` waiting: the run id and the job's id.
async fn waiting_sign_off(stack: &TestStack, ws: &str, creator: &str, yaml: &str) -> (String, String) {
    let Answer { status, body: created } =
        stack.post(&format!("/v1/workspaces/{ws}/runs"), creator, json!({"definition": yaml})).await;
    assert_eq!(status, 201, "{created:#}");
    let run = created.id();
    run_job(stack, ws, &run, 1, "build", JobOutcome::Succeeded).await;
    let view = stack.wait_view(ws, &run, "sign-off waiting", |v| job_in(v, 1, "sign-off")["status"] == "waiting").await;
    let sign_off = job_in(&view, 1, "sign-off");
    assert_eq!(sign_off["approval"]["required"], 2);
    assert!(sign_off["approval"]["deadline"].is_string(), "{sign_off:#}");
    assert!(sign_off["executions"][0]["status"] == "waiting");
    (run, sign_off.id())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_of_three_named_approvers_release_the_job_with_their_inputs_and_the_creator_is_refused() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let alice = stack.approver_token(&ws, "alice", &[]).await;
    let bob = stack.approver_token(&ws, "bob", &["release-managers"]).await;
    let carol = stack.approver_token(&ws, "carol", &["release-managers"]).await;
    let mallory = stack.approver_token(&ws, "mallory", &["ops"]).await;
    // Carol creates the run: she may not approve it.
    let (run, sign_off) = waiting_sign_off(&stack, &ws, &carol, RELEASE).await;
    // `client` is no field of the API's: it is ignored, as on every route
    // (api.md), so a newer client's request is not refused by an older stack.
    let approve =
        |inputs: Value| json!({"decision": "approve", "comment": "ship it", "inputs": inputs, "client": "console"});

    let Answer { status, body } =
        decide(&stack, &ws, &run, &sign_off, &carol, approve(json!({"dry_run": false}))).await;
    assert_eq!((status, body["error"]["code"].as_str()), (403, Some("self-approval")));
    let Answer { status, body } =
        decide(&stack, &ws, &run, &sign_off, &mallory, approve(json!({"dry_run": false}))).await;
    assert_eq!((status, body["error"]["code"].as_str()), (403, Some("forbidden")));
    for (inputs, named) in
        [(json!({"channel": "nightly"}), "inputs.channel"), (json!({"dry_run": "no"}), "inputs.dry_run")]
    {
        let Answer { status, body } = decide(&stack, &ws, &run, &sign_off, &alice, approve(inputs)).await;
        assert_eq!(status, 400, "{body}");
        assert!(body["error"]["message"].as_str().unwrap().contains(named), "{body}");
    }
    let view = stack.run_view(&ws, &run).await;
    assert_eq!(job_in(&view, 1, "sign-off")["approval"]["decisions"], json!([]), "a refusal records nothing");

    let Answer { status, body } = decide(&stack, &ws, &run, &sign_off, &alice, approve(json!({"notes": "rc1"}))).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("waiting")), "{body:#}");
    // Alice again: counted once, nothing recorded.
    let Answer { status, body } = decide(&stack, &ws, &run, &sign_off, &alice, approve(json!({}))).await;
    assert_eq!((status, body["approval"]["decisions"].as_array().unwrap().len()), (200, 1));
    let Answer { status, body } =
        decide(&stack, &ws, &run, &sign_off, &bob, approve(json!({"channel": "stable", "dry_run": false}))).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("succeeded")), "{body:#}");
    assert_eq!(body["outputs"], json!({"channel": "stable", "dry_run": false, "notes": "rc1"}));
    let by: Vec<&str> =
        body["approval"]["decisions"].as_array().unwrap().iter().map(|d| d["by"].as_str().unwrap()).collect();
    assert_eq!(by, ["alice", "bob"]);
    let Answer { status, body } = decide(&stack, &ws, &run, &sign_off, &mallory, approve(json!({}))).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("not-waiting")));

    // The inputs reach the job that needs the approval.
    let deploy = queued(&stack, &run, 1, "deploy").await;
    assert_eq!(deploy.spec.work.env.get("CHANNEL").map(String::as_str), Some("stable"));
    assert_eq!(deploy.spec.work.env.get("DRY_RUN").map(String::as_str), Some("false"));
    let facts: Vec<Value> = stack
        .facts("baton.workflows.job.approval_decided")
        .into_iter()
        .filter(|d| d["run_id"] == run.as_str())
        .collect();
    let outcomes: Vec<(&str, &str)> =
        facts.iter().map(|f| (f["by"].as_str().unwrap(), f["outcome"].as_str().unwrap())).collect();
    assert_eq!(outcomes, [("alice", "waiting"), ("bob", "approved")], "one fact a recorded decision");
    assert_eq!(stack.run_view(&ws, &run).await["created_by"], "carol");
    let waiting = stack
        .wait_fact("baton.workflows.job.waiting", WAIT, |d| d["run_id"] == run.as_str() && d["job_key"] == "sign-off")
        .await;
    assert_eq!(waiting["waiting_for"], "approval", "a notifier learns someone must decide");
    stack.assert_all_facts_valid();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejection_fails_the_approval_with_reason_rejected_and_skips_its_dependants() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let bob = stack.approver_token(&ws, "bob", &["release-managers"]).await;
    let (run, sign_off) = waiting_sign_off(&stack, &ws, &stack.admin_token, RELEASE).await;
    let Answer { status, body } =
        decide(&stack, &ws, &run, &sign_off, &bob, json!({"decision": "reject", "comment": "not today"})).await;
    assert_eq!(
        (status, body["status"].as_str(), body["status_reason"].as_str()),
        (200, Some("failed"), Some("rejected"))
    );
    assert_eq!(body["approval"]["decisions"][0]["comment"], "not today");
    let view = stack.wait_run_status(&ws, &run, "failed").await;
    assert_eq!(job_in(&view, 1, "deploy")["status"], "skipped");
    assert!(!queued_keys(&stack, &run).contains(&"deploy".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_nobody_decides_fails_approves_with_its_defaults_or_is_skipped_as_on_timeout_says() {
    // A timeout minute of one second: the approvals time out in 2 s.
    let stack = start_with_minute(1).await;
    let ws = workspace();
    for (on_timeout, status, deploy) in
        [("fail", "failed", "skipped"), ("approve", "succeeded", "queued"), ("skip", "skipped", "skipped")]
    {
        let yaml = format!(
            "name: t-{on_timeout}\njobs:\n  build:\n    runs-on: linux\n    steps: [{{run: make}}]\n  sign-off:\n    needs: build\n    \
             approval:\n      timeout-minutes: 2\n      on-timeout: {on_timeout}\n      inputs:\n        channel: {{type: choice, options: [stable, beta], default: beta}}\n  \
             deploy:\n    needs: sign-off\n    runs-on: linux\n    env: {{CHANNEL: '${{{{ needs.sign-off.outputs.channel }}}}'}}\n    steps: [{{run: ./deploy}}]\n"
        );
        let created = stack.create_run(&ws, &yaml).await;
        let run = created.id();
        run_job(&stack, &ws, &run, 1, "build", JobOutcome::Succeeded).await;
        let view = stack
            .wait_view(&ws, &run, &format!("{on_timeout}: sign-off ended"), |v| {
                job_in(v, 1, "sign-off")["status"] != "waiting" && job_in(v, 1, "sign-off")["status"] != "pending"
            })
            .await;
        let sign_off = job_in(&view, 1, "sign-off");
        assert_eq!(sign_off["status"], status, "{on_timeout}: {sign_off:#}");
        if on_timeout != "approve" {
            assert_eq!(sign_off["status_reason"], "timed_out", "{on_timeout}");
        }
        let view = stack
            .wait_view(&ws, &run, &format!("{on_timeout}: deploy {deploy}"), |v| {
                job_in(v, 1, "deploy")["status"] == deploy
            })
            .await;
        if on_timeout == "approve" {
            assert_eq!(job_in(&view, 1, "sign-off")["outputs"], json!({"channel": "beta"}));
            let deploy = queued(&stack, &run, 1, "deploy").await;
            assert_eq!(deploy.spec.work.env.get("CHANNEL").map(String::as_str), Some("beta"), "the default reaches it");
        }
    }
}

/// The approval's own write, as the route makes it, without what follows
/// it: what a try whose answer was lost (after its write, before its wake
/// of the orchestration) leaves behind.
async fn decide_without_waking(stack: &TestStack, run: &str, job_id: &str, approver: &str, body: Value) {
    use baton_store::attempts::{AttemptStep, AttemptWrite};
    let run_id = uuid::Uuid::parse_str(run).unwrap();
    let job_id = uuid::Uuid::parse_str(job_id).unwrap();
    let approver = baton_domain::workflows::approval::Approver { name: approver.into(), groups: Vec::new() };
    let request: baton_api::runs::ApprovalRequest = serde_json::from_value(body).unwrap();
    let minute = stack.host.config.orchestration.timeout_minute;
    stack
        .store
        .update_attempt(run_id, 1, 7, |next, definition| {
            let change = next
                .state
                .decide_approval(definition, job_id, &approver, Some("creator"), request.clone(), chrono::Utc::now())
                .unwrap()
                .expect("the decision changes the job");
            let mut emitted = change.emitted;
            let (advanced, wake) = baton_service::usecases::outcomes::advance_in_write(
                next,
                definition,
                minute,
                baton_service::usecases::orchestration::JOBS_PER_TRANSACTION,
            );
            emitted.extend(advanced);
            Ok::<_, baton_store::StoreError>(AttemptStep::Write(AttemptWrite {
                emitted,
                progressed: wake,
                ..AttemptWrite::default()
            }))
        })
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_retried_after_its_answer_was_lost_wakes_the_orchestration_the_lost_try_owed() {
    let stack = TestStack::start().await;
    let ws = workspace();
    // A registered runner, so no job is flagged unschedulable: a flag's
    // wake-up would hide whether the retry wakes the orchestration.
    stack.runner(&ws, &["linux"]).await;
    let alice = stack.approver_token(&ws, "alice", &[]).await;
    let yaml = RELEASE.replace("required: 2", "required: 1");
    let Answer { status, body: created } =
        stack.post(&format!("/v1/workspaces/{ws}/runs"), &stack.admin_token, json!({"definition": yaml})).await;
    assert_eq!(status, 201, "{created:#}");
    let run = created.id();
    run_job(&stack, &ws, &run, 1, "build", JobOutcome::Succeeded).await;
    let view =
        stack.wait_view(&ws, &run, "sign-off waiting", |v| job_in(v, 1, "sign-off")["status"] == "waiting").await;
    let sign_off = job_in(&view, 1, "sign-off")["id"].as_str().unwrap().to_string();
    // The orchestration parks, waiting for progress.
    let run_id = uuid::Uuid::parse_str(&run).unwrap();
    baton_tests::wait_for("the orchestration to park", WAIT, || async {
        let item = stack.store.get_attempt(run_id, 1).await.unwrap()?;
        (item.wait_token.is_some() && item.wait_progress == Some(item.progress)).then_some(())
    })
    .await;

    // Alice's click is recorded (the job ends, the deploy is due) and its
    // answer lost before anything woke the orchestration.
    let click = json!({"decision": "approve", "inputs": {"channel": "stable", "dry_run": false}});
    decide_without_waking(&stack, &run, &sign_off, "alice", click.clone()).await;
    assert!(queued_keys(&stack, &run).iter().all(|k| k != "deploy"), "the deploy waits for the orchestration");

    // Her browser retries: the job has ended (409), and that try wakes
    // the orchestration, which starts the deploy at once, not at its
    // parked step's deadline an hour later.
    let Answer { status, body } = decide(&stack, &ws, &run, &sign_off, &alice, click).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("not-waiting")), "{body}");
    baton_tests::wait_for("the deploy to be queued", WAIT, || async {
        queued_keys(&stack, &run).iter().any(|k| k == "deploy").then_some(())
    })
    .await;
}
