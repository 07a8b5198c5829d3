//! Real workflows, real runner processes, and the local stack failing the way
//! AWS fails (`baton_shared::faults`): transaction conflicts, throttling,
//! responses lost after the write applied, partial `PutEvents` failures,
//! Step Functions answers lost, messages and stream batches delivered twice
//! and out of order. Each scenario must end exactly as it ends without
//! faults, and the histories must show no double claim.

mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_devhost::HostOptions;
use baton_shared::faults::FaultPlan;
use baton_tests::TestStack;
use serde_json::{json, Value};
use support::*;

/// Every kind of fault at once, each at a rate a busy day on AWS can reach.
fn plan(seed: u64) -> String {
    format!(
        "seed={seed};dynamodb:conflict=0.1;dynamodb:throttle=0.05;dynamodb:lost=0.05;\
         events.PutEvents:partial=0.2;events:lost=0.05;states:lost=0.1;\
         trigger.sqs:duplicate=0.15;trigger.sqs:reorder=0.3;trigger.stream:duplicate=0.1"
    )
}

/// The soak's plan: every kind of fault at one `rate`.
fn uniform_plan(seed: u64, rate: f64) -> String {
    format!(
        "seed={seed};dynamodb:conflict={rate};dynamodb:throttle={rate};dynamodb:lost={rate};\
         events.PutEvents:partial={rate};events:lost={rate};states:lost={rate};\
         trigger.sqs:duplicate={rate};trigger.sqs:reorder={rate};trigger.stream:duplicate={rate}"
    )
}

const FAN_OUT: &str = "name: chaos-fan-out
jobs:
  build:
    runs-on: linux
    steps:
      - run: echo build
  test-a:
    needs: build
    runs-on: linux
    steps:
      - run: echo a
  test-b:
    needs: build
    runs-on: linux
    steps:
      - run: exit 3
  test-c:
    needs: build
    runs-on: linux
    steps:
      - run: echo c
  publish:
    needs: [test-a, test-b, test-c]
    runs-on: linux
    steps:
      - run: echo never
  report:
    needs: [test-a, test-b, test-c]
    if: always()
    runs-on: linux
    steps:
      - run: echo report
";

const CHAIN: &str = "name: chaos-chain
jobs:
  one:
    runs-on: linux
    steps:
      - run: echo 1
  two:
    needs: one
    runs-on: linux
    steps:
      - run: echo 2
  three:
    needs: two
    runs-on: linux
    steps:
      - run: echo 3
  four:
    needs: three
    runs-on: linux
    steps:
      - run: echo 4
";

/// What a run ended as: its status and each job's status and reason.
type Outcome = (String, BTreeMap<String, (String, String)>);

fn outcome(view: &Value) -> Outcome {
    let current = view["current_attempt"].as_u64().unwrap_or(1);
    let attempt = view["attempts"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["attempt"].as_u64() == Some(current)))
        .cloned()
        .unwrap_or(Value::Null);
    let jobs = attempt["jobs"]
        .as_array()
        .map(|jobs| {
            jobs.iter()
                .map(|j| {
                    let key = j["key"].as_str().unwrap_or_default().to_string();
                    let status = j["status"].as_str().unwrap_or_default().to_string();
                    let reason = j["status_reason"].as_str().unwrap_or_default().to_string();
                    (key, (status, reason))
                })
                .collect()
        })
        .unwrap_or_default();
    (view["status"].as_str().unwrap_or_default().to_string(), jobs)
}

/// Runs each workflow to its end on `stack` with two runner processes;
/// returns the outcomes in order.
async fn run_all(stack: &TestStack, workflows: &[&str]) -> Vec<Outcome> {
    let ws = workspace();
    // A client of a busy service retries a 503 (it carries Retry-After).
    let token = loop {
        let created =
            stack.post(&format!("/v1/workspaces/{ws}/registration-tokens"), &stack.admin_token, json!({})).await;
        if created.status != 503 {
            assert_eq!(created.status, 201, "{}", created.body);
            break created.body["token"].as_str().expect("a token").to_string();
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let mut runners = [Runner::start(stack, &token, "linux", &[]), Runner::start(stack, &token, "linux", &[])];
    let mut outcomes = Vec::new();
    for (i, yaml) in workflows.iter().enumerate() {
        // A client of a busy service: a 503 (with Retry-After) is retried,
        // the create with an idempotency key so a retry makes no second run.
        let body = json!({"definition": yaml, "idempotency_key": format!("chaos-{i}")});
        let created = loop {
            let created = stack.post(&format!("/v1/workspaces/{ws}/runs"), &stack.admin_token, body.clone()).await;
            if created.status != 503 {
                break created;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
        assert_eq!(created.status, 201, "{}", created.body);
        let run_id = created.body["id"].as_str().expect("a run id").to_string();
        let deadline = Instant::now() + Duration::from_secs(180);
        let view = loop {
            let path = format!("/v1/workspaces/{ws}/runs/{run_id}");
            let view = stack.send(reqwest::Method::GET, &path, &stack.admin_token, None).await;
            if view.status == 503 {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            assert_eq!(view.status, 200, "{}", view.body);
            let finished =
                view.body["status"].as_str().is_some_and(|s| ["succeeded", "failed", "cancelled"].contains(&s));
            if finished {
                break view.body;
            }
            if Instant::now() >= deadline {
                panic!(
                    "run {run_id} did not finish; {}; last view:\n{:#}",
                    diagnose(stack, &view.body).await,
                    view.body
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        outcomes.push(outcome(&view));
    }
    for runner in &mut runners {
        runner.stop().await;
    }
    outcomes
}

/// Where each unfinished execution of `view` is on the runners side: did its
/// queued fact reach the bus, what does its runners' record say.
async fn diagnose(stack: &TestStack, view: &Value) -> String {
    let mut notes = Vec::new();
    let queued = stack.facts("baton.workflows.job_execution.queued");
    for attempt in view["attempts"].as_array().into_iter().flatten() {
        for job in attempt["jobs"].as_array().into_iter().flatten() {
            for execution in job["executions"].as_array().into_iter().flatten() {
                if execution["status"] == "queued" {
                    let id = execution["id"].as_str().unwrap_or_default();
                    let on_bus = queued.iter().filter(|f| f["job_execution_id"] == id).count();
                    let record = match uuid::Uuid::parse_str(id) {
                        Ok(uuid) => format!("{:?}", stack.store.runner_record(uuid).await),
                        Err(_) => "no id".into(),
                    };
                    notes.push(format!(
                        "{} {id}: queued fact seen on the bus {on_bus} times; record {record}",
                        job["key"]
                    ));
                }
            }
        }
    }
    notes.join("; ")
}

/// Each execution was claimed at most once, and under one epoch: the
/// distinct `job.claimed` facts the bus carried (a fact delivered twice has
/// one `event_id`).
fn assert_each_execution_claimed_once(stack: &TestStack) {
    let mut claims: HashMap<String, HashSet<String>> = HashMap::new();
    for fact in stack.facts("baton.runners.job.claimed") {
        let execution = fact["job_execution_id"].as_str().unwrap_or_default().to_string();
        claims.entry(execution).or_default().insert(fact["event_id"].as_str().unwrap_or_default().to_string());
    }
    assert!(!claims.is_empty(), "jobs were claimed");
    for (execution, events) in claims {
        assert_eq!(events.len(), 1, "execution {execution} was claimed {} times", events.len());
    }
}

/// The workflows run on a stack whose functions meet `faults`.
async fn stormy_run(faults: String, workflows: &[&str]) -> (Vec<Outcome>, Arc<FaultPlan>, TestStack) {
    let plan = Arc::new(FaultPlan::parse(&faults).expect("a valid plan").expect("rules"));
    let options = HostOptions { faults: Some(plan.clone()), ..HostOptions::default() };
    let stack = TestStack::start_custom(|_| {}, HashMap::new(), options).await;
    let outcomes = run_all(&stack, workflows).await;
    (outcomes, plan, stack)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflows_end_as_they_do_without_faults_when_aws_fails_the_way_it_does() {
    // `make chaos` sets these to soak many seeds at one rate (docs/faults.md).
    if let Ok(range) = std::env::var("BATON_CHAOS_SEEDS") {
        let (first, last) = range.split_once('-').expect("BATON_CHAOS_SEEDS is first-last");
        let rate = std::env::var("BATON_CHAOS_RATE").map_or(0.1, |r| r.parse().expect("BATON_CHAOS_RATE is a rate"));
        return soak(first.parse().expect("a seed"), last.parse().expect("a seed"), rate).await;
    }
    let workflows = [FAN_OUT, CHAIN];
    // The fault-free run and the stormy ones side by side: each on a
    // stack of its own, so they share nothing but the emulator.
    let calm = async { run_all(&TestStack::start().await, &workflows).await };
    let stormy = |seed: u64| async move {
        let (outcomes, faults, stack) = stormy_run(plan(seed), &workflows).await;
        (seed, outcomes, faults, stack)
    };
    let (calm, first, second) = tokio::join!(calm, stormy(1), stormy(2));
    assert_eq!(calm[0].0, "failed", "the fan-out fails through test-b: {calm:?}");
    assert_eq!(calm[1].0, "succeeded", "{calm:?}");
    for (seed, stormy, faults, stack) in [first, second] {
        assert_eq!(stormy, calm, "seed {seed}: the same ends; faults injected {:?}", faults.injected_by_kind());
        assert_each_execution_claimed_once(&stack);
        let injected = faults.injected_by_kind();
        eprintln!("chaos: seed {seed}: faults injected by kind: {injected:?}");
        assert!(injected.len() >= 5, "seed {seed}: several kinds of fault met the run: {injected:?}");
    }
}

/// `make chaos`: the same scenario over many seeds at one fault rate for
/// every kind, `seeds` (`first-last`) at `rate`. It counts what happened
/// instead of stopping at the first difference, prints the counts, and fails
/// at the end if any run ended otherwise than without faults.
async fn soak(first: u64, last: u64, rate: f64) {
    let workflows = [FAN_OUT, CHAIN];
    let calm = run_all(&TestStack::start().await, &workflows).await;
    let mut injected: BTreeMap<&'static str, u64> = BTreeMap::new();
    let (mut runs, mut violations) = (0, Vec::new());
    let seeds: Vec<u64> = (first..=last).collect();
    // Two stacks at a time: the machine has two cores.
    for pair in seeds.chunks(2) {
        let results = futures::future::join_all(pair.iter().map(|&seed| {
            let workflows = &workflows;
            async move { (seed, stormy_run(uniform_plan(seed, rate), workflows).await) }
        }))
        .await;
        for (seed, (outcomes, plan, stack)) in results {
            runs += outcomes.len();
            for (kind, n) in plan.injected_by_kind() {
                *injected.entry(kind).or_default() += n;
            }
            if outcomes != calm {
                violations.push(format!("seed {seed}: ended {outcomes:?}"));
            }
            let mut claims: HashMap<String, HashSet<String>> = HashMap::new();
            for fact in stack.facts("baton.runners.job.claimed") {
                let execution = fact["job_execution_id"].as_str().unwrap_or_default().to_string();
                claims.entry(execution).or_default().insert(fact["event_id"].as_str().unwrap_or_default().to_string());
            }
            for (execution, events) in claims.iter().filter(|(_, events)| events.len() > 1) {
                violations.push(format!("seed {seed}: execution {execution} claimed {} times", events.len()));
            }
        }
    }
    let redeliveries = injected.get("duplicate").copied().unwrap_or(0);
    eprintln!(
        "chaos soak: seeds {first}-{last} at rate {rate}: {runs} runs, {} seeds, faults injected by kind {injected:?}, \
         redeliveries {redeliveries}, invariant violations {}",
        seeds.len(),
        violations.len()
    );
    assert!(violations.is_empty(), "{violations:#?}");
}
