//! Listening jobs (behaviour.md §16) through the real functions: deliveries
//! refused before the job listens, for an event it does not take, from
//! another workspace; a listening timeout; what the view shows. The happy
//! path with real runner processes is in the runner tests.

use crate::workflows_support::*;
use baton_api::facts::JobOutcome;
use baton_tests::http::Answer;
use baton_tests::runs::{job_in, Identified};
use baton_tests::{workspace, TestStack, WAIT};
use serde_json::json;

/// `on-review` listens for `review` events for two timeout minutes once
/// `build` is done, its step reading each event; `after` needs it.
const LISTENING: &str = include_str!("../../../domain/tests/fixtures/workflows/listening_reviews.yml");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_are_refused_before_listening_and_checked_and_the_listening_timeout_ends_the_job() {
    // A minute of one second: the job listens 2 s.
    let stack = start_with_minute(1).await;
    let ws = workspace();
    let created = stack.create_run(&ws, LISTENING).await;
    let run = created.id();
    let job_id = job_in(&created, 1, "on-review")["id"].as_str().unwrap().to_string();
    let path = format!("/v1/workspaces/{ws}/runs/{run}/jobs/{job_id}/events");
    // `sent_by` is no field of the API's: ignored, as on every route (api.md).
    let fire = |reference: &str| json!({"name": "review", "disposition": "fire", "ref": reference, "payload": {"review": {"state": "ok"}}, "sent_by": "bridge"});

    let Answer { status, body } = stack.post(&path, &stack.admin_token, fire("early")).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("not-listening")), "its needs are not met yet");
    let Answer { status, body } = stack
        .post(
            &format!(
                "/v1/workspaces/{ws}/runs/{run}/jobs/{}/events",
                job_in(&created, 1, "build")["id"].as_str().unwrap()
            ),
            &stack.admin_token,
            fire("x"),
        )
        .await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("not-listening")), "not a listening job");
    // Another workspace's token does not reach the run.
    let other = stack.workspace_token("elsewhere").await;
    let Answer { status, body: _ } = stack.post(&path, &other, fire("x")).await;
    assert_eq!(status, 404);

    run_job(&stack, &ws, &run, 1, "build", JobOutcome::Succeeded).await;
    stack.wait_view(&ws, &run, "listening", |v| job_in(v, 1, "on-review")["status"] == "waiting").await;
    for (body, says) in [
        (json!({"name": "push", "disposition": "fire", "ref": "r1"}), "name"),
        (json!({"name": "review", "disposition": "fire", "ref": ""}), "ref"),
        (
            json!({"name": "review", "disposition": "fire", "ref": "r1", "payload": {"big": "x".repeat(9000)}}),
            "payload",
        ),
    ] {
        let Answer { status, body: answer } = stack.post(&path, &stack.admin_token, body).await;
        assert_eq!(status, 400, "{answer}");
        assert!(answer["error"]["message"].as_str().unwrap().starts_with(says), "{answer}");
    }
    let view = stack.run_view(&ws, &run).await;
    let listening = &job_in(&view, 1, "on-review")["listening"];
    assert_eq!((listening["events"].clone(), listening["pending"].clone()), (json!(["review"]), json!([])));
    assert!(listening["until"].is_string(), "{listening}");

    // Nobody fires: the listening times out, its dependant is skipped.
    let view = stack.wait_run_status(&ws, &run, "failed").await;
    let on_review = job_in(&view, 1, "on-review");
    assert_eq!(
        (on_review["status"].as_str(), on_review["status_reason"].as_str()),
        (Some("failed"), Some("timed_out"))
    );
    assert_eq!(job_in(&view, 1, "after")["status"], "skipped");
    let Answer { status, body } = stack.post(&path, &stack.admin_token, fire("late")).await;
    assert_eq!((status, body), (200, json!({"delivered": false})), "a job that ended acknowledges and changes nothing");
    assert_eq!(stack.run_view(&ws, &run).await, view);
}

/// Puts `detail` on the stack's bus as a producer would.
async fn put_on_bus(stack: &baton_tests::TestStack, detail_type: &str, detail: serde_json::Value) {
    let entry = aws_sdk_eventbridge::types::PutEventsRequestEntry::builder()
        .event_bus_name(&stack.provisioned.bus)
        .source("acme.reviews")
        .detail_type(detail_type)
        .detail(detail.to_string())
        .build();
    let out = stack.clients.eventbridge().put_events().entries(entry).send().await.expect("PutEvents");
    assert_eq!(out.failed_entry_count, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_put_on_the_bus_reach_their_listening_job_and_another_workspaces_are_dropped() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let created = stack.create_run(&ws, LISTENING).await;
    let run = created.id();
    run_job(&stack, &ws, &run, 1, "build", JobOutcome::Succeeded).await;
    stack.wait_view(&ws, &run, "listening", |v| job_in(v, 1, "on-review")["status"] == "waiting").await;
    let event = |workspace: &str, reference: &str, disposition: &str| {
        json!({"workspace_id": workspace, "run_id": run, "job": "on-review", "name": "review",
               "disposition": disposition, "ref": reference, "payload": {"review": {"state": reference}}})
    };
    // Another workspace's producer names this run: dropped. A malformed
    // event: dropped. Neither is retried nor reaches the job.
    put_on_bus(&stack, "baton.external.job_event", event("not-mine", "stolen", "fire")).await;
    put_on_bus(&stack, "baton.external.job_event", json!({"workspace_id": ws, "run_id": run})).await;
    put_on_bus(&stack, "baton.external.job_event", event(&ws, "r1", "fire")).await;
    put_on_bus(&stack, "baton.external.job_event", event(&ws, "r1", "fire")).await;
    let queued = queued(&stack, &run, 1, "on-review").await;
    assert_eq!(
        (queued.spec.work.steps[0].run.as_str(), queued.spec.work.env.get("STATE").map(String::as_str)),
        ("echo review r1 $STATE", Some("r1")),
        "the event's name, ref and payload reach its execution"
    );
    let runner = Runner::for_queued(&ws, &queued);
    runner.claim(&stack).await;
    runner.complete(&stack, JobOutcome::Succeeded).await;
    put_on_bus(&stack, "baton.external.job_event", event(&ws, "done", "resolve")).await;
    let view =
        stack.wait_view(&ws, &run, "on-review resolved", |v| job_in(v, 1, "on-review")["status"] == "succeeded").await;
    let executions = job_in(&view, 1, "on-review")["executions"].as_array().unwrap().clone();
    let refs: Vec<&str> = executions.iter().map(|e| e["event"]["ref"].as_str().unwrap_or("")).collect();
    assert_eq!(refs, ["r1"], "one execution: the repeat and the other workspace's event changed nothing");
    // The resolve's write queued `after` too; the listening job was queued once.
    let queued_listening = stack
        .facts("baton.workflows.job_execution.queued")
        .into_iter()
        .filter(|d| d["run_id"] == run.as_str() && d["job"]["key"] == "on-review")
        .count();
    assert_eq!(queued_listening, 1, "r1 only");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_if_runs_only_the_events_it_admits_and_records_the_others_rejected() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let yaml = r#"
name: reviews
jobs:
  on-review:
    runs-on: linux
    listen: {events: [review], if: "${{ event.payload.state == 'approved' }}"}
    steps: [{run: "echo ${{ event.ref }}"}]
"#;
    let created = stack.create_run(&ws, yaml).await;
    let run = created.id();
    let job_id = job_in(&created, 1, "on-review")["id"].as_str().unwrap().to_string();
    stack.wait_view(&ws, &run, "listening", |v| job_in(v, 1, "on-review")["status"] == "waiting").await;
    let path = format!("/v1/workspaces/{ws}/runs/{run}/jobs/{job_id}/events");
    let fire = |reference: &str, state: &str| json!({"name": "review", "disposition": "fire", "ref": reference, "payload": {"state": state}});
    let Answer { status, body: _ } = stack.post(&path, &stack.admin_token, fire("c1", "commented")).await;
    assert_eq!(status, 202);
    let view = stack
        .wait_view(&ws, &run, "the comment rejected", |v| {
            job_in(v, 1, "on-review")["executions"].as_array().is_some_and(|e| e.len() == 2)
        })
        .await;
    let rejected = &job_in(&view, 1, "on-review")["executions"][0];
    assert_eq!(
        (rejected["status"].as_str(), rejected["status_reason"].as_str(), rejected["event"]["ref"].as_str()),
        (Some("cancelled"), Some("condition_rejected"), Some("c1")),
        "{view:#}"
    );
    assert!(queued_keys(&stack, &run).is_empty(), "a rejected event runs nothing");
    assert_eq!(job_in(&view, 1, "on-review")["status"], "waiting", "it listens on");

    let Answer { status, body: _ } = stack.post(&path, &stack.admin_token, fire("a1", "approved")).await;
    assert_eq!(status, 202);
    baton_tests::wait_for("the approved review to run", WAIT, || async {
        (!queued_keys(&stack, &run).is_empty()).then_some(())
    })
    .await;
    // The job's `if:` itself may not read events: it decides once, before any.
    let refused = yaml.replace("    listen:", "    if: \"${{ event.ref == 'x' }}\"\n    listen:");
    let Answer { status, body } =
        stack.post(&format!("/v1/workspaces/{ws}/runs"), &stack.admin_token, json!({"definition": refused})).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("`listen.if` decides each event"), "{body}");
    stack.assert_all_facts_valid();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_retried_after_its_answer_was_lost_wakes_the_orchestration_the_lost_try_owed() {
    use baton_store::attempts::{AttemptStep, AttemptWrite};
    let stack = TestStack::start().await;
    let ws = workspace();
    // A registered runner, so no job is flagged unschedulable: a flag's
    // wake-up would hide whether the retry wakes the orchestration.
    stack.runner(&ws, &["linux"]).await;
    // Its env reads the run's inputs: starting an execution takes a read,
    // which the delivery's own write does not make (the orchestration does).
    let yaml = LISTENING.replace("    env:\n", "    env:\n      WHO: \"${{ inputs.who }}\"\n");
    assert!(yaml.contains("inputs.who"), "the listening job's env reads an input: {yaml}");
    let Answer { status, body: created } = stack
        .post(
            &format!("/v1/workspaces/{ws}/runs"),
            &stack.admin_token,
            json!({"definition": yaml, "inputs": {"who": "octocat"}}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let run = created.id();
    let job_id = job_in(&created, 1, "on-review")["id"].as_str().unwrap().to_string();
    run_job(&stack, &ws, &run, 1, "build", JobOutcome::Succeeded).await;
    stack.wait_view(&ws, &run, "listening", |v| job_in(v, 1, "on-review")["status"] == "waiting").await;
    let run_id = uuid::Uuid::parse_str(&run).unwrap();
    baton_tests::wait_for("the orchestration to park", WAIT, || async {
        let item = stack.store.get_attempt(run_id, 1).await.unwrap()?;
        (item.wait_token.is_some() && item.wait_progress == Some(item.progress)).then_some(())
    })
    .await;

    // The delivery's own write, as the route makes it, its answer lost
    // before anything woke the orchestration (its step reads the payload).
    let event = baton_domain::workflows::listening::JobEvent {
        name: "review".into(),
        reference: "r1".into(),
        disposition: baton_domain::workflows::listening::Disposition::Fire,
        payload: json!({"review": {"state": "ok"}}),
        delivered_at: chrono::Utc::now(),
    };
    let minute = stack.host.config.orchestration.timeout_minute;
    let id = uuid::Uuid::parse_str(&job_id).unwrap();
    stack
        .store
        .update_attempt(run_id, 1, 7, |next, definition| {
            assert!(next.state.deliver_event(definition, id, event.clone()).unwrap());
            let (emitted, wake) = baton_service::usecases::outcomes::advance_in_write(
                next,
                definition,
                minute,
                baton_service::usecases::orchestration::JOBS_PER_TRANSACTION,
            );
            Ok::<_, baton_store::StoreError>(AttemptStep::Write(AttemptWrite {
                emitted,
                progressed: wake,
                ..AttemptWrite::default()
            }))
        })
        .await
        .unwrap();
    assert!(queued_keys(&stack, &run).iter().all(|k| k != "on-review"), "the execution waits for the orchestration");

    // The producer retries: the ref was delivered (200, false), and that try
    // wakes the orchestration, which runs the execution now.
    let path = format!("/v1/workspaces/{ws}/runs/{run}/jobs/{job_id}/events");
    let body = json!({"name": "review", "disposition": "fire", "ref": "r1", "payload": {"review": {"state": "ok"}}});
    let Answer { status, body: answer } = stack.post(&path, &stack.admin_token, body).await;
    assert_eq!((status, answer), (200, json!({"delivered": false})));
    baton_tests::wait_for("the event's execution to be queued", WAIT, || async {
        queued_keys(&stack, &run).iter().any(|k| k == "on-review").then_some(())
    })
    .await;
}
