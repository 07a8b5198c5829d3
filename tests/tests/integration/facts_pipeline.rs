//! The facts pipeline end to end on the emulator: a state change and its fact
//! written in one transaction → table stream → relay → EventBridge bus → rule
//! → SQS queue → subscriber with partial batch failures → DLQ for poison.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_lambda_events::sqs::SqsEvent;
use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use baton_api::facts::{Fact, FactDetail, RunCancelled};
use baton_devhost::sqs::SqsHandler;
use baton_devhost::HostOptions;
use baton_service::facts::subscriber::{consume, HandlerError};
use baton_store::{s, Store, TxOutcome};
use baton_tests::{add_subscriber, wait_for, TestStack};
use uuid::Uuid;

const PROBE: &str = "probe";
const PROBE_MAX_RECEIVES: u32 = 2;

/// A stack with one extra subscriber, "probe", for `run.cancelled` facts,
/// mounted in the dev host like any function.
async fn stack_with_probe(seen: Arc<Mutex<Seen>>) -> TestStack {
    // The store is only known once provisioned; the handler reads it lazily.
    let store: Arc<Mutex<Option<Store>>> = Arc::default();
    let mut options = HostOptions::default();
    options.extra_sqs_functions.insert(PROBE.into(), probe_handler(store.clone(), seen));
    let stack = TestStack::start_custom(
        |plan| add_subscriber(plan, PROBE, vec![RunCancelled::DETAIL_TYPE.to_string()], PROBE_MAX_RECEIVES),
        HashMap::new(),
        options,
    )
    .await;
    *store.lock().unwrap() = Some(stack.store.clone());
    stack
}

/// Writes a run item and its `run.cancelled` fact in one transaction.
async fn cancel_run_with_fact(store: &Store, workspace: &str) -> Fact<RunCancelled> {
    let fact = Fact::new(workspace, chrono::Utc::now(), RunCancelled { run_id: Uuid::now_v7(), attempt: 1 });
    let state = Put::builder()
        .table_name(&store.table)
        .item("pk", s(format!("RUN#{}", fact.detail.run_id)))
        .item("sk", s("RUN"))
        .item("type", s("run"))
        .item("status", s("cancelled"))
        .build()
        .unwrap();
    let outcome = store
        .transact(vec![TransactWriteItem::builder().put(state).build(), store.outbox_put(&fact, 7).unwrap()])
        .await
        .unwrap();
    assert!(matches!(outcome, TxOutcome::Committed));
    fact
}

/// What the probe consumer did: how many times each fact's effect applied,
/// and how many deliveries it saw.
#[derive(Default)]
struct Seen {
    effects: HashMap<Uuid, u32>,
    deliveries: HashMap<Uuid, u32>,
}

/// The probe consumer: rejects facts of workspace "poison"; otherwise applies
/// its effect once per fact, made idempotent by a processed marker written in
/// the same transaction as the effect.
fn probe_handler(store: Arc<Mutex<Option<Store>>>, seen: Arc<Mutex<Seen>>) -> SqsHandler {
    Arc::new(move |event: SqsEvent| {
        let store = store.lock().unwrap().clone();
        let seen = seen.clone();
        Box::pin(async move {
            Ok(consume(event, |delivered| {
                let store = store.clone();
                let seen = seen.clone();
                async move {
                    let store = store.ok_or_else(|| HandlerError::Transient("store not ready".into()))?;
                    let fact = delivered.parse::<RunCancelled>()?;
                    *seen.lock().unwrap().deliveries.entry(fact.header.event_id).or_default() += 1;
                    if fact.header.workspace_id == "poison" {
                        return Err(HandlerError::Permanent("poison".into()));
                    }
                    let marker = store.processed_marker(PROBE, fact.header.event_id, 0)?;
                    match store.transact(vec![marker]).await? {
                        TxOutcome::Committed => {
                            *seen.lock().unwrap().effects.entry(fact.header.event_id).or_default() += 1;
                        }
                        TxOutcome::ConditionFailed { .. } => {} // a redelivery: already applied
                    }
                    Ok(())
                }
            })
            .await)
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fact_written_in_a_transaction_reaches_its_subscriber_once_even_when_delivered_twice() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stack = stack_with_probe(seen.clone()).await;

    let fact = cancel_run_with_fact(&stack.store, "ws-a").await;
    let id = fact.header.event_id;
    wait_for("the fact to reach the probe", Duration::from_secs(30), || async {
        seen.lock().unwrap().effects.get(&id).copied()
    })
    .await;

    // Redeliver: publish the same outbox record again, as a retried stream
    // batch would. The fact keeps its event_id and the effect does not repeat.
    stack.redeliver_event(&id.to_string()).await;
    wait_for("the redelivery to reach the probe", Duration::from_secs(30), || async {
        (seen.lock().unwrap().deliveries.get(&id).copied() >= Some(2)).then_some(())
    })
    .await;
    assert_eq!(seen.lock().unwrap().effects.get(&id), Some(&1), "a duplicate delivery applied its effect again");

    // The detail that arrived is the fact that was written.
    let run_item = stack
        .clients
        .dynamodb()
        .get_item()
        .table_name(&stack.store.table)
        .key("pk", s(format!("RUN#{}", fact.detail.run_id)))
        .key("sk", s("RUN"))
        .send()
        .await
        .unwrap();
    assert!(run_item.item.is_some(), "the state change committed with its fact");
    let event_id = id.to_string();
    stack.wait_fact(RunCancelled::DETAIL_TYPE, Duration::from_secs(30), |d| d["event_id"] == event_id.as_str()).await;
    stack.assert_all_facts_valid();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_fact_lands_in_the_dlq_while_the_facts_behind_it_keep_flowing() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stack = stack_with_probe(seen.clone()).await;

    let poison = cancel_run_with_fact(&stack.store, "poison").await;
    let good = cancel_run_with_fact(&stack.store, "ws-good").await;
    let good_id = good.header.event_id;
    wait_for("the good fact behind the poison one", Duration::from_secs(30), || async {
        seen.lock().unwrap().effects.get(&good_id).copied()
    })
    .await;

    let envelope = stack.wait_dead_letter(PROBE).await;
    assert_eq!(envelope["detail"]["event_id"], poison.header.event_id.to_string());
    let deliveries = seen.lock().unwrap().deliveries.get(&poison.header.event_id).copied();
    assert_eq!(deliveries, Some(PROBE_MAX_RECEIVES), "tried maxReceiveCount times, then dead-lettered");
    assert_eq!(seen.lock().unwrap().effects.get(&poison.header.event_id), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outbox_facts_of_a_time_window_can_be_published_again() {
    // The recovery for a stream batch the relay gave up on: its facts are
    // still in the outbox, and publishing them again is harmless.
    let stack = TestStack::start().await;
    let at = chrono::Utc::now();
    let facts: Vec<Fact<RunCancelled>> =
        (0..3).map(|_| Fact::new("ws1", at, RunCancelled { run_id: Uuid::now_v7(), attempt: 1 })).collect();
    for fact in &facts {
        stack.publish(fact).await;
    }
    let seen =
        |id: Uuid| stack.facts(RunCancelled::DETAIL_TYPE).iter().filter(|d| d["event_id"] == id.to_string()).count();
    wait_for("the facts relayed once", Duration::from_secs(30), || async {
        facts.iter().all(|f| seen(f.header.event_id) >= 1).then_some(())
    })
    .await;
    let window = (at - chrono::Duration::seconds(1), at + chrono::Duration::seconds(1));
    let published = baton_service::facts::relay::republish_outbox(
        &stack.store,
        stack.clients.eventbridge(),
        &stack.provisioned.bus,
        window.0,
        window.1,
    )
    .await
    .expect("published again");
    assert_eq!(published, 3, "exactly the window's facts");
    wait_for("each fact delivered again", Duration::from_secs(30), || async {
        facts.iter().all(|f| seen(f.header.event_id) >= 2).then_some(())
    })
    .await;
}
