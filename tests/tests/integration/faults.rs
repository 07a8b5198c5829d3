//! Baton under the failures moto never produces (`baton_localstack::faults`):
//! the functions' AWS requests meet transaction conflicts, and the races
//! they lose must stay races, never errors a runner sees or messages lost.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_devhost::HostOptions;
use baton_localstack::faults::FaultPlan;
use baton_service::context::Context;
use baton_tests::http::Answer;
use baton_tests::runners::queued_fact;
use baton_tests::runs::{job_in, Identified, LeasedRun};
use baton_tests::{wait_for, TestStack};
use chrono::{Duration as Span, Utc};
use serde_json::json;

/// A stack whose functions' AWS requests meet `faults` (the harness's own
/// requests, which set up and check, do not).
async fn stack_with_faults(faults: &str) -> (TestStack, Arc<FaultPlan>) {
    stack_with_faults_and(faults, HashMap::new()).await
}

/// As [`stack_with_faults`], with `overrides` in the functions' configuration.
async fn stack_with_faults_and(faults: &str, overrides: HashMap<String, String>) -> (TestStack, Arc<FaultPlan>) {
    let plan = Arc::new(FaultPlan::parse(faults).expect("a valid plan").expect("rules"));
    let options = HostOptions { faults: Some(plan.clone()), ..HostOptions::default() };
    (TestStack::start_custom(|_| {}, overrides, options).await, plan)
}

fn conflicts(plan: &FaultPlan) -> u64 {
    plan.injected_by_kind().get("conflict").copied().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runners_racing_for_jobs_under_transaction_conflicts_see_only_200_or_204_and_take_each_job_once() {
    let (stack, plan) = stack_with_faults("seed=11;dynamodb.TransactWriteItems:conflict=0.5").await;
    let stack = Arc::new(stack);
    let mut queued = HashSet::new();
    for _ in 0..4 {
        queued.insert(stack.queue_job("ws1", &["linux"], Utc::now()).await.detail.job_execution_id);
    }
    let mut runners = Vec::new();
    for _ in 0..8 {
        runners.push(stack.runner("ws1", &["linux"]).await.session_token);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let claims = futures::future::join_all(runners.into_iter().map(|token| {
        let stack = stack.clone();
        async move {
            let mut answers = Vec::new();
            let mut claimed = Vec::new();
            // Until the queue is drained as this runner sees it (two empty
            // answers in a row), or the time is up.
            let mut empty = 0;
            while empty < 2 && Instant::now() < deadline {
                let answer = stack.post("/v1/runners/claim", &token, json!({})).await;
                answers.push((answer.status, answer.body.clone()));
                match answer.status {
                    200 => {
                        empty = 0;
                        claimed.push(answer.body["job_execution_id"].as_str().unwrap_or_default().to_string());
                    }
                    _ => empty += 1,
                }
            }
            (answers, claimed)
        }
    }))
    .await;
    let mut claimed = Vec::new();
    for (answers, mine) in claims {
        for (status, body) in answers {
            assert!(status == 200 || status == 204, "a claim answered {status}: {body}");
        }
        claimed.extend(mine);
    }
    let expected: HashSet<String> = queued.iter().map(|id| id.to_string()).collect();
    let taken: HashSet<String> = claimed.iter().cloned().collect();
    assert_eq!(claimed.len(), expected.len(), "no job was claimed twice: {claimed:?}");
    assert_eq!(taken, expected, "every job was claimed");
    assert!(conflicts(&plan) > 0, "the claims met conflicts: {:?}", plan.injected_by_kind());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueues_on_one_label_set_under_transaction_conflicts_all_become_claimable() {
    // Every enqueue of a label set updates the same registry item: on AWS,
    // concurrent ones conflict. Each must still end up pending, none
    // dead-lettered.
    let (stack, plan) = stack_with_faults("seed=5;dynamodb.TransactWriteItems:conflict=0.6").await;
    let facts: Vec<_> = (0..20).map(|_| queued_fact("ws1", &["linux", "x64"], Utc::now())).collect();
    futures::future::join_all(facts.iter().map(|fact| stack.publish(fact))).await;
    for fact in &facts {
        stack.wait_runner_record(fact.detail.job_execution_id).await;
    }
    wait_for("every job pending", Duration::from_secs(30), || async {
        (stack.pending_of("ws1").await.len() == facts.len()).then_some(())
    })
    .await;
    assert!(conflicts(&plan) > 0, "the enqueues met conflicts: {:?}", plan.injected_by_kind());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reaper_pass_that_meets_conflicts_goes_on_and_the_next_pass_expires_the_rest_once() {
    let stack = TestStack::start().await;
    let runner = stack.runner("ws1", &["linux"]).await;
    for _ in 0..6 {
        stack.queue_job("ws1", &["linux"], Utc::now()).await;
        assert!(stack.claim(&runner.session_token).await.is_some());
    }
    let later = Utc::now() + Span::seconds(61);
    let plan = Arc::new(
        FaultPlan::parse("seed=3;dynamodb.TransactWriteItems:conflict=0.9").expect("a valid plan").expect("rules"),
    );
    let faulty = Context::new(stack.host.config.clone(), baton_localstack::with_faults(&stack.clients, plan.clone()));
    let limits = baton_lease_reaper::ReapLimits {
        page: baton_lease_reaper::REAPER_PAGE,
        stop_at: Instant::now() + Duration::from_secs(60),
    };
    let first = baton_lease_reaper::reap(&faulty, later, limits).await.expect("conflicts do not fail the pass");
    assert!(conflicts(&plan) > 0);
    let second = stack.reap_at(later).await;
    assert_eq!(first.expired() + second, 6, "every lease expired, each once");
    assert_eq!(stack.reap_at(later).await, 0);
}

/// A shard whose expiry index read is throttled past the SDK's retries is
/// skipped for this pass; the other shards are read beside it all the same,
/// and the pass does not fail (it used to stop at the first such shard, and
/// start there again on the next tick: the shards after it were never read
/// while the table throttled).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_shard_of_the_expiry_index_is_skipped_and_every_other_shard_is_reaped() {
    let stack = TestStack::start().await;
    let runner = stack.runner("ws1", &["linux"]).await;
    let mut by_shard = Vec::new();
    for shard in 0..baton_store::keys::LEASE_SHARDS as u8 {
        let mut fact = queued_fact("ws1", &["linux"], Utc::now());
        let mut id = *fact.detail.job_execution_id.as_bytes();
        id[15] = shard;
        fact.detail.job_execution_id = uuid::Uuid::from_bytes(id);
        stack.publish(&fact).await;
        stack.wait_runner_record(fact.detail.job_execution_id).await;
        assert!(stack.claim(&runner.session_token).await.is_some(), "each job is claimed");
        by_shard.push(fact.detail.job_execution_id);
    }
    let later = Utc::now() + Span::seconds(61);
    let plan = Arc::new(FaultPlan::parse("seed=5;dynamodb.Query:throttle=0.8").expect("a valid plan").expect("rules"));
    let throttled =
        Context::new(stack.host.config.clone(), baton_localstack::with_faults(&stack.clients, plan.clone()));
    let limits = baton_lease_reaper::ReapLimits {
        page: baton_lease_reaper::REAPER_PAGE,
        stop_at: Instant::now() + Duration::from_secs(60),
    };
    let pass =
        baton_lease_reaper::reap(&throttled, later, limits).await.expect("a throttled shard does not fail the pass");
    let read = pass.expired_by_shard.len() as u32;
    assert!(pass.shards_skipped > 0 && read > 0, "seed 5 throttles some shards past the retries, not all: {pass:?}");
    assert_eq!(read + pass.shards_skipped, baton_store::keys::LEASE_SHARDS, "every shard read or skipped: {pass:?}");
    assert!(pass.expired_by_shard.iter().all(|(_, n)| *n == 1), "each shard read expired its lease: {pass:?}");
    for (shard, id) in by_shard.iter().enumerate() {
        let live = stack.store.lease(*id).await.expect("read").is_some();
        let read = pass.expired_by_shard.iter().any(|(s, _)| *s == shard as u32);
        assert_eq!(live, !read, "shard {shard}: its lease lives on only if the shard was skipped");
    }
    assert_eq!(
        stack.reap_at(later).await,
        pass.shards_skipped as usize,
        "the next pass expires the skipped shards' leases"
    );
}

/// The expiry index lags behind the reaper's own writes (`index_lag_ms`),
/// as a global secondary index does on AWS. Four heartbeated leases of one
/// shard, whose entries still say the grace's expiry: a pass with a page of
/// two moves each entry up to its lease's expiry, then reads the shard again
/// and gets the moved entries back where they were. It must end there, not
/// read that page again until its deadline; and the leases, alive, expire
/// only at their heartbeat's expiry, each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reaper_pass_under_a_lagging_expiry_index_ends_without_rereading_and_no_live_lease_expires() {
    let stack = TestStack::start().await;
    let runner = stack.runner("ws1", &["linux"]).await;
    let mut leases = Vec::new();
    for _ in 0..4 {
        let mut fact = queued_fact("ws1", &["linux"], Utc::now());
        let mut id = *fact.detail.job_execution_id.as_bytes();
        id[15] = 2;
        fact.detail.job_execution_id = uuid::Uuid::from_bytes(id);
        stack.publish(&fact).await;
        stack.wait_runner_record(fact.detail.job_execution_id).await;
        let claimed = stack.claim(&runner.session_token).await.expect("each job is claimed");
        assert_eq!(stack.heartbeat(&claimed.lease.token, claimed.job_execution_id).await.status, 200);
        leases.push(claimed.job_execution_id);
    }
    let plan = Arc::new(FaultPlan::parse("index_lag_ms=4000").expect("a valid plan").expect("a lag"));
    let lagging = Context::new(stack.host.config.clone(), baton_localstack::with_faults(&stack.clients, plan.clone()));
    let past_the_grace = Utc::now() + Span::seconds(61);
    let limits = baton_lease_reaper::ReapLimits { page: 2, stop_at: Instant::now() + Duration::from_secs(20) };
    let pass = baton_lease_reaper::reap(&lagging, past_the_grace, limits).await.expect("a pass");
    let queries = plan.requests("dynamodb", "Query");
    assert!(!pass.stopped_early, "the pass re-read a lagging page until its deadline ({queries} queries)");
    assert_eq!(pass.expired(), 0, "heartbeated leases live on");
    // Shard 2: two pages that moved entries up, and the stale one; one
    // query for each of the other shards.
    let shards = u64::from(baton_store::keys::LEASE_SHARDS);
    assert!(
        queries <= 3 + (shards - 1),
        "the pass read a lagging page again and again: {queries} queries for {shards} shards"
    );

    // Once the index caught up, nothing is read as expired before its
    // heartbeat's expiry, and every lease expires once after it.
    tokio::time::sleep(plan.index_lag()).await;
    let mut latest = Utc::now();
    for id in &leases {
        latest = latest.max(stack.store.lease(*id).await.expect("read").expect("alive").expires_at);
    }
    let reap = |now| {
        let limits = baton_lease_reaper::ReapLimits { page: 2, stop_at: Instant::now() + Duration::from_secs(20) };
        baton_lease_reaper::reap(&lagging, now, limits)
    };
    assert_eq!(reap(past_the_grace).await.expect("a pass").expired(), 0);
    assert_eq!(reap(latest + Span::seconds(1)).await.expect("a pass").expired(), 4);
    // The index still lists the expired leases (their entries' removal
    // lags): read from the table, they are gone, and expire no second time.
    assert_eq!(reap(latest + Span::seconds(1)).await.expect("a pass").expired(), 0, "each once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_single_use_registrations_under_conflicts_make_one_session_and_never_a_500() {
    let (stack, plan) = stack_with_faults("seed=9;dynamodb.TransactWriteItems:conflict=0.3").await;
    for round in 0..5 {
        let token = stack.registration_token("ws1", json!({ "single_use": true })).await;
        let body = json!({ "labels": ["linux"] });
        let (a, b) = tokio::join!(
            stack.post("/v1/runners/register", &token, body.clone()),
            stack.post("/v1/runners/register", &token, body.clone())
        );
        let mut statuses = [a.status, b.status];
        statuses.sort();
        assert_eq!(statuses[0], 201, "round {round}: one registration makes the session: {} {}", a.body, b.body);
        assert!(
            statuses[1] == 409 || statuses[1] == 503,
            "round {round}: the other is refused (409) or told to retry (503): {} {}",
            a.body,
            b.body
        );
    }
    assert!(conflicts(&plan) > 0, "{:?}", plan.injected_by_kind());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_created_while_transaction_responses_are_lost_are_created_once_and_numbered_consecutively() {
    // The create transaction is applied, then its answer is lost: the SDK
    // sends it again. Run again against the state it created, it would lose
    // its own counter condition and number a second copy of the run.
    let (stack, plan) = stack_with_faults("seed=21;dynamodb.TransactWriteItems:lost=0.5").await;
    let path = "/v1/workspaces/ws1/runs";
    let definition = "name: ci\njobs:\n  build:\n    runs-on: [linux]\n    steps:\n      - run: make\n";
    let mut created = Vec::new();
    for i in 0..6 {
        // As a client does: every resend of the transaction can lose its
        // answer too (a 503), and then it asks again with its key.
        let body = json!({ "definition": definition, "idempotency_key": format!("create-{i}") });
        let answer = post_while(&stack, path, &stack.admin_token, &body, 10, |s| s == 503).await;
        assert!(answer.status == 201 || answer.status == 200, "{} {}", answer.status, answer.body);
        created.push(answer.body["number"].as_u64().expect("a number"));
    }
    assert_eq!(created, (1..=6).collect::<Vec<u64>>(), "consecutive numbers, one each");
    let listed = stack.get(&format!("{path}?limit=100"), &stack.admin_token).await;
    let mut numbers: Vec<u64> =
        listed.body["items"].as_array().expect("items").iter().filter_map(|run| run["number"].as_u64()).collect();
    numbers.sort();
    assert_eq!(numbers, (1..=6).collect::<Vec<u64>>(), "no run was written twice");
    assert!(plan.injected_by_kind().get("lost").copied().unwrap_or(0) > 0, "{:?}", plan.injected_by_kind());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_use_registration_whose_answer_is_lost_still_gets_its_session() {
    let (stack, plan) = stack_with_faults("seed=2;dynamodb.TransactWriteItems:lost=0.7").await;
    for round in 0..6 {
        let token = stack.registration_token("ws1", json!({ "single_use": true })).await;
        // As a runner does: every resend of the transaction can lose its
        // answer too, and then the runner asks again with the same id.
        let body = json!({ "labels": ["linux"], "request_id": uuid::Uuid::now_v7() });
        let answer = post_while(&stack, "/v1/runners/register", &token, &body, 10, |s| s == 503).await;
        assert_eq!(answer.status, 201, "round {round}: the token made its session: {}", answer.body);
        let again = stack.post("/v1/runners/register", &token, json!({ "labels": ["linux"] })).await;
        assert_eq!(again.code(), "registration-token-consumed", "round {round}: and only one");
    }
    assert!(plan.injected_by_kind().get("lost").copied().unwrap_or(0) > 0, "{:?}", plan.injected_by_kind());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_token_and_a_session_whose_single_put_answers_are_lost_are_still_made() {
    // Each is one conditional put of a new id: sent again after its answer
    // was lost, it finds itself and must not read that as a refusal. When
    // every one of the SDK's tries lost its answer, the client is told to
    // retry (503), as a client of a busy service is, never 500 nor 409.
    let (stack, plan) = stack_with_faults("seed=4;dynamodb.PutItem:lost=0.5").await;
    let until_not_busy = |path: String, token: String| {
        let stack = &stack;
        async move {
            for _ in 0..10 {
                let answer = stack.post(&path, &token, json!({ "labels": ["linux"] })).await;
                if answer.status != 503 {
                    return answer;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            panic!("{path} stayed busy")
        }
    };
    for round in 0..6 {
        let created = until_not_busy("/v1/workspaces/ws1/registration-tokens".into(), stack.admin_token.clone()).await;
        assert_eq!(created.status, 201, "round {round}: the token is made: {}", created.body);
        let token = created.body["token"].as_str().expect("a token").to_string();
        let session = until_not_busy("/v1/runners/register".into(), token).await;
        assert_eq!(session.status, 201, "round {round}: the session is made: {}", session.body);
    }
    assert!(plan.injected_by_kind().get("lost").copied().unwrap_or(0) > 0, "{:?}", plan.injected_by_kind());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_ended_on_the_runners_side_before_its_timeout_keeps_that_end_when_its_fact_arrives_late() {
    // behaviour.md §9: finished > lease expired > timeout, whatever the
    // pipeline's latency. The runners' facts reach job-outcomes 20 s late;
    // both jobs' 10 s timeouts pass first. One job was completed and the
    // other's lease expired, each well before its deadline: the timeout
    // must not be what the run shows. The complete function crashes right
    // after its transaction (abandoned), so its direct adoption of the
    // outcome never happens and the late fact is the only way it travels.
    let faults = "seed=1;late_ms=20000;trigger.sqs.job-outcomes:late=1;trigger.http.complete:abandon=1";
    let minute = HashMap::from([("BATON_TIMEOUT_MINUTE_S".to_string(), "5".to_string())]);
    let (stack, plan) = stack_with_faults_and(faults, minute).await;
    let ws = "ws-close-call";
    let yaml =
        "name: close-call\njobs:\n  done:\n    runs-on: linux\n    timeout-minutes: 2\n    steps: [{run: 'true'}]\n  \
                lost:\n    runs-on: linux\n    timeout-minutes: 2\n    steps: [{run: 'true'}]\n";
    let run_id = stack.create_run(ws, yaml).await.id();
    let session = stack.runner(ws, &["linux"]).await.session_token;
    let mut claims = HashMap::new();
    let until = Instant::now() + Duration::from_secs(30);
    while claims.len() < 2 {
        assert!(Instant::now() < until, "both jobs became claimable");
        match stack.claim(&session).await {
            Some(claim) => {
                claims.insert(claim.job.work.key.clone(), claim);
            }
            None => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let done = &claims["done"];
    let step = done.job.work.steps[0].id;
    let report = json!({ "status": "succeeded", "exit_code": 0 });
    let reported = stack
        .post(&format!("/v1/runners/leases/{}/steps/{step}", done.job_execution_id), &done.lease.token, report)
        .await;
    // The same function: abandoned once its write answered, unless it
    // finished in that very moment. Applied either way.
    assert!(matches!(reported.status, 200 | 502), "{}", reported.body);
    let steps = json!([{ "id": step, "status": "succeeded", "exit_code": 0 }]);
    let completed = stack
        .complete(&done.lease.token, done.job_execution_id, json!({ "status": "succeeded", "steps": steps }))
        .await;
    assert_eq!(completed.status, 502, "the function was abandoned after its write: {}", completed.body);
    let record = stack.store.runner_record(done.job_execution_id).await.expect("read").expect("the record");
    assert_eq!(record.status, baton_store::records::RunnerStatus::Completed, "the outcome was recorded");
    // The lost job's runner never heartbeats; the reaper takes its lease.
    assert_eq!(stack.reap_at(Utc::now() + Span::hours(1)).await, 1);
    let deadline = done.queued_at + Span::seconds(10);
    assert!(Utc::now() < deadline, "both ended on the runners' side before the 10 s timeout; the machine was too slow");

    let view = wait_for("the run finished", Duration::from_secs(60), || async {
        let view = stack.run_view(ws, &run_id).await;
        (view["status"] == "failed").then_some(view)
    })
    .await;
    let job = |key: &str| {
        let jobs = view["attempts"][0]["jobs"].as_array().cloned().unwrap_or_default();
        jobs.into_iter().find(|j| j["key"] == key).unwrap_or_default()
    };
    assert_eq!(job("done")["status"], "succeeded", "finished beats timeout: {view:#}");
    assert_eq!(job("lost")["executions"][0]["status_reason"], "runner_lost", "lease expired beats timeout: {view:#}");
    let finished_at: chrono::DateTime<Utc> =
        serde_json::from_value(job("done")["executions"][0]["finished_at"].clone()).expect("finished_at");
    assert!(finished_at >= deadline, "decided at the timeout, before the runner's fact arrived");
    // The late fact then changes nothing but the steps the view shows.
    let steps = wait_for("the late fact's steps in the view", Duration::from_secs(60), || async {
        let view = stack.run_view(ws, &run_id).await;
        let jobs = view["attempts"][0]["jobs"].as_array().cloned().unwrap_or_default();
        let done = jobs.into_iter().find(|j| j["key"] == "done").unwrap_or_default();
        let steps = done["executions"][0]["steps"].clone();
        (steps[0]["status"] == "succeeded").then_some((done["status"].clone(), steps))
    })
    .await;
    assert_eq!(steps.0, "succeeded");
    // The two facts may come in one batch (one late delivery) or two.
    assert!(plan.injected_by_kind().get("late").copied().unwrap_or(0) >= 1, "{:?}", plan.injected_by_kind());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_reaches_its_run_without_waiting_for_the_bus() {
    // Every runner fact reaches job-outcomes a minute late; the complete
    // function adopts its own outcome and wakes the orchestration, so the
    // run ends long before that.
    let (stack, plan) = stack_with_faults("seed=1;late_ms=60000;trigger.sqs.job-outcomes:late=1").await;
    let ws = "ws-direct";
    let yaml = "name: direct\njobs:\n  only:\n    runs-on: linux\n    steps: [{run: 'true'}]\n";
    let LeasedRun { view, claim, .. } = stack.leased_run(ws, yaml).await;
    let run_id = view.id();
    let steps = json!([{ "id": claim.job.work.steps[0].id, "status": "succeeded", "exit_code": 0 }]);
    let completed = stack
        .complete(&claim.lease.token, claim.job_execution_id, json!({ "status": "succeeded", "steps": steps }))
        .await;
    assert_eq!(completed.status, 200, "{}", completed.body);
    let view = wait_for("the run to succeed well within the bus's minute", Duration::from_secs(30), || async {
        let view = stack.run_view(ws, &run_id).await;
        (view["status"] == "succeeded").then_some(view)
    })
    .await;
    assert_eq!(view["attempts"][0]["jobs"][0]["executions"][0]["steps"][0]["status"], "succeeded", "{view:#}");
    // Every delivery to job-outcomes is held back, so the run cannot have
    // ended through the bus; the run may end before the first of those
    // deliveries is even due (the relay and the queue come first), so this
    // waits for the fault to be seen applied rather than checking at once.
    wait_for("the bus to hold a runner fact back", Duration::from_secs(30), || async {
        (plan.injected_by_kind().get("late").copied().unwrap_or(0) >= 1).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_retried_after_its_answer_was_lost_gets_the_same_job_under_the_same_token() {
    // The claim function runs to its end, then API Gateway answers 504
    // (seed 6: the first claim's answer is lost, the second's is not). A
    // retry with the same request id must bring the job it took; without
    // the id the job would stay leased to nobody until it is lost.
    let (stack, plan) = stack_with_faults("seed=6;trigger.http.claim:lost=0.5").await;
    let queued = stack.queue_job("ws1", &["linux"], Utc::now()).await.detail.job_execution_id;
    let session = stack.runner("ws1", &["linux"]).await.session_token;
    let request = json!({ "request_id": uuid::Uuid::now_v7() });
    let mut answers = Vec::new();
    let claim = loop {
        let answer = stack.post("/v1/runners/claim", &session, request.clone()).await;
        answers.push(answer.status);
        if answer.status != 504 {
            break answer;
        }
        assert!(answers.len() < 10, "the answers kept being lost: {answers:?}");
    };
    assert!(answers.contains(&504), "an answer was lost first: {answers:?}");
    assert_eq!(claim.status, 200, "{}", claim.body);
    assert_eq!(claim.body["job_execution_id"], queued.to_string(), "the job the lost answer took");
    let token = claim.body["lease"]["token"].as_str().expect("a lease token").to_string();
    assert_eq!(stack.heartbeat(&token, queued).await.status, 200, "the token holds the lease");
    // The same request again, now that the lease is in use: nothing more.
    let again = stack.post("/v1/runners/claim", &session, request.clone()).await;
    assert!(again.status == 204 || again.status == 504, "{} {}", again.status, again.body);
    let claimed = stack.wait_fact("baton.runners.job.claimed", Duration::from_secs(30), |d| {
        d["job_execution_id"] == queued.to_string()
    });
    let _ = claimed.await;
    assert_eq!(
        stack.facts("baton.runners.job.claimed").len(),
        1,
        "one claim, however many tries: {:?}",
        plan.injected_by_kind()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ephemeral_runners_only_claim_retried_after_its_answer_was_lost_gets_its_job_not_session_exhausted() {
    // The claim that took the job also used the session's only claim (a
    // reservation's token, `max_claims = 1`): its retry must still get the
    // job. Found by the chaos suite's elastic fleet: answered
    // `session-exhausted`, the runner exited and the job was lost.
    let (stack, _plan) = stack_with_faults("seed=6;trigger.http.claim:lost=0.5").await;
    let queued = stack.queue_job("ws1", &["linux"], Utc::now()).await.detail.job_execution_id;
    let token = stack.registration_token("ws1", json!({"max_claims": 1, "single_use": true})).await;
    let session = stack.register(&token, &["linux"]).await.session_token;
    let request = json!({ "request_id": uuid::Uuid::now_v7() });
    let first = stack.post("/v1/runners/claim", &session, request.clone()).await;
    assert_eq!(first.status, 504, "seed 6 loses the first answer");
    // Each try's answer may be lost too (seeded): the runner keeps trying.
    let retried = json!({"request_id": request["request_id"], "retry": true});
    let retry = claim_until_answered(&stack, &session, &retried).await;
    assert_eq!(retry.status, 200, "{}", retry.body);
    assert_eq!(retry.body["job_execution_id"], queued.to_string());
    let lease = retry.body["lease"]["token"].as_str().expect("a lease token").to_string();
    assert_eq!(stack.heartbeat(&lease, queued).await.status, 200, "the runner holds its job");
    // A new claim of the capped session is refused as before.
    let fresh = json!({ "request_id": uuid::Uuid::now_v7() });
    let next = claim_until_answered(&stack, &session, &fresh).await;
    assert_eq!((next.status, next.code()), (409, "session-exhausted"));
}

/// A provisioned machine's token is single use: the registration that used
/// it may have its answer lost, and the runner's retry must get the session
/// that try made. Found by the chaos suite's elastic fleet: the retry was
/// refused `registration-token-consumed`, the runner exited and its
/// instance failed, so the fleet never drained its queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_use_registration_retried_after_its_answer_was_lost_gets_the_session_it_made() {
    let (stack, _plan) = stack_with_faults("seed=2;trigger.http.register:lost=0.5").await;
    let queued = stack.queue_job("ws1", &["linux"], Utc::now()).await.detail.job_execution_id;
    let token = stack.registration_token("ws1", json!({"max_claims": 1, "single_use": true})).await;
    let request = json!({ "labels": ["linux"], "request_id": uuid::Uuid::now_v7() });
    let first = stack.post("/v1/runners/register", &token, request.clone()).await;
    assert_eq!(first.status, 504, "seed 2 loses the first answer");
    let retry = send_until_answered(&stack, "/v1/runners/register", &token, &request).await;
    assert_eq!(retry.status, 201, "{}", retry.body);
    let session = retry.body["session_token"].as_str().expect("a session token").to_string();
    let claim = send_until_answered(&stack, "/v1/runners/claim", &session, &json!({})).await;
    assert_eq!(claim.status, 200, "the retry's session claims: {}", claim.body);
    assert_eq!(claim.body["job_execution_id"], queued.to_string());
    // Every try of it answers the same session; another registration with
    // the used token is still refused.
    let again = send_until_answered(&stack, "/v1/runners/register", &token, &request).await;
    assert_eq!(again.body["session_id"], retry.body["session_id"]);
    let other = json!({ "labels": ["linux"], "request_id": uuid::Uuid::now_v7() });
    let refused = send_until_answered(&stack, "/v1/runners/register", &token, &other).await;
    assert_eq!((refused.status, refused.code()), (409, "registration-token-consumed"));
}

/// Two tries of one registration side by side (the HTTP API gave up on the
/// first at 30 s; the runner sent it again): both answer the one session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tries_of_one_single_use_registration_at_once_make_one_session() {
    let stack = TestStack::start().await;
    let token = stack.registration_token("ws1", json!({"single_use": true})).await;
    let request = json!({ "labels": ["linux"], "request_id": uuid::Uuid::now_v7() });
    let (a, b) = tokio::join!(
        stack.post("/v1/runners/register", &token, request.clone()),
        stack.post("/v1/runners/register", &token, request.clone())
    );
    assert_eq!((a.status, b.status), (201, 201), "{} {}", a.body, b.body);
    assert_eq!(a.body["session_id"], b.body["session_id"]);
    assert_eq!(a.body["session_token"], b.body["session_token"]);
}

/// A provisioner's reserve whose answer was lost: before reserves were
/// named, the retry reserved again (the lost ones held demand and slots
/// until they expired, their machines never started). Now its retry, with
/// the same `request_id`, gets the same reservations and tokens, and the
/// demand is held once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reserve_retried_after_its_answer_was_lost_gets_the_same_reservations_and_holds_demand_once() {
    let (stack, _plan) = stack_with_faults("seed=12;trigger.http.provisioner-reservations:lost=0.5").await;
    for _ in 0..3 {
        stack.queue_job("ws1", &["linux"], Utc::now()).await;
    }
    let settings = json!({"name": "fleet", "label_sets": [["linux"]], "max_instances": 10});
    let (_, token) = stack.create_provisioner("ws1", settings).await;
    let request = json!({"labels": ["linux"], "count": 2, "request_id": uuid::Uuid::now_v7()});
    let first = stack.post("/v1/provisioners/reservations", &token, request.clone()).await;
    assert_eq!(first.status, 504, "seed 12 loses the first answer");
    let retry = send_until_answered(&stack, "/v1/provisioners/reservations", &token, &request).await;
    assert_eq!(retry.status, 201, "{}", retry.body);
    let reservations = retry.body["reservations"].as_array().expect("reservations").clone();
    assert_eq!(reservations.len(), 2, "{}", retry.body);
    let again = send_until_answered(&stack, "/v1/provisioners/reservations", &token, &request).await;
    assert_eq!(again.body["reservations"], json!(reservations), "every try answers the same reservations and tokens");
    assert_eq!(stack.count_items("reservation").await, 2, "reserved once");
    // The third job is still there for a new reserve, and only it.
    let other = json!({"labels": ["linux"], "count": 5, "request_id": uuid::Uuid::now_v7()});
    let more = send_until_answered(&stack, "/v1/provisioners/reservations", &token, &other).await;
    assert_eq!(more.body["reservations"].as_array().map(Vec::len), Some(1), "{}", more.body);
    // A reservation's token registers its machine.
    let registration = reservations[0]["registration_token"].as_str().expect("a token");
    let session = stack.post("/v1/runners/register", registration, json!({"labels": ["linux"]})).await;
    assert_eq!(session.status, 201, "{}", session.body);
}

/// `body` sent as a claim until an answer arrives (a seeded `lost` fault
/// answers 504 after the claim ran), at most 10 times; the last answer.
async fn claim_until_answered(stack: &TestStack, session: &str, body: &serde_json::Value) -> Answer {
    send_until_answered(stack, "/v1/runners/claim", session, body).await
}

/// `body` posted to `path` until an answer arrives (a seeded `lost` fault
/// answers 504 after the request ran), at most 10 times; the last answer.
async fn send_until_answered(stack: &TestStack, path: &str, token: &str, body: &serde_json::Value) -> Answer {
    post_while(stack, path, token, body, 10, |status| status == 504).await
}

/// `body` posted to `path` while `retry` says so of the answer's status, at
/// most `tries` times; the last answer.
async fn post_while(
    stack: &TestStack,
    path: &str,
    token: &str,
    body: &serde_json::Value,
    tries: u32,
    retry: impl Fn(u16) -> bool,
) -> Answer {
    let mut tried = 0;
    loop {
        tried += 1;
        let answer = stack.post(path, token, body.clone()).await;
        if !retry(answer.status) || tried == tries {
            return answer;
        }
    }
}

/// An HTTP API gives up on its integration at 30 s while the function goes
/// on, and the runner sends its claim again with the same id: two tries of
/// one claim run side by side, and the one that commits first may be the
/// retry. Its answer is what the runner holds; the original, still running,
/// then finds the claim answered and answers nobody. Before tokens were
/// derived from the claim, that late original rotated the lease's token,
/// so the runner's first heartbeat got 404 and the job ended `runner_lost`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claims_original_try_finishing_after_its_retry_leaves_the_runner_its_token() {
    let stack = TestStack::start().await;
    let queued = stack.queue_job("ws1", &["linux"], Utc::now()).await.detail.job_execution_id;
    let session = stack.runner("ws1", &["linux"]).await.session_token;
    let request = json!({ "request_id": uuid::Uuid::now_v7() });
    // The retry commits first: the runner hears this answer.
    let heard = stack.post("/v1/runners/claim", &session, request.clone()).await;
    assert_eq!(heard.status, 200, "{}", heard.body);
    assert_eq!(heard.body["job_execution_id"], queued.to_string());
    // The original ends later; nobody hears its answer.
    let unheard = stack.post("/v1/runners/claim", &session, request.clone()).await;
    assert_eq!(unheard.status, 200, "{}", unheard.body);
    assert_eq!(unheard.body["lease"]["token"], heard.body["lease"]["token"], "every try hands out one token");
    // A try that comes late gets the first-heartbeat grace from its own
    // instant, not from the first try's: the runner may only now start.
    let expiry = |answer: &Answer| {
        chrono::DateTime::parse_from_rfc3339(answer.body["lease"]["expires_at"].as_str().expect("expires_at"))
            .expect("a timestamp")
    };
    assert!(expiry(&unheard) > expiry(&heard), "the grace counts again from the late try");
    let token = heard.body["lease"]["token"].as_str().expect("a lease token");
    assert_eq!(stack.heartbeat(token, queued).await.status, 200, "the token the runner holds still holds the lease");
}

/// The gateway's `replay` fault answers a claim 504 at once while its
/// invocation runs on, so the runner's retry (same request id, marked as a
/// retry) runs beside it, as after a timeout on AWS. Whichever commits
/// first, the runner ends up holding each job under a token that holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_retried_while_their_first_try_still_runs_hand_one_lease_to_the_runner() {
    let (stack, plan) = stack_with_faults("seed=5;trigger.http.claim:replay=0.5").await;
    let session = stack.runner("ws1", &["linux"]).await.session_token;
    for _ in 0..4 {
        let queued = stack.queue_job("ws1", &["linux"], Utc::now()).await.detail.job_execution_id;
        let mark = stack.host.invocations.mark();
        let request_id = uuid::Uuid::now_v7();
        let (mut retry, mut tries) = (false, 0);
        let claim = loop {
            let body = json!({ "request_id": request_id, "retry": retry });
            let answer = stack.post("/v1/runners/claim", &session, body).await;
            tries += 1;
            if answer.status != 504 {
                break answer;
            }
            retry = true;
        };
        // A retry's answer is the claim's: the job, whichever try took it.
        assert_eq!(claim.status, 200, "{}", claim.body);
        assert_eq!(claim.body["job_execution_id"], queued.to_string());
        let token = claim.body["lease"]["token"].as_str().expect("a lease token");
        // Every try has ended: whatever an unheard one did is done.
        wait_for("every try of the claim to end", Duration::from_secs(30), || async {
            let ended = stack.host.invocations.since(mark).iter().filter(|r| r.function == "claim").count();
            (ended >= tries).then_some(())
        })
        .await;
        assert_eq!(stack.heartbeat(token, queued).await.status, 200, "the runner's token holds the lease");
    }
    assert!(plan.injected_by_kind().get("replay").copied().unwrap_or(0) >= 1, "{:?}", plan.injected_by_kind());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_claims_racing_for_one_job_under_faults_make_one_lease_and_no_error() {
    // Conflicts, throttling and lost answers on the claims' writes: one
    // runner gets the job, under epoch 1; the others hear 204 or a 503 to
    // retry, never a 500; the bus carries one claim.
    let faults = "seed=16;dynamodb.TransactWriteItems:conflict=0.3;dynamodb:throttle=0.1;dynamodb:lost=0.1";
    let (stack, plan) = stack_with_faults(faults).await;
    let stack = Arc::new(stack);
    let mut runners = Vec::new();
    for _ in 0..16 {
        runners.push(stack.runner("ws1", &["linux"]).await.session_token);
    }
    let queued = stack.queue_job("ws1", &["linux"], Utc::now()).await;
    let answers = futures::future::join_all(runners.iter().map(|token| {
        let stack = stack.clone();
        let token = token.clone();
        async move { stack.post("/v1/runners/claim", &token, json!({})).await }
    }))
    .await;
    let mut won = Vec::new();
    for answer in answers {
        assert!([200, 204, 503].contains(&answer.status), "a claim answered {}: {}", answer.status, answer.body);
        if answer.status == 200 {
            won.push(answer.body);
        }
    }
    assert!(won.len() <= 1, "at most one runner holds the job: {won:?}");
    if won.is_empty() {
        // Every racer was told to retry: the job is still there for one.
        let claim = stack.claim(&runners[0]).await.expect("the job, on a retry");
        assert_eq!(claim.job_execution_id, queued.detail.job_execution_id);
    } else {
        assert_eq!(won[0]["job_execution_id"], queued.detail.job_execution_id.to_string());
        assert_eq!(won[0]["lease"]["epoch"], 1);
    }
    stack
        .wait_fact("baton.runners.job.claimed", Duration::from_secs(30), |d| {
            d["job_execution_id"] == queued.detail.job_execution_id.to_string()
        })
        .await;
    assert_eq!(stack.facts("baton.runners.job.claimed").len(), 1, "{:?}", plan.injected_by_kind());
    assert!(!plan.injected_by_kind().is_empty(), "faults met the claims");
}

/// API Gateway waits 30 s for a function and then answers 504 while the
/// invocation goes on (Lambda does not stop it). The gateway of the dev host
/// does the same (its wait shortened here): a long poll held past it is a
/// 504 to the runner, and the claim function still runs to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_answers_504_at_its_integration_timeout_while_the_invocation_goes_on() {
    let options = HostOptions { integration_timeout: Duration::from_secs(1), ..HostOptions::default() };
    let stack = TestStack::start_custom(|_| {}, HashMap::new(), options).await;
    let session = stack.runner("ws1", &["linux"]).await.session_token;
    let mark = stack.host.invocations.mark();
    let answer = stack.post("/v1/runners/claim", &session, json!({ "wait_s": 3 })).await;
    assert_eq!(answer.status, 504, "{}", answer.body);
    let finished = wait_for("the claim's invocation to end", Duration::from_secs(30), || async {
        stack.host.invocations.since(mark).into_iter().find(|r| r.function == "claim")
    })
    .await;
    assert_eq!(finished.status, Some(204), "the invocation ran to its end, unheard");
}

/// A job completed with outputs whose completed fact is late (the complete
/// function crashed right after its write, so nothing adopted it directly)
/// is adopted at its timeout from the runners' record: its dependant is
/// queued with those outputs (its `if:` holds and its env carries them).
/// Before the record kept them, the adoption brought no outputs and the
/// dependant was skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outcome_adopted_from_its_record_at_a_timeout_hands_its_outputs_to_dependants() {
    let faults = "seed=1;late_ms=20000;trigger.sqs.job-outcomes:late=1;trigger.http.complete:abandon=1";
    let minute = HashMap::from([("BATON_TIMEOUT_MINUTE_S".to_string(), "5".to_string())]);
    let (stack, _plan) = stack_with_faults_and(faults, minute).await;
    let ws = "ws-outputs-at-timeout";
    let yaml = "name: release\njobs:\n  build:\n    runs-on: linux\n    timeout-minutes: 2\n    outputs: [version]\n    \
                steps: [{run: 'true'}]\n  deploy:\n    runs-on: linux\n    needs: [build]\n    \
                if: needs.build.outputs.version == '1.2.3'\n    env:\n      VERSION: ${{ needs.build.outputs.version }}\n    \
                steps: [{run: ./deploy}]\n";
    let LeasedRun { view, claim: build, .. } = stack.leased_run(ws, yaml).await;
    let run_id = view.id();
    let step = build.job.work.steps[0].id;
    let body = json!({
        "status": "succeeded",
        "steps": [{ "id": step, "status": "succeeded", "exit_code": 0 }],
        "outputs": { "version": "1.2.3" },
    });
    let completed = stack.complete(&build.lease.token, build.job_execution_id, body).await;
    assert_eq!(completed.status, 502, "the function was abandoned after its write: {}", completed.body);

    // build's 10 s timeout passes long before its fact (held 20 s) arrives.
    let queued = stack
        .wait_fact("baton.workflows.job_execution.queued", Duration::from_secs(60), |d| {
            d["run_id"] == run_id.as_str() && d["job"]["key"] == "deploy"
        })
        .await;
    let execution: uuid::Uuid = serde_json::from_value(queued["job_execution_id"].clone()).expect("an execution id");
    let spec = stack.store.job_spec(execution).await.expect("read").expect("deploy's spec");
    assert_eq!(spec.work.env.get("VERSION").map(String::as_str), Some("1.2.3"), "{:?}", spec.work.env);
    let view = stack.run_view(ws, &run_id).await;
    let build_view = job_in(&view, 1, "build");
    assert_eq!(build_view["status"], "succeeded", "{view:#}");
    assert_eq!(build_view["outputs"]["version"], "1.2.3", "the view shows the outputs: {view:#}");
}

/// A retried claim that finds nothing answers the runner 204, and the try
/// it repeats may still be running (its 504 came from the gateway, not from
/// the function). Had that late try then taken a job, the job would be
/// leased to a runner that was told there was none, until its lease
/// expired. A retry's empty answer is final: the late try takes nothing,
/// and the job waits for the runner's next claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claims_late_first_try_takes_nothing_after_its_retry_answered_empty() {
    let stack = TestStack::start().await;
    let session = stack.runner("ws1", &["linux"]).await.session_token;
    let request_id = uuid::Uuid::now_v7();
    let retry = stack.post("/v1/runners/claim", &session, json!({ "request_id": request_id, "retry": true })).await;
    assert_eq!(retry.status, 204, "the retry found nothing: {}", retry.body);
    let queued = stack.queue_job("ws1", &["linux"], Utc::now()).await.detail.job_execution_id;
    let late = stack.post("/v1/runners/claim", &session, json!({ "request_id": request_id })).await;
    assert_eq!(late.status, 204, "the late first try takes nothing: {}", late.body);
    let next = stack.claim(&session).await.expect("the job waits for the runner's next claim");
    assert_eq!(next.job_execution_id, queued);
}

/// `body` posted to `path` until an answer that is not a 5xx (a lost or
/// replayed answer, a fault the function could not survive), at most 20
/// times, as the runner's retries do; the last answer.
async fn post_until_answered(stack: &TestStack, path: &str, token: &str, body: &serde_json::Value) -> Answer {
    post_while(stack, path, token, body, 20, |status| status >= 500).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifact_and_cache_uploads_whose_answers_are_lost_or_replayed_are_charged_once_and_stored_once() {
    let faults = "seed=21;trigger.http.artifacts:replay=0.3;trigger.http.caches:replay=0.3;\
                  dynamodb.TransactWriteItems:lost=0.3;s3:lost=0.3";
    let (stack, plan) = stack_with_faults(faults).await;
    let ws = "ws-artifacts";
    let yaml = "name: a\njobs:\n  build:\n    runs-on: linux\n    steps: [{run: make}]\n";
    // Retried with its key on a 503, as a client does (every resend of the
    // create's transaction can lose its answer too).
    let body = json!({"definition": yaml, "idempotency_key": "artifacts"});
    let created =
        post_while(&stack, &format!("/v1/workspaces/{ws}/runs"), &stack.admin_token, &body, 10, |s| s == 503).await;
    assert!(created.status == 201 || created.status == 200, "{}", created.body);
    let run_id = created.body.id();
    let session = stack.runner(ws, &["linux"]).await.session_token;
    let job = stack.wait_claim(&session).await;
    let base = format!("/v1/runners/leases/{}", job.job_execution_id);
    let token = job.lease.token.clone();

    for round in 0..4 {
        let archive: Vec<u8> = (0..5_000u32).map(|i| (i * 31 + round) as u8).collect();
        let digest = format!("{:x}", <sha2::Sha256 as sha2::Digest>::digest(&archive));
        let name = format!("dist-{round}");
        let body = json!({"name": name, "bytes": archive.len(), "sha256": digest});
        let begun = post_until_answered(&stack, &format!("{base}/artifacts"), &token, &body).await;
        assert_eq!(begun.status, 200, "round {round}: {}", begun.body);
        let parts = stack.put_parts(&begun.body, &archive).await;
        let done =
            post_until_answered(&stack, &format!("{base}/artifacts/{name}/complete"), &token, &json!({"parts": parts}))
                .await;
        assert_eq!((done.status, done.body["status"].as_str()), (200, Some("stored")), "round {round}: {}", done.body);

        let key = format!("deps-{round}");
        let body = json!({"key": key, "bytes": archive.len(), "sha256": digest});
        let begun = post_until_answered(&stack, &format!("{base}/caches"), &token, &body).await;
        assert_eq!(begun.status, 200, "round {round}: {}", begun.body);
        if begun.body["stored"] != true {
            let parts = stack.put_parts(&begun.body, &archive).await;
            let complete = json!({"key": key, "parts": parts});
            let done = post_until_answered(&stack, &format!("{base}/caches/complete"), &token, &complete).await;
            assert_eq!(done.status, 200, "round {round}: {}", done.body);
        }
        let restored =
            post_until_answered(&stack, &format!("{base}/caches/restore"), &token, &json!({"key": key})).await;
        assert_eq!(restored.body["hit"], "exact", "round {round}: {}", restored.body);
    }
    // Charged once each: the run's and the lease's counts are the four archives.
    let usage = stack.store.get(&format!("RUN#{run_id}"), "ARTIFACTS").await.unwrap().unwrap();
    assert_eq!(usage["bytes"].as_n().unwrap(), "20000", "{:?}", plan.injected_by_kind());
    let lease = stack.store.get(&format!("EXEC#{}", job.job_execution_id), "LEASE").await.unwrap().unwrap();
    assert_eq!(
        (lease["artifact_bytes"].as_n().unwrap().as_str(), lease["artifact_count"].as_n().unwrap().as_str()),
        ("20000", "4")
    );
    let list_path = format!("/v1/workspaces/{ws}/runs/{run_id}/artifacts");
    let mut list = stack.get(&list_path, &stack.admin_token).await;
    while list.status >= 500 {
        // A replayed read: the operator asks again.
        list = stack.get(&list_path, &stack.admin_token).await;
    }
    let stored = list.body["artifacts"].as_array().unwrap().iter().filter(|a| a["status"] == "stored").count();
    assert_eq!(stored, 4, "{}", list.body);
    let injected = plan.injected_by_kind();
    assert!(
        injected.get("replay").copied().unwrap_or(0) > 0 && injected.get("lost").copied().unwrap_or(0) > 0,
        "{injected:?}"
    );
}

/// Sends a long poll in the background: its status and body.
fn poll_in_background(
    stack: &TestStack,
    path: &str,
    token: &str,
    claim: Option<serde_json::Value>,
) -> tokio::task::JoinHandle<(u16, serde_json::Value)> {
    let (http, url, token) = (stack.http.clone(), stack.url(path), token.to_string());
    tokio::spawn(async move {
        let request = match claim {
            Some(body) => http.post(url).json(&body),
            None => http.get(url),
        };
        let answer = request.bearer_auth(token).send().await.expect("an answer");
        let status = answer.status().as_u16();
        (status, answer.json().await.unwrap_or(serde_json::Value::Null))
    })
}

/// A long poll reads again every second while it waits (a provisioner's
/// demand, a runner's claim, up to 20 s each). A read that fails meanwhile,
/// as reads do while DynamoDB throttles, is read again next time, not the
/// poll's answer: failing the poll on it failed most long polls exactly when
/// AWS throttled (in the 30 % soak a provisioner, backing off from its
/// failed polls, saw no demand for minutes while jobs waited).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_polls_ride_out_reads_that_fail_while_they_wait() {
    let (stack, plan) = stack_with_faults("seed=3;dynamodb.Query:throttle=1").await;
    plan.pause();
    let settings = json!({"name": "fleet", "label_sets": [["linux"]], "max_instances": 5});
    let (_, token) = stack.create_provisioner("ws1", settings).await;
    let seen = stack.get("/v1/provisioners/demand", &token).await;
    assert_eq!(seen.status, 200, "{}", seen.body);
    let version = seen.body["version"].as_str().expect("a version").to_string();
    let session = stack.runner("ws1", &["linux"]).await.session_token;

    let demand =
        poll_in_background(&stack, &format!("/v1/provisioners/demand?wait_s=10&since={version}"), &token, None);
    let claim = json!({"wait_s": 10, "request_id": uuid::Uuid::now_v7()});
    let claim = poll_in_background(&stack, "/v1/runners/claim", &session, Some(claim));
    // Both wait; then every read of the counts and of the queue throttles,
    // the SDK's retries too, for a couple of seconds of looks.
    tokio::time::sleep(Duration::from_secs(1)).await;
    plan.resume();
    let started = Instant::now();
    let throttled = || {
        plan.injected().get(&(baton_localstack::faults::Fault::Throttle, "dynamodb.Query".into())).copied().unwrap_or(0)
    };
    wait_for("reads throttled", Duration::from_secs(30), || async {
        (throttled() >= 3 && started.elapsed() >= Duration::from_secs(3)).then_some(())
    })
    .await;
    plan.pause();
    assert!(!demand.is_finished() && !claim.is_finished(), "a failed read is not the polls' answer");

    let queued = stack.queue_job("ws1", &["linux"], Utc::now()).await.detail.job_execution_id;
    let (status, claimed) = claim.await.expect("the claim");
    assert_eq!(status, 200, "the claim waited on, then took the job: {claimed}");
    assert_eq!(claimed["job_execution_id"], queued.to_string());
    let (status, demand) = demand.await.expect("the demand");
    assert_eq!(status, 200, "the demand waited on, then answered the change: {demand}");
    assert_ne!(demand["version"], version.as_str(), "{demand}");
}

/// A claim's look whose transaction applied while its answer was lost (every
/// resend's too) may have taken a job. The poll goes on, and the claim's
/// answer item says what it took: the same request answers that job under
/// the token its lease holds, rather than a 503 the runner has to retry
/// while the job's first-heartbeat grace runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_claim_whose_transaction_answer_was_lost_answers_the_job_it_took() {
    let (stack, plan) = stack_with_faults("seed=3;dynamodb.TransactWriteItems:lost=1").await;
    plan.pause();
    let session = stack.runner("ws1", &["linux"]).await.session_token;
    let claim = json!({"wait_s": 10, "request_id": uuid::Uuid::now_v7()});
    let claim = poll_in_background(&stack, "/v1/runners/claim", &session, Some(claim));
    tokio::time::sleep(Duration::from_secs(1)).await;
    plan.resume();
    let queued = stack.queue_job("ws1", &["linux"], Utc::now()).await.detail.job_execution_id;
    let (status, claimed) = claim.await.expect("the claim");
    plan.pause();
    let lost = plan.injected_by_kind().get("lost").copied().unwrap_or(0);
    assert!(lost >= 1, "the claim's transaction answer was lost: {:?}", plan.injected_by_kind());
    assert_eq!(status, 200, "{claimed}");
    assert_eq!(claimed["job_execution_id"], queued.to_string());
    let token = claimed["lease"]["token"].as_str().expect("a lease token");
    assert_eq!(stack.heartbeat(token, queued).await.status, 200, "the answered token holds the lease");
    let _ = stack
        .wait_fact("baton.runners.job.claimed", Duration::from_secs(30), |d| {
            d["job_execution_id"] == queued.to_string()
        })
        .await;
    assert_eq!(stack.facts("baton.runners.job.claimed").len(), 1, "one claim");
}

/// A cancel whose write applied while its answer was lost (every resend's
/// too) has woken nothing: the client's retry finds the run finished (409),
/// and that try owes the parked orchestration its wake, or the `always()`
/// job waits for the parked step's deadline (an hour by default). Found by
/// the chaos soak (seed 15 at 10 %: a cancel racing claims, its cleanup job
/// still pending three minutes on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_retried_after_its_answer_was_lost_wakes_the_orchestration_for_its_always_jobs() {
    use crate::workflows_support::queued_keys;
    use baton_tests::WAIT;
    let (stack, plan) = stack_with_faults("seed=3;dynamodb.TransactWriteItems:lost=1").await;
    plan.pause();
    // A registered runner, so no job is flagged unschedulable: a flag's
    // wake-up would hide whether the retry wakes the orchestration.
    stack.runner("ws1", &["linux"]).await;
    let yaml = "name: cancelled\njobs:\n  build:\n    runs-on: linux\n    steps: [{run: make}]\n  report:\n    needs: build\n    if: always()\n    runs-on: linux\n    steps: [{run: ./report}]\n";
    let run = stack.create_run("ws1", yaml).await.id();
    let run_id = uuid::Uuid::parse_str(&run).expect("a uuid");
    wait_for("the orchestration to park with build queued", WAIT, || async {
        let item = stack.store.get_attempt(run_id, 1).await.ok()??;
        let parked = item.wait_token.is_some() && item.wait_progress == Some(item.progress);
        (parked && queued_keys(&stack, &run).contains(&"build".to_string())).then_some(())
    })
    .await;

    let path = format!("/v1/workspaces/ws1/runs/{run}/cancel");
    plan.resume();
    let Answer { status, body } = stack.post(&path, &stack.admin_token, json!({})).await;
    plan.pause();
    assert!(status >= 500, "every answer of the cancel's write was lost: {status} {body}");
    let item = stack.store.get_attempt(run_id, 1).await.expect("read").expect("the attempt");
    assert!(item.state.status.is_terminal(), "the cancel applied: {status} {body}");
    assert!(item.token_to_wake().is_some(), "its progress went unheard");

    // The client retries: the run has finished, and this try wakes the
    // orchestration, which starts the always() job at once.
    let Answer { status, body } = stack.post(&path, &stack.admin_token, json!({})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("run-already-finished")), "{body}");
    wait_for("the always() job to be queued", WAIT, || async {
        queued_keys(&stack, &run).contains(&"report".to_string()).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_transaction_applied_but_whose_every_resend_was_throttled_still_hands_its_job_out() {
    // The claim's transaction applies and its answer is lost; the SDK sends
    // it again, and DynamoDB's answer to the repeat is throttled. The claim
    // took the job for this session: it must say so, not "nothing to claim"
    // (the job then waits, leased to nobody, for its grace to expire: the
    // chaos soak's `Listening` run ended `runner_lost` so).
    let (stack, plan) =
        stack_with_faults("seed=7;dynamodb.TransactWriteItems:throttle=0.6;dynamodb.TransactWriteItems:lost=1").await;
    plan.pause();
    let runner = stack.runner("ws1", &["linux"]).await;
    let (mut queued, mut handed_out): (Vec<uuid::Uuid>, HashSet<uuid::Uuid>) = (Vec::new(), HashSet::new());
    for round in 0..12 {
        plan.pause();
        queued.push(stack.queue_job("ws1", &["linux"], Utc::now()).await.detail.job_execution_id);
        plan.resume();
        // As the runner does: a 503 is retried under the same request id;
        // an answer is final.
        let request_id = uuid::Uuid::now_v7();
        let mut answer = None;
        for attempt in 0..10 {
            let body = json!({ "wait_s": 0, "request_id": request_id, "retry": attempt > 0 });
            let answered = stack.post("/v1/runners/claim", &runner.session_token, body).await;
            if answered.status != 503 {
                answer = Some(answered);
                break;
            }
        }
        plan.pause();
        let answer = answer.expect("an answer within 10 tries");
        match answer.status {
            200 => {
                let execution: uuid::Uuid =
                    answer.body["job_execution_id"].as_str().expect("a job").parse().expect("an id");
                handed_out.insert(execution);
            }
            status => assert_eq!(status, 204, "round {round}: {}", answer.body),
        }
        // Every job leased to the session was handed out by its claim.
        for execution in &queued {
            if stack.store.lease(*execution).await.expect("a read").is_some() {
                assert!(
                    handed_out.contains(execution),
                    "round {round}: job {execution} is leased to the session, but its claim answered {} {}",
                    answer.status,
                    answer.body
                );
            }
        }
    }
    let injected = plan.injected_by_kind();
    assert!(
        injected.get("lost").copied().unwrap_or(0) > 0 && injected.get("throttle").copied().unwrap_or(0) > 0,
        "{injected:?}"
    );
}

/// A hook's create whose transaction applied while its answer was lost, and
/// whose resends (same token) were throttled until the SDK gave up, so the
/// store sent it again under a new token, which finds its own writes, made
/// the hook: the create answers 201 with it, and the workspace has that one
/// hook, not a 500 and an orphan. Found by the chaos soak's logs (`hook …
/// exists already`). Seed 102 gives the create's transaction exactly that:
/// lost, throttled twice (the SDK's three attempts), then nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_created_while_its_transactions_answer_was_lost_is_created_once() {
    let (stack, plan) =
        stack_with_faults("seed=102;dynamodb.TransactWriteItems:lost=0.5;dynamodb.TransactWriteItems:throttle=0.8")
            .await;
    let path = "/v1/workspaces/ws1/hooks";
    let created = stack
        .send(reqwest::Method::POST, path, &stack.admin_token, Some(json!({"provider": "github"}).to_string()))
        .await;
    plan.pause();
    let injected = plan.injected_by_kind();
    assert!(injected.contains_key("lost") && injected.contains_key("throttle"), "{injected:?}");
    assert_eq!(created.status, 201, "{}", created.body);
    let listed = stack.get_ok(path, &stack.admin_token).await;
    let ids: Vec<&str> = listed["items"].as_array().unwrap().iter().filter_map(|h| h["id"].as_str()).collect();
    assert_eq!(ids, [created.body["id"].as_str().unwrap()], "{listed:#}");
}
