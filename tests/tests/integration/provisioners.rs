//! Provisioners (behaviour.md §15, api.md "Provisioners") through the real
//! functions on the dev host against the emulator: settings and isolation,
//! demand from the queue's counts, reservations that never take one job's
//! demand twice nor pass `max_instances` under races, ephemeral tokens,
//! forward-only instance reports, terminate intents and the seed's release
//! rule, with the facts each writes.

use std::sync::Arc;
use std::time::Duration;

use baton_devhost::HostOptions;
use baton_localstack::faults::FaultPlan;
use baton_tests::runners::cancelled_fact;
use baton_tests::{wait_for, TestStack};
use chrono::Utc;
use reqwest::Method;
use serde_json::{json, Value};

async fn demand(stack: &TestStack, token: &str) -> Value {
    stack.get_ok("/v1/provisioners/demand", token).await
}

/// The demand figures of `labels` in a demand answer: (queued, reserved, running, idle).
fn figures(demand: &Value, labels: &[&str]) -> (u64, u64, u64, u64) {
    let set = demand["label_sets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["labels"] == json!(labels))
        .unwrap_or_else(|| panic!("no {labels:?} in {demand}"));
    let n = |k: &str| set[k].as_u64().unwrap();
    (n("queued"), n("reserved"), n("running"), n("idle_sessions"))
}

async fn reserve(stack: &TestStack, token: &str, labels: &[&str], count: u32) -> Vec<Value> {
    let answer = stack.post("/v1/provisioners/reservations", token, json!({"labels": labels, "count": count})).await;
    assert_eq!(answer.status, 201, "{}", answer.body);
    answer.body["reservations"].as_array().unwrap().clone()
}

async fn report(stack: &TestStack, token: &str, events: Value) -> Value {
    let answer = stack.post("/v1/provisioners/instances", token, json!({ "events": events })).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.body
}

fn intent_of(items: &[Value], provider_runner_id: &str) -> Option<String> {
    items
        .iter()
        .find(|i| i["provider_runner_id"] == provider_runner_id)
        .and_then(|i| i["terminate"]["reason"].as_str().map(str::to_string))
}

fn settings(labels: Value, max: u32) -> Value {
    json!({"name": "fleet", "label_sets": labels, "max_instances": max})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_settings_are_400_naming_the_field_and_a_token_reaches_only_its_own_provisioner() {
    let stack = TestStack::start().await;
    let path = "/v1/workspaces/ws1/provisioners";
    for (body, field) in [
        (json!({"name": "f", "label_sets": [], "max_instances": 1}), "label_sets"),
        (json!({"name": "f", "label_sets": [["linux"]], "max_instances": 0}), "max_instances"),
        (json!({"name": "f", "label_sets": [["linux"]], "max_instances": 2, "warm": 3}), "warm"),
        (json!({"name": "f", "label_sets": [["linux"]], "max_instances": 2, "idle_timeout_s": 5}), "idle_timeout_s"),
        (json!({"name": "f", "label_sets": [["bad label"]], "max_instances": 2}), "label_sets[0]"),
    ] {
        let answer = stack.post(path, &stack.admin_token, body.clone()).await;
        assert_eq!(answer.status, 400, "{body}");
        assert!(answer.body["error"]["message"].as_str().unwrap().contains(field), "{}", answer.body);
    }
    assert_eq!(stack.count_items("provisioner").await, 0, "a refused creation writes nothing");

    let (id, token) = stack.create_provisioner("ws1", settings(json!([["linux"]]), 2)).await;
    assert!(token.starts_with("bpt_"));
    let listed = stack.get(path, &stack.admin_token).await;
    assert_eq!(listed.body["items"].as_array().unwrap().len(), 1);
    assert!(listed.body["items"][0].get("token").is_none(), "the token is shown once");
    let stored = format!("{:?}", stack.store.get(&format!("PROV#{id}"), "PROV").await.unwrap());
    assert!(!stored.contains(&token), "only the token's hash is stored");

    // Another provisioner's reservation cannot be reported on.
    let (_, other) = stack.create_provisioner("ws1", settings(json!([["linux"]]), 2)).await;
    stack.queue_job("ws1", &["linux"], Utc::now()).await;
    let theirs = reserve(&stack, &other, &["linux"], 1).await;
    let reservation_id = theirs[0]["id"].as_str().unwrap();
    let answer = stack
        .post(
            "/v1/provisioners/instances",
            &token,
            json!({"events": [{"provider_runner_id": "i-1", "state": "booting", "reservation_id": reservation_id}]}),
        )
        .await;
    assert_eq!(answer.status, 400, "{}", answer.body);
    assert!(answer.body["error"]["message"].as_str().unwrap().contains("events[0].reservation_id"));
    for (events, what) in [
        (json!([{"provider_runner_id": "i-1", "state": "exploded"}]), "unknown state"),
        (
            json!((0..101)
                .map(|i| json!({"provider_runner_id": format!("i-{i}"), "state": "booting"}))
                .collect::<Vec<_>>()),
            "101 events",
        ),
        (json!([{"provider_runner_id": "x".repeat(257), "state": "booting"}]), "oversized id"),
    ] {
        let answer = stack.post("/v1/provisioners/instances", &token, json!({ "events": events })).await;
        assert_eq!(answer.status, 400, "{what}: {}", answer.body);
    }
    for count in [0, 10_000] {
        let answer =
            stack.post("/v1/provisioners/reservations", &token, json!({"labels": ["linux"], "count": count})).await;
        assert_eq!(answer.status, 400, "count {count}");
        assert!(answer.body["error"]["message"].as_str().unwrap().contains("count"));
    }
    let answer = stack.post("/v1/provisioners/reservations", &token, json!({"labels": ["gpu"], "count": 1})).await;
    assert_eq!((answer.status, answer.code()), (400, "invalid-labels"), "not a served set");
    assert_eq!(stack.count_items("instance").await, 0, "a refused report writes nothing");
    assert_eq!(stack.count_items("reservation").await, 1);

    // The operator routes of another workspace do not reveal it.
    let scoped = stack.workspace_token("ws2").await;
    let answer = stack.send(Method::DELETE, &format!("{path}/{id}"), &scoped, None).await;
    assert_eq!(answer.status, 404);
    let answer = stack.send(Method::DELETE, &format!("/v1/workspaces/ws2/provisioners/{id}"), &scoped, None).await;
    assert_eq!(answer.status, 404, "another workspace's provisioner is not found");

    // A removed provisioner's token is refused at once.
    let removed = stack.send(Method::DELETE, &format!("{path}/{id}"), &stack.admin_token, None).await;
    assert_eq!(removed.status, 204);
    let answer = stack.get("/v1/provisioners/demand", &token).await;
    assert_eq!((answer.status, answer.code()), (401, "unauthenticated"));
    let listed = stack.get(path, &stack.admin_token).await;
    assert_eq!(listed.body["items"].as_array().unwrap().len(), 1, "the removed one is no longer listed");
}

/// A create whose answer was lost is sent again with its idempotency key
/// (by a deploy script, by an HTTP client's retry): no second provisioner,
/// whose machines would double the fleet. The token is shown once and only
/// its hash is stored, so the repeat answers a new one and the lost one
/// stops working; other settings under the same key, or a key whose
/// provisioner was removed, are a conflict that changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_repeated_with_its_idempotency_key_makes_one_provisioner_and_answers_a_fresh_token() {
    let stack = TestStack::start().await;
    let path = "/v1/workspaces/ws1/provisioners";
    let mut body = settings(json!([["linux"]]), 3);
    body["idempotency_key"] = json!("fleet-2026-12");
    let first = stack.post(path, &stack.admin_token, body.clone()).await;
    assert_eq!(first.status, 201, "{}", first.body);
    let lost_token = first.body["token"].as_str().unwrap().to_string();
    let again = stack.post(path, &stack.admin_token, body.clone()).await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.body["id"], first.body["id"], "the same provisioner");
    let token = again.body["token"].as_str().unwrap().to_string();
    assert!(token.starts_with("bpt_") && token != lost_token, "a new token");
    assert_eq!(stack.get("/v1/provisioners/demand", &token).await.status, 200);
    let refused = stack.get("/v1/provisioners/demand", &lost_token).await;
    assert_eq!((refused.status, refused.code()), (401, "unauthenticated"), "the lost answer's token stops working");

    // Four concurrent creates with one new key: one provisioner between them.
    body["idempotency_key"] = json!("fleet-race");
    let answers = futures::future::join_all((0..4).map(|_| stack.post(path, &stack.admin_token, body.clone()))).await;
    let mut statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 200, 200, 201], "{answers:?}");
    assert!(answers.iter().all(|a| a.body["id"] == answers[0].body["id"]));
    assert_eq!(stack.get(path, &stack.admin_token).await.body["items"].as_array().unwrap().len(), 2);

    // Other settings under a used key: a conflict, nothing changed.
    let mut other = settings(json!([["linux"]]), 9);
    other["idempotency_key"] = json!("fleet-2026-12");
    let conflict = stack.post(path, &stack.admin_token, other).await;
    assert_eq!((conflict.status, conflict.code()), (409, "idempotency-conflict"), "{}", conflict.body);
    assert_eq!(stack.get("/v1/provisioners/demand", &token).await.status, 200, "the token still works");
    // A key whose provisioner was removed makes nothing again.
    let id = first.body["id"].as_str().unwrap();
    assert_eq!(stack.send(Method::DELETE, &format!("{path}/{id}"), &stack.admin_token, None).await.status, 204);
    body["idempotency_key"] = json!("fleet-2026-12");
    let after = stack.post(path, &stack.admin_token, body.clone()).await;
    assert_eq!((after.status, after.code()), (409, "idempotency-conflict"), "{}", after.body);
    body["idempotency_key"] = json!("");
    assert_eq!(stack.post(path, &stack.admin_token, body).await.status, 400, "an empty key");
    assert_eq!(stack.get(path, &stack.admin_token).await.body["items"].as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demand_counts_the_jobs_a_served_set_covers_and_a_reservation_takes_it_once_for_every_provisioner() {
    let stack = TestStack::start().await;
    for labels in [&["linux"][..], &["linux"], &["linux"], &["gpu", "linux"], &["gpu", "linux"], &["arm"]] {
        stack.queue_job("ws1", labels, Utc::now()).await;
    }
    let (_, a) = stack.create_provisioner("ws1", settings(json!([["linux", "x64"], ["gpu", "linux"]]), 50)).await;
    let (_, b) = stack.create_provisioner("ws1", settings(json!([["linux", "x64"]]), 50)).await;
    let before = demand(&stack, &a).await;
    assert_eq!(figures(&before, &["linux", "x64"]), (3, 0, 0, 0));
    assert_eq!(figures(&before, &["gpu", "linux"]), (5, 0, 0, 0));
    assert!(before["label_sets"][0]["oldest_queued_at"].is_string());

    // Asking for more than the demand gets the demand.
    assert_eq!(reserve(&stack, &a, &["linux", "x64"], 10).await.len(), 3);
    let after = demand(&stack, &a).await;
    assert_eq!(figures(&after, &["linux", "x64"]), (0, 3, 0, 0));
    assert_eq!(figures(&after, &["gpu", "linux"]), (2, 3, 0, 0), "the linux jobs are covered for every set");
    assert_ne!(after["version"], before["version"]);
    // The other provisioner on the same set finds nothing left to reserve.
    assert!(reserve(&stack, &b, &["linux", "x64"], 5).await.is_empty());
    let seen_by_b = demand(&stack, &b).await;
    assert_eq!(figures(&seen_by_b, &["linux", "x64"]), (0, 3, 0, 0));
    assert_eq!(stack.count_items("reservation").await, 3);
    stack.wait_fact("baton.runners.reservation.created", Duration::from_secs(30), |_| true).await;

    // A long poll with the current version waits, and answers at once on a change.
    let version = seen_by_b["version"].as_str().unwrap().to_string();
    let poll = {
        let (http, url, token) =
            (stack.http.clone(), stack.url(&format!("/v1/provisioners/demand?wait_s=20&since={version}")), b.clone());
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            let body: Value = http.get(url).bearer_auth(token).send().await.unwrap().json().await.unwrap();
            (started.elapsed(), body)
        })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!poll.is_finished(), "an unchanged demand keeps the poll waiting");
    stack.queue_job("ws1", &["linux"], Utc::now()).await;
    let (waited, body) = poll.await.unwrap();
    assert!(waited < Duration::from_secs(15), "answered on the change, not at wait_s ({waited:?})");
    assert_eq!(figures(&body, &["linux", "x64"]), (1, 3, 0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reserves_never_take_a_job_twice_nor_pass_max_instances() {
    let stack = TestStack::start().await;
    for _ in 0..6 {
        stack.queue_job("ws1", &["linux"], Utc::now()).await;
    }
    let (_, a) = stack.create_provisioner("ws1", settings(json!([["linux"]]), 100)).await;
    let (_, b) = stack.create_provisioner("ws1", settings(json!([["linux"]]), 100)).await;
    let calls = (0..8).map(|i| {
        let token = if i % 2 == 0 { a.clone() } else { b.clone() };
        let stack = &stack;
        async move { reserve(stack, &token, &["linux"], 3).await.len() }
    });
    let made: usize = futures::future::join_all(calls).await.into_iter().sum();
    assert_eq!(made, 6, "eight reserves of three over six jobs reserve six");
    assert_eq!(stack.count_items("reservation").await, 6);

    for _ in 0..20 {
        stack.queue_job("ws2", &["linux"], Utc::now()).await;
    }
    let (id, capped) = stack.create_provisioner("ws2", settings(json!([["linux"]]), 4)).await;
    let calls = (0..8).map(|_| reserve(&stack, &capped, &["linux"], 1));
    let made: usize = futures::future::join_all(calls).await.into_iter().map(|r| r.len()).sum();
    assert_eq!(made, 4, "max_instances holds under concurrent reserves");
    let listed = stack.get("/v1/workspaces/ws2/provisioners", &stack.admin_token).await;
    let summary = listed.body["items"].as_array().unwrap().iter().find(|p| p["id"] == id.as_str()).unwrap().clone();
    assert_eq!(summary["reserved_instances"], 4);
}

/// A reserve over many job sets (tool labels and matrices make sets of one
/// job common) takes them all, in as many transactions as DynamoDB's 100
/// items each allow: 35 reservations over 35 sets were 108 items, refused on
/// every try, and those jobs never got a machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reserve_over_sixty_job_sets_takes_them_all_within_the_transaction_limit() {
    let stack = TestStack::start().await;
    // In canonical order, as the demand lists it.
    let mut served: Vec<String> =
        std::iter::once("linux".to_string()).chain((0..19).map(|i| format!("l{i:02}"))).collect();
    served.sort();
    let pairs = (0..19).flat_map(|a| (a + 1..19).map(move |b| (a, b))).take(60);
    for (a, b) in pairs {
        stack.queue_job("ws1", &["linux", &format!("l{a:02}"), &format!("l{b:02}")], Utc::now()).await;
    }
    let (_, token) = stack.create_provisioner("ws1", settings(json!([served]), 100)).await;
    let served: Vec<&str> = served.iter().map(String::as_str).collect();
    assert_eq!(figures(&demand(&stack, &token).await, &served).0, 60, "sixty jobs queued over sixty sets");
    let made = reserve(&stack, &token, &served, 60).await;
    assert_eq!(made.len(), 60, "every job got its reservation");
    assert_eq!(stack.count_items("reservation").await, 60);
    let (queued, reserved, _, _) = figures(&demand(&stack, &token).await, &served);
    assert_eq!((queued, reserved), (0, 60), "no demand left uncovered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ephemeral_instance_registers_once_runs_one_job_is_exhausted_and_releases_its_reservation() {
    let stack = TestStack::start().await;
    stack.queue_job("ws1", &["linux"], Utc::now()).await;
    let (id, token) = stack.create_provisioner("ws1", settings(json!([["linux", "x64"]]), 5)).await;
    let reserved = reserve(&stack, &token, &["linux", "x64"], 1).await;
    let reservation_id = reserved[0]["id"].as_str().unwrap().to_string();
    let registration = reserved[0]["registration_token"].as_str().unwrap().to_string();
    let answer = report(
        &stack,
        &token,
        json!([{"provider_runner_id": "i-1", "state": "requested", "reservation_id": reservation_id},
               {"provider_runner_id": "i-1", "state": "running", "reservation_id": reservation_id},
               {"provider_runner_id": "i-1", "state": "booting"}]),
    )
    .await;
    assert_eq!(answer["accepted"], 2, "a late `booting` after `running` is no move");

    // The token binds the labels and one claim; it makes one session.
    let session = stack.register(&registration, &["anything"]).await;
    assert_eq!(session.labels, vec!["linux".to_string(), "x64".into()]);
    assert_eq!(session.max_claims, Some(1));
    let again = stack.post("/v1/runners/register", &registration, json!({"labels": ["linux"]})).await;
    assert_eq!(again.status, 409, "single use");
    // Registered, not yet claimed: the reservation still holds the demand.
    assert_eq!(figures(&demand(&stack, &token).await, &["linux", "x64"]), (0, 1, 0, 1));

    let job = stack.claim(&session.session_token).await.expect("the reserved job");
    assert_eq!(
        figures(&demand(&stack, &token).await, &["linux", "x64"]),
        (0, 0, 1, 0),
        "the claim used the reservation"
    );
    assert_eq!(intent_of(&stack.instances(&token).await, "i-1"), None, "busy: no intent");

    let done =
        stack.complete(&job.lease.token, job.job_execution_id, json!({"status": "succeeded", "steps": []})).await;
    assert_eq!(done.status, 200);
    // The complete decided it: the ephemeral machine is exhausted.
    let listed = stack.get("/v1/provisioners/instances?intent=terminate", &token).await;
    let items = listed.body["items"].as_array().unwrap();
    assert_eq!(intent_of(items, "i-1").as_deref(), Some("exhausted"), "{}", listed.body);
    assert_eq!(items[0]["runner_session_id"], session.session_id.to_string());
    assert_eq!(figures(&demand(&stack, &token).await, &["linux", "x64"]), (0, 0, 0, 0));

    let answer = report(&stack, &token, json!([{"provider_runner_id": "i-1", "state": "terminated"}])).await;
    assert_eq!(answer["reservations_released"], 1);
    assert_eq!(answer["terminate_intents_honored"], json!([{"provider_runner_id": "i-1", "reason": "exhausted"}]));
    let repeat = report(&stack, &token, json!([{"provider_runner_id": "i-1", "state": "terminated"}])).await;
    assert_eq!((repeat["accepted"].clone(), repeat["reservations_released"].clone()), (json!(0), json!(0)));
    let listed = stack.get("/v1/workspaces/ws1/provisioners", &stack.admin_token).await;
    assert_eq!(listed.body["items"][0]["reserved_instances"], 0, "the slot came back ({id})");

    for fact in [
        "baton.runners.reservation.created",
        "baton.runners.instance.terminate_requested",
        "baton.runners.reservation.released",
    ] {
        let found = stack.wait_fact(fact, Duration::from_secs(30), |f| f["provisioner_id"] == id.as_str()).await;
        assert!(!found.to_string().contains("brt_"), "no token in a fact");
    }
    stack.assert_all_facts_valid();
}

/// A fleet pass decides on what it read; a claim can land between its read
/// and its write. An `idle` intent decided on a read that a claim overtook
/// must not be written (the machine would be stopped under the job it just
/// claimed, which would end `runner_lost`), and once an intent is written
/// the machine's runner claims nothing more: the job waits for another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_told_to_go_takes_no_job_and_an_intent_a_claim_overtook_is_not_written() {
    let stack = TestStack::start().await;
    stack.queue_job("ws1", &["linux"], Utc::now()).await;
    let body = json!({"name": "f", "label_sets": [["linux"]], "max_instances": 5,
                      "jobs_per_instance": 3, "idle_timeout_s": 10});
    let (id, token) = stack.create_provisioner("ws1", body).await;
    let provisioner_id: uuid::Uuid = id.parse().unwrap();
    let reserved = reserve(&stack, &token, &["linux"], 1).await;
    let r = &reserved[0];
    report(&stack, &token, json!([{"provider_runner_id": "i-1", "state": "running", "reservation_id": r["id"]}])).await;
    let session = stack.register(r["registration_token"].as_str().unwrap(), &["linux"]).await;
    // Its demand went to another machine: nothing queued it could take.
    let other = stack.register(&stack.registration_token("ws1", json!({})).await, &["linux"]).await;
    let first = stack.claim(&other.session_token).await.expect("the queued job");
    stack.complete(&first.lease.token, first.job_execution_id, json!({"status": "succeeded", "steps": []})).await;

    // A pass reads the fleet: i-1 registered, no lease, nothing it could
    // take. Then a job is queued and i-1 claims it, before the pass writes
    // what it decided for a moment past the idle timeout.
    let later = Utc::now() + chrono::Duration::seconds(11);
    let read = stack.store.fleet(provisioner_id).await.unwrap().expect("the fleet");
    assert_eq!(read.decide_intents(later).len(), 1, "as read, i-1 is idle past its timeout");
    stack.queue_job("ws1", &["linux"], Utc::now()).await;
    let job = stack.claim(&session.session_token).await.expect("i-1 takes the new job");
    stack.store.write_fleet_decisions(read, later).await.unwrap();
    assert_eq!(intent_of(&stack.instances(&token).await, "i-1"), None, "the claim overtook the idle read");
    let beat = stack.heartbeat(&job.lease.token, job.job_execution_id).await;
    assert_eq!(beat.status, 200, "i-1 keeps its lease: {}", beat.body);
    stack.complete(&job.lease.token, job.job_execution_id, json!({"status": "succeeded", "steps": []})).await;

    // Idle again, and past its timeout this time: the intent is written. A
    // job queued after it goes to another machine, not to the one told to go.
    let read = stack.store.fleet(provisioner_id).await.unwrap().expect("the fleet");
    stack.store.write_fleet_decisions(read, Utc::now() + chrono::Duration::seconds(11)).await.unwrap();
    assert_eq!(intent_of(&stack.instances(&token).await, "i-1").as_deref(), Some("idle"));
    stack.queue_job("ws1", &["linux"], Utc::now()).await;
    let refused = stack.post("/v1/runners/claim", &session.session_token, json!({})).await;
    assert_eq!((refused.status, refused.code()), (409, "session-exhausted"), "{}", refused.body);
    assert!(stack.claim(&other.session_token).await.is_some(), "the job waited for another machine");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_lease_never_blocks_the_release_a_live_one_does() {
    let stack = TestStack::start().await;
    for _ in 0..3 {
        stack.queue_job("ws1", &["linux"], Utc::now()).await;
    }
    let body = json!({"name": "f", "label_sets": [["linux"]], "max_instances": 5, "jobs_per_instance": 2});
    let (_, token) = stack.create_provisioner("ws1", body).await;
    let reserved = reserve(&stack, &token, &["linux"], 2).await;
    let mut machines = Vec::new();
    for (i, r) in reserved.iter().enumerate() {
        let provider = format!("i-{i}");
        report(
            &stack,
            &token,
            json!([{"provider_runner_id": provider, "state": "running", "reservation_id": r["id"]}]),
        )
        .await;
        let session = stack.register(r["registration_token"].as_str().unwrap(), &["linux"]).await;
        machines.push((provider, session));
    }
    // Machine 0 holds two leases: one cancelled, one live.
    let (first, second) = (&machines[0], &machines[1]);
    let cancelled_job = stack.claim(&first.1.session_token).await.unwrap();
    let live_job = stack.claim(&first.1.session_token).await.unwrap();
    stack.publish(&cancelled_fact(&cancelled_job)).await;
    let items = wait_for("the job-cancelled intent", Duration::from_secs(30), || async {
        let items = stack.instances(&token).await;
        intent_of(&items, "i-0").is_some().then_some(items)
    })
    .await;
    assert_eq!(intent_of(&items, "i-0").as_deref(), Some("job-cancelled"));
    let answer = report(&stack, &token, json!([{"provider_runner_id": "i-0", "state": "terminated"}])).await;
    assert_eq!(answer["reservations_released"], 0, "one cancelled and one live lease keep the reservation");
    assert_eq!(answer["terminate_intents_honored"][0]["reason"], "job-cancelled");
    // Its live lease ends: the release converges from the complete.
    stack.complete(&live_job.lease.token, live_job.job_execution_id, json!({"status": "succeeded", "steps": []})).await;
    wait_for("the release after the last live lease", Duration::from_secs(10), || async {
        let released = stack.items_of("reservation").await.iter().filter(|r| r.contains_key("released_at")).count();
        (released == 1).then_some(())
    })
    .await;

    // Machine 1 holds only a cancelled lease: ended, it releases at once.
    let only = stack.claim(&second.1.session_token).await.unwrap();
    stack.publish(&cancelled_fact(&only)).await;
    wait_for("the second job-cancelled intent", Duration::from_secs(30), || async {
        intent_of(&stack.instances(&token).await, "i-1").is_some().then_some(())
    })
    .await;
    let answer = report(&stack, &token, json!([{"provider_runner_id": "i-1", "state": "terminated"}])).await;
    assert_eq!(answer["terminate_intents_honored"], json!([{"provider_runner_id": "i-1", "reason": "job-cancelled"}]));
    // Only a cancelled lease: released. By this report, or by the cancel's
    // reconciliation converging in the same moment on the report's write
    // (both apply one rule and only one of them writes the release).
    assert!(answer["reservations_released"].as_u64() <= Some(1), "{answer}");
    wait_for("the release of the machine that held only a cancelled lease", Duration::from_secs(10), || async {
        let released = stack.items_of("reservation").await.iter().filter(|r| r.contains_key("released_at")).count();
        (released == 2).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unused_reservation_expires_returning_its_demand_and_its_machine_is_asked_to_go() {
    let stack = TestStack::start().await;
    stack.queue_job("ws1", &["linux"], Utc::now()).await;
    let (_, token) = stack.create_provisioner("ws1", settings(json!([["linux"]]), 5)).await;
    let answer = stack
        .post("/v1/provisioners/reservations", &token, json!({"labels": ["linux"], "count": 1, "expires_in_s": 1}))
        .await;
    let r = answer.body["reservations"][0].clone();
    report(&stack, &token, json!([{"provider_runner_id": "i-9", "state": "booting", "reservation_id": r["id"]}])).await;
    assert_eq!(figures(&demand(&stack, &token).await, &["linux"]), (0, 1, 0, 0));
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let items = stack.get("/v1/provisioners/instances?intent=terminate", &token).await;
    assert_eq!(intent_of(items.body["items"].as_array().unwrap(), "i-9").as_deref(), Some("reservation-expired"));
    assert_eq!(figures(&demand(&stack, &token).await, &["linux"]), (1, 0, 0, 0), "the demand came back");
    let late = stack
        .post("/v1/runners/register", r["registration_token"].as_str().unwrap(), json!({"labels": ["linux"]}))
        .await;
    assert_eq!(late.status, 401, "an expired reservation's token registers nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_that_never_registers_is_terminated_as_an_orphan_after_its_boot_timeout() {
    let stack = TestStack::start().await;
    stack.queue_job("ws1", &["linux"], Utc::now()).await;
    let body = json!({"name": "f", "label_sets": [["linux"]], "max_instances": 5, "boot_timeout_s": 10});
    let (_, token) = stack.create_provisioner("ws1", body).await;
    let r = reserve(&stack, &token, &["linux"], 1).await;
    let reported_at = std::time::Instant::now();
    report(
        &stack,
        &token,
        json!([{"provider_runner_id": "i-orphan", "state": "booting", "reservation_id": r[0]["id"]}]),
    )
    .await;
    assert_eq!(intent_of(&stack.instances(&token).await, "i-orphan"), None, "booting, within its boot timeout");
    let reason = wait_for("the orphan intent", Duration::from_secs(20), || async {
        intent_of(&stack.instances(&token).await, "i-orphan")
    })
    .await;
    assert_eq!(reason, "orphan");
    assert!(reported_at.elapsed() >= Duration::from_secs(10), "not before boot_timeout_s");
    let answer = report(&stack, &token, json!([{"provider_runner_id": "i-orphan", "state": "terminated"}])).await;
    assert_eq!(answer["terminate_intents_honored"], json!([{"provider_runner_id": "i-orphan", "reason": "orphan"}]));
    assert_eq!(answer["reservations_released"], 1);
    assert_eq!(figures(&demand(&stack, &token).await, &["linux"]), (1, 0, 0, 0), "its demand is back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_instance_list_comes_in_pages_by_id_that_together_hold_every_instance_once() {
    let stack = TestStack::start().await;
    let (_, token) = stack.create_provisioner("ws1", settings(json!([["linux"]]), 10)).await;
    let ids = ["i-e", "i-a", "i-d", "i-b", "i-c"];
    let events: Vec<Value> = ids.iter().map(|id| json!({"provider_runner_id": id, "state": "running"})).collect();
    report(&stack, &token, json!(events)).await;
    let mut seen = Vec::new();
    let mut path = "/v1/provisioners/instances?limit=2".to_string();
    let mut pages = 0;
    loop {
        let page = stack.get(&path, &token).await;
        assert_eq!(page.status, 200, "{}", page.body);
        pages += 1;
        let items = page.body["items"].as_array().unwrap();
        assert!(items.len() <= 2, "{}", page.body);
        seen.extend(items.iter().map(|i| i["provider_runner_id"].as_str().unwrap().to_string()));
        match page.body["next_cursor"].as_str() {
            Some(cursor) => path = format!("/v1/provisioners/instances?limit=2&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, ["i-a", "i-b", "i-c", "i-d", "i-e"], "each once, by id");
    // Without a limit, one page holds them all (up to 1,000).
    let all = stack.instances(&token).await;
    assert_eq!(all.len(), 5);
    for bad in ["limit=0", "limit=1001", "limit=x", "cursor="] {
        let answer = stack.get(&format!("/v1/provisioners/instances?{bad}"), &token).await;
        assert_eq!((answer.status, answer.code()), (400, "invalid-request"), "{bad}: {}", answer.body);
    }
}

/// The demand metrics an auto scaling group scales on are published on the
/// schedule for every provisioner-served label set, whether or not anything
/// polls the demand: read from the registry that creating and removing a
/// provisioner keep (with their writes' answers lost and throttled), one
/// datapoint a distinct set a workspace, zeros included; a removed
/// provisioner's set is gone at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demand_metrics_publish_every_served_set_of_every_workspace_without_anyone_polling() {
    let plan = Arc::new(
        FaultPlan::parse("seed=19;dynamodb.TransactWriteItems:lost=0.4;dynamodb.TransactWriteItems:throttle=0.3")
            .expect("a valid plan")
            .expect("rules"),
    );
    let options = HostOptions { faults: Some(plan.clone()), ..HostOptions::default() };
    let stack = TestStack::start_custom(|_| {}, std::collections::HashMap::new(), options).await;
    for (ws, labels) in [("ws1", &["linux"][..]), ("ws1", &["linux"]), ("ws1", &["linux", "x64"]), ("ws2", &["gpu"])] {
        stack.queue_job(ws, labels, Utc::now()).await;
    }
    // Two provisioners on one set (listed in another order), one on a set
    // with nothing queued, one in another workspace, one removed.
    stack.create_provisioner("ws1", settings(json!([["linux", "x64"]]), 5)).await;
    stack.create_provisioner("ws1", settings(json!([["x64", "linux"], ["arm"]]), 5)).await;
    stack.create_provisioner("ws2", settings(json!([["gpu", "linux"]]), 5)).await;
    let (removed, _) = stack.create_provisioner("ws3", settings(json!([["mac"]]), 5)).await;
    let answer = stack
        .send(Method::DELETE, &format!("/v1/workspaces/ws3/provisioners/{removed}"), &stack.admin_token, None)
        .await;
    assert_eq!(answer.status, 204, "{}", answer.body);
    let injected = plan.injected_by_kind();
    assert!(
        injected.get("lost").copied().unwrap_or(0) + injected.get("throttle").copied().unwrap_or(0) > 0,
        "{injected:?}"
    );

    let far = std::time::Instant::now() + Duration::from_secs(60);
    let published = baton_demand_metrics::collect(&stack.context(), far).await.expect("collected");
    assert!(published.failed.is_empty() && published.unreached == 0);
    let mut points: Vec<(String, String, u64, u64)> = published
        .datapoints
        .iter()
        .map(|p| (p.workspace_id.clone(), p.labels.join(","), p.queued, p.running))
        .collect();
    points.sort();
    assert_eq!(
        points,
        vec![
            ("ws1".to_string(), "arm".to_string(), 0, 0),
            ("ws1".into(), "linux,x64".into(), 3, 0),
            ("ws2".into(), "gpu,linux".into(), 1, 0),
        ],
        "one datapoint a served set (not a provisioner); the removed provisioner's set is not published"
    );
    assert_eq!(
        stack.count_items("provisioner-registration").await,
        3,
        "created once each, removed with its provisioner"
    );

    // A claim moves the demand from queued to running (the claim's own
    // faults are another test's).
    plan.pause();
    let session = stack.runner("ws1", &["linux", "x64"]).await;
    assert!(stack.claim(&session.session_token).await.is_some(), "a job to claim");
    let after = baton_demand_metrics::collect(&stack.context(), far).await.expect("collected");
    let linux = after.datapoints.iter().find(|p| p.workspace_id == "ws1" && p.labels == ["linux", "x64"]).unwrap();
    assert_eq!((linux.queued, linux.running), (2, 1));
}

/// An instance report whose update applied while its answer was lost (every
/// resend's too: the report is answered 503) is sent again by the
/// provisioner; the update then finds its state stored and is no move. What
/// the lost try would have done next (tie the reservation to the instance,
/// release it once the instance ended) must still happen: skipping it left
/// the reservation of a registered, ended instance held for ever, its slot
/// gone (the 30 % chaos soak's leak). And a report never sent again still
/// left the instance's state, and the reservation it names, stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_sent_again_after_its_answer_was_lost_still_releases_the_ended_instances_reservation() {
    let plan = Arc::new(FaultPlan::parse("seed=5;dynamodb.UpdateItem:lost=1").expect("a valid plan").expect("rules"));
    plan.pause();
    let options = HostOptions { faults: Some(plan.clone()), ..HostOptions::default() };
    let stack = TestStack::start_custom(|_| {}, std::collections::HashMap::new(), options).await;
    stack.queue_job("ws1", &["linux"], Utc::now()).await;
    stack.queue_job("ws1", &["linux"], Utc::now()).await;
    let (_, token) = stack.create_provisioner("ws1", settings(json!([["linux"]]), 5)).await;
    let reserved = reserve(&stack, &token, &["linux"], 2).await;
    for reservation in &reserved {
        // Registered: the reservation is in use, so it never expires unused.
        stack.register(reservation["registration_token"].as_str().unwrap(), &["linux"]).await;
    }
    let reservation_id = reserved[0]["id"].as_str().unwrap().to_string();

    let ended =
        json!({"events": [{"provider_runner_id": "i-1", "state": "terminated", "reservation_id": reservation_id}]});
    plan.resume();
    let lost = stack.post("/v1/provisioners/instances", &token, ended.clone()).await;
    plan.pause();
    assert_eq!(lost.status, 503, "every resend's answer was lost: {}", lost.body);
    let again = stack.post("/v1/provisioners/instances", &token, ended).await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.body["accepted"], 0, "the state was stored by the first try");
    assert_eq!(again.body["reservations_released"], 1, "{}", again.body);

    // The second instance's report is lost the same way and never sent
    // again (its provisioner went away): the next fleet pass (any read of
    // the instances) finds the ended instance by the reservation it names.
    let other = reserved[1]["id"].as_str().unwrap();
    let ended = json!({"events": [{"provider_runner_id": "i-2", "state": "terminated", "reservation_id": other}]});
    plan.resume();
    let lost = stack.post("/v1/provisioners/instances", &token, ended).await;
    plan.pause();
    assert_eq!(lost.status, 503, "{}", lost.body);
    stack.instances(&token).await;

    let reservations = stack.items_of("reservation").await;
    let held: Vec<_> = reservations.iter().filter(|r| !r.contains_key("released_at")).collect();
    assert!(held.is_empty(), "no reservation held by an ended instance: {held:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_reads_a_fleet_as_its_provisioner_sees_it_and_another_workspace_cannot() {
    let stack = TestStack::start().await;
    for labels in [&["linux"][..], &["linux"], &["gpu"]] {
        stack.queue_job("ws1", labels, Utc::now()).await;
    }
    let (id, token) = stack.create_provisioner("ws1", settings(json!([["linux", "x64"]]), 10)).await;
    let reserved = reserve(&stack, &token, &["linux", "x64"], 1).await;
    report(
        &stack,
        &token,
        json!([{"provider_runner_id": "i-2", "state": "booting", "reservation_id": reserved[0]["id"]},
               {"provider_runner_id": "i-1", "state": "failed"}]),
    )
    .await;

    let fleet = stack.get_ok(&format!("/v1/workspaces/ws1/provisioners/{id}"), &stack.admin_token).await;
    // The same figures the provisioner polls: one linux job queued, one reserved.
    let polled = demand(&stack, &token).await;
    assert_eq!(fleet["label_sets"][0]["labels"], json!(["linux", "x64"]));
    assert_eq!(figures(&fleet, &["linux", "x64"]), figures(&polled, &["linux", "x64"]));
    assert_eq!(figures(&fleet, &["linux", "x64"]), (1, 1, 0, 0));
    assert!(fleet["label_sets"][0]["oldest_queued_at"].is_string());
    assert_eq!(fleet["provisioner"]["id"], json!(id));
    assert_eq!(fleet["provisioner"]["reserved_instances"], 1);
    // Live instances are listed with their reservation; ended ones counted.
    let instances = fleet["instances"].as_array().expect("instances");
    assert_eq!(instances.len(), 1, "{fleet}");
    assert_eq!(
        (instances[0]["provider_runner_id"].as_str(), instances[0]["state"].as_str()),
        (Some("i-2"), Some("booting"))
    );
    assert_eq!(instances[0]["reservation_id"], reserved[0]["id"]);
    assert_eq!(fleet["ended_instances"], 1);

    // Another workspace's operator, a provisioner's token, a made-up id: none sees it.
    let other = stack.workspace_token("ws2").await;
    let path = format!("/v1/workspaces/ws2/provisioners/{id}");
    assert_eq!(stack.get(&path, &other).await.status, 404);
    assert_eq!(stack.get(&format!("/v1/workspaces/ws1/provisioners/{id}"), &token).await.status, 401);
    let unknown = format!("/v1/workspaces/ws1/provisioners/{}", uuid::Uuid::now_v7());
    assert_eq!(stack.get(&unknown, &stack.admin_token).await.status, 404);
    // Once removed, it is gone for its operators too.
    let removed =
        stack.send(Method::DELETE, &format!("/v1/workspaces/ws1/provisioners/{id}"), &stack.admin_token, None).await;
    assert_eq!(removed.status, 204);
    assert_eq!(stack.get(&format!("/v1/workspaces/ws1/provisioners/{id}"), &stack.admin_token).await.status, 404);
}

/// A year of one-job machines: what ended leaves the partition every call
/// reads, so a demand read, a report or an instances page costs what the
/// live fleet costs, not what its past does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_with_a_year_of_ended_machines_reads_only_what_is_alive() {
    let stack = TestStack::start().await;
    let (id, token) = stack.create_provisioner("ws1", settings(json!([["linux"]]), 10)).await;
    let provisioner_id: uuid::Uuid = id.parse().unwrap();
    report(&stack, &token, json!([{"provider_runner_id": "i-live", "state": "running"}])).await;
    const ENDED: usize = 200;
    stack.pile_up_ended_instances("ws1", provisioner_id, ENDED, Utc::now() - chrono::Duration::days(200), false).await;
    let partition = |pk: String| {
        let dynamodb = stack.clients.dynamodb().clone();
        let table = stack.store.table.clone();
        async move {
            let out = dynamodb
                .query()
                .table_name(table)
                .key_condition_expression("pk = :pk")
                .expression_attribute_values(":pk", aws_sdk_dynamodb::types::AttributeValue::S(pk))
                .select(aws_sdk_dynamodb::types::Select::Count)
                .send()
                .await
                .unwrap();
            out.count() as usize
        }
    };
    let live_pk = baton_store::keys::provisioner_pk(provisioner_id);
    assert_eq!(partition(live_pk.clone()).await, 2 + 2 * ENDED, "the history as the partition held it");

    // Each first page's pass moves a bounded share (instances first, then
    // their reservations): the provisioner's polling empties the partition
    // of its past within a few dozen calls.
    let passes = 2 * ENDED / baton_store::provisioners::history::MOVES_PER_PASS;
    let mut calls = 0;
    while partition(live_pk.clone()).await > 2 {
        assert!(calls <= passes + 5, "the past still in the partition after {calls} passes");
        stack.instances(&token).await;
        calls += 1;
    }
    assert_eq!(stack.instances(&token).await.len(), 1, "the list holds the live instance only");
    let fleet = stack.store.fleet(provisioner_id).await.unwrap().expect("the fleet");
    assert_eq!((fleet.instances.len(), fleet.reservations.len()), (1, 0), "a fleet read reads the live fleet");
    let history = baton_store::keys::provisioner_history_pk(provisioner_id);
    assert_eq!(partition(history).await, 2 * ENDED + 1, "every ended item kept in the history, with the count");
    let operator = stack.get_ok(&format!("/v1/workspaces/ws1/provisioners/{id}"), &stack.admin_token).await;
    assert_eq!(operator["ended_instances"], ENDED, "the operator still sees how many ended");
    let live_key = aws_sdk_dynamodb::types::AttributeValue::S(live_pk.clone());
    let moved = stack.items_of("instance").await.into_iter().filter(|i| i.get("pk") != Some(&live_key));
    assert!(
        moved.clone().count() == ENDED && moved.into_iter().all(|i| i.contains_key("ttl")),
        "kept for a while, then expired"
    );

    // A late report about an instance of the past names a reservation in
    // the history: accepted as known, and it brings nothing back.
    let past = stack.items_of("reservation").await.into_iter().next().expect("a past reservation");
    let (past_id, past_instance) = match (&past["id"], &past["provider_runner_id"]) {
        (aws_sdk_dynamodb::types::AttributeValue::S(r), aws_sdk_dynamodb::types::AttributeValue::S(i)) => {
            (r.clone(), i.clone())
        }
        other => panic!("a reservation with its instance: {other:?}"),
    };
    let late = report(
        &stack,
        &token,
        json!([{"provider_runner_id": past_instance, "state": "running", "reservation_id": past_id}]),
    )
    .await;
    assert_eq!(late["accepted"], 0, "{late}");
    assert_eq!(stack.instances(&token).await.len(), 1, "the ended machine stays ended");
    assert_eq!(partition(live_pk).await, 2);
}
