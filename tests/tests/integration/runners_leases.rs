//! Leases: heartbeat, step reports, complete, the reaper and terminal
//! reconciliation — behaviour.md §5–7 and §13 scenarios 11–16.

use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_api::facts::{Fact, JobLeaseExpired};
use baton_api::runners::ClaimResponse;
use baton_domain::workflows::StepStatus;
use baton_lease_reaper::{reap, ReapLimits};
use baton_store::keys::lease_shard;
use baton_store::leases::ReportedSteps;
use baton_store::records::RunnerStatus;
use baton_store::runner_items::LeaseItem;
use baton_tests::http::Answer;
use baton_tests::runners::{cancelled_fact, queued_fact, queued_steps_fact};
use baton_tests::runs::Identified;
use baton_tests::TestStack;
use chrono::{Duration as Span, Utc};
use serde_json::json;
use uuid::Uuid;

async fn leased(stack: &TestStack, workspace: &str) -> (String, ClaimResponse) {
    let runner = stack.runner(workspace, &["linux"]).await;
    stack.queue_job(workspace, &["linux"], Utc::now()).await;
    let job = stack.claim(&runner.session_token).await.expect("claimable");
    (runner.session_token, job)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_extends_the_lease_and_reports_no_cancel() {
    let stack = TestStack::start().await;
    let (_, job) = leased(&stack, "ws1").await;
    let grace_expiry = job.lease.expires_at;
    let answer = stack.heartbeat(&job.lease.token, job.job_execution_id).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["cancel"], false);
    assert_eq!(answer.body["heartbeat_interval_s"], 15);
    let extended: chrono::DateTime<Utc> = serde_json::from_value(answer.body["expires_at"].clone()).unwrap();
    assert!(extended > grace_expiry + Span::seconds(100), "a heartbeat extends by the lease duration (180 s)");
    let lease = stack.store.lease(job.job_execution_id).await.unwrap().unwrap();
    assert_eq!(lease.expires_at, extended);
    assert!(lease.heartbeated);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_with_a_stale_epoch_or_another_leases_token_changes_nothing() {
    let stack = TestStack::start().await;
    let (_, job) = leased(&stack, "ws1").await;
    let (_, other) = leased(&stack, "ws1").await;
    let before = stack.store.lease(job.job_execution_id).await.unwrap().unwrap();

    // Same execution and secret, another epoch: a fenced-out runner.
    let stale = job.lease.token.replacen(".1.", ".2.", 1);
    let answer = stack.heartbeat(&stale, job.job_execution_id).await;
    assert_eq!((answer.status, answer.code()), (409, "lease-lost"));
    // Another lease's token (another session) on this execution.
    let answer = stack.heartbeat(&other.lease.token, job.job_execution_id).await;
    assert_eq!((answer.status, answer.code()), (404, "not-found"));
    // A session token is not a lease token.
    let answer = stack.heartbeat("bst_nope", job.job_execution_id).await;
    assert_eq!((answer.status, answer.code()), (401, "unauthenticated"));
    // A malformed body.
    let answer = stack
        .send(
            reqwest::Method::POST,
            &format!("/v1/runners/leases/{}/heartbeat", job.job_execution_id),
            &job.lease.token,
            Some("{nope".into()),
        )
        .await;
    assert_eq!((answer.status, answer.code()), (400, "invalid-request"));

    let after = stack.store.lease(job.job_execution_id).await.unwrap().unwrap();
    assert_eq!(before, after, "no refused heartbeat wrote anything");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_never_heartbeated_lease_expires_after_the_grace_and_a_heartbeated_one_lives() {
    let stack = TestStack::start().await;
    let (_, silent) = leased(&stack, "ws1").await;
    let (_, alive) = leased(&stack, "ws1").await;
    assert_eq!(stack.heartbeat(&alive.lease.token, alive.job_execution_id).await.status, 200);

    // Just before the grace: nothing expires.
    assert_eq!(stack.reap_at(silent.lease.expires_at - Span::seconds(1)).await, 0);
    // Past the 60 s grace, before the 180 s lease: only the silent one.
    assert_eq!(stack.reap_at(Utc::now() + Span::seconds(61)).await, 1);
    assert!(stack.store.lease(silent.job_execution_id).await.unwrap().is_none());
    assert!(stack.store.lease(alive.job_execution_id).await.unwrap().is_some());
    let record = stack.store.runner_record(silent.job_execution_id).await.unwrap().unwrap();
    assert_eq!(record.status, RunnerStatus::Expired, "the tombstone stays");

    let answer = stack.heartbeat(&silent.lease.token, silent.job_execution_id).await;
    assert_eq!((answer.status, answer.code()), (409, "lease-lost"), "a reaped runner can never act again");
    let expired = stack
        .wait_fact("baton.runners.job.lease_expired", Duration::from_secs(30), |d| {
            d["job_execution_id"] == silent.job_execution_id.to_string()
        })
        .await;
    assert_eq!(expired["epoch"], 1);

    // Heartbeats leave the index alone (no index write each); the reaper
    // moved the heartbeated lease's entry up to its expiry, so it is no
    // candidate until then, and expires once past it.
    let shard = lease_shard(alive.job_execution_id);
    let candidates = stack.store.expired_leases(&shard, Utc::now() + Span::seconds(61), 100).await.unwrap();
    assert!(candidates.iter().all(|l| l.execution.id != alive.job_execution_id), "its index entry moved up");
    let expires_at = stack.store.lease(alive.job_execution_id).await.unwrap().expect("alive").expires_at;
    assert_eq!(stack.reap_at(expires_at - Span::seconds(1)).await, 0, "alive until its heartbeat's expiry");
    assert_eq!(stack.reap_at(expires_at + Span::seconds(1)).await, 1, "then expired");
    assert!(stack.store.lease(alive.job_execution_id).await.unwrap().is_none());
    stack.assert_all_facts_valid();
}

/// What a reaper pass at `reaper_now` reads about `id` before it writes:
/// the lease as a candidate, its reported steps, and the fact it would emit.
async fn reaper_read(
    stack: &TestStack,
    id: Uuid,
    reaper_now: chrono::DateTime<Utc>,
) -> (LeaseItem, ReportedSteps, Fact<JobLeaseExpired>) {
    let candidates = stack.store.expired_leases(&lease_shard(id), reaper_now, 100).await.unwrap();
    let candidate = candidates.into_iter().find(|l| l.execution.id == id).expect("read as expired");
    let reported = stack.store.reported_steps(&candidate).await.unwrap().expect("leased");
    let fact = Fact::new(
        candidate.execution.workspace_id.clone(),
        reaper_now,
        JobLeaseExpired {
            lease: candidate.lease_ref(),
            expired_at: reaper_now,
            steps: reported.steps.values().cloned().collect(),
            claimed_at: Some(candidate.claimed_at),
        },
    );
    (candidate, reported, fact)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_between_the_reapers_read_and_write_saves_the_lease() {
    let stack = TestStack::start().await;
    let (_, job) = leased(&stack, "ws1").await;
    let reaper_now = Utc::now() + Span::seconds(61);
    // The reaper's read: the lease is a candidate.
    let (candidate, reported, fact) = reaper_read(&stack, job.job_execution_id, reaper_now).await;
    // The runner heartbeats in between.
    assert_eq!(stack.heartbeat(&job.lease.token, job.job_execution_id).await.status, 200);
    // The reaper's write re-checks the expiry and loses.
    assert!(!stack.store.expire_lease(&candidate, &reported, reaper_now, &fact, 7).await.unwrap());
    assert!(stack.store.lease(job.job_execution_id).await.unwrap().is_some(), "the lease survived");
    assert_eq!(stack.heartbeat(&job.lease.token, job.job_execution_id).await.status, 200);
    assert_eq!(stack.store.runner_record(job.job_execution_id).await.unwrap().unwrap().status, RunnerStatus::Leased);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_reapers_at_once_emit_one_lease_expired_per_lease() {
    let stack = Arc::new(TestStack::start().await);
    let mut jobs = Vec::new();
    for _ in 0..6 {
        jobs.push(leased(&stack, "ws1").await.1);
    }
    let now = Utc::now() + Span::seconds(61);
    let (a, b) = tokio::join!(stack.reap_at(now), stack.reap_at(now));
    assert_eq!(a + b, 6, "each lease expired by exactly one of the two");
    for job in &jobs {
        stack
            .wait_fact("baton.runners.job.lease_expired", Duration::from_secs(30), |d| {
                d["job_execution_id"] == job.job_execution_id.to_string()
            })
            .await;
    }
    // A third, retried run finds nothing.
    assert_eq!(stack.reap_at(now).await, 0);
    let outbox = stack.outbox().await;
    let expired = outbox.iter().filter(|(_, detail_type)| detail_type == "baton.runners.job.lease_expired").count();
    assert_eq!(expired, 6, "one fact per lease");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciliation_flags_the_lease_once_keeps_the_first_timestamp_and_leaves_siblings() {
    let stack = TestStack::start().await;
    let (_, job) = leased(&stack, "ws1").await;
    let (_, sibling) = leased(&stack, "ws1").await;
    let fact = cancelled_fact(&job);
    stack.publish(&fact).await;
    stack.wait_handled(fact.header.event_id, "reconcile").await;

    let answer = stack.heartbeat(&job.lease.token, job.job_execution_id).await;
    assert_eq!(answer.body["cancel"], true, "the runner sees cancel on its next heartbeat");
    let first = stack.store.lease(job.job_execution_id).await.unwrap().unwrap().cancel_requested_at;
    assert!(first.is_some());
    assert_eq!(stack.heartbeat(&sibling.lease.token, sibling.job_execution_id).await.body["cancel"], false);

    // Delivered again, later: the first timestamp stands.
    stack.redeliver(&fact).await;
    let again = cancelled_fact(&job);
    stack.publish(&again).await;
    stack.wait_handled(again.header.event_id, "reconcile").await;
    assert_eq!(stack.store.lease(job.job_execution_id).await.unwrap().unwrap().cancel_requested_at, first);

    // The runner stops and completes as failed: accepted.
    let done = stack.complete(&job.lease.token, job.job_execution_id, json!({"status": "failed", "steps": []})).await;
    assert_eq!((done.status, done.body["status"].as_str()), (200, Some("failed")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn complete_ends_the_lease_at_once_and_a_repeat_returns_the_recorded_outcome() {
    let stack = TestStack::start().await;
    let (_, job) = leased(&stack, "ws1").await;
    let step = job.job.work.steps[0].id;
    let progress = stack
        .post(
            &format!("/v1/runners/leases/{}/steps/{step}", job.job_execution_id),
            &job.lease.token,
            json!({"status": "running"}),
        )
        .await;
    assert_eq!((progress.status, &progress.body["cancel"]), (200, &json!(false)));
    let body = json!({"status": "succeeded", "steps": [{"id": step, "status": "succeeded", "exit_code": 0}]});
    let first = stack.complete(&job.lease.token, job.job_execution_id, body.clone()).await;
    assert_eq!((first.status, first.body["status"].as_str()), (200, Some("succeeded")));
    assert!(stack.store.lease(job.job_execution_id).await.unwrap().is_none(), "no lease left to reap");

    // A repeat (even claiming another outcome) returns the recorded one.
    let repeat = stack.complete(&job.lease.token, job.job_execution_id, json!({"status": "failed", "steps": []})).await;
    assert_eq!((repeat.status, repeat.body["status"].as_str()), (200, Some("succeeded")));
    let completed = stack
        .wait_fact("baton.runners.job.completed", Duration::from_secs(30), |d| {
            d["job_execution_id"] == job.job_execution_id.to_string()
        })
        .await;
    assert_eq!(completed["status"], "succeeded");
    assert_eq!(completed["steps"][0]["exit_code"], 0);
    assert_eq!(stack.reap_at(Utc::now() + Span::seconds(600)).await, 0);
    let facts = stack.facts("baton.runners.job.completed");
    assert_eq!(facts.len(), 1, "one result, one fact");
    stack.assert_all_facts_valid();
}

/// A job of `steps` steps whose ids are Baton's own, leased to a runner.
async fn leased_steps(stack: &TestStack, workspace: &str, steps: usize) -> ClaimResponse {
    let runner = stack.runner(workspace, &["linux"]).await;
    let queued = queued_steps_fact(workspace, &["linux"], Utc::now(), steps);
    stack.publish(&queued).await;
    stack.wait_runner_record(queued.detail.job_execution_id).await;
    stack.claim(&runner.session_token).await.expect("claimable")
}

async fn report(stack: &TestStack, job: &ClaimResponse, index: usize, body: serde_json::Value) -> Answer {
    let path = format!("/v1/runners/leases/{}/steps/{}", job.job_execution_id, job.job.work.steps[index].id);
    stack.post(&path, &job.lease.token, body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_steps_report_settles_the_job_and_a_complete_after_answers_the_recorded_outcome() {
    let stack = TestStack::start().await;
    let job = leased_steps(&stack, "ws1", 2).await;
    let id = job.job_execution_id;
    assert_eq!(report(&stack, &job, 0, json!({"status": "running"})).await.body, json!({"cancel": false}));
    // An earlier step's end settles nothing, even one that says wrongly
    // that it is the last (the server checks the job's step count).
    let first = report(&stack, &job, 0, json!({"status": "succeeded", "exit_code": 0, "last": true})).await;
    assert_eq!(first.body, json!({"cancel": false}), "an earlier step's end settles nothing");
    assert!(stack.store.lease(id).await.unwrap().is_some());
    // The last step's report that is not marked as such is recorded only:
    // the runner's complete, or its marked report, ends the job.
    let unmarked = report(&stack, &job, 1, json!({"status": "succeeded", "exit_code": 0})).await;
    assert_eq!(unmarked.body, json!({"cancel": false}));
    assert!(stack.store.lease(id).await.unwrap().is_some());

    let last = json!({"status": "succeeded", "exit_code": 0, "outputs": {"version": "1.2.3"}, "last": true});
    let settled = report(&stack, &job, 1, last.clone()).await;
    assert_eq!((settled.status, &settled.body), (200, &json!({"cancel": false, "settled": "succeeded"})));
    assert!(stack.store.lease(id).await.unwrap().is_none(), "the lease ended with the report");
    let record = stack.store.runner_record(id).await.unwrap().unwrap();
    assert_eq!((record.status, record.step_reports), (RunnerStatus::Completed, 4));

    // The runner's repeat of that report (its answer lost), a complete
    // after it, and a late report all answer the recorded outcome.
    assert_eq!(report(&stack, &job, 1, last).await.body["settled"], "succeeded");
    let complete = stack.complete(&job.lease.token, id, json!({"status": "failed", "steps": []})).await;
    assert_eq!((complete.status, complete.body["status"].as_str()), (200, Some("succeeded")));
    let fact = stack
        .wait_fact("baton.runners.job.completed", Duration::from_secs(30), |d| d["job_execution_id"] == id.to_string())
        .await;
    assert_eq!((fact["settled_by"].as_str(), fact["status"].as_str()), (Some("steps"), Some("succeeded")));
    let steps: Vec<_> = fact["steps"].as_array().unwrap().iter().map(|s| s.id()).collect();
    assert_eq!(steps, job.job.work.steps.iter().map(|s| s.id.to_string()).collect::<Vec<_>>(), "every step, in order");
    assert_eq!(fact["outputs"], json!({"version": "1.2.3"}));
    assert_eq!(stack.reap_at(Utc::now() + Span::seconds(600)).await, 0);
    assert_eq!(stack.facts("baton.runners.job.completed").len(), 1, "one outcome, one fact");
    stack.assert_all_facts_valid();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_step_settles_the_job_failed_and_a_lost_report_leaves_it_to_the_complete() {
    let stack = TestStack::start().await;
    // A failed step, the next one skipped: settled failed.
    let job = leased_steps(&stack, "ws1", 2).await;
    report(&stack, &job, 0, json!({"status": "failed", "exit_code": 3})).await;
    let settled = report(&stack, &job, 1, json!({"status": "skipped", "last": true})).await;
    assert_eq!(settled.body["settled"], "failed");
    assert!(stack.store.lease(job.job_execution_id).await.unwrap().is_none());

    // A forgiven failure (`continue-on-error`) does not fail it.
    let forgiven = leased_steps(&stack, "ws1", 2).await;
    report(&stack, &forgiven, 0, json!({"status": "failed", "soft_failed": true, "exit_code": 1})).await;
    let settled = report(&stack, &forgiven, 1, json!({"status": "succeeded", "exit_code": 0, "last": true})).await;
    assert_eq!(settled.body["settled"], "succeeded");

    // The first step's end never reached the server: the last report does
    // not settle (the outcome is not certain), the lease lives on, and the
    // runner's complete decides as before.
    let lost = leased_steps(&stack, "ws1", 2).await;
    let unsettled = report(&stack, &lost, 1, json!({"status": "succeeded", "exit_code": 0, "last": true})).await;
    assert_eq!((unsettled.status, &unsettled.body), (200, &json!({"cancel": false})));
    assert!(stack.store.lease(lost.job_execution_id).await.unwrap().is_some());
    let steps = json!([{"id": lost.job.work.steps[0].id, "status": "failed", "exit_code": 2},
                       {"id": lost.job.work.steps[1].id, "status": "succeeded", "exit_code": 0}]);
    let done =
        stack.complete(&lost.lease.token, lost.job_execution_id, json!({"status": "failed", "steps": steps})).await;
    assert_eq!(done.body["status"], "failed");

    // Another lease's token settles nothing and learns nothing.
    let other = leased_steps(&stack, "ws1", 1).await;
    let path = format!("/v1/runners/leases/{}/steps/{}", other.job_execution_id, other.job.work.steps[0].id);
    let foreign = stack.post(&path, &job.lease.token, json!({"status": "succeeded", "last": true})).await;
    assert_eq!(foreign.status, 404, "{}", foreign.body);
    assert!(stack.store.lease(other.job_execution_id).await.unwrap().is_some());
    stack.assert_all_facts_valid();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn complete_after_the_lease_expired_is_lease_lost_and_the_expiry_carries_the_steps() {
    let stack = TestStack::start().await;
    let (_, job) = leased(&stack, "ws1").await;
    let step = job.job.work.steps[0].id;
    let report = json!({"status": "succeeded", "exit_code": 0});
    let progress = stack
        .post(&format!("/v1/runners/leases/{}/steps/{step}", job.job_execution_id), &job.lease.token, report)
        .await;
    assert_eq!(progress.status, 200);
    assert_eq!(stack.reap_at(Utc::now() + Span::seconds(61)).await, 1);
    let late =
        stack.complete(&job.lease.token, job.job_execution_id, json!({"status": "succeeded", "steps": []})).await;
    assert_eq!((late.status, late.code()), (409, "lease-lost"));
    let expired = stack
        .wait_fact("baton.runners.job.lease_expired", Duration::from_secs(30), |d| {
            d["job_execution_id"] == job.job_execution_id.to_string()
        })
        .await;
    assert_eq!(expired["steps"][0]["status"], "succeeded", "the reported step travels with the expiry");
    assert!(stack.facts("baton.runners.job.completed").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reaper_reads_every_shard_each_pass_and_leaves_a_backlog_when_its_time_is_up() {
    let stack = TestStack::start().await;
    let runner = stack.runner("ws1", &["linux"]).await;
    // Three leases in shard 2 (a backlog bigger than one page of 2), two in shard 3.
    for shard in [2u8, 2, 2, 3, 3] {
        let mut fact = queued_fact("ws1", &["linux"], Utc::now());
        let mut id = *fact.detail.job_execution_id.as_bytes();
        id[15] = shard;
        fact.detail.job_execution_id = Uuid::from_bytes(id);
        assert_eq!(lease_shard(fact.detail.job_execution_id), format!("L#{shard}"));
        stack.publish(&fact).await;
        stack.wait_runner_record(fact.detail.job_execution_id).await;
        assert!(stack.claim(&runner.session_token).await.is_some(), "each job is claimed");
    }
    let later = Utc::now() + Span::seconds(61);
    let context = stack.context();

    // A pass whose time is already up reads one page of every shard (it
    // always makes progress, and shard 2's backlog delays no other shard),
    // then stops instead of running on.
    let out_of_time = ReapLimits { page: 2, stop_at: Instant::now() };
    let first = reap(&context, later, out_of_time).await.unwrap();
    let busy: Vec<_> = first.expired_by_shard.iter().copied().filter(|(_, n)| *n > 0).collect();
    assert_eq!(busy, vec![(2, 2), (3, 2)]);
    assert_eq!(first.expired_by_shard.len(), baton_store::keys::LEASE_SHARDS as usize, "every shard was read");
    assert!(first.stopped_early, "shard 2's third lease is left");

    // The next pass drains shard 2's rest.
    let ample = ReapLimits { page: 2, stop_at: Instant::now() + Duration::from_secs(60) };
    let second = reap(&context, later, ample).await.unwrap();
    assert_eq!(second.expired(), 1);
    assert_eq!(second.expired_by_shard[2], (2, 1));
    assert!(!second.stopped_early);
    assert_eq!(stack.reap_at(later).await, 0, "nothing is left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_reports_land_on_the_runner_record_and_leave_the_heartbeated_lease_as_it_was() {
    let stack = TestStack::start().await;
    let (_, job) = leased(&stack, "ws1").await;
    let (_, other) = leased(&stack, "ws1").await;
    let id = job.job_execution_id;
    let path = |step: Uuid| format!("/v1/runners/leases/{id}/steps/{step}");
    let lease_before = stack.store.lease(id).await.unwrap().expect("live");
    for step in &job.job.work.steps {
        let answer = stack.post(&path(step.id), &job.lease.token, json!({"status": "running"})).await;
        assert_eq!((answer.status, &answer.body["cancel"]), (200, &json!(false)), "{}", answer.body);
    }
    // What heartbeats rewrite did not grow: its size stays one write unit
    // however many steps the job reports.
    assert_eq!(stack.store.lease(id).await.unwrap().expect("live"), lease_before);
    let record = stack.store.runner_record(id).await.unwrap().expect("record");
    assert_eq!(record.steps.len(), job.job.work.steps.len());
    assert!(record.steps.values().all(|step| step.status == StepStatus::Running));
    assert_eq!(record.step_reports, job.job.work.steps.len() as u64);

    // Another lease's token is refused there as it was on the lease, and
    // writes nothing.
    let foreign = stack.post(&path(job.job.work.steps[0].id), &other.lease.token, json!({"status": "failed"})).await;
    assert_eq!((foreign.status, foreign.code()), (404, "not-found"));
    assert_eq!(stack.store.runner_record(id).await.unwrap().expect("record"), record);

    // A cancel is answered to a step report too.
    let fact = cancelled_fact(&job);
    stack.publish(&fact).await;
    stack.wait_handled(fact.header.event_id, "reconcile").await;
    let answer = stack.post(&path(job.job.work.steps[0].id), &job.lease.token, json!({"status": "running"})).await;
    assert_eq!((answer.status, &answer.body["cancel"]), (200, &json!(true)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_report_between_the_reapers_read_and_write_is_not_lost() {
    let stack = TestStack::start().await;
    let (_, job) = leased(&stack, "ws1").await;
    let id = job.job_execution_id;
    let step = job.job.work.steps[0].id;
    let reaper_now = Utc::now() + Span::seconds(61);
    let (candidate, read, fact) = reaper_read(&stack, id, reaper_now).await;
    assert!(read.steps.is_empty());
    // The runner reports its step in between: the expiry written with what
    // the reaper read would drop it, so it is not written.
    let report = json!({"status": "succeeded", "exit_code": 0});
    assert_eq!(
        stack.post(&format!("/v1/runners/leases/{id}/steps/{step}"), &job.lease.token, report).await.status,
        200
    );
    assert!(!stack.store.expire_lease(&candidate, &read, reaper_now, &fact, 7).await.unwrap());
    assert_eq!(stack.store.runner_record(id).await.unwrap().expect("record").status, RunnerStatus::Leased);
    // The next pass reads the report and expires the lease with it.
    assert_eq!(stack.reap_at(reaper_now).await, 1);
    let expired = stack
        .wait_fact("baton.runners.job.lease_expired", Duration::from_secs(30), |d| {
            d["job_execution_id"] == id.to_string()
        })
        .await;
    assert_eq!(expired["steps"][0]["status"], "succeeded");
    let record = stack.store.runner_record(id).await.unwrap().expect("record");
    assert_eq!((record.status, record.steps.len()), (RunnerStatus::Expired, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_claimed_before_step_reports_moved_to_the_record_keeps_taking_them_on_itself() {
    use aws_sdk_dynamodb::types::AttributeValue;
    let stack = TestStack::start().await;
    let (_, job) = leased(&stack, "ws1").await;
    let id = job.job_execution_id;
    let step = job.job.work.steps[0].id;
    // As the previous version wrote them: no fence on the record, an empty
    // map of steps on the lease.
    let key = |sk: &str| {
        [("pk".to_string(), AttributeValue::S(format!("EXEC#{id}"))), ("sk".to_string(), AttributeValue::S(sk.into()))]
    };
    let store = &stack.store;
    let old_record = store.client.update_item().table_name(&store.table).set_key(Some(key("RUNNER").into()));
    old_record.update_expression("REMOVE token_hash, steps").send().await.unwrap();
    let old_lease = store.client.update_item().table_name(&store.table).set_key(Some(key("LEASE").into()));
    old_lease
        .update_expression("SET steps = :none")
        .expression_attribute_values(":none", AttributeValue::M(Default::default()))
        .send()
        .await
        .unwrap();

    let report = json!({"status": "succeeded", "exit_code": 0});
    let answer = stack.post(&format!("/v1/runners/leases/{id}/steps/{step}"), &job.lease.token, report).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let lease = store.lease(id).await.unwrap().expect("live");
    assert_eq!(lease.steps[&step.to_string()].status, StepStatus::Succeeded);
    let (_, other) = leased(&stack, "ws1").await;
    let refused = stack
        .post(&format!("/v1/runners/leases/{id}/steps/{step}"), &other.lease.token, json!({"status": "failed"}))
        .await;
    assert_eq!(refused.status, 404);

    // Its expiry carries them.
    assert!(stack.reap_at(Utc::now() + Span::seconds(61)).await >= 1);
    let expired = stack
        .wait_fact("baton.runners.job.lease_expired", Duration::from_secs(30), |d| {
            d["job_execution_id"] == id.to_string()
        })
        .await;
    assert_eq!(expired["steps"][0]["status"], "succeeded");
}
