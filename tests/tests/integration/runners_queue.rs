//! The queue: enqueue (replays, tombstones), claim (labels, order, races,
//! caps, stale items) — behaviour.md §3, §4 and §13 scenarios 1–10.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use baton_api::facts::{Fact, JobExecutionQueued, JobExecutionTerminated};
use baton_domain::runners::labels::{canonicalize, labelset_id};
use baton_store::records::RunnerStatus;
use baton_tests::runners::queued_fact;
use baton_tests::TestStack;
use chrono::{Duration as Span, Utc};
use serde_json::json;

fn republish_with(fact: &Fact<JobExecutionQueued>, queued_at: chrono::DateTime<Utc>) -> Fact<JobExecutionQueued> {
    let mut detail = fact.detail.clone();
    detail.queued_at = queued_at;
    Fact::new(fact.header.workspace_id.clone(), queued_at, detail)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_enqueue_leaves_one_pending_item_with_the_first_queued_at() {
    let stack = TestStack::start().await;
    let first = stack.queue_job("ws1", &["linux"], Utc::now() - Span::seconds(30)).await;
    // The same fact again (redelivery) and the same execution queued later.
    stack.redeliver(&first).await;
    let later = republish_with(&first, Utc::now());
    stack.publish(&later).await;
    stack.wait_handled(later.header.event_id, "enqueue").await;

    let pending = stack.pending_of("ws1").await;
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].queued_at, first.detail.queued_at);
    let record = stack.store.runner_record(first.detail.job_execution_id).await.unwrap().unwrap();
    assert_eq!(record.queued_at, Some(first.detail.queued_at));
    stack.assert_all_facts_valid();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_enqueue_after_claim_queues_nothing() {
    let stack = TestStack::start().await;
    let runner = stack.runner("ws1", &["linux"]).await;
    let fact = stack.queue_job("ws1", &["linux"], Utc::now()).await;
    let claimed = stack.claim(&runner.session_token).await.expect("the job is claimable");
    assert_eq!(claimed.job_execution_id, fact.detail.job_execution_id);

    let replay = republish_with(&fact, Utc::now());
    stack.publish(&replay).await;
    stack.wait_handled(replay.header.event_id, "enqueue").await;
    assert!(stack.pending_of("ws1").await.is_empty());
    assert!(stack.claim(&runner.session_token).await.is_none());
    let record = stack.store.runner_record(fact.detail.job_execution_id).await.unwrap().unwrap();
    assert_eq!(record.status, RunnerStatus::Leased);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_after_the_lease_expired_or_the_execution_ended_does_not_requeue() {
    let stack = TestStack::start().await;
    let runner = stack.runner("ws1", &["linux"]).await;

    // Expired: claimed, never heartbeated, reaped.
    let expired = stack.queue_job("ws1", &["linux"], Utc::now()).await;
    stack.claim(&runner.session_token).await.expect("claimable");
    let reaped = stack.reap_at(Utc::now() + Span::seconds(61)).await;
    assert_eq!(reaped, 1);

    // Ended while pending: the terminated fact removes it and leaves a tombstone.
    let ended = stack.queue_job("ws1", &["linux"], Utc::now()).await;
    let terminated = terminated_fact(&ended, "cancelled");
    stack.publish(&terminated).await;
    stack.wait_handled(terminated.header.event_id, "reconcile").await;
    assert!(stack.pending_of("ws1").await.is_empty(), "the pending item of an ended execution is removed");

    for fact in [&expired, &ended] {
        let replay = republish_with(fact, Utc::now());
        stack.publish(&replay).await;
        stack.wait_handled(replay.header.event_id, "enqueue").await;
    }
    assert!(stack.pending_of("ws1").await.is_empty());
    assert!(stack.claim(&runner.session_token).await.is_none());
    assert_eq!(
        stack.store.runner_record(expired.detail.job_execution_id).await.unwrap().unwrap().status,
        RunnerStatus::Expired
    );
    assert_eq!(
        stack.store.runner_record(ended.detail.job_execution_id).await.unwrap().unwrap().status,
        RunnerStatus::Terminated
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_fact_that_overtakes_its_queued_fact_still_prevents_queueing() {
    let stack = TestStack::start().await;
    let fact = queued_fact("ws1", &["linux"], Utc::now());
    let terminated = terminated_fact(&fact, "cancelled");
    stack.publish(&terminated).await;
    stack.wait_handled(terminated.header.event_id, "reconcile").await;
    stack.publish(&fact).await;
    stack.wait_handled(fact.header.event_id, "enqueue").await;
    assert!(stack.pending_of("ws1").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_are_canonical_and_a_job_runs_only_where_its_labels_are_a_subset() {
    let stack = TestStack::start().await;
    let small = stack.runner("ws1", &["Linux"]).await;
    assert_eq!(small.labels, vec!["linux"]);
    let big = stack.runner("ws1", &[" LINUX ", "x64", "linux"]).await;
    assert_eq!(big.labels, vec!["linux", "x64"]);

    let gpu = stack.queue_job("ws1", &["linux", "gpu"], Utc::now() - Span::seconds(10)).await;
    let plain = stack.queue_job("ws1", &["Linux"], Utc::now()).await;

    let claimed = stack.claim(&small.session_token).await.expect("`Linux` runs on [linux]");
    assert_eq!(claimed.job_execution_id, plain.detail.job_execution_id);
    assert_eq!(claimed.job.work.labels, vec!["linux"]);
    assert!(stack.claim(&small.session_token).await.is_none(), "[linux, gpu] does not run on [linux]");
    assert!(stack.claim(&big.session_token).await.is_none(), "[linux, gpu] does not run on [linux, x64]");
    let gpu_runner = stack.runner("ws1", &["gpu", "linux", "x64"]).await;
    let claimed = stack.claim(&gpu_runner.session_token).await.expect("a superset runs it");
    assert_eq!(claimed.job_execution_id, gpu.detail.job_execution_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_oldest_fitting_job_goes_first_and_an_older_unfitting_one_does_not_block_it() {
    let stack = TestStack::start().await;
    let now = Utc::now();
    let unfitting = stack.queue_job("ws1", &["macos"], now - Span::seconds(60)).await;
    let young = stack.queue_job("ws1", &["linux"], now - Span::seconds(10)).await;
    let old = stack.queue_job("ws1", &["linux", "x64"], now - Span::seconds(20)).await;
    let runner = stack.runner("ws1", &["linux", "x64"]).await;
    let first = stack.claim(&runner.session_token).await.unwrap();
    let second = stack.claim(&runner.session_token).await.unwrap();
    assert_eq!(first.job_execution_id, old.detail.job_execution_id, "oldest queued_at first, across label sets");
    assert_eq!(second.job_execution_id, young.detail.job_execution_id);
    assert!(stack.claim(&runner.session_token).await.is_none());
    assert_eq!(stack.pending_of("ws1").await[0].execution.id, unfitting.detail.job_execution_id);
}

/// `priority`: a priority 10 job queued after a priority 0 one is claimed
/// first, across label sets; one queued 11 minutes before it is not
/// overtaken (a point of priority is worth a minute of waiting).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_higher_priority_job_is_claimed_before_older_ones_until_they_have_waited_long_enough() {
    let stack = TestStack::start().await;
    let now = Utc::now();
    let prioritised = |labels: &[&str], at, priority| {
        let mut queued = queued_fact("ws1", labels, at);
        queued.spec.priority = priority;
        queued.fact.detail.job.priority = priority;
        queued
    };
    let starving = prioritised(&["linux"], now - Span::minutes(11), 0);
    let older = prioritised(&["linux"], now - Span::minutes(5), 0);
    let urgent = prioritised(&["linux", "x64"], now, 10);
    for queued in [&starving, &older, &urgent] {
        stack.publish(queued).await;
        stack.wait_runner_record(queued.detail.job_execution_id).await;
    }
    let runner = stack.runner("ws1", &["linux", "x64"]).await;
    let mut order = Vec::new();
    while let Some(claimed) = stack.claim(&runner.session_token).await {
        order.push(claimed.job_execution_id);
    }
    let expected: Vec<_> = [&starving, &urgent, &older].iter().map(|q| q.detail.job_execution_id).collect();
    assert_eq!(order, expected, "11 minutes waited beat 10 points; 10 points beat 5 minutes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_concurrent_claims_on_one_job_make_exactly_one_lease() {
    let stack = Arc::new(TestStack::start().await);
    let mut runners = Vec::new();
    for _ in 0..16 {
        runners.push(stack.runner("ws1", &["linux"]).await.session_token);
    }
    let fact = stack.queue_job("ws1", &["linux"], Utc::now()).await;
    let claims = futures::future::join_all(runners.iter().map(|token| {
        let stack = stack.clone();
        let token = token.clone();
        async move { stack.claim(&token).await }
    }))
    .await;
    let won: Vec<_> = claims.into_iter().flatten().collect();
    assert_eq!(won.len(), 1, "exactly one 200, fifteen 204");
    assert_eq!(won[0].job_execution_id, fact.detail.job_execution_id);
    assert_eq!(won[0].lease.epoch, 1);
    let claimed_facts = stack
        .wait_fact("baton.runners.job.claimed", Duration::from_secs(30), |d| {
            d["job_execution_id"] == fact.detail.job_execution_id.to_string()
        })
        .await;
    assert_eq!(claimed_facts["epoch"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_runners_drain_two_hundred_jobs_each_claimed_exactly_once() {
    let stack = Arc::new(TestStack::start().await);
    let labels = canonicalize(&["linux".to_string()]).unwrap();
    let labelset = labelset_id(&labels);
    let base = Utc::now() - Span::seconds(600);
    let mut queued = HashSet::new();
    // Enqueued through the enqueue use case directly (the pipeline is covered
    // above); 200 executions in one workspace and label set.
    for i in 0..200 {
        let fact = queued_fact("ws1", &["linux"], base + Span::milliseconds(i));
        let spec = stack.store.job_spec_put(fact.detail.job_execution_id, "ws1", &fact.spec).unwrap();
        stack.store.transact(vec![spec]).await.unwrap();
        stack.store.enqueue(&fact, labels.clone(), &labelset).await.unwrap();
        queued.insert(fact.detail.job_execution_id);
    }
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let token = stack.runner("ws1", &["linux"]).await.session_token;
        let stack = stack.clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            while let Some(job) = stack.claim(&token).await {
                let done = stack
                    .complete(&job.lease.token, job.job_execution_id, json!({"status": "succeeded", "steps": []}))
                    .await;
                assert_eq!(done.status, 200, "{}", done.body);
                mine.push(job.job_execution_id);
            }
            mine
        }));
    }
    let mut claimed: HashMap<uuid::Uuid, u32> = HashMap::new();
    for task in tasks {
        for id in task.await.unwrap() {
            *claimed.entry(id).or_default() += 1;
        }
    }
    assert_eq!(claimed.len(), 200, "none lost");
    assert!(claimed.values().all(|&n| n == 1), "none claimed twice");
    assert_eq!(claimed.keys().copied().collect::<HashSet<_>>(), queued);
    assert!(stack.pending_of("ws1").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capped_session_gets_409_past_its_cap_and_an_empty_poll_spends_nothing() {
    let stack = TestStack::start().await;
    let token = stack.registration_token("ws1", json!({"max_claims": 1})).await;
    let runner = stack.register(&token, &["linux"]).await;
    assert_eq!(runner.max_claims, Some(1));
    // Empty polls first: they must not use up the one claim.
    for _ in 0..3 {
        assert!(stack.claim(&runner.session_token).await.is_none());
    }
    stack.queue_job("ws1", &["linux"], Utc::now()).await;
    stack.queue_job("ws1", &["linux"], Utc::now()).await;
    assert!(stack.claim(&runner.session_token).await.is_some());
    let answer = stack.post("/v1/runners/claim", &runner.session_token, json!({})).await;
    assert_eq!((answer.status, answer.code()), (409, "session-exhausted"));
    assert_eq!(stack.pending_of("ws1").await.len(), 1, "the refused claim took nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_pending_item_for_a_leased_execution_is_dropped_without_spending_a_claim() {
    let stack = TestStack::start().await;
    let token = stack.registration_token("ws1", json!({"max_claims": 3})).await;
    let runner = stack.register(&token, &["linux"]).await;
    let fact = stack.queue_job("ws1", &["linux"], Utc::now() - Span::seconds(5)).await;
    let pending = stack.pending_of("ws1").await;
    stack.claim(&runner.session_token).await.expect("claimable");
    // Put the claimed execution's pending item back, as a lost delete would.
    stack
        .clients
        .dynamodb()
        .put_item()
        .table_name(&stack.store.table)
        .set_item(Some(baton_store::to_item(&pending[0]).unwrap()))
        .send()
        .await
        .unwrap();
    let other = stack.queue_job("ws1", &["linux"], Utc::now()).await;
    let claimed = stack.claim(&runner.session_token).await.expect("falls through to the next job");
    assert_eq!(claimed.job_execution_id, other.detail.job_execution_id);
    assert_ne!(claimed.job_execution_id, fact.detail.job_execution_id);
    assert!(stack.pending_of("ws1").await.is_empty(), "the stale item was removed");
    assert!(
        stack.claim(&runner.session_token).await.is_none(),
        "no loop, and the stale item spent no claim (2 of 3 used)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_returns_as_soon_as_work_appears() {
    let stack = Arc::new(TestStack::start().await);
    let runner = stack.runner("ws1", &["linux"]).await;
    let poll = {
        let stack = stack.clone();
        let token = runner.session_token.clone();
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            let answer = stack.post("/v1/runners/claim", &token, json!({"wait_s": 20})).await;
            (answer, started.elapsed())
        })
    };
    let fact = stack.queue_job("ws1", &["linux"], Utc::now()).await;
    let (answer, waited) = poll.await.unwrap();
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body["job_execution_id"], fact.detail.job_execution_id.to_string());
    assert!(waited < Duration::from_secs(20), "returned when the job appeared, not at the deadline");
    let too_long = stack.post("/v1/runners/claim", &runner.session_token, json!({"wait_s": 21})).await;
    assert_eq!((too_long.status, too_long.code()), (400, "invalid-request"));
}

fn terminated_fact(fact: &Fact<JobExecutionQueued>, status: &str) -> Fact<JobExecutionTerminated> {
    Fact::new(
        fact.header.workspace_id.clone(),
        Utc::now(),
        JobExecutionTerminated {
            run_id: fact.detail.run_id,
            attempt: fact.detail.attempt,
            job_id: fact.detail.job_id,
            job_execution_id: fact.detail.job_execution_id,
            status: status.into(),
            reason: Some("run_cancelled".into()),
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_fact_with_invalid_labels_is_dead_lettered_and_writes_nothing() {
    let stack = TestStack::start().await;
    let bad = queued_fact("ws1", &["linux", "Not A Label"], Utc::now());
    let empty = queued_fact("ws1", &[], Utc::now());
    stack.publish(&bad).await;
    stack.publish(&empty).await;
    let dlq = stack.provisioned.queues["enqueue"].dlq_url.clone();
    let dead = Arc::new(std::sync::Mutex::new(HashSet::new()));
    baton_tests::wait_for("both facts in the enqueue DLQ", Duration::from_secs(60), || {
        let sqs = stack.clients.sqs().clone();
        let dlq = dlq.clone();
        let dead = dead.clone();
        async move {
            let out = sqs
                .receive_message()
                .queue_url(&dlq)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .send()
                .await
                .ok()?;
            let mut dead = dead.lock().unwrap();
            for message in out.messages() {
                let envelope: serde_json::Value = serde_json::from_str(message.body().unwrap_or("{}")).ok()?;
                dead.insert(envelope["detail"]["job_execution_id"].as_str()?.to_string());
            }
            (dead.len() == 2).then_some(())
        }
    })
    .await;
    let dead = dead.lock().unwrap().clone();
    assert!(dead.contains(&bad.detail.job_execution_id.to_string()));
    assert!(stack.store.runner_record(bad.detail.job_execution_id).await.unwrap().is_none());
    assert!(stack.store.runner_record(empty.detail.job_execution_id).await.unwrap().is_none());
    assert!(stack.pending_of("ws1").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_polling_does_not_write_the_session_on_every_poll() {
    let stack = TestStack::start().await;
    let runner = stack.runner("ws1", &["linux"]).await;
    let key = format!("SESSION#{}", runner.session_id);
    let before: baton_store::runner_items::Session =
        baton_store::from_item(stack.store.get(&key, "SESSION").await.unwrap().unwrap()).unwrap();
    for _ in 0..5 {
        assert!(stack.claim(&runner.session_token).await.is_none());
    }
    let after: baton_store::runner_items::Session =
        baton_store::from_item(stack.store.get(&key, "SESSION").await.unwrap().unwrap()).unwrap();
    assert_eq!(before.last_seen_at, after.last_seen_at, "last_seen_at is written at most once every 10 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_label_set_without_pending_work_leaves_the_registry_and_comes_back_with_new_work() {
    let stack = TestStack::start().await;
    let session = stack.runner("ws1", &["linux", "arm64"]).await.session_token;
    let first = stack.queue_job("ws1", &["linux", "arm64"], Utc::now()).await;
    assert_eq!(stack.count_items("labelset").await, 1);
    let claimed = stack.claim(&session).await.expect("the job");
    assert_eq!(claimed.job_execution_id, first.detail.job_execution_id);
    // While its job runs the set stays (it counts the job as running, for
    // provisioners' demand); once it ended, an empty claim (once the
    // instance's cached list is a second old) finds the set's partition
    // empty, its counts zero, and prunes the set.
    assert!(stack.claim(&session).await.is_none(), "nothing left to claim");
    assert_eq!(stack.count_items("labelset").await, 1, "a running job keeps its set");
    let done = stack
        .complete(
            &claimed.lease.token,
            claimed.job_execution_id,
            serde_json::json!({"status": "succeeded", "steps": []}),
        )
        .await;
    assert_eq!(done.status, 200);
    baton_tests::wait_for("the drained set to leave the registry", Duration::from_secs(10), || async {
        assert!(stack.claim(&session).await.is_none(), "nothing left to claim");
        (stack.count_items("labelset").await == 0).then_some(())
    })
    .await;
    let second = stack.queue_job("ws1", &["linux", "arm64"], Utc::now()).await;
    assert_eq!(stack.count_items("labelset").await, 1, "new work registers the set again");
    let claimed = stack.claim(&session).await.expect("the new job");
    assert_eq!(claimed.job_execution_id, second.detail.job_execution_id);
}
