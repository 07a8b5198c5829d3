//! Whole workflows through the whole local stack: runs of a shape (1 job, a
//! 10-job fan-out/fan-in, a 50-job chain) created through the API and
//! executed by R in-process `baton-runner` agents (the very agent code, with
//! steps that succeed at once), with every AWS request counted.
//!
//! Runs go one at a time, each in its own window: create → terminal status →
//! quiet. The bench watches the run through clients that do not count, so a
//! window holds only what the stack did for the run. Claims that found
//! nothing (idle long polls of the runners waiting between jobs) are counted
//! apart: they are the fleet's idle cost, priced per runner-month, not per job.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_api::runners::CreateRegistrationToken;
use baton_api::runs::{CreateRunRequest, RunView};
use baton_bench::cost::{self, Usage};
use baton_client::operators::Operator;
use baton_devhost::invocations::Record as InvocationRecord;
use baton_runner::agent::AgentConfig;
use baton_runner::Shutdown;
use baton_service::aws::AwsClients;
use baton_store::Store;
use baton_tests::TestStack;
use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::watch;
use uuid::Uuid;

use crate::recorder::{Recorder, Request};
use crate::report::verdict;
use crate::windows::{percentile, settle_except};

/// The labels every bench runner has and every bench job asks for.
pub(crate) const RUNS_ON: &str = "linux";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Single,
    FanOut10,
    Chain50,
    /// One job whose step writes 1 MiB of output: what logs cost.
    Logs1Mib,
    /// A build, 254 tests after it, a publish after them (256 jobs).
    FanOut256,
    /// A build, 38 tests after it, a publish after them: with as many
    /// runners, the 38 finish within a second of each other, the burst of
    /// outcomes on one attempt that contention shows in.
    FanOut40,
}

impl Shape {
    pub fn parse(name: &str) -> Option<Shape> {
        match name {
            "single" | "1" => Some(Shape::Single),
            "fan-out-10" | "fanout" | "10" => Some(Shape::FanOut10),
            "chain-50" | "chain" | "50" => Some(Shape::Chain50),
            "logs-1mib" | "logs" => Some(Shape::Logs1Mib),
            "fan-out-256" | "256" => Some(Shape::FanOut256),
            "fan-out-40" | "40" => Some(Shape::FanOut40),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Shape::Single => "single",
            Shape::FanOut10 => "fan-out-10",
            Shape::Chain50 => "chain-50",
            Shape::Logs1Mib => "logs-1mib",
            Shape::FanOut256 => "fan-out-256",
            Shape::FanOut40 => "fan-out-40",
        }
    }

    pub fn jobs(self) -> usize {
        match self {
            Shape::Single => 1,
            Shape::FanOut10 => 10,
            Shape::Chain50 => 50,
            Shape::Logs1Mib => 1,
            Shape::FanOut256 => 256,
            Shape::FanOut40 => 40,
        }
    }

    /// The workflow file: every step is `true`.
    pub fn yaml(self) -> String {
        let job = |key: &str, needs: &[String]| {
            let needs = if needs.is_empty() { String::new() } else { format!("    needs: [{}]\n", needs.join(", ")) };
            format!("  {key}:\n    runs-on: [{RUNS_ON}]\n{needs}    steps:\n      - run: \"true\"\n")
        };
        let mut out = format!("name: bench-{}\njobs:\n", self.name());
        match self {
            Shape::Single => out.push_str(&job("only", &[])),
            // 10,486 lines of 100 bytes: 1 MiB of output, as one step prints it.
            Shape::Logs1Mib => out.push_str(&format!(
                "  chatty:\n    runs-on: [{RUNS_ON}]\n    steps:\n      - run: yes \"$(printf '%099d' 0)\" | head -n 10486\n"
            )),
            Shape::FanOut10 | Shape::FanOut40 | Shape::FanOut256 => {
                out.push_str(&job("build", &[]));
                let tests: Vec<String> = (1..=self.jobs() - 2).map(|i| format!("test{i}")).collect();
                for t in &tests {
                    out.push_str(&job(t, &["build".to_string()]));
                }
                out.push_str(&job("publish", &tests));
            }
            Shape::Chain50 => {
                for i in 1..=50 {
                    let needs = if i == 1 { vec![] } else { vec![format!("j{:02}", i - 1)] };
                    out.push_str(&job(&format!("j{i:02}"), &needs));
                }
            }
        }
        out
    }
}

/// What one run cost, from its window.
#[derive(Debug, Clone, Serialize)]
pub struct RunFigures {
    pub run_id: Uuid,
    pub status: String,
    pub jobs: usize,
    /// Billable usage of the run (idle claims excluded).
    pub usage: Usage,
    /// DynamoDB write units of heartbeats (included in `usage`).
    pub heartbeat_write_units: f64,
    /// Write units the indexes billed (included in `usage`, heartbeats' too).
    pub index_write_units: f64,
    pub transitions: usize,
    /// DynamoDB requests by operation; AWS requests by function.
    pub dynamodb_by_operation: BTreeMap<String, usize>,
    pub requests_by_function: BTreeMap<String, usize>,
    pub invocations_by_function: BTreeMap<String, usize>,
    pub api_requests_by_function: BTreeMap<String, usize>,
    pub idle_claims: usize,
    /// Requests of the claim function left out as idle polling.
    pub idle_claim_requests: usize,
    /// DynamoDB (read, write) units by function.
    pub units_by_function: BTreeMap<String, (f64, f64)>,
    pub failed_conditional_writes: usize,
    /// Seconds from the run's creation to its first claim and to its end.
    pub to_first_claim_s: Option<f64>,
    pub to_end_s: f64,
    /// Per dependent job: seconds from its last need's end to its claim,
    /// split into "to queued" (orchestration) and "queued to claimed".
    pub dispatch_s: Vec<f64>,
    pub orchestrate_s: Vec<f64>,
    pub queue_to_claim_s: Vec<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ShapeFigures {
    pub shape: String,
    pub jobs_per_run: usize,
    pub runners: usize,
    pub runs: Vec<RunFigures>,
    pub per_job: Usage,
    pub per_run: Usage,
    pub per_job_write_units_without_heartbeats: f64,
    /// Of all write units per job, those the indexes billed.
    pub per_job_index_write_units: f64,
    pub per_job_transitions: f64,
    pub per_job_cost: cost::Cost,
    pub per_run_cost: cost::Cost,
    pub median_to_first_claim_s: f64,
    pub median_to_end_s: f64,
    pub median_dispatch_s: f64,
    pub median_orchestrate_s: f64,
    pub median_queue_to_claim_s: f64,
    /// Median AWS requests a single invocation makes, by function.
    pub requests_per_invocation: BTreeMap<String, f64>,
    /// API requests each runner sent per job (claims that got one, step
    /// reports, heartbeats, completes) and idle claims per runner-minute.
    pub api_requests_per_job: f64,
    pub idle_claims_per_runner_minute: f64,
}

/// R agents of one workspace, running until told to stop.
pub struct Fleet {
    shutdown: watch::Sender<Shutdown>,
    agents: Vec<tokio::task::JoinHandle<()>>,
    pub runners: usize,
}

impl Fleet {
    pub async fn start(stack: &TestStack, workspace: &str, runners: usize, work_root: &std::path::Path) -> Fleet {
        let operator = Operator::new(&stack.api, &stack.admin_token).expect("an operator client");
        let (shutdown, watch_rx) = watch::channel(Shutdown::Running);
        let mut agents = Vec::new();
        for i in 0..runners {
            let token = operator
                .create_registration_token(
                    workspace,
                    &CreateRegistrationToken {
                        name: Some(format!("bench-{i}")),
                        expires_in_s: None,
                        single_use: false,
                        max_claims: None,
                    },
                )
                .await
                .expect("a registration token");
            let config = AgentConfig {
                api: stack.api.clone(),
                registration_token: token.token,
                labels: vec![RUNS_ON.to_string()],
                tools: Vec::new(),
                name: Some(format!("bench-{i}")),
                work_dir: work_root.join(format!("runner-{i}")),
                max_jobs: None,
                concurrency: 1,
                // The agent's defaults: a 20 s long poll.
                claim_wait_s: 20,
                kill_grace: Duration::from_secs(10),
                json_logs: false,
                keep_work_dirs: false,
                log_cap_bytes: 32 * 1024 * 1024,
                push: baton_runner::agent::PushSettings::default(),
                actions: Default::default(),
            };
            let rx = watch_rx.clone();
            agents.push(tokio::spawn(async move {
                if let Err(err) = baton_runner::agent::run(config, rx).await {
                    eprintln!("bench: a runner stopped: {err}");
                }
            }));
        }
        Fleet { shutdown, agents, runners }
    }

    pub async fn stop(self) {
        let _ = self.shutdown.send(Shutdown::Abandon);
        // A claim long poll in flight would hold the agent up to 20 s.
        for agent in self.agents {
            agent.abort();
            let _ = agent.await;
        }
    }
}

/// Runs `runs` runs of `shape` one after another on `fleet`.
#[allow(clippy::too_many_arguments)]
pub async fn bench_shape(
    stack: &TestStack,
    recorder: &Recorder,
    quiet: &AwsClients,
    workspace: &str,
    fleet: &Fleet,
    shape: Shape,
    runs: usize,
) -> ShapeFigures {
    let operator = Operator::new(&stack.api, &stack.admin_token).expect("an operator client");
    let watcher = Store::new(quiet.dynamodb().clone(), stack.provisioned.table.clone());
    let state_machine = stack.provisioned.state_machines.get("run-attempt").cloned().unwrap_or_default();
    let mut figures = Vec::new();
    let mut idle_minutes = 0.0;
    for i in 0..runs {
        settle_except(recorder, "claim").await;
        let (mark, invocation_mark) = (recorder.mark(), stack.host.invocations.mark());
        let started = Instant::now();
        let request = CreateRunRequest {
            definition: shape.yaml(),
            inputs: None,
            idempotency_key: Some(format!("bench-{}-{i}-{}", shape.name(), Uuid::new_v4())),
        };
        let created = operator.submit_run(workspace, &request).await.expect("the run is created");
        let run_id = created.header.id;
        let deadline = Instant::now() + Duration::from_secs(60 + 20 * shape.jobs() as u64);
        let status = loop {
            let state = watcher.get_run(workspace, run_id).await.ok().flatten();
            if let Some(state) = state.filter(|s| s.status.is_terminal()) {
                break format!("{:?}", state.status).to_lowercase();
            }
            if Instant::now() > deadline {
                break "timed-out".to_string();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        // The facts of the run's end still travel (run terminated → its
        // subscribers); they belong to this run.
        settle_except(recorder, "claim").await;
        idle_minutes += started.elapsed().as_secs_f64() / 60.0 * fleet.runners as f64;
        let window = recorder.since(mark);
        let invocations = stack.host.invocations.since(invocation_mark);
        let transitions = count_transitions(quiet, &state_machine, run_id).await;
        let view = watcher.run_records(workspace, run_id).await.ok().flatten().map(|records| records.view());
        figures.push(run_figures(run_id, status, shape.jobs(), &window, &invocations, transitions, view.as_ref()));
        eprintln!(
            "bench:   {} run {}/{runs}: {} in {:.1} s",
            shape.name(),
            i + 1,
            figures.last().map_or("?", |f| f.status.as_str()),
            started.elapsed().as_secs_f64()
        );
    }
    summarise(shape, fleet.runners, figures, idle_minutes)
}

/// Step Functions bills every state entered.
async fn count_transitions(quiet: &AwsClients, state_machine: &str, run_id: Uuid) -> usize {
    let mut total = 0;
    // A run has one execution per attempt; the bench makes attempt 1 only.
    let arn = format!("{}:{run_id}-1", state_machine.replace(":stateMachine:", ":execution:"));
    let mut token = None;
    loop {
        let Ok(page) = quiet
            .sfn()
            .get_execution_history()
            .execution_arn(&arn)
            .max_results(1000)
            .set_next_token(token)
            .send()
            .await
        else {
            return total;
        };
        total += page.events().iter().filter(|e| e.r#type().as_str().ends_with("StateEntered")).count();
        match page.next_token() {
            Some(next) if !next.is_empty() => token = Some(next.to_string()),
            _ => return total,
        }
    }
}

/// The requests of the window that the run is billed for. Every request
/// counts except the runners' idle polling: a claim invocation counts only if
/// it finished in the window with a job (200), and then as if it had found
/// the job at once: its session lookup, the last read of the queue before its
/// claim transaction, the transaction(s) and what follows. The re-checks a
/// long poll made while nothing was queued are idle polling, priced per
/// runner-month instead (as are polls still open when the window closes).
fn billed_requests<'a>(window: &'a [Request], invocations: &[InvocationRecord]) -> (Vec<&'a Request>, usize) {
    let claims_with_a_job: std::collections::HashSet<u64> =
        invocations.iter().filter(|r| r.function == "claim" && r.status == Some(200)).map(|r| r.id).collect();
    let mut by_claim: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    let mut billed = vec![true; window.len()];
    for (i, r) in window.iter().enumerate() {
        if r.function.as_deref() == Some("claim") {
            billed[i] = false;
            if let Some(id) = r.invocation.filter(|id| claims_with_a_job.contains(id)) {
                by_claim.entry(id).or_default().push(i);
            }
        }
    }
    for indexes in by_claim.values() {
        let Some(tx) = indexes.iter().position(|&i| window[i].operation == "TransactWriteItems") else {
            continue;
        };
        let mut first = tx;
        while first > 1 && window[indexes[first - 1]].operation == "Query" {
            first -= 1;
        }
        if first > 1 && window[indexes[first - 1]].operation == "GetItem" {
            first -= 1;
        }
        billed[indexes[0]] = true;
        for &i in &indexes[first..] {
            billed[i] = true;
        }
    }
    let idle = billed.iter().zip(window).filter(|(b, r)| !**b && r.function.as_deref() == Some("claim")).count();
    (window.iter().zip(billed).filter(|(_, b)| *b).map(|(r, _)| r).collect(), idle)
}

fn run_figures(
    run_id: Uuid,
    status: String,
    jobs: usize,
    window: &[Request],
    invocations: &[InvocationRecord],
    transitions: usize,
    view: Option<&RunView>,
) -> RunFigures {
    // Claims that answered 204 found nothing: idle polling.
    let idle: std::collections::HashSet<u64> =
        invocations.iter().filter(|r| r.function == "claim" && r.status == Some(204)).map(|r| r.id).collect();
    let busy: Vec<&InvocationRecord> = invocations.iter().filter(|r| !idle.contains(&r.id)).collect();
    let (counted, idle_claim_requests) = billed_requests(window, invocations);
    let ddb: Vec<&&Request> = counted.iter().filter(|r| r.is_dynamodb()).collect();
    let mut units_by_function: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for r in &ddb {
        let e = units_by_function.entry(r.function.clone().unwrap_or_else(|| "(bench)".into())).or_default();
        e.0 += r.read_units;
        e.1 += r.write_units;
    }

    let mut dynamodb_by_operation = BTreeMap::new();
    for r in &ddb {
        *dynamodb_by_operation.entry(r.operation.clone()).or_insert(0) += 1;
    }
    let mut requests_by_function = BTreeMap::new();
    for r in &counted {
        *requests_by_function.entry(r.function.clone().unwrap_or_else(|| "(triggers)".into())).or_insert(0) += 1;
    }
    let mut invocations_by_function = BTreeMap::new();
    let mut api_requests_by_function = BTreeMap::new();
    for r in &busy {
        *invocations_by_function.entry(r.function.clone()).or_insert(0) += 1;
        if r.status.is_some() {
            *api_requests_by_function.entry(r.function.clone()).or_insert(0) += 1;
        }
    }

    // SQS, as AWS bills it: each message is sent once into its queue (by
    // EventBridge or Step Functions, inside the emulator here: one request
    // per record handed to a function), then received in a batch and
    // deleted by the event-source mapping. Empty receives are the mappings'
    // idle polling, a fixed cost of the stack, not of the run.
    let messages: usize = busy.iter().filter(|r| is_sqs_function(&r.function)).map(|r| r.records).sum();
    let receives = counted.iter().filter(|r| r.operation == "ReceiveMessage" && r.entries > 0).count();
    let settles = counted
        .iter()
        .filter(|r| matches!(r.operation.as_str(), "DeleteMessage" | "DeleteMessageBatch" | "ChangeMessageVisibility"))
        .count();
    let sqs_sent_by_functions = counted
        .iter()
        .filter(|r| r.function.is_some() && matches!(r.operation.as_str(), "SendMessage" | "SendMessageBatch"))
        .count();
    let eventbridge_events: usize = counted.iter().filter(|r| r.operation == "PutEvents").map(|r| r.entries).sum();
    let function_requests = counted.iter().filter(|r| r.function.is_some()).count();
    let usage = Usage {
        dynamodb_read_units: ddb.iter().map(|r| r.read_units).sum(),
        dynamodb_write_units: ddb.iter().map(|r| r.write_units).sum(),
        sfn_transitions: transitions as f64,
        lambda_invocations: busy.len() as f64,
        lambda_gb_seconds: cost::modelled_gb_seconds(
            busy.len() as f64,
            function_requests as f64,
            cost::FUNCTION_MEMORY_MB,
        ),
        sqs_requests: (messages + receives + settles + sqs_sent_by_functions) as f64,
        eventbridge_events: eventbridge_events as f64,
        api_requests: api_requests_by_function.values().sum::<usize>() as f64,
        // Nudges posted to runners' sockets (each a billed message).
        websocket_messages: counted.iter().filter(|r| r.operation == "PostToConnection" && r.status < 400).count()
            as f64,
        ..Usage::default()
    };
    let heartbeat_write_units =
        ddb.iter().filter(|r| r.function.as_deref() == Some("heartbeat")).map(|r| r.write_units).sum();
    let index_write_units = ddb.iter().map(|r| r.index_write_units).sum();

    let mut figures = RunFigures {
        run_id,
        status,
        jobs,
        usage,
        heartbeat_write_units,
        index_write_units,
        transitions,
        dynamodb_by_operation,
        requests_by_function,
        invocations_by_function,
        api_requests_by_function,
        idle_claims: idle.len(),
        idle_claim_requests,
        units_by_function,
        failed_conditional_writes: ddb.iter().filter(|r| r.failed_condition).count(),
        to_first_claim_s: None,
        to_end_s: 0.0,
        dispatch_s: Vec::new(),
        orchestrate_s: Vec::new(),
        queue_to_claim_s: Vec::new(),
    };
    if let Some(view) = view {
        timings(view, &mut figures);
    }
    figures
}

fn is_sqs_function(function: &str) -> bool {
    matches!(function, "enqueue" | "reconcile" | "orchestrator" | "start-attempt" | "job-outcomes")
}

fn seconds(from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    (to - from).num_milliseconds() as f64 / 1000.0
}

/// Latencies from the timestamps the server recorded: a job's execution was
/// queued by the orchestrator (`queued_at`), claimed (`started_at`) and
/// completed (`finished_at`).
fn timings(view: &RunView, figures: &mut RunFigures) {
    let Some(attempt) = view.attempts.first() else { return };
    let first_claim = attempt.jobs.iter().filter_map(|j| j.executions.first()?.started_at).min();
    figures.to_first_claim_s = first_claim.map(|at| seconds(view.header.created_at, at));
    figures.to_end_s = view.header.finished_at.map_or(0.0, |at| seconds(view.header.created_at, at));
    let finished: HashMap<&str, DateTime<Utc>> =
        attempt.jobs.iter().filter_map(|j| Some((j.key.as_str(), j.executions.first()?.finished_at?))).collect();
    for job in attempt.jobs.iter().filter(|j| !j.needs.is_empty()) {
        let Some(execution) = job.executions.first() else { continue };
        let Some(ready) = job.needs.iter().map(|n| finished.get(n.as_str()).copied()).collect::<Option<Vec<_>>>()
        else {
            continue;
        };
        let Some(ready) = ready.into_iter().max() else { continue };
        if let (Some(queued), Some(claimed)) = (execution.queued_at, execution.started_at) {
            figures.dispatch_s.push(seconds(ready, claimed));
            figures.orchestrate_s.push(seconds(ready, queued));
            figures.queue_to_claim_s.push(seconds(queued, claimed));
        }
    }
}

fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.into_iter().collect();
    v.sort_by(|a, b| a.total_cmp(b));
    percentile(&v, 0.5)
}

fn summarise(shape: Shape, runners: usize, runs: Vec<RunFigures>, idle_minutes: f64) -> ShapeFigures {
    let n = runs.len().max(1) as f64;
    let jobs = (runs.iter().map(|r| r.jobs).sum::<usize>()).max(1) as f64;
    let total = runs.iter().fold(Usage::default(), |acc, r| acc.plus(&r.usage));
    let per_job = total.scaled(1.0 / jobs);
    let per_run = total.scaled(1.0 / n);
    let heartbeats: f64 = runs.iter().map(|r| r.heartbeat_write_units).sum();
    let mut requests_per_invocation = BTreeMap::new();
    let mut by_function: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for r in &runs {
        for (f, k) in &r.invocations_by_function {
            by_function.entry(f.clone()).or_default().0 += k;
        }
        for (f, k) in &r.requests_by_function {
            by_function.entry(f.clone()).or_default().1 += k;
        }
    }
    for (f, (inv, req)) in by_function {
        if inv > 0 {
            requests_per_invocation.insert(f, req as f64 / inv as f64);
        }
    }
    let idle_claims: usize = runs.iter().map(|r| r.idle_claims).sum();
    ShapeFigures {
        shape: shape.name().into(),
        jobs_per_run: shape.jobs(),
        runners,
        per_job,
        per_run,
        per_job_write_units_without_heartbeats: (total.dynamodb_write_units - heartbeats) / jobs,
        per_job_index_write_units: runs.iter().map(|r| r.index_write_units).sum::<f64>() / jobs,
        per_job_transitions: total.sfn_transitions / jobs,
        per_job_cost: cost::price(&per_job),
        per_run_cost: cost::price(&per_run),
        median_to_first_claim_s: median(runs.iter().filter_map(|r| r.to_first_claim_s)),
        median_to_end_s: median(runs.iter().map(|r| r.to_end_s)),
        median_dispatch_s: median(runs.iter().flat_map(|r| r.dispatch_s.iter().copied())),
        median_orchestrate_s: median(runs.iter().flat_map(|r| r.orchestrate_s.iter().copied())),
        median_queue_to_claim_s: median(runs.iter().flat_map(|r| r.queue_to_claim_s.iter().copied())),
        requests_per_invocation,
        api_requests_per_job: total.api_requests / jobs,
        idle_claims_per_runner_minute: if idle_minutes > 0.0 { idle_claims as f64 / idle_minutes } else { 0.0 },
        runs,
    }
}

/// The dispatch path from "needs satisfied" (the last need's `complete`
/// committed) to "runner has the job", hop by hop. Each entry: the hop, the
/// function that runs in it (whose measured requests per invocation the
/// report prints) and whether the hop waits on a poll.
pub const DISPATCH_PATH: &[(&str, Option<&str>)] = &[
    (
        "runner → API: complete (outcome + job.completed fact, one transaction), then adopts it and advances the attempt: ready jobs claimable (record + pending item + facts, one transaction), nudge fitting runners",
        Some("complete"),
    ),
    ("the nudged runner claims: GetItem + Query + claim transaction → 200", Some("claim")),
];

/// The same path on the previous main (a737f9b), for the side-by-side.
pub const PREVIOUS_DISPATCH_HOPS: usize = 6;

pub fn render(shapes: &[ShapeFigures]) -> String {
    let mut s = String::new();
    s.push_str(
        "Per job, by shape (averages over the runs; idle claims excluded; DynamoDB units computed from item sizes)\n",
    );
    s.push_str(&format!(
        "{:<11} {:>4} {:>4} {:>7} {:>7} {:>9} {:>7} {:>6} {:>6} {:>6} {:>6} {:>6} {:>10}  {}\n",
        "shape",
        "runs",
        "R",
        "RCU/job",
        "WCU/job",
        "WCU-hb/job",
        "GSI/job",
        "trans",
        "invoc",
        "SQS",
        "events",
        "API",
        "$/1000 jobs",
        "targets (fan-out-10: ≤ 20 WCU-hb incl. GSI, ≤ $0.06 per 1000 jobs; single: ≤ 4 transitions, ≤ $0.12)"
    ));
    for f in shapes {
        let p = &f.per_job;
        let mut verdicts = Vec::new();
        if f.shape == "fan-out-10" {
            verdicts.push(format!("WCU {}", verdict(Some(f.per_job_write_units_without_heartbeats <= 20.0))));
            verdicts.push(format!("cost {}", verdict(Some(f.per_job_cost.total * 1000.0 <= 0.06))));
        }
        if f.shape == "single" {
            verdicts.push(format!("transitions {}", verdict(Some(f.per_job_transitions <= 4.0))));
            verdicts.push(format!("cost {}", verdict(Some(f.per_job_cost.total * 1000.0 <= 0.12))));
        }
        s.push_str(&format!(
            "{:<11} {:>4} {:>4} {:>7.1} {:>7.1} {:>9.1} {:>7.1} {:>6.2} {:>6.2} {:>6.1} {:>6.2} {:>6.2} {:>10.4}  {}\n",
            f.shape,
            f.runs.len(),
            f.runners,
            p.dynamodb_read_units,
            p.dynamodb_write_units,
            f.per_job_write_units_without_heartbeats,
            f.per_job_index_write_units,
            f.per_job_transitions,
            p.lambda_invocations,
            p.sqs_requests,
            p.eventbridge_events,
            p.api_requests,
            f.per_job_cost.total * 1000.0,
            verdicts.join(", ")
        ));
    }
    s.push_str("   (WCU counts index writes too; GSI: their part; WCU-hb: write units without heartbeats; trans: Step Functions state transitions; invoc: Lambda\n");
    s.push_str("    invocations; SQS: billed SQS requests; events: EventBridge entries; API: HTTP API requests)\n\n");

    s.push_str("Cost at us-east-1 list prices (bench/src/cost.rs), by service\n");
    s.push_str(&format!(
        "{:<11} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8}   {:>10}\n",
        "shape", "$/1000 jobs", "DynamoDB", "SFN", "Lambda", "SQS", "EvBridge", "API GW", "$/1000 runs"
    ));
    for f in shapes {
        let c = &f.per_job_cost;
        s.push_str(&format!(
            "{:<11} {:>10.4} {:>10.4} {:>8.4} {:>8.4} {:>8.4} {:>8.4} {:>8.4}   {:>10.4}\n",
            f.shape,
            c.total * 1000.0,
            c.dynamodb * 1000.0,
            c.step_functions * 1000.0,
            c.lambda * 1000.0,
            c.sqs * 1000.0,
            c.eventbridge * 1000.0,
            c.api_gateway * 1000.0,
            f.per_run_cost.total * 1000.0
        ));
    }
    s.push('\n');

    s.push_str("Latency on the local stack (medians over the runs; the emulator is slow, see its own latency below)\n");
    s.push_str(&format!(
        "{:<11} {:>14} {:>10} {:>16} {:>14} {:>16}\n",
        "shape", "create→claim s", "create→end s", "needs→claimed s", "needs→queued s", "queued→claimed s"
    ));
    for f in shapes {
        s.push_str(&format!(
            "{:<11} {:>14.2} {:>10.2} {:>16.2} {:>14.2} {:>16.2}\n",
            f.shape,
            f.median_to_first_claim_s,
            f.median_to_end_s,
            f.median_dispatch_s,
            f.median_orchestrate_s,
            f.median_queue_to_claim_s
        ));
    }
    s.push('\n');

    s.push_str("Dispatch path: from \"needs satisfied\" to \"runner has the job\"\n");
    let per_invocation = merged_requests_per_invocation(shapes);
    let mut round_trips = 0.0;
    for (i, (hop, function)) in DISPATCH_PATH.iter().enumerate() {
        let requests = function.and_then(|f| per_invocation.get(f).copied());
        if let Some(r) = requests {
            round_trips += r;
        }
        let requests = requests.map_or("  (in Step Functions)".to_string(), |r| format!("{r:>5.1} AWS requests"));
        s.push_str(&format!("  {}. {:<108} {}\n", i + 1, hop, requests));
    }
    s.push_str(&format!(
        "  {} sequential hops (previous main: {}, with EventBridge and the relay on the path), {:.0} AWS requests made by\n\
         \x20  the functions on the way (measured per invocation, averaged; the orchestrator batches, so its figure is per batch)\n\n",
        DISPATCH_PATH.len(),
        PREVIOUS_DISPATCH_HOPS,
        round_trips
    ));

    s.push_str("API requests per job (all runners): ");
    s.push_str(
        &shapes.iter().map(|f| format!("{} {:.2}", f.shape, f.api_requests_per_job)).collect::<Vec<_>>().join(", "),
    );
    s.push_str("; idle claims per runner-minute: ");
    s.push_str(
        &shapes
            .iter()
            .map(|f| format!("{} {:.1}", f.shape, f.idle_claims_per_runner_minute))
            .collect::<Vec<_>>()
            .join(", "),
    );
    s.push('\n');
    for f in shapes {
        let mut inv: BTreeMap<String, usize> = BTreeMap::new();
        for r in &f.runs {
            for (k, v) in &r.invocations_by_function {
                *inv.entry(k.clone()).or_default() += v;
            }
        }
        let jobs = (f.runs.len() * f.jobs_per_run).max(1) as f64;
        let parts: Vec<String> = inv.iter().map(|(k, v)| format!("{k} {:.2}", *v as f64 / jobs)).collect();
        s.push_str(&format!("   invocations per job, {}: {}\n", f.shape, parts.join(", ")));
        let mut units: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        for r in &f.runs {
            for (k, (rd, wr)) in &r.units_by_function {
                let e = units.entry(k.clone()).or_default();
                e.0 += rd;
                e.1 += wr;
            }
        }
        let parts: Vec<String> =
            units.iter().map(|(k, (rd, wr))| format!("{k} {:.1}/{:.1}", rd / jobs, wr / jobs)).collect();
        s.push_str(&format!("   RCU/WCU per job by function, {}: {}\n", f.shape, parts.join(", ")));
    }
    s
}

fn merged_requests_per_invocation(shapes: &[ShapeFigures]) -> BTreeMap<String, f64> {
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for f in shapes {
        for (k, v) in &f.requests_per_invocation {
            let e = sums.entry(k.clone()).or_default();
            e.0 += v;
            e.1 += 1;
        }
    }
    sums.into_iter().map(|(k, (sum, n))| (k, sum / n as f64)).collect()
}

/// The fleet's handle for `main`: start one, run every shape, stop it.
pub async fn run_all(
    stack: Arc<TestStack>,
    recorder: &Recorder,
    quiet: &AwsClients,
    shapes: &[Shape],
    runners: usize,
    runs: usize,
    work_root: &std::path::Path,
) -> Vec<ShapeFigures> {
    let workspace = format!("bench-wf-{}", &baton_tests::unique_stage()[1..]);
    let fleet = Fleet::start(&stack, &workspace, runners, work_root).await;
    let mut out = Vec::new();
    for &shape in shapes {
        eprintln!("bench: {} × {runs} run(s) with {runners} runner(s) …", shape.name());
        out.push(bench_shape(&stack, recorder, quiet, &workspace, &fleet, shape, runs).await);
    }
    fleet.stop().await;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_domain::workflows::parse_definition;

    #[test]
    fn every_shape_is_a_valid_workflow_of_its_size() {
        for shape in [Shape::Single, Shape::FanOut10, Shape::FanOut40, Shape::Chain50, Shape::FanOut256] {
            let definition = parse_definition(&shape.yaml())
                .unwrap_or_else(|e| panic!("{} does not parse: {e:?}\n{}", shape.name(), shape.yaml()));
            assert_eq!(definition.jobs.len(), shape.jobs(), "{}", shape.name());
        }
    }
}
