//! Real workflows, real runner processes, and the local stack failing the way
//! AWS fails (`baton_localstack::faults`): transaction conflicts, throttling,
//! responses lost after the write applied, partial `PutEvents` failures,
//! Step Functions answers lost, messages and stream batches delivered
//! twice, out of order and late, invocations abandoned after their first
//! write, index reads a second behind the writes. Each scenario (fan-out with a failing job and `always()`, a chain,
//! cancel mid-run, a `failed` rerun, a runner SIGKILLed mid-job, an elastic
//! fleet, concurrency groups (a run's and a job's), an approval two people
//! give twice, a listening job fed duplicated events by the route and the
//! bus, a matrix decided from an earlier job's output) must end
//! exactly as it ends without faults, and the histories must hold: each
//! execution claimed once under one epoch, every outbox item published,
//! every dead-letter queue empty, and the runners saw only documented
//! answers (a 5xx only as a 503, which they retried).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::*;
use baton_devhost::HostOptions;
use baton_localstack::faults::FaultPlan;
use baton_tests::provisioners::is_live;
use baton_tests::{workspace, TestStack, WAIT};
use serde_json::{json, Value};

/// Every kind of fault at once, each at a rate a busy day on AWS can reach.
fn plan(seed: u64) -> String {
    format!(
        "seed={seed};late_ms=1500;index_lag_ms=1000;dynamodb:conflict=0.1;dynamodb:throttle=0.05;dynamodb:lost=0.05;\
         events.PutEvents:partial=0.2;events:lost=0.05;states:lost=0.1;states.sendMessage:integration-throttled=0.05;\
         trigger.sqs:duplicate=0.15;trigger.sqs:reorder=0.3;trigger.sqs:late=0.1;trigger.sqs:abandon=0.1;\
         trigger.stream:duplicate=0.1;trigger.stream:late=0.05;trigger.stream:abandon=0.1;\
         trigger.http:abandon=0.05;trigger.http:lost=0.05;trigger.http:replay=0.05"
    )
}

/// The soak's plan: every kind of fault at one `rate`.
fn uniform_plan(seed: u64, rate: f64) -> String {
    format!(
        "seed={seed};late_ms=1500;index_lag_ms=1000;dynamodb:conflict={rate};dynamodb:throttle={rate};dynamodb:lost={rate};\
         events.PutEvents:partial={rate};events:lost={rate};states:lost={rate};\
         states.sendMessage:integration-throttled={rate};\
         trigger.sqs:duplicate={rate};trigger.sqs:reorder={rate};trigger.sqs:late={rate};trigger.sqs:abandon={rate};\
         trigger.stream:duplicate={rate};trigger.stream:late={rate};trigger.stream:abandon={rate};\
         trigger.http:abandon={rate};trigger.http:lost={rate};trigger.http:replay={rate}"
    )
}

/// Leases short enough that a SIGKILLed runner's job is lost in seconds,
/// long enough that heartbeats delayed by faults never lose a live one. Past
/// 10 % a heartbeat fails that much more often, so the lease (and the first
/// heartbeat's grace) grow with the rate as the waits do (`patience`), as an
/// operator on a bad network sizes them: at 30 % a heartbeat every 2 s has
/// 60 s to get one through, and a claim 180 s to hand its lease out (20 s
/// at 10 %).
fn timings() -> HashMap<String, String> {
    let scale = patience();
    HashMap::from([
        ("BATON_HEARTBEAT_INTERVAL_S".into(), "2".into()),
        ("BATON_LEASE_DURATION_S".into(), (20 * scale).to_string()),
        // A claim whose answer was lost hands its lease out only once a
        // retry gets through, and the grace runs meanwhile: at 30 % (two
        // tries in three fail) 12 retries in a row failing, 35 s, was seen;
        // at 10 %, with forty siblings loading the dev host, a lost answer
        // reached the runner 5 s after the claim and its retries took 6 s
        // more, past a 10 s grace (seed 7 or 8).
        ("BATON_FIRST_HEARTBEAT_GRACE_S".into(), (20 * scale * scale).to_string()),
        ("BATON_REAPER_PERIOD_S".into(), "2".into()),
    ])
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
    retry: {max: 1, when: [step_failed], exit-codes: [3]}
    steps:
      - run: exit 3
  lint:
    needs: build
    runs-on: linux
    continue-on-error: true
    steps:
      - run: exit 1
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
    needs: [test-a, test-b, test-c, lint]
    if: always()
    runs-on: linux
    steps:
      - run: echo report
";

/// Each job hands a value to the next (outputs, `${{ }}` in env, run and
/// `if:`): a value lost under faults skips or fails a job, which the
/// invariants catch as a different end.
const CHAIN: &str = "name: chaos-chain
jobs:
  one:
    runs-on: linux
    outputs: [n]
    steps:
      - run: echo 1 && echo n=1 >> \"$BATON_OUTPUT\"
  two:
    needs: one
    if: needs.one.outputs.n == '1'
    runs-on: linux
    outputs: [n]
    env:
      N: ${{ needs.one.outputs.n }}
    steps:
      - run: test \"$N\" = 1 && echo n=2 >> \"$BATON_OUTPUT\"
  three:
    needs: two
    runs-on: linux
    priority: 5
    steps:
      - run: test \"${{ needs.two.outputs.n }}\" = 2 && echo 3
  four:
    needs: three
    runs-on: linux
    strategy:
      matrix: {shard: [1, 2, 3]}
      max-parallel: 2
    steps:
      - run: echo 4-${{ matrix.shard }}
";

const CANCEL: &str = "name: chaos-cancel
jobs:
  slow:
    runs-on: linux
    steps:
      - run: sleep 120
  after:
    needs: slow
    runs-on: linux
    steps:
      - run: echo never
  cleanup:
    needs: slow
    if: always()
    runs-on: linux
    steps:
      - run: echo cleanup
";

/// Fails on its first attempt only, so a `failed` rerun succeeds.
const RERUN: &str = "name: chaos-rerun
jobs:
  build:
    runs-on: linux
    steps:
      - run: echo build
  flaky:
    needs: build
    runs-on: linux
    steps:
      - run: test \"$BATON_ATTEMPT\" -ge 2
  ship:
    needs: flaky
    runs-on: linux
    steps:
      - run: echo ship
";

/// Jobs only an elastic fleet serves (label `elastic`): a fan-out and its
/// fan-in, each job on a machine of its own that the local provisioner
/// starts for it and that goes after its job.
const ELASTIC: &str = "name: chaos-elastic
jobs:
  e1:
    runs-on: elastic
    steps:
      - run: echo 1
  e2:
    runs-on: elastic
    steps:
      - run: echo 2
  e3:
    runs-on: elastic
    steps:
      - run: echo 3
  e4:
    runs-on: elastic
    steps:
      - run: echo 4
  done:
    needs: [e1, e2, e3, e4]
    runs-on: elastic
    steps:
      - run: echo done
";

const APPROVED: &str = "name: chaos-approved
jobs:
  build:
    runs-on: linux
    steps:
      - run: echo build
  sign-off:
    needs: build
    approval:
      required: 2
      from: [chaos-approvers]
      inputs:
        channel: {type: choice, options: [stable, beta], default: beta}
  deploy:
    needs: sign-off
    runs-on: linux
    env:
      CHANNEL: ${{ needs.sign-off.outputs.channel }}
    steps:
      - run: test \"$CHANNEL\" = stable
";

const LISTENING: &str = "name: chaos-listening
jobs:
  build:
    runs-on: linux
    steps:
      - run: echo build
  on-event:
    needs: build
    runs-on: linux
    listen: {events: [review]}
    env:
      STATE: ${{ event.payload.state }}
    steps:
      - run: test \"$STATE\" = \"ok-${{ event.ref }}\"
  after:
    needs: on-event
    runs-on: linux
    steps:
      - run: echo after
";

/// Three runs of this definition race into one concurrency group that
/// runs two at a time, and their deploys into a job's group that runs one
/// at a time.
const GROUPED: &str = "name: chaos-grouped
concurrency: {group: chaos-deploy, limit: 2, queue: max}
jobs:
  build:
    runs-on: linux
    steps:
      - run: sleep 1
  deploy:
    needs: build
    runs-on: linux
    concurrency: {group: chaos-deploy-job, queue: max}
    steps:
      - run: sleep 1
";

/// How many runs the grouped scenario creates at once.
const GROUPED_RUNS: usize = 3;

/// A pipeline a forge's pushes start (the Triggered scenario).
const TRIGGERED: &str = "name: chaos-triggered
on:
  push:
    branches: [main]
jobs:
  build:
    runs-on: linux
    steps:
      - run: test -n \"${{ github.sha }}\" && test \"${{ github.ref_name }}\" = main
";

/// How many distinct pushes the Triggered scenario delivers.
const TRIGGERED_DELIVERIES: usize = 3;

/// How many sibling jobs the siblings scenario runs at once.
const SIBLINGS: usize = 40;

/// On how many runners (of `SIBLINGS / WIDE_RUNNERS` jobs each).
const WIDE_RUNNERS: usize = 4;

/// 40 legs of one job that a runner runs all at once and that finish
/// together: each waits at a barrier (a file a leg, up to a minute) so
/// that their 40 completions reach the attempt within about a second, and
/// contend on its one item as their outcomes are adopted. Then a fan-in.
fn siblings(dir: &Path) -> String {
    let legs: Vec<String> = (1..=SIBLINGS).map(|n| n.to_string()).collect();
    let barrier = dir.join("siblings");
    format!(
        "name: chaos-siblings
jobs:
  leg:
    runs-on: wide
    strategy:
      matrix: {{n: [{legs}]}}
    steps:
      - run: |
          mkdir -p {barrier} && touch {barrier}/${{{{ matrix.n }}}}
          for i in $(seq 1 120); do [ $(ls {barrier} | wc -l) -ge {SIBLINGS} ] && break; sleep 0.5; done
  gather:
    needs: leg
    runs-on: wide
    steps:
      - run: echo gathered
",
        legs = legs.join(", "),
        barrier = barrier.display(),
    )
}

/// Cancelled as soon as its jobs are queued, while the runners race to
/// claim them: whether a job was claimed first or not, it ends cancelled
/// (a claimed one is stopped at its next heartbeat), nothing after it
/// runs, and the `always()` job does.
const CANCEL_RACE: &str = "name: chaos-cancel-race
jobs:
  a:
    runs-on: linux
    steps:
      - run: sleep 60
  b:
    runs-on: linux
    steps:
      - run: sleep 60
  c:
    runs-on: linux
    steps:
      - run: sleep 60
  after:
    needs: [a, b, c]
    runs-on: linux
    steps:
      - run: echo never
  cleanup:
    needs: [a, b, c]
    if: always()
    runs-on: linux
    steps:
      - run: echo cleanup
";

/// A matrix `plan`'s output decides when `leg` is due: three legs, the one
/// an `include` marks failing, then an `always()` job after them all. The
/// decision is a compare-and-set of the attempt like any change: lost
/// races and replays decide it again from the same output.
const MATRIX_FROM_OUTPUTS: &str = r#"name: chaos-matrix-from-outputs
jobs:
  plan:
    runs-on: linux
    outputs: {matrix: "${{ steps.p.outputs.matrix }}"}
    steps:
      - id: p
        run: echo 'matrix={"n":[1,2,3],"include":[{"n":2,"fails":true}]}' >> "$GITHUB_OUTPUT"
  leg:
    needs: plan
    runs-on: linux
    strategy: {fail-fast: false, matrix: "${{ fromJSON(needs.plan.outputs.matrix) }}"}
    steps:
      - run: test "${{ matrix.fails }}" != true
  after:
    needs: leg
    if: always()
    runs-on: linux
    steps:
      - run: echo "${{ needs.leg.result }}"
"#;

/// `doomed` runs on a runner of its own, which the scenario SIGKILLs.
fn killed(marker: &Path) -> String {
    format!(
        "name: chaos-killed
jobs:
  doomed:
    runs-on: doomed
    steps:
      - run: echo $$ > {}; sleep 120
  after:
    needs: doomed
    runs-on: linux
    steps:
      - run: echo never
  cleanup:
    needs: doomed
    if: always()
    runs-on: linux
    steps:
      - run: echo cleanup
",
        marker.display()
    )
}

/// What a user does with a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Scenario {
    /// Fan-out and fan-in, a failing job, an `always()` job.
    FanOut,
    Chain,
    /// Cancel while a job runs; an `always()` job still runs.
    CancelMidRun,
    /// A run that failed, rerun with mode `failed`.
    RerunFailed,
    /// The runner of a job is SIGKILLed mid-job: the job is lost.
    RunnerKilled,
    /// Every job on an elastic fleet that starts from zero: the local
    /// provisioner's reserves, reports and intents meet the faults too.
    Elastic,
    /// Runs created at once into one concurrency group: each succeeds, and
    /// no two ever run at once.
    Grouped,
    /// An approval two people give (each twice: a retried click), whose
    /// input the deploy after it checks.
    Approved,
    /// A listening job fed three events (each delivered twice, one through
    /// the bus), then resolved: one execution an event, then its dependant.
    Listening,
    /// 40 sibling jobs completing at once, then their fan-in.
    Siblings,
    /// A cancel racing the claims of the jobs it cancels.
    CancelRacingClaims,
    /// Pushes a forge delivers, each twice at once and once more later (its
    /// redelivery), retried when an answer is lost: one run a delivery.
    Triggered,
    /// A matrix decided from an earlier job's output, one leg failing.
    MatrixFromOutputs,
}

const SCENARIOS: [Scenario; 13] = [
    Scenario::FanOut,
    Scenario::Chain,
    Scenario::CancelMidRun,
    Scenario::RerunFailed,
    Scenario::RunnerKilled,
    Scenario::Elastic,
    Scenario::Grouped,
    Scenario::Approved,
    Scenario::Listening,
    Scenario::Siblings,
    Scenario::CancelRacingClaims,
    Scenario::Triggered,
    Scenario::MatrixFromOutputs,
];

/// The scenarios this process plays: all of them, or those named in
/// `BATON_CHAOS_SCENARIOS` (comma-separated, e.g. `Elastic,Siblings`), to
/// replay one scenario's seeds quickly after a soak found a violation in it.
fn scenarios() -> Vec<Scenario> {
    let Ok(names) = std::env::var("BATON_CHAOS_SCENARIOS") else { return SCENARIOS.to_vec() };
    let wanted: Vec<&str> = names.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
    let chosen: Vec<Scenario> =
        SCENARIOS.iter().copied().filter(|s| wanted.contains(&format!("{s:?}").as_str())).collect();
    assert_eq!(chosen.len(), wanted.len(), "BATON_CHAOS_SCENARIOS names scenarios of {SCENARIOS:?}: {names}");
    chosen
}

/// What a run ended as: its status, its attempts, and each job's status
/// and reason in the current attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    status: String,
    attempts: usize,
    jobs: BTreeMap<String, (String, String)>,
}

fn outcome(view: &Value) -> Outcome {
    let current = view["current_attempt"].as_u64().unwrap_or(1);
    let attempts = view["attempts"].as_array().cloned().unwrap_or_default();
    let attempt = attempts.iter().find(|a| a["attempt"].as_u64() == Some(current)).cloned().unwrap_or(Value::Null);
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
    Outcome { status: view["status"].as_str().unwrap_or_default().to_string(), attempts: attempts.len(), jobs }
}

/// A client of a busy service: a 503 (it carries `Retry-After`), and API
/// Gateway's 502 and 504 (the function failed, or its answer was lost), are
/// sent again after a pause, for up to a minute (`patience` minutes above
/// 10 %); any other answer is returned. Every request the suite sends is safe to repeat.
async fn call(
    stack: &TestStack,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> baton_tests::http::Answer {
    call_as(stack, &stack.admin_token, method, path, body).await
}

/// Puts a `baton.external.job_event` on the stack's bus (retried while
/// the bus refuses it).
async fn put_external_event(stack: &TestStack, detail: Value) -> Result<(), String> {
    let entry = aws_sdk_eventbridge::types::PutEventsRequestEntry::builder()
        .event_bus_name(&stack.provisioned.bus)
        .source("chaos.producer")
        .detail_type("baton.external.job_event")
        .detail(detail.to_string())
        .build();
    for _ in 0..30 {
        match stack.clients.eventbridge().put_events().entries(entry.clone()).send().await {
            Ok(out) if out.failed_entry_count == 0 => return Ok(()),
            _ => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
    Err("the bus refused the event for 30 s".into())
}

/// [`call`] with another operator token.
async fn call_as(
    stack: &TestStack,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> baton_tests::http::Answer {
    // A minute at 10 %, three at 30 %: at 30 % a cancel (seed 6) was
    // answered 503 for a whole minute while its write had been applied and
    // its run went on to end as it should; a client of a service that busy
    // retries longer, as the suite's other waits do.
    let deadline = Instant::now() + wait_for_rate(60);
    loop {
        let answer = stack.send(method.clone(), path, token, body.as_ref().map(Value::to_string)).await;
        if ![502, 503, 504].contains(&answer.status) || Instant::now() >= deadline {
            return answer;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Waits until the run's view satisfies `done`; `Err` once `timeout` passed
/// without the run moving (a job or execution changing status), or twice
/// `patience` times `timeout` in all. A run is slow rather than stuck as
/// long as it moves: it ends later, as the soak allows (at 10 % the elastic
/// run, sharing the dev host with forty siblings, once moved on past 180 s
/// in all).
async fn wait_run(
    stack: &TestStack,
    path: &str,
    timeout: Duration,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Result<Value, String> {
    let mut views = wait_runs(stack, &[path.to_string()], timeout, what, done).await?;
    Ok(views.remove(0))
}

/// As [`wait_run`], for runs that wait on one another (a concurrency
/// group's queue): each must satisfy `done`, a move of any of them is a
/// move of all, and the cap grows with their number, since a run queued behind the others cannot move before
/// they end (at 10 % the last of three grouped runs stood still for three
/// minutes behind the other two, which moved on throughout).
async fn wait_runs(
    stack: &TestStack,
    paths: &[String],
    timeout: Duration,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Result<Vec<Value>, String> {
    let started = Instant::now();
    // A queue of n runs takes up to n times one run's time.
    let cap = started + timeout * 2 * patience() * paths.len() as u32;
    let mut moved = started;
    let mut seen = vec![String::new(); paths.len()];
    let mut views = vec![Value::Null; paths.len()];
    loop {
        for (i, path) in paths.iter().enumerate() {
            if views[i] != Value::Null && done(&views[i]) {
                continue;
            }
            let view = call(stack, reqwest::Method::GET, path, None).await;
            if view.status == 200 {
                let now = progress(&view.body);
                if now != seen[i] {
                    (moved, seen[i]) = (Instant::now(), now);
                }
                views[i] = view.body;
            }
        }
        if views.iter().all(|view| *view != Value::Null && done(view)) {
            return Ok(views);
        }
        let at = Instant::now();
        if at >= cap || at >= moved + timeout {
            let mut stuck = Vec::new();
            for view in views.iter().filter(|view| !done(view)) {
                stuck.push(format!("{}; last view {view}", diagnose(stack, view).await));
            }
            return Err(format!(
                "{what} not within {:?} (the last {:?} without a move; {})",
                at - started,
                at - moved,
                stuck.join("; ")
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Where a run is: its status and each job's and execution's, every attempt.
fn progress(view: &Value) -> String {
    let mut at = vec![view["status"].to_string()];
    for attempt in view["attempts"].as_array().into_iter().flatten() {
        for job in attempt["jobs"].as_array().into_iter().flatten() {
            let executions: Vec<String> =
                job["executions"].as_array().into_iter().flatten().map(|e| e["status"].to_string()).collect();
            at.push(format!("{}:{}:{}:{}", attempt["attempt"], job["key"], job["status"], executions.join(",")));
        }
    }
    at.join(";")
}

/// The run ended and so did every job of its current attempt (a cancelled
/// run is `cancelled` at once, while its `always()` jobs still run).
fn finished(view: &Value) -> bool {
    let terminal = |s: &str| ["succeeded", "failed", "cancelled", "skipped"].contains(&s);
    let current = view["current_attempt"].as_u64().unwrap_or(1);
    let jobs_ended = view["attempts"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["attempt"].as_u64() == Some(current)))
        .and_then(|a| a["jobs"].as_array())
        .is_some_and(|jobs| jobs.iter().all(|j| j["status"].as_str().is_some_and(terminal)));
    view["status"].as_str().is_some_and(terminal) && jobs_ended
}

fn job_status<'a>(view: &'a Value, key: &str) -> &'a Value {
    let current = view["current_attempt"].as_u64().unwrap_or(1);
    view["attempts"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["attempt"].as_u64() == Some(current)))
        .and_then(|a| a["jobs"].as_array())
        .and_then(|jobs| jobs.iter().find(|j| j["key"] == key))
        .map_or(&Value::Null, |j| &j["status"])
}

/// Plays `scenario` in workspace `ws` to its end: creates the run, does
/// what the scenario does to it, waits until it finished.
async fn play(stack: &TestStack, ws: &str, token: &str, scenario: Scenario, dir: &Path) -> Result<Outcome, String> {
    let marker = dir.join(format!("{scenario:?}.pgid"));
    let definition = match scenario {
        Scenario::FanOut => FAN_OUT.to_string(),
        Scenario::Chain => CHAIN.to_string(),
        Scenario::CancelMidRun => CANCEL.to_string(),
        Scenario::RerunFailed => RERUN.to_string(),
        Scenario::RunnerKilled => killed(&marker),
        Scenario::Elastic => ELASTIC.to_string(),
        Scenario::Approved => APPROVED.to_string(),
        Scenario::Listening => LISTENING.to_string(),
        Scenario::Siblings => siblings(dir),
        Scenario::CancelRacingClaims => CANCEL_RACE.to_string(),
        Scenario::MatrixFromOutputs => MATRIX_FROM_OUTPUTS.to_string(),
        // Several runs, not one.
        Scenario::Grouped => return play_grouped(stack, ws).await,
        Scenario::Triggered => return play_triggered(stack, ws).await,
    };
    // The idempotency key makes a create retried after a lost answer the
    // same run.
    let body = json!({ "definition": definition, "idempotency_key": format!("chaos-{scenario:?}") });
    let created = call(stack, reqwest::Method::POST, &format!("/v1/workspaces/{ws}/runs"), Some(body)).await;
    if created.status != 201 && created.status != 200 {
        return Err(format!("create answered {}: {}", created.status, created.body));
    }
    let run_id = created.body["id"].as_str().unwrap_or_default().to_string();
    let path = format!("/v1/workspaces/{ws}/runs/{run_id}");
    let wait = wait_for_rate(180);
    match scenario {
        Scenario::FanOut
        | Scenario::Chain
        | Scenario::Elastic
        | Scenario::Grouped
        | Scenario::Siblings
        | Scenario::Triggered
        | Scenario::MatrixFromOutputs => {}
        Scenario::CancelRacingClaims => {
            // As soon as one job is queued, the runners are claiming.
            let queued = |v: &Value| {
                ["a", "b", "c"].iter().any(|k| ["queued", "running"].map(Value::from).contains(job_status(v, k)))
            };
            wait_run(stack, &path, wait, "a job queued", queued).await?;
            let cancel = call(stack, reqwest::Method::POST, &format!("{path}/cancel"), None).await;
            // 409 run-already-finished: a retry after an applied cancel whose answer was lost.
            if cancel.status != 202 && cancel.status != 409 {
                return Err(format!("cancel answered {}: {}", cancel.status, cancel.body));
            }
        }
        Scenario::Listening => {
            wait_run(stack, &path, wait, "on-event listening", |v| job_status(v, "on-event") == "waiting").await?;
            let events = format!("{path}/jobs/on-event/events");
            let job_id = {
                let view = call(stack, reqwest::Method::GET, &path, None).await;
                view.body["attempts"][0]["jobs"]
                    .as_array()
                    .and_then(|jobs| jobs.iter().find(|j| j["key"] == "on-event"))
                    .and_then(|j| j["id"].as_str())
                    .unwrap_or_default()
                    .to_string()
            };
            let events = events.replace("/jobs/on-event/", &format!("/jobs/{job_id}/"));
            let body = |reference: &str, disposition: &str| {
                json!({"name": "review", "disposition": disposition, "ref": reference,
                       "payload": {"state": format!("ok-{reference}")}})
            };
            // Each twice (a producer's retry), one through the bus; the
            // resolve only once the three ran, so it cannot overtake them.
            for reference in ["e1", "e2"] {
                for _ in 0..2 {
                    let answer = call(stack, reqwest::Method::POST, &events, Some(body(reference, "fire"))).await;
                    if answer.status != 202 && answer.status != 200 {
                        return Err(format!("delivering {reference} answered {}: {}", answer.status, answer.body));
                    }
                }
            }
            let run = run_id.clone();
            for _ in 0..2 {
                put_external_event(
                    stack,
                    json!({"workspace_id": ws, "run_id": run, "job": "on-event", "name": "review",
                    "disposition": "fire", "ref": "e3", "payload": {"state": "ok-e3"}}),
                )
                .await?;
            }
            let three = |v: &Value| {
                let jobs = v["attempts"][0]["jobs"].as_array().cloned().unwrap_or_default();
                let job = jobs.iter().find(|j| j["key"] == "on-event").cloned().unwrap_or(Value::Null);
                let executions = job["executions"].as_array().cloned().unwrap_or_default();
                executions
                    .iter()
                    .filter(|e| ["succeeded", "failed"].contains(&e["status"].as_str().unwrap_or("")))
                    .count()
                    >= 3
            };
            wait_run(stack, &path, wait, "three executions ended", three).await?;
            for _ in 0..2 {
                let answer = call(stack, reqwest::Method::POST, &events, Some(body("done", "resolve"))).await;
                if answer.status != 202 && answer.status != 200 {
                    return Err(format!("resolving answered {}: {}", answer.status, answer.body));
                }
            }
            let view = wait_run(stack, &path, wait, "the run finished", finished).await?;
            let jobs = view["attempts"][0]["jobs"].as_array().cloned().unwrap_or_default();
            let job = jobs.iter().find(|j| j["key"] == "on-event").cloned().unwrap_or(Value::Null);
            let mut refs: Vec<String> = job["executions"]
                .as_array()
                .map(|e| e.iter().map(|e| e["event"]["ref"].as_str().unwrap_or("").to_string()).collect())
                .unwrap_or_default();
            refs.sort();
            if refs != ["e1", "e2", "e3"] {
                return Err(format!("the listening job ran {refs:?}, not each event once"));
            }
        }
        Scenario::Approved => {
            wait_run(stack, &path, wait, "sign-off waiting", |v| job_status(v, "sign-off") == "waiting").await?;
            let job_id = {
                let view = call(stack, reqwest::Method::GET, &path, None).await;
                view.body["attempts"][0]["jobs"]
                    .as_array()
                    .and_then(|jobs| jobs.iter().find(|j| j["key"] == "sign-off"))
                    .and_then(|j| j["id"].as_str())
                    .unwrap_or_default()
                    .to_string()
            };
            for name in ["approver-1", "approver-2"] {
                let approver = baton_domain::tokens::new_operator_token();
                let groups = ["chaos-approvers".to_string()];
                stack
                    .store
                    .put_operator_token_in_groups(&approver, Some(ws), Some(name), &groups)
                    .await
                    .map_err(|e| format!("the approver's token: {e}"))?;
                let body = json!({"decision": "approve", "inputs": {"channel": "stable"}});
                // Twice each: the second is a retried click, which counts
                // once (200), or finds the job approved already (409).
                for _ in 0..2 {
                    let answer = call_as(
                        stack,
                        &approver,
                        reqwest::Method::POST,
                        &format!("{path}/jobs/{job_id}/approval"),
                        Some(body.clone()),
                    )
                    .await;
                    if answer.status != 200 && answer.status != 409 {
                        return Err(format!("the approval by {name} answered {}: {}", answer.status, answer.body));
                    }
                }
            }
        }
        Scenario::CancelMidRun => {
            wait_run(stack, &path, wait, "slow running", |v| job_status(v, "slow") == "running").await?;
            let cancel = call(stack, reqwest::Method::POST, &format!("{path}/cancel"), None).await;
            // 409 run-already-finished: a retry after an applied cancel whose answer was lost.
            if cancel.status != 202 && cancel.status != 409 {
                return Err(format!("cancel answered {}: {}", cancel.status, cancel.body));
            }
        }
        Scenario::RerunFailed => {
            wait_run(stack, &path, wait, "the first attempt finished", finished).await?;
            let rerun =
                call(stack, reqwest::Method::POST, &format!("{path}/rerun"), Some(json!({ "mode": "failed" }))).await;
            // 409 run-not-terminal: a retry after an applied rerun whose answer was lost.
            if rerun.status != 201 && rerun.status != 409 {
                return Err(format!("rerun answered {}: {}", rerun.status, rerun.body));
            }
            wait_run(stack, &path, wait, "the rerun", |v| v["current_attempt"] == 2).await?;
        }
        Scenario::RunnerKilled => {
            let mut doomed = Runner::start(stack, token, "doomed", &[]);
            // Not started in time is a violation of this seed (with its
            // evidence kept), not a panic that loses every seed's.
            let deadline = Instant::now() + wait_for_rate(120);
            let pgid = loop {
                if let Some(pgid) = std::fs::read_to_string(&marker).ok().and_then(|s| s.trim().parse::<i32>().ok()) {
                    break pgid;
                }
                if Instant::now() >= deadline {
                    doomed.signal(libc::SIGKILL);
                    let view = call(stack, reqwest::Method::GET, &path, None).await;
                    return Err(format!(
                        "the doomed step never started within {} s ({}); last view {}",
                        wait_for_rate(120).as_secs(),
                        diagnose(stack, &view.body).await,
                        view.body
                    ));
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            };
            let _group = GroupGuard(pgid);
            doomed.signal(libc::SIGKILL);
            doomed.exited(WAIT).await;
            kill_group(pgid);
        }
    }
    let view = wait_run(stack, &path, wait, "the run finished", finished).await?;
    Ok(outcome(&view))
}

/// [`Scenario::Grouped`]: its runs' common outcome, or why not (one that
/// ended otherwise, or two whose jobs ran at once).
async fn play_grouped(stack: &TestStack, ws: &str) -> Result<Outcome, String> {
    let created = futures::future::join_all((0..GROUPED_RUNS).map(|i| async move {
        let body = json!({ "definition": GROUPED, "idempotency_key": format!("chaos-grouped-{i}") });
        call(stack, reqwest::Method::POST, &format!("/v1/workspaces/{ws}/runs"), Some(body)).await
    }))
    .await;
    let mut paths = Vec::new();
    for answer in created {
        if answer.status != 201 && answer.status != 200 {
            return Err(format!("create answered {}: {}", answer.status, answer.body));
        }
        paths.push(format!("/v1/workspaces/{ws}/runs/{}", answer.body["id"].as_str().unwrap_or_default()));
    }
    let views = wait_runs(stack, &paths, wait_for_rate(180), "the grouped runs finished", finished).await?;
    let mut outcomes = Vec::new();
    // Each run's span (its first queueing to its last finish), and each
    // deploy execution's.
    let mut runs = Vec::new();
    let mut deploys = Vec::new();
    for (view, path) in views.iter().zip(&paths) {
        let jobs = view["attempts"][0]["jobs"].as_array().cloned().unwrap_or_default();
        let mut span: Option<(chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>)> = None;
        for job in &jobs {
            for execution in job["executions"].as_array().cloned().unwrap_or_default() {
                let at = |field: &str| {
                    execution[field].as_str().and_then(|t| t.parse::<chrono::DateTime<chrono::Utc>>().ok())
                };
                if let (Some(queued), Some(finished)) = (at("queued_at"), at("finished_at")) {
                    span = Some(span.map_or((queued, finished), |(a, b)| (a.min(queued), b.max(finished))));
                    if job["key"] == "deploy" {
                        deploys.push((queued, finished, path.clone()));
                    }
                }
            }
        }
        runs.extend(span.map(|(from, to)| (from, to, path.clone())));
        outcomes.push(outcome(view));
    }
    deploys.sort();
    for pair in deploys.windows(2) {
        if pair[1].0 < pair[0].1 {
            return Err(format!("two deploys of one job's concurrency group ran at once: {pair:?}"));
        }
    }
    // A group of two: no instant has three of its runs going.
    runs.sort();
    for three in runs.windows(3) {
        let latest_start = three.iter().map(|r| r.0).max();
        let earliest_end = three.iter().map(|r| r.1).min();
        if latest_start < earliest_end {
            return Err(format!("three runs of a group of two ran at once: {three:?}"));
        }
    }
    if outcomes.windows(2).any(|pair| pair[0] != pair[1]) {
        return Err(format!("the grouped runs ended differently: {outcomes:?}"));
    }
    Ok(outcomes.remove(0))
}

/// A forge's delivery, sent again while its answer is lost (a 502 or 504
/// from the gateway, a 503 from a busy store), as GitHub's redelivery does.
async fn deliver_retried(
    stack: &TestStack,
    hook: &baton_tests::hooks::Hook,
    delivery: &str,
    payload: &Value,
) -> baton_tests::http::Answer {
    let deadline = Instant::now() + wait_for_rate(60);
    loop {
        let answer = stack.github_delivery(hook, "push", delivery, payload).await;
        if ![502, 503, 504].contains(&answer.status) || Instant::now() >= deadline {
            return answer;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Pushes delivered as a forge delivers them under faults: each delivery
/// twice at once and once more after (a redelivery), each copy retried
/// while its answer is lost. Each delivery must start exactly one run, the
/// same one whichever copy answered.
async fn play_triggered(stack: &TestStack, ws: &str) -> Result<Outcome, String> {
    let put = call(
        stack,
        reqwest::Method::PUT,
        &format!("/v1/workspaces/{ws}/pipelines/chaos-triggered"),
        Some(json!({ "definition": TRIGGERED })),
    )
    .await;
    if put.status != 201 && put.status != 200 {
        return Err(format!("the pipeline's put answered {}: {}", put.status, put.body));
    }
    // A hook created twice (a retried create) is two hooks: one is used.
    let created =
        call(stack, reqwest::Method::POST, &format!("/v1/workspaces/{ws}/hooks"), Some(json!({"provider": "github"})))
            .await;
    if created.status != 201 {
        return Err(format!("the hook's create answered {}: {}", created.status, created.body));
    }
    let text = |key: &str| created.body[key].as_str().unwrap_or_default().to_string();
    let hook = baton_tests::hooks::Hook { id: text("id"), url: text("url"), secret: text("secret") };
    let push = baton_tests::hooks::fixture("github/push.json");
    let mut paths = Vec::new();
    for i in 0..TRIGGERED_DELIVERIES {
        let mut payload = push.clone();
        payload["after"] = json!(format!("{:040x}", i + 1));
        let delivery = format!("chaos-delivery-{i}");
        let (first, second) = tokio::join!(
            deliver_retried(stack, &hook, &delivery, &payload),
            deliver_retried(stack, &hook, &delivery, &payload)
        );
        let again = deliver_retried(stack, &hook, &delivery, &payload).await;
        let mut runs = Vec::new();
        for answer in [&first, &second, &again] {
            if answer.status != 202 {
                return Err(format!("delivery {delivery} answered {}: {}", answer.status, answer.body));
            }
            runs.push(answer.body["runs"].clone());
        }
        if runs.windows(2).any(|pair| pair[0] != pair[1]) || runs[0].as_array().map(Vec::len) != Some(1) {
            return Err(format!("delivery {delivery}'s copies answered different runs: {runs:?}"));
        }
        let run_id = runs[0][0]["run_id"].as_str().unwrap_or_default();
        paths.push(format!("/v1/workspaces/{ws}/runs/{run_id}"));
    }
    // The runs are created after the answers: wait for each to exist.
    for path in &paths {
        let deadline = Instant::now() + wait_for_rate(180);
        while call(stack, reqwest::Method::GET, path, None).await.status != 200 {
            if Instant::now() >= deadline {
                return Err(format!("the run {path} an answer named was not created"));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    let views = wait_runs(stack, &paths, wait_for_rate(180), "the triggered runs finished", finished).await?;
    let listed = call(stack, reqwest::Method::GET, &format!("/v1/workspaces/{ws}/runs?limit=100"), None).await;
    // The workspace holds the other scenarios' runs too.
    let items = listed.body["items"].as_array().cloned().unwrap_or_default();
    let count = items.iter().filter(|run| run["pipeline"] == "chaos-triggered").count();
    if count != TRIGGERED_DELIVERIES {
        return Err(format!("{TRIGGERED_DELIVERIES} deliveries started {count} runs"));
    }
    let mut outcomes: Vec<Outcome> = views.iter().map(outcome).collect();
    if outcomes.windows(2).any(|pair| pair[0] != pair[1]) {
        return Err(format!("the triggered runs ended differently: {outcomes:?}"));
    }
    Ok(outcomes.remove(0))
}

/// What one stack's runs ended as, and what its histories show.
struct Played {
    outcomes: BTreeMap<Scenario, Result<Outcome, String>>,
    violations: Vec<String>,
    /// Requests the runners sent again after a transient failure.
    retries: usize,
    /// Where the runners' logs are (and a failing seed's facts go).
    dir: PathBuf,
}

/// Plays every scenario at once on `stack` with two runner processes, then
/// checks the histories.
async fn play_all(stack: &TestStack) -> Played {
    let ws = workspace();
    let token = loop {
        let created =
            call(stack, reqwest::Method::POST, &format!("/v1/workspaces/{ws}/registration-tokens"), Some(json!({})))
                .await;
        assert_eq!(created.status, 201, "{}", created.body);
        if let Some(token) = created.body["token"].as_str() {
            break token.to_string();
        }
    };
    let dir = scratch();
    let logs: Vec<PathBuf> = (0..2).map(|i| dir.join(format!("runner-{i}.log"))).collect();
    let mut runners: Vec<Runner> =
        logs.iter().map(|log| Runner::start_logged(stack, &token, "linux", &["--concurrency", "3"], log)).collect();
    // The siblings' runners: all 40 at once, on four runners (each claims
    // one job at a time, so four fill the slots four times as fast).
    let wide_logs: Vec<PathBuf> = (0..WIDE_RUNNERS).map(|i| dir.join(format!("runner-wide-{i}.log"))).collect();
    let concurrency = (SIBLINGS / WIDE_RUNNERS).to_string();
    for log in &wide_logs {
        runners.push(Runner::start_logged(stack, &token, "wide", &["--concurrency", &concurrency], log));
    }
    let logs: Vec<PathBuf> = logs.into_iter().chain(wide_logs).collect();
    let (provisioner, fleet_token) = elastic_fleet(stack, &ws).await;
    let fleet = LocalProvisioner::start(stack, &fleet_token, &[], Some(&dir.join("provisioner.log")));
    let played = scenarios();
    let elastic_played = played.contains(&Scenario::Elastic);
    let outcomes = futures::future::join_all(played.into_iter().map(|scenario| {
        let (ws, token, dir) = (&ws, &token, &dir);
        async move { (scenario, play(stack, ws, token, scenario, dir).await) }
    }))
    .await
    .into_iter()
    .collect();
    for runner in &mut runners {
        runner.stop().await;
    }
    let mut violations = claimed_more_than_once(stack);
    violations.extend(fleet_at_rest(stack, &provisioner, &fleet_token, elastic_played).await);
    drop(fleet);
    // Facts written last (a run's end) may still be on their way.
    let outbox = stack.outbox().await;
    if outbox.is_empty() {
        violations.push("the outbox holds no fact: nothing to check publishing against".into());
    }
    let published = tokio::time::timeout(Duration::from_secs(60), async {
        while !stack.unpublished(&outbox).is_empty() {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await;
    if published.is_err() {
        violations.push(format!("outbox items never published: {:?}", stack.unpublished(&outbox)));
    }
    let dead = stack.dead_letters().await;
    if !dead.is_empty() {
        violations.push(format!("dead letters: {dead:?}"));
    }
    let (retries, seen) = runner_answers(&logs);
    violations.extend(seen);
    Played { outcomes, violations, retries, dir }
}

/// The elastic fleet of `ws`: a provisioner for the label `elastic`
/// (ephemeral machines, at most 3) created through the API; its id and token.
async fn elastic_fleet(stack: &TestStack, ws: &str) -> (String, String) {
    let body = json!({"name": "chaos", "label_sets": [["elastic"]], "max_instances": 3, "jobs_per_instance": 1});
    loop {
        let created =
            call(stack, reqwest::Method::POST, &format!("/v1/workspaces/{ws}/provisioners"), Some(body.clone())).await;
        assert_eq!(created.status, 201, "{}", created.body);
        if let (Some(id), Some(token)) = (created.body["id"].as_str(), created.body["token"].as_str()) {
            return (id.to_string(), token.to_string());
        }
    }
}

/// Once the runs ended, the elastic fleet comes to rest within 90 s (a
/// reservation whose answer was lost comes back when it expires, 60 s):
/// every instance ended (none left running past its intent, none left
/// at all: every machine was ephemeral) and every reservation released
/// (none leaked), its slots all back. The fleet must have started an
/// instance only when the `Elastic` scenario played (a replay of other
/// scenarios through `BATON_CHAOS_SCENARIOS` gives it no demand).
async fn fleet_at_rest(stack: &TestStack, provisioner: &str, token: &str, elastic_played: bool) -> Vec<String> {
    let deadline = Instant::now() + wait_for_rate(90);
    loop {
        let mut found = Vec::new();
        // The list itself may be answered 5xx under faults: a client asks
        // again (for up to `patience` minutes), and so does the wait.
        let listed = call_as(stack, token, reqwest::Method::GET, "/v1/provisioners/instances", None).await;
        if listed.status != 200 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        }
        let instances = listed.body["items"].as_array().cloned().unwrap_or_default();
        if listed.status != 200 {
            found.push(format!("instances answered {}", listed.status));
        }
        let live: Vec<&Value> = instances.iter().filter(|i| is_live(i)).collect();
        if !live.is_empty() {
            found.push(format!("instances still live: {live:?}"));
        }
        if elastic_played && instances.is_empty() && listed.status == 200 {
            found.push("the elastic fleet never started an instance".into());
        }
        let reservations = stack.items_of("reservation").await;
        let mine: Vec<_> = reservations
            .iter()
            .filter(|r| r.get("provisioner_id").and_then(|v| v.as_s().ok()).is_some_and(|p| p == provisioner))
            .collect();
        let leaked: Vec<_> = mine.iter().filter(|r| !r.contains_key("released_at")).collect();
        if !leaked.is_empty() {
            // What the store holds of each, and of its instance: the release
            // waits on the instance's end and on its session's leases.
            let instances = stack.items_of("instance").await;
            let field = |item: &baton_store::Item, name: &str| {
                item.get(name).map(|v| format!("{v:?}")).unwrap_or_else(|| "-".into())
            };
            let explained: Vec<String> = leaked
                .iter()
                .map(|r| {
                    let instance =
                        instances.iter().find(|i| i.get("provider_runner_id") == r.get("provider_runner_id"));
                    format!(
                        "reservation {} (instance {}, session {}, expires {}): instance state {}, terminate {}",
                        field(r, "sk"),
                        field(r, "provider_runner_id"),
                        field(r, "session_id"),
                        field(r, "expires_at"),
                        instance.map_or("-".into(), |i| field(i, "state")),
                        instance.map_or("-".into(), |i| field(i, "terminate_reason")),
                    )
                })
                .collect();
            found.push(format!("{} of {} reservations never released: {explained:?}", leaked.len(), mine.len()));
        }
        if found.is_empty() || Instant::now() >= deadline {
            return found.into_iter().map(|f| format!("elastic fleet: {f}")).collect();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Each execution was claimed at most once, under one epoch: the distinct
/// `job.claimed` facts the bus carried (a fact delivered twice has one
/// `event_id`).
fn claimed_more_than_once(stack: &TestStack) -> Vec<String> {
    let mut claims: HashMap<String, HashSet<(String, u64)>> = HashMap::new();
    for fact in stack.facts("baton.runners.job.claimed") {
        let execution = fact["job_execution_id"].as_str().unwrap_or_default().to_string();
        let event = fact["event_id"].as_str().unwrap_or_default().to_string();
        claims.entry(execution).or_default().insert((event, fact["epoch"].as_u64().unwrap_or(0)));
    }
    let mut violations: Vec<String> = claims
        .iter()
        .filter(|(_, claims)| claims.len() > 1)
        .map(|(execution, claims)| format!("execution {execution} claimed {} times: {claims:?}", claims.len()))
        .collect();
    if claims.is_empty() {
        violations.push("no job was claimed".into());
    }
    violations
}

/// What the runners' logs show: how many requests they retried, and every
/// answer that is not documented (an error logged, a 5xx other than Baton's
/// 503 or API Gateway's 502/504, a request refused, a lease lost).
fn runner_answers(logs: &[PathBuf]) -> (usize, Vec<String>) {
    let (mut retries, mut violations) = (0, Vec::new());
    for log in logs {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        for line in text.lines() {
            let Ok(entry) = serde_json::from_str::<Value>(line) else { continue };
            let fields = &entry["fields"];
            let message = fields["message"].as_str().unwrap_or_default();
            let error = fields["error"].as_str().unwrap_or_default();
            if message.ends_with("retrying") || message.ends_with("failed") {
                retries += 1;
            }
            // Baton's 503, or API Gateway's own 502 and 504 (injected), or
            // its 503 in an outage.
            let documented_5xx =
                ["HTTP 503 unavailable", "Internal server error", "Endpoint request timed out", "Service Unavailable"]
                    .iter()
                    .any(|answer| error.contains(answer));
            let undocumented_5xx = error.contains("HTTP 5") && !documented_5xx;
            let wrong = entry["level"] == "ERROR"
                || undocumented_5xx
                || error.contains("request refused")
                || message.starts_with("lease lost");
            if wrong {
                violations.push(format!("{}: {line}", log.display()));
            }
        }
    }
    (retries, violations)
}

/// Where each unfinished execution of `view` is on the runners side: did its
/// queued fact reach the bus, what does its runners' record say.
async fn diagnose(stack: &TestStack, view: &Value) -> String {
    let mut notes = Vec::new();
    let queued = stack.facts("baton.workflows.job_execution.queued");
    for attempt in view["attempts"].as_array().into_iter().flatten() {
        for job in attempt["jobs"].as_array().into_iter().flatten() {
            for execution in job["executions"].as_array().into_iter().flatten() {
                if execution["status"] == "queued" || execution["status"] == "running" {
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
    // The orchestration's side: the attempt's parked wait and its
    // executions' statuses (a run that stands still stands on one of them).
    let run_id = view["id"].as_str().and_then(|id| uuid::Uuid::parse_str(id).ok());
    for attempt in view["attempts"].as_array().into_iter().flatten() {
        let (Some(run_id), Some(number)) = (run_id, attempt["attempt"].as_u64()) else { continue };
        let number = number as u32;
        if let Ok(Some(item)) = stack.store.get_attempt(run_id, number).await {
            notes.push(format!(
                "attempt {number}: version {} progress {} wait_progress {:?} wait_token {} wait_until {:?}",
                item.version,
                item.progress,
                item.wait_progress,
                if item.wait_token.is_some() { "parked" } else { "none" },
                item.wait_until
            ));
        }
        let Some(machine) = stack.host.config.run_state_machine_arn.as_deref() else { continue };
        let reference =
            baton_service::usecases::orchestration::AttemptRef { workspace_id: String::new(), run_id, attempt: number };
        for generation in 0..3 {
            let arn =
                baton_service::usecases::orchestration::execution_arn(machine, &reference.generation_name(generation));
            let Ok(described) = stack.clients.sfn().describe_execution().execution_arn(&arn).send().await else {
                break;
            };
            let history = stack
                .clients
                .sfn()
                .get_execution_history()
                .execution_arn(&arn)
                .reverse_order(true)
                .max_results(6)
                .send()
                .await;
            let last: Vec<String> =
                history.map(|h| h.events().iter().map(|e| format!("{:?}", e.r#type())).collect()).unwrap_or_default();
            notes.push(format!("execution g{generation}: {:?}, last events {last:?}", described.status()));
        }
    }
    notes.join("; ")
}

/// How much more the suite allows at the soak's fault rate than at 10 %
/// (1 up to it, 3 at 30 %): each request fails that much more often, so
/// everything takes longer, and a message takes more receives to get
/// through. Its waits and the queues' receive counts scale by it; nothing
/// the runs must end as does.
fn patience() -> u32 {
    let rate: f64 = std::env::var("BATON_CHAOS_RATE").ok().and_then(|r| r.parse().ok()).unwrap_or(0.1);
    ((rate / 0.1).ceil() as u32).max(1)
}

/// A scenario's wait for something to happen, at this rate.
fn wait_for_rate(seconds: u64) -> Duration {
    Duration::from_secs(seconds * u64::from(patience()))
}

/// A stack with the chaos suite's timings, whose functions meet `faults`.
async fn stack(faults: Option<String>) -> (TestStack, Option<Arc<FaultPlan>>) {
    let plan = faults.map(|f| Arc::new(FaultPlan::parse(&f).expect("a valid plan").expect("rules")));
    let options = HostOptions { faults: plan.clone(), ..HostOptions::default() };
    let scale = patience();
    let receives = move |plan: &mut baton_localstack::provision::Plan| {
        for queue in &mut plan.queues {
            queue.max_receive_count *= scale;
        }
    };
    (TestStack::start_custom(receives, timings(), options).await, plan)
}

/// The calm run's outcomes: every scenario played without faults.
async fn calm() -> BTreeMap<Scenario, Outcome> {
    let (stack, _) = stack(None).await;
    let played = play_all(&stack).await;
    assert!(played.violations.is_empty(), "without faults: {:#?}", played.violations);
    played
        .outcomes
        .into_iter()
        .map(|(scenario, outcome)| (scenario, outcome.unwrap_or_else(|e| panic!("{scenario:?} without faults: {e}"))))
        .collect()
}

/// Where the functions of this test process log (their JSON lines, as on
/// CloudWatch): a violation names it; a process without one removes it.
static FUNCTION_LOG: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Sends the functions' logs of this process to [`FUNCTION_LOG`] (once,
/// before the first stack, which would send them to stdout).
fn log_functions() {
    FUNCTION_LOG.get_or_init(|| {
        let path = std::env::temp_dir().join(format!("baton-chaos-functions-{}.log", uuid::Uuid::now_v7().simple()));
        match std::fs::File::create(&path) {
            Ok(file) => baton_telemetry::logs::init_writing_to(std::sync::Mutex::new(file)),
            Err(err) => eprintln!("chaos: the functions' logs go nowhere: {err}"),
        }
        path
    });
}

/// Removes the functions' logs of a process that found nothing to read them
/// for, unless `BATON_CHAOS_KEEP_LOGS` asks to keep them (to read a slow run).
fn drop_function_log() {
    if std::env::var_os("BATON_CHAOS_KEEP_LOGS").is_some() {
        return;
    }
    if let Some(log) = FUNCTION_LOG.get() {
        let _ = std::fs::remove_file(log);
    }
}

/// One seed's run of every scenario with faults, measured against `calm`:
/// the violations, the faults injected by kind, the runners' retries.
async fn stormy(
    seed: u64,
    faults: String,
    calm: &BTreeMap<Scenario, Outcome>,
) -> (Vec<String>, BTreeMap<&'static str, u64>, usize) {
    let (stack, plan) = stack(Some(faults)).await;
    let played = play_all(&stack).await;
    let mut violations: Vec<String> = played.violations.iter().map(|v| format!("seed {seed}: {v}")).collect();
    for (scenario, outcome) in &played.outcomes {
        match outcome {
            Ok(outcome) if Some(outcome) == calm.get(scenario) => {}
            Ok(outcome) => violations
                .push(format!("seed {seed}: {scenario:?} ended {outcome:?}, without faults {:?}", calm.get(scenario))),
            Err(err) => violations.push(format!("seed {seed}: {scenario:?}: {err}")),
        }
    }
    if !violations.is_empty() {
        // A violation depends on timing and rarely replays: keep what the
        // runners logged, every fact the bus carried and what the functions
        // logged, to read it back.
        if let Some(log) = FUNCTION_LOG.get() {
            violations
                .push(format!("seed {seed}: the functions' logs (every stack of this test) in {}", log.display()));
        }
        let facts: String = stack
            .all_facts()
            .iter()
            .map(|(detail_type, detail)| format!("{}\n", json!({ "detail_type": detail_type, "detail": detail })))
            .collect();
        let kept = played.dir.join("facts.ndjson");
        match std::fs::write(&kept, facts) {
            Ok(()) => {
                violations.push(format!("seed {seed}: evidence (runner logs, facts) in {}", played.dir.display()))
            }
            Err(err) => violations.push(format!("seed {seed}: the evidence could not be kept: {err}")),
        }
    }
    let injected = plan.map(|p| p.injected_by_kind()).unwrap_or_default();
    (violations, injected, played.retries)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflows_end_as_they_do_without_faults_when_aws_fails_the_way_it_does() {
    // Before any stack starts: the first to set the process's log output wins.
    log_functions();
    // `make chaos` sets these to soak many seeds at one rate (docs/faults.md).
    if let Ok(range) = std::env::var("BATON_CHAOS_SEEDS") {
        let (first, last) = range.split_once('-').expect("BATON_CHAOS_SEEDS is first-last");
        let rate = std::env::var("BATON_CHAOS_RATE").map_or(0.1, |r| r.parse().expect("BATON_CHAOS_RATE is a rate"));
        return soak(first.parse().expect("a seed"), last.parse().expect("a seed"), rate).await;
    }
    let calm = calm().await;
    assert_eq!(calm[&Scenario::FanOut].status, "failed", "the fan-out fails through test-b: {calm:?}");
    assert_eq!(calm[&Scenario::Chain].status, "succeeded", "{calm:?}");
    assert_eq!(calm[&Scenario::CancelMidRun].status, "cancelled", "{calm:?}");
    assert_eq!(calm[&Scenario::CancelMidRun].jobs["cleanup"].0, "succeeded", "always() runs after a cancel");
    assert_eq!((calm[&Scenario::RerunFailed].status.as_str(), calm[&Scenario::RerunFailed].attempts), ("succeeded", 2));
    assert_eq!(calm[&Scenario::RunnerKilled].jobs["doomed"], ("failed".into(), "runner_lost".into()), "{calm:?}");
    assert_eq!(calm[&Scenario::Elastic].status, "succeeded", "an elastic fleet from zero runs every job: {calm:?}");
    assert_eq!(calm[&Scenario::Grouped].status, "succeeded", "a group's runs each run in turn: {calm:?}");
    assert_eq!(calm[&Scenario::Approved].status, "succeeded", "the approvers' input reaches the deploy: {calm:?}");
    assert_eq!(calm[&Scenario::Listening].status, "succeeded", "each event ran once, then the dependant: {calm:?}");
    assert_eq!(calm[&Scenario::Triggered].status, "succeeded", "one run a delivery, each reading its push: {calm:?}");
    let siblings = &calm[&Scenario::Siblings];
    assert_eq!((siblings.status.as_str(), siblings.jobs.len()), ("succeeded", SIBLINGS + 1), "{calm:?}");
    let raced = &calm[&Scenario::CancelRacingClaims];
    assert_eq!(raced.status, "cancelled", "{calm:?}");
    assert_eq!(raced.jobs["a"], ("cancelled".into(), "run_cancelled".into()), "{calm:?}");
    assert_eq!(raced.jobs["cleanup"].0, "succeeded", "always() runs after a cancel that raced claims");
    // Two seeds side by side: each on a stack of its own.
    let (first, second) = tokio::join!(stormy(1, plan(1), &calm), stormy(2, plan(2), &calm));
    for (seed, (violations, injected, retries)) in [(1, first), (2, second)] {
        eprintln!("chaos: seed {seed}: faults injected by kind {injected:?}; runner retries {retries}");
        assert!(violations.is_empty(), "{violations:#?}");
        assert!(injected.len() >= 8, "seed {seed}: many kinds of fault met the runs: {injected:?}");
    }
    drop_function_log();
}

/// `make chaos`: every scenario over many seeds at one fault rate for every
/// kind, `seeds` (`first-last`) at `rate`. It counts what happened instead
/// of stopping at the first difference, prints the counts, and fails at the
/// end if any invariant was violated.
async fn soak(first: u64, last: u64, rate: f64) {
    let started = Instant::now();
    let calm = calm().await;
    let mut injected: BTreeMap<&'static str, u64> = BTreeMap::new();
    let (mut runs, mut retries, mut violations) = (0, 0, Vec::new());
    let seeds: Vec<u64> = (first..=last).collect();
    // Two stacks at a time: the machine has two cores.
    for pair in seeds.chunks(2) {
        let results = futures::future::join_all(pair.iter().map(|&seed| {
            let calm = &calm;
            async move { stormy(seed, uniform_plan(seed, rate), calm).await }
        }))
        .await;
        for (found, by_kind, retried) in results {
            runs += scenarios().len();
            retries += retried;
            for (kind, n) in by_kind {
                *injected.entry(kind).or_default() += n;
            }
            // Said as found: a long soak's violation is read while it runs.
            for violation in &found {
                eprintln!("chaos soak: violation: {violation}");
            }
            violations.extend(found);
        }
        eprintln!("chaos soak: {runs} runs so far, {} violations, {:?}", violations.len(), started.elapsed());
    }
    let total: u64 = injected.values().sum();
    eprintln!(
        "chaos soak: seeds {first}-{last} at rate {rate}: {runs} runs ({} scenarios x {} seeds) in {:?}; \
         faults injected {total} by kind {injected:?}; redeliveries {}; runner retries {retries}; \
         invariant violations {}",
        scenarios().len(),
        seeds.len(),
        started.elapsed(),
        injected.get("duplicate").copied().unwrap_or(0) + injected.get("abandon").copied().unwrap_or(0),
        violations.len()
    );
    assert!(violations.is_empty(), "{violations:#?}");
    drop_function_log();
}

/// How long the outage test keeps the API down.
const OUTAGE: Duration = Duration::from_secs(180);

/// Three jobs finish while the whole API is down for 3 minutes (API
/// Gateway answers 503 to everything, on top of the suite's faults): their
/// runner can deliver neither a step report, a log, a heartbeat nor a
/// complete. Leases outlast the outage (the deployed default is 180 s of
/// lease after each heartbeat; here 240 s), so the runner keeps retrying
/// each complete for as long as the lease lives, and once the API is back
/// every job ends as it finished, `succeeded`, and the job after them
/// runs. Before, a complete gave up after 120 s and stopped heartbeating,
/// so these jobs ended `runner_lost`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_that_finish_during_a_three_minute_api_outage_report_after_it_and_end_as_they_finished() {
    let plan = Arc::new(FaultPlan::parse(&plan(3)).expect("a valid plan").expect("rules"));
    let options = HostOptions { faults: Some(plan.clone()), ..HostOptions::default() };
    let outage = options.outage.clone();
    let timings = HashMap::from([
        ("BATON_HEARTBEAT_INTERVAL_S".into(), "2".into()),
        ("BATON_LEASE_DURATION_S".into(), "240".into()),
        ("BATON_FIRST_HEARTBEAT_GRACE_S".into(), "240".into()),
        ("BATON_REAPER_PERIOD_S".into(), "2".into()),
    ]);
    let stack = TestStack::start_custom(|_| {}, timings, options).await;
    let ws = workspace();
    let created =
        call(&stack, reqwest::Method::POST, &format!("/v1/workspaces/{ws}/registration-tokens"), Some(json!({}))).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let token = created.body["token"].as_str().expect("a token").to_string();
    let dir = scratch();
    let log = dir.join("runner.log");
    let mut runner = Runner::start_logged(&stack, &token, "linux", &["--concurrency", "3"], &log);
    let go = dir.join("go");
    let job = |name: &str| {
        format!(
            "  {name}:\n    runs-on: linux\n    steps:\n      - run: touch {started}; while [ ! -e {go} ]; do sleep 0.2; done; echo {name}\n",
            started = dir.join(format!("started-{name}")).display(),
            go = go.display()
        )
    };
    let definition = format!(
        "name: chaos-outage\njobs:\n{}{}{}  after:\n    needs: [a, b, c]\n    runs-on: linux\n    steps:\n      - run: echo after\n",
        job("a"),
        job("b"),
        job("c")
    );
    let body = json!({ "definition": definition, "idempotency_key": "chaos-outage" });
    let created = call(&stack, reqwest::Method::POST, &format!("/v1/workspaces/{ws}/runs"), Some(body)).await;
    assert!(created.status == 201 || created.status == 200, "{}", created.body);
    let path = format!("/v1/workspaces/{ws}/runs/{}", created.body["id"].as_str().expect("a run id"));
    let all_started = || ["a", "b", "c"].iter().all(|j| dir.join(format!("started-{j}")).exists());
    let deadline = Instant::now() + WAIT;
    while !all_started() {
        assert!(Instant::now() < deadline, "the three jobs never all started");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Down, then the jobs finish; up again after 3 minutes.
    outage.store(true, std::sync::atomic::Ordering::SeqCst);
    std::fs::write(&go, b"").expect("the go file");
    tokio::time::sleep(OUTAGE).await;
    outage.store(false, std::sync::atomic::Ordering::SeqCst);

    let view = wait_run(&stack, &path, Duration::from_secs(180), "the run finished after the outage", finished)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    runner.stop().await;
    let ended = outcome(&view);
    for job in ["a", "b", "c", "after"] {
        assert_eq!(ended.jobs[job], ("succeeded".into(), String::new()), "{job} ended as it finished: {view:#}");
    }
    assert_eq!(ended.status, "succeeded", "{view:#}");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let refused_in_outage =
        text.lines().filter(|l| l.contains("complete failed") && l.contains("Service Unavailable")).count();
    assert!(refused_in_outage >= 3, "each complete met the outage and was retried through it ({refused_in_outage})");
    let (_, undocumented) = runner_answers(&[log]);
    assert!(undocumented.is_empty(), "{undocumented:#?}");
}
