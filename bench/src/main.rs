//! `make bench`: what the claim path costs, counted against the local stack.
//!
//! Every AWS request (the bench's own and the functions', which run in the
//! dev host on the same clients) goes through a counting interceptor
//! ([`recorder`]). The stack is provisioned without EventBridge rules and
//! without schedules, so no subscriber or reaper writes in the background: a
//! measured window holds only the requests of the operation measured.
//!
//! Scenarios:
//! 1. each runner operation once, uncontended (1 runner): DynamoDB requests by
//!    operation, read and write units;
//! 2. contention: R runners (1, 8, 32) drain a queue of N jobs with HTTP
//!    claim + complete; failed conditional writes per successful claim;
//! 3. the emulator's single-request latency, for scale.
//!
//! Flags (or environment): `--sections`, `--jobs N` (`BATON_BENCH_JOBS`),
//! `--runners 1,8,32` (`BATON_BENCH_RUNNERS`), `--out PATH`, … ([`Options`],
//! `bench --help`, with the defaults). Needs `BATON_AWS_ENDPOINT`
//! (scripts/bench.sh starts moto and sets it).

mod fleet;
mod recorder;
mod transfers;
mod workflows;

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use baton_api::facts::{Fact, FactDetail, JobExecutionQueued};
use baton_bench::{cold_start, cost};
use baton_devhost::HostOptions;
use baton_domain::runners::claim::HEAD_READ;
use baton_domain::runners::labels::{canonicalize, labelset_id};
use baton_localstack::provision::{default_infra_dir, Plan};
use baton_localstack::resources::{Naming, Resources};
use baton_service::aws::AwsClients;
use baton_service::context::Context;
use baton_store::Store;
use baton_tests::runners::queued_fact;
use baton_tests::{endpoint, unique_stage, TestStack};
use chrono::Utc;
use clap::{ArgAction, Parser};
use recorder::{Recorder, Request};
use serde::Serialize;
use serde_json::json;

pub(crate) const LABELS: &[&str] = &["linux", "x64"];

/// What to run: `--sections` picks among these (default: all).
/// (`fleet` runs for minutes of wall-clock time: only when asked for.)
const SECTIONS: &[&str] = &["claim-path", "artifacts", "contention", "workflows", "idle", "cold-start", "fleet"];

/// The repository root (the bench's default paths are under its `target/`).
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// What the claim path costs, counted against the local stack
/// (docs/benchmarks.md). Needs BATON_AWS_ENDPOINT: run `make bench`.
#[derive(Debug, Parser)]
#[command(
    name = "bench",
    args_override_self = true,
    after_help = "Every flag also reads BATON_BENCH_<FLAG> (e.g. BATON_BENCH_JOBS=200)."
)]
struct Options {
    /// Sections to run: claim-path, artifacts, contention, workflows, idle, cold-start, fleet (not by default)
    #[arg(
        long,
        env = "BATON_BENCH_SECTIONS",
        value_name = "LIST",
        value_delimiter = ',',
        action = ArgAction::Set,
        value_parser = section,
        default_value = "claim-path,artifacts,contention,workflows,idle,cold-start"
    )]
    sections: Vec<String>,
    /// Jobs per drain
    #[arg(
        long,
        env = "BATON_BENCH_JOBS",
        value_name = "N",
        value_parser = number,
        default_value = "1000",
        help_heading = "Contention"
    )]
    jobs: usize,
    /// Runner counts, each draining the jobs
    #[arg(
        long,
        env = "BATON_BENCH_RUNNERS",
        value_name = "LIST",
        value_delimiter = ',',
        action = ArgAction::Set,
        value_parser = number,
        default_value = "1,8,32,64",
        help_heading = "Contention"
    )]
    runners: Vec<usize>,
    /// Workspace counts the jobs are spread over
    #[arg(
        long,
        env = "BATON_BENCH_WORKSPACES",
        value_name = "LIST",
        value_delimiter = ',',
        action = ArgAction::Set,
        value_parser = number,
        default_value = "1,10",
        help_heading = "Contention"
    )]
    workspaces: Vec<usize>,
    /// Workflow shapes: single, fan-out-10, fan-out-40, chain-50, fan-out-256, logs-1mib (one job printing 1 MiB)
    #[arg(
        long,
        env = "BATON_BENCH_SHAPES",
        value_name = "LIST",
        value_delimiter = ',',
        action = ArgAction::Set,
        value_parser = shape,
        default_value = "single,fan-out-10,chain-50",
        help_heading = "Workflows"
    )]
    shapes: Vec<workflows::Shape>,
    /// Runs of each shape (at least 1)
    #[arg(
        long,
        env = "BATON_BENCH_RUNS",
        value_name = "N",
        value_parser = number,
        default_value = "3",
        help_heading = "Workflows"
    )]
    runs: usize,
    /// In-process baton-runner agents executing the workflows (at least 1)
    #[arg(
        long,
        env = "BATON_BENCH_WORKFLOW_RUNNERS",
        value_name = "N",
        value_parser = number,
        default_value = "4",
        help_heading = "Workflows"
    )]
    workflow_runners: usize,
    /// Contention's jobs get priorities spread over -N..=N (0: all 0), to
    /// show what `priority` costs a claim
    #[arg(
        long,
        env = "BATON_BENCH_PRIORITY_SPREAD",
        value_name = "N",
        default_value_t = 0,
        value_parser = clap::value_parser!(i32).range(0..=100),
        help_heading = "Contention"
    )]
    priority_spread: i32,
    /// Where the functions' release binaries are
    #[arg(
        long,
        env = "BATON_BENCH_BIN_DIR",
        value_name = "DIR",
        default_value_os_t = root().join("target/release"),
        help_heading = "Cold start"
    )]
    bin_dir: PathBuf,
    /// Runs per function (at least 1)
    #[arg(
        long,
        env = "BATON_BENCH_COLD_RUNS",
        value_name = "N",
        value_parser = number,
        default_value = "5",
        help_heading = "Cold start"
    )]
    cold_runs: usize,
    /// The `baton-runner` the fleet's machines run (scripts/bench.sh builds it)
    #[arg(long, env = "BATON_BENCH_RUNNER_BIN", value_name = "PATH", default_value_os_t = fleet::default_runner_bin(&root()), help_heading = "Fleet")]
    runner_bin: PathBuf,
    /// Most machines of the elastic fleet, and the size of the fixed one
    #[arg(long, env = "BATON_BENCH_FLEET_SIZE", value_name = "N", default_value_t = 5, help_heading = "Fleet")]
    fleet_size: u32,
    /// Bursts of the bursty workload
    #[arg(long, env = "BATON_BENCH_FLEET_BURSTS", value_name = "N", value_parser = number, default_value = "3", help_heading = "Fleet")]
    fleet_bursts: usize,
    /// Jobs a burst (one run of that many parallel jobs)
    #[arg(long, env = "BATON_BENCH_FLEET_BURST_JOBS", value_name = "N", value_parser = number, default_value = "20", help_heading = "Fleet")]
    fleet_burst_jobs: usize,
    /// Seconds between bursts
    #[arg(long, env = "BATON_BENCH_FLEET_GAP_S", value_name = "S", default_value_t = 300, help_heading = "Fleet")]
    fleet_gap_s: u64,
    /// Seconds each job sleeps
    #[arg(long, env = "BATON_BENCH_FLEET_JOB_S", value_name = "S", default_value_t = 5, help_heading = "Fleet")]
    fleet_job_s: u64,
    /// The elastic fleet's idle timeout, seconds (10 at least)
    #[arg(
        long,
        env = "BATON_BENCH_FLEET_IDLE_TIMEOUT_S",
        value_name = "S",
        default_value_t = 30,
        help_heading = "Fleet"
    )]
    fleet_idle_timeout_s: u32,
    /// Cold starts measured on each fleet
    #[arg(long, env = "BATON_BENCH_FLEET_COLD_RUNS", value_name = "N", value_parser = number, default_value = "3", help_heading = "Fleet")]
    fleet_cold_runs: usize,
    /// The JSON report (the functions' stdout goes next to it)
    #[arg(
        long,
        env = "BATON_BENCH_OUT",
        value_name = "PATH",
        default_value_os_t = root().join("target/bench/bench.json")
    )]
    out: PathBuf,
}

fn number(raw: &str) -> Result<usize, String> {
    raw.trim().parse().map_err(|_| format!("cannot read {raw:?}"))
}

fn section(raw: &str) -> Result<String, String> {
    SECTIONS.iter().find(|s| **s == raw.trim()).map(|s| s.to_string()).ok_or_else(|| format!("cannot read {raw:?}"))
}

fn shape(raw: &str) -> Result<workflows::Shape, String> {
    workflows::Shape::parse(raw.trim()).ok_or_else(|| format!("cannot read {raw:?}"))
}

/// The options from the command line, then `BATON_BENCH_<FLAG>`, then the
/// defaults.
fn options() -> Options {
    Options::parse().at_least_one_run()
}

impl Options {
    /// Runs of any kind are at least one (`--runs 0` runs once).
    fn at_least_one_run(mut self) -> Self {
        self.runs = self.runs.max(1);
        self.workflow_runners = self.workflow_runners.max(1);
        self.cold_runs = self.cold_runs.max(1);
        self
    }

    fn wants(&self, section: &str) -> bool {
        self.sections.iter().any(|s| s == section)
    }
}

/// The functions print their metrics (EMF lines) to stdout; while the bench
/// runs, stdout goes to a log file so the report stays readable.
struct QuietStdout {
    saved: i32,
}

impl QuietStdout {
    fn to(log: &std::path::Path) -> Option<Self> {
        let file = std::fs::File::create(log).ok()?;
        use std::os::fd::AsRawFd;
        let _ = std::io::stdout().flush();
        // SAFETY: plain descriptor duplication on descriptors this process owns.
        let saved = unsafe { libc::dup(1) };
        if saved < 0 {
            return None;
        }
        // SAFETY: as above; `file` stays open until dup2 has copied it.
        unsafe { libc::dup2(file.as_raw_fd(), 1) };
        Some(Self { saved })
    }

    fn restore(self) {
        let _ = std::io::stdout().flush();
        // SAFETY: restores the descriptor saved in `to`.
        unsafe {
            libc::dup2(self.saved, 1);
            libc::close(self.saved);
        }
    }
}

/// A stack like the tests' one, on counting clients, without schedules
/// (the reaper would tick in the middle of a measurement) and, unless
/// `with_rules`, without EventBridge rules (no subscriber works in the
/// background: the claim path's windows hold only the operation measured).
async fn start_stack(recorder: &Recorder, with_rules: bool) -> TestStack {
    let clients = AwsClients::local_with_interceptor(&endpoint(), recorder.interceptor()).await;
    let mut plan = Plan::new(&Resources::load(), &Naming::for_stage(&unique_stage()), &default_infra_dir())
        .expect("the plan builds from resources.json");
    if !with_rules {
        plan.rules.clear();
    }
    plan.schedules.clear();
    TestStack::start_on(clients, &plan, HashMap::new(), HostOptions::default()).await
}

// ---------------------------------------------------------------- windows

fn dynamodb(requests: &[Request]) -> Vec<&Request> {
    requests.iter().filter(|r| r.is_dynamodb()).collect()
}

fn is_read(operation: &str) -> bool {
    matches!(operation, "GetItem" | "Query" | "Scan" | "BatchGetItem" | "TransactGetItems")
}

fn is_write(operation: &str) -> bool {
    matches!(operation, "PutItem" | "UpdateItem" | "DeleteItem" | "BatchWriteItem" | "TransactWriteItems")
}

/// Waits until no DynamoDB request was recorded for a while.
pub(crate) async fn settle(recorder: &Recorder) {
    settle_except(recorder, "").await
}

/// Waits until no DynamoDB request was recorded for a while, except those of
/// `function`'s invocations (idle runners long-poll the claim function all
/// the time; their polls never stop).
async fn settle_except(recorder: &Recorder, function: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = recorder.mark();
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = recorder.mark();
        let busy = dynamodb(&recorder.since(last))
            .iter()
            .filter(|r| function.is_empty() || r.function.as_deref() != Some(function))
            .count();
        if busy == 0 || Instant::now() > deadline {
            return;
        }
        last = now;
    }
}

#[derive(Debug, Serialize)]
struct OperationFigures {
    name: String,
    requests: usize,
    by_operation: BTreeMap<String, usize>,
    read_requests: usize,
    write_requests: usize,
    transactions: usize,
    read_units: f64,
    write_units: f64,
    failed_conditional_writes: usize,
    other_services: BTreeMap<String, usize>,
    request_bytes: usize,
    target: Option<String>,
    meets_target: Option<bool>,
}

pub(crate) fn figures(name: &str, window: &[Request]) -> OperationFigures {
    let ddb = dynamodb(window);
    let mut by_operation = BTreeMap::new();
    for r in &ddb {
        *by_operation.entry(r.operation.clone()).or_insert(0) += 1;
    }
    let mut other_services = BTreeMap::new();
    for r in window.iter().filter(|r| !r.is_dynamodb()) {
        *other_services.entry(format!("{}:{}", r.service, r.operation)).or_insert(0) += 1;
    }
    OperationFigures {
        name: name.into(),
        requests: ddb.len(),
        by_operation,
        read_requests: ddb.iter().filter(|r| is_read(&r.operation)).count(),
        write_requests: ddb.iter().filter(|r| is_write(&r.operation)).count(),
        transactions: ddb.iter().filter(|r| r.operation == "TransactWriteItems").count(),
        read_units: ddb.iter().map(|r| r.read_units).sum(),
        write_units: ddb.iter().map(|r| r.write_units).sum(),
        failed_conditional_writes: ddb.iter().filter(|r| r.failed_condition).count(),
        other_services,
        request_bytes: ddb.iter().map(|r| r.request_bytes).sum(),
        target: None,
        meets_target: None,
    }
}

async fn measure<T>(
    recorder: &Recorder,
    name: &str,
    op: impl std::future::Future<Output = T>,
) -> (OperationFigures, T) {
    settle(recorder).await;
    let mark = recorder.mark();
    let out = op.await;
    (figures(name, &recorder.since(mark)), out)
}

// ---------------------------------------------------------------- scenario 1

fn sqs_event_for(fact: &Fact<JobExecutionQueued>) -> aws_lambda_events::sqs::SqsEvent {
    let envelope = json!({
        "version": "0",
        "id": uuid::Uuid::new_v4(),
        "detail-type": JobExecutionQueued::DETAIL_TYPE,
        "source": "baton",
        "account": "123456789012",
        "time": Utc::now(),
        "region": "us-east-1",
        "resources": [],
        "detail": fact,
    });
    serde_json::from_value(json!({
        "Records": [{
            "messageId": uuid::Uuid::new_v4().to_string(),
            "receiptHandle": "bench",
            "body": envelope.to_string(),
            "attributes": {},
            "messageAttributes": {},
            "eventSource": "aws:sqs",
            "awsRegion": "us-east-1",
        }]
    }))
    .expect("an SQS event")
}

/// Queues a job as the orchestrator and the enqueue function together do
/// (its spec, then its pending item), without the pipeline in between.
pub(crate) async fn enqueue_direct(store: &Store, workspace: &str, at: chrono::DateTime<Utc>, priority: i32) {
    let mut queued = queued_fact(workspace, LABELS, at);
    queued.spec.priority = priority;
    queued.fact.detail.job.priority = priority;
    write_spec(store, &queued).await;
    let labels = canonicalize(&queued.detail.job.labels).expect("valid labels");
    let set = labelset_id(&labels);
    store.enqueue(&queued.fact, labels, &set).await.expect("enqueue");
}

/// Writes a queued job's spec, as the orchestrator does with its fact.
async fn write_spec(store: &Store, queued: &baton_tests::runners::Queued) {
    let put =
        store.job_spec_put(queued.detail.job_execution_id, workspace_of(queued), &queued.spec).expect("a spec put");
    store.transact(vec![put]).await.expect("the spec is written");
}

fn workspace_of(queued: &baton_tests::runners::Queued) -> &str {
    &queued.fact.header.workspace_id
}

async fn per_operation(stack: &TestStack, recorder: &Recorder, context: &Context) -> Vec<OperationFigures> {
    let ws = format!("bench-ops-{}", &unique_stage()[1..]);
    let mut all = Vec::new();

    let reg_token = stack.registration_token(&ws, json!({})).await;
    let (f, runner) = measure(recorder, "register", stack.register(&reg_token, LABELS)).await;
    all.push(f);
    let session = runner.session_token.clone();

    let (f, none) = measure(recorder, "empty claim (no work ever queued)", stack.claim(&session)).await;
    assert!(none.is_none());
    all.push(f);

    let queued = queued_fact(&ws, LABELS, Utc::now());
    write_spec(&stack.store, &queued).await;
    let event = sqs_event_for(&queued.fact);
    let (f, response) = measure(recorder, "enqueue (function, one fact)", baton_enqueue::handle(context, event)).await;
    assert!(response.batch_item_failures.is_empty(), "the enqueue function took the fact");
    all.push(f);

    let (f, job) = measure(recorder, "claim (first job of a new label set)", stack.claim(&session)).await;
    let job = job.expect("the queued job is claimed");
    all.push(f);
    let id = job.job_execution_id;
    let token = job.lease.token.clone();

    let (f, hb) = measure(recorder, "heartbeat", stack.heartbeat(&token, id)).await;
    assert_eq!(hb.status, 200, "{}", hb.body);
    all.push(f);

    let step = job.job.steps[0].id;
    let path = format!("/v1/runners/leases/{id}/steps/{step}");
    let (f, report) = measure(
        recorder,
        "step report",
        stack.post(&path, &token, json!({"status": "running", "started_at": Utc::now()})),
    )
    .await;
    assert_eq!(report.status, 200, "{}", report.body);
    all.push(f);

    let (f, done) =
        measure(recorder, "complete", stack.complete(&token, id, json!({"status": "succeeded", "steps": []}))).await;
    assert_eq!(done.status, 200, "{}", done.body);
    all.push(f);

    // The same one-step job, ended by its step's report (behaviour.md §16):
    // the report reads the lease and the record, then ends the lease in the
    // complete's transaction; the runner sends no complete.
    {
        let queued = baton_tests::runners::queued_steps_fact(&ws, LABELS, Utc::now(), 1);
        write_spec(&stack.store, &queued).await;
        let labels = canonicalize(&queued.detail.job.labels).expect("valid labels");
        stack.store.enqueue(&queued.fact, labels.clone(), &labelset_id(&labels)).await.expect("enqueue");
        let job = stack.claim(&session).await.expect("the queued job is claimed");
        let (id, token, step) = (job.job_execution_id, job.lease.token.clone(), job.job.steps[0].id);
        let path = format!("/v1/runners/leases/{id}/steps/{step}");
        let report = json!({"status": "succeeded", "exit_code": 0, "outputs": {"version": "1.0.0"}, "last": true});
        let (f, settled) =
            measure(recorder, "last step report (settles the job, no complete)", stack.post(&path, &token, report))
                .await;
        assert_eq!(settled.body["settled"], "succeeded", "{}", settled.body);
        all.push(f);
    }

    let (f, none) = measure(recorder, "empty claim (label set drained)", stack.claim(&session)).await;
    assert!(none.is_none());
    all.push(f);

    // The steady state: a job of a label set this instance read in the last
    // second (claims cache a workspace's label sets for LABEL_SETS_TTL). The
    // drain above pruned the set, so one claim first registers it in the
    // cache again.
    enqueue_direct(&stack.store, &ws, Utc::now(), 0).await;
    enqueue_direct(&stack.store, &ws, Utc::now(), 0).await;
    let first = stack.claim(&session).await.expect("the first of two jobs");
    let done =
        stack.complete(&first.lease.token, first.job_execution_id, json!({"status": "succeeded", "steps": []})).await;
    assert_eq!(done.status, 200, "{}", done.body);
    let (f, warm) = measure(recorder, "claim (label set seen < 1 s ago)", stack.claim(&session)).await;
    let warm = warm.expect("the queued job is claimed");
    all.push(f);
    let done =
        stack.complete(&warm.lease.token, warm.job_execution_id, json!({"status": "succeeded", "steps": []})).await;
    assert_eq!(done.status, 200, "{}", done.body);

    // A claim of a job naming 5 workspace secrets: the claim reads them
    // (one SSM GetParameters for up to 10 names) and puts them in.
    let names: Vec<String> = (1..=5).map(|i| format!("BENCH_SECRET_{i}")).collect();
    for name in &names {
        context.secrets.put(&ws, name, "bench-value").await.expect("a secret is set");
    }
    {
        let mut queued = queued_fact(&ws, LABELS, Utc::now());
        queued.spec.secrets = names.clone();
        queued.spec.env = names
            .iter()
            .map(|name| (name.clone(), baton_domain::workflows::references::secret_placeholder(name)))
            .collect();
        write_spec(&stack.store, &queued).await;
        let labels = canonicalize(&queued.detail.job.labels).expect("valid labels");
        let set = labelset_id(&labels);
        stack.store.enqueue(&queued.fact, labels, &set).await.expect("enqueue");
    }
    let (f, with_secrets) = measure(recorder, "claim (job naming 5 secrets)", stack.claim(&session)).await;
    let with_secrets = with_secrets.expect("the queued job is claimed");
    assert_eq!(with_secrets.job.secret_values.len(), 5, "the claim put the 5 secrets in");
    all.push(f);
    let done = stack
        .complete(&with_secrets.lease.token, with_secrets.job_execution_id, json!({"status": "succeeded", "steps": []}))
        .await;
    assert_eq!(done.status, 200, "{}", done.body);

    // A lease nobody heartbeats, then the reaper after its expiry.
    enqueue_direct(&stack.store, &ws, Utc::now(), 0).await;
    let _lost = stack.claim(&session).await.expect("a job to let expire");
    let later = Utc::now() + chrono::Duration::hours(2);
    let limits = baton_lease_reaper::ReapLimits {
        page: baton_lease_reaper::REAPER_PAGE,
        stop_at: std::time::Instant::now() + std::time::Duration::from_secs(60),
    };
    let (f, reaped) =
        measure(recorder, "reaper (expires one lease)", baton_lease_reaper::reap(context, later, 0, limits)).await;
    assert_eq!(reaped.expect("the reaper runs").expired(), 1, "the reaper expired the lease");
    all.push(f);

    // A claim that must look at 30 fitting label sets, each queueing a job
    // with a 4 KB spec: the registry read, one head query a set, the claim
    // transaction and the winner's spec. Pending items carry no spec, so each
    // head query reads a small item whatever the scripts weigh.
    let wide = ["linux", "x64", "a", "b", "c", "d", "e"];
    let wide_ws = format!("{ws}-wide");
    let subsets: Vec<Vec<&str>> = (1u32..128)
        .filter(|mask| mask.count_ones() >= 2)
        .take(30)
        .map(|mask| wide.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, l)| *l).collect())
        .collect();
    for labels in &subsets {
        let mut queued = queued_fact(&wide_ws, labels, Utc::now());
        queued.spec.steps[0].run = "x".repeat(4096);
        write_spec(&stack.store, &queued).await;
        let canonical = canonicalize(&queued.detail.job.labels).expect("valid labels");
        let set = labelset_id(&canonical);
        stack.store.enqueue(&queued.fact, canonical, &set).await.expect("enqueue");
    }
    let wide_session = stack.runner(&wide_ws, &wide).await.session_token;
    let (f, job) =
        measure(recorder, "claim among 30 fitting label sets (4 KB job specs)", stack.claim(&wide_session)).await;
    assert_eq!(job.expect("a job").job.steps[0].run.len(), 4096, "the spec reaches the runner whole");
    all.push(f);

    // A provisioner's reads and writes at scale (issue 23): the same 30
    // label sets hold 2,000 queued jobs (pending items only: demand counts
    // them, nobody claims them here). A provisioner serves at most
    // `MAX_LABEL_SETS` (20) sets: two share the 30.
    for (index, labels) in subsets.iter().cycle().take(2_000 - subsets.len()).enumerate() {
        let queued = queued_fact(&wide_ws, labels, Utc::now() + chrono::Duration::milliseconds(index as i64));
        let canonical = canonicalize(&queued.detail.job.labels).expect("valid labels");
        let set = labelset_id(&canonical);
        stack.store.enqueue(&queued.fact, canonical, &set).await.expect("enqueue");
    }
    let served = |sets: &[Vec<&str>]| json!({"name": "bench", "label_sets": sets, "max_instances": 1000});
    let path = format!("/v1/workspaces/{wide_ws}/provisioners");
    let mut provisioner_tokens = Vec::new();
    for sets in subsets.chunks(baton_domain::runners::provisioners::settings::MAX_LABEL_SETS) {
        let created = stack.post(&path, &stack.admin_token, served(sets)).await;
        assert_eq!(created.status, 201, "{}", created.body);
        provisioner_tokens.push(created.body["token"].as_str().expect("a provisioner token").to_string());
    }
    let (f, demand) = measure(
        recorder,
        "provisioner demand read (20 of 30 label sets, 2,000 jobs queued)",
        stack.send(reqwest::Method::GET, "/v1/provisioners/demand", &provisioner_tokens[0], None),
    )
    .await;
    assert_eq!(demand.status, 200, "{}", demand.body);
    let queued: u64 = demand.body["label_sets"]
        .as_array()
        .expect("label sets")
        .iter()
        .map(|set| set["queued"].as_u64().unwrap_or(0))
        .sum();
    assert!(queued >= 1_300, "the demand counts its sets' queued jobs ({queued})");
    all.push(f);
    let reserve = json!({"labels": subsets[0], "count": 1});
    let (f, reserved) = measure(
        recorder,
        "provisioner reservation (1 instance; 30 label sets, 2,000 jobs queued)",
        stack.post("/v1/provisioners/reservations", &provisioner_tokens[0], reserve),
    )
    .await;
    assert_eq!(reserved.status, 201, "{}", reserved.body);
    all.push(f);
    // The fleet pass at scale: every report and read of instances runs one
    // (intents, releases); here with 50 instances booting (a set holds
    // about 66 of the 2,000 jobs).
    let reserve = json!({"labels": subsets[1], "count": 50});
    let (f, reserved) = measure(
        recorder,
        "provisioner reservation (50 instances at once; same queue)",
        stack.post("/v1/provisioners/reservations", &provisioner_tokens[0], reserve),
    )
    .await;
    assert_eq!(reserved.status, 201, "{}", reserved.body);
    all.push(f);
    let events: Vec<serde_json::Value> = reserved.body["reservations"]
        .as_array()
        .expect("reservations")
        .iter()
        .enumerate()
        .map(|(i, r)| json!({"provider_runner_id": format!("i-{i:04}"), "state": "booting", "reservation_id": r["id"]}))
        .collect();
    assert_eq!(events.len(), 50, "50 reservations granted");
    let (f, report) = measure(
        recorder,
        "instance report (50 booting; with its fleet pass)",
        stack.post("/v1/provisioners/instances", &provisioner_tokens[0], json!({ "events": events })),
    )
    .await;
    assert_eq!(report.status, 200, "{}", report.body);
    all.push(f);
    let (f, listed) = measure(
        recorder,
        "instances read (50 instances; with its fleet pass)",
        stack.send(reqwest::Method::GET, "/v1/provisioners/instances", &provisioner_tokens[0], None),
    )
    .await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    all.push(f);

    for f in &mut all {
        match f.name.as_str() {
            "claim (label set seen < 1 s ago)" => {
                f.target = Some("≤ 3 reads (session, head, spec) + 1 transaction".into());
                f.meets_target = Some(f.read_requests <= 3 && f.transactions == 1 && f.write_requests == 1);
            }
            "heartbeat" => {
                f.target = Some("exactly 1 write, no read".into());
                f.meets_target = Some(f.write_requests == 1 && f.read_requests == 0 && f.requests == 1);
            }
            _ => {}
        }
    }
    all
}

// ---------------------------------------------------------------- scenario 2

#[derive(Debug, Serialize)]
struct ContentionFigures {
    runners: usize,
    workspaces: usize,
    jobs: usize,
    claims: usize,
    empty_claims: usize,
    claim_errors: usize,
    failed_conditional_writes: usize,
    failed_conditional_writes_per_claim: f64,
    failed_claim_transactions: usize,
    dynamodb_requests: usize,
    dynamodb_requests_per_claim: f64,
    read_units_per_claim: f64,
    write_units_per_claim: f64,
    /// Failed conditional writes per claim while the backlog was at least
    /// the claim window (`HEAD_READ`), and in the drain's tail below it.
    failed_per_claim_backlog: f64,
    failed_per_claim_tail: f64,
    claims_in_tail: usize,
    /// The emulator's median answer time per DynamoDB operation.
    median_ms_by_operation: BTreeMap<String, f64>,
    claim_http_median_ms: f64,
    claim_http_p95_ms: f64,
    wall_seconds: f64,
    target: Option<String>,
    meets_target: Option<bool>,
}

/// R runners drain `jobs` jobs spread evenly over `workspaces` workspaces;
/// each runner belongs to one workspace (round robin), and every workspace
/// gets at least one, so `runners` grows to `workspaces` if it is smaller.
async fn contention(
    stack: Arc<TestStack>,
    recorder: &Recorder,
    runners: usize,
    jobs: usize,
    workspaces: usize,
    priority_spread: i32,
) -> ContentionFigures {
    let workspaces = workspaces.max(1);
    let runners = runners.max(workspaces);
    let tag = &unique_stage()[1..];
    let names: Vec<String> = (0..workspaces).map(|w| format!("bench-r{runners}-w{w}-{tag}")).collect();
    let start = Utc::now() - chrono::Duration::seconds(jobs as i64 + 1);
    // Enqueue straight into the store (the bench is about claims), a few at a time.
    let store = stack.store.clone();
    futures::future::join_all((0..jobs).collect::<Vec<_>>().chunks(jobs.div_ceil(8).max(1)).map(|chunk| {
        let store = store.clone();
        let names = names.clone();
        let chunk = chunk.to_vec();
        async move {
            for i in chunk {
                let ws = &names[i % names.len()];
                // Deterministic, spread over -N..=N, unrelated to the order of queueing.
                let priority = if priority_spread == 0 {
                    0
                } else {
                    (i as i32 * 7).rem_euclid(2 * priority_spread + 1) - priority_spread
                };
                enqueue_direct(&store, ws, start + chrono::Duration::milliseconds(i as i64 * 10), priority).await;
            }
        }
    }))
    .await;
    let mut sessions = Vec::new();
    for r in 0..runners {
        sessions.push(stack.runner(&names[r % names.len()], LABELS).await.session_token);
    }
    settle(recorder).await;

    let claimed = Arc::new(AtomicUsize::new(0));
    let empty = Arc::new(AtomicUsize::new(0));
    let errors = Arc::new(AtomicUsize::new(0));
    let latencies = Arc::new(Mutex::new(Vec::new()));
    // When the backlog fell below the claim window (jobs left < HEAD_READ).
    let tail_from: Arc<Mutex<Option<Instant>>> =
        Arc::new(Mutex::new(if jobs <= HEAD_READ { Some(Instant::now()) } else { None }));
    let mark = recorder.mark();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(1800);
    let tasks: Vec<_> = sessions
        .into_iter()
        .map(|session| {
            let (stack, claimed, empty, errors, latencies, tail_from) =
                (stack.clone(), claimed.clone(), empty.clone(), errors.clone(), latencies.clone(), tail_from.clone());
            tokio::spawn(async move {
                while claimed.load(Ordering::SeqCst) < jobs && Instant::now() < deadline {
                    let t = Instant::now();
                    let answer = stack.post("/v1/runners/claim", &session, json!({})).await;
                    latencies.lock().unwrap_or_else(|e| e.into_inner()).push(t.elapsed().as_secs_f64() * 1000.0);
                    match answer.status {
                        200 => {
                            let n = claimed.fetch_add(1, Ordering::SeqCst) + 1;
                            if n + HEAD_READ == jobs.max(HEAD_READ) {
                                *tail_from.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
                            }
                            let id = answer.body["job_execution_id"].as_str().unwrap_or_default().to_string();
                            let token = answer.body["lease"]["token"].as_str().unwrap_or_default().to_string();
                            let done = stack
                                .post(
                                    &format!("/v1/runners/leases/{id}/complete"),
                                    &token,
                                    json!({"status": "succeeded", "steps": []}),
                                )
                                .await;
                            if done.status != 200 {
                                errors.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                        204 => {
                            empty.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        _ => {
                            errors.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
    let wall = started.elapsed().as_secs_f64();
    let window = recorder.since(mark);
    let ddb = dynamodb(&window);
    let claims = claimed.load(Ordering::SeqCst);
    let failed = ddb.iter().filter(|r| r.failed_condition).count();
    let per = |x: f64| if claims == 0 { 0.0 } else { x / claims as f64 };
    let tail_at = tail_from.lock().unwrap_or_else(|e| e.into_inner()).unwrap_or_else(Instant::now);
    let claims_in_tail = jobs.min(HEAD_READ);
    let failed_tail = ddb.iter().filter(|r| r.failed_condition && r.at.is_some_and(|at| at >= tail_at)).count();
    let ratio = |x: usize, n: usize| if n == 0 { 0.0 } else { x as f64 / n as f64 };
    let mut times: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in &ddb {
        times.entry(r.operation.clone()).or_default().push(r.millis);
    }
    let median_ms_by_operation = times
        .into_iter()
        .map(|(op, mut t)| {
            t.sort_by(|a, b| a.total_cmp(b));
            (op, percentile(&t, 0.5))
        })
        .collect();
    let mut lat = latencies.lock().unwrap_or_else(|e| e.into_inner()).clone();
    lat.sort_by(|a, b| a.total_cmp(b));
    ContentionFigures {
        runners,
        workspaces,
        jobs,
        claims,
        empty_claims: empty.load(Ordering::SeqCst),
        claim_errors: errors.load(Ordering::SeqCst),
        failed_conditional_writes: failed,
        failed_conditional_writes_per_claim: per(failed as f64),
        failed_claim_transactions: ddb
            .iter()
            .filter(|r| r.failed_condition && r.operation == "TransactWriteItems")
            .count(),
        dynamodb_requests: ddb.len(),
        dynamodb_requests_per_claim: per(ddb.len() as f64),
        read_units_per_claim: per(ddb.iter().map(|r| r.read_units).sum()),
        write_units_per_claim: per(ddb.iter().map(|r| r.write_units).sum()),
        failed_per_claim_backlog: ratio(failed - failed_tail, claims.saturating_sub(claims_in_tail)),
        failed_per_claim_tail: ratio(failed_tail, claims_in_tail),
        claims_in_tail,
        median_ms_by_operation,
        claim_http_median_ms: percentile(&lat, 0.5),
        claim_http_p95_ms: percentile(&lat, 0.95),
        wall_seconds: wall,
        target: (runners == 32).then(|| "≤ 0.2 failed conditional writes per claim".into()),
        meets_target: (runners == 32).then_some(per(failed as f64) <= 0.2),
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

// ---------------------------------------------------------------- scenario 3

#[derive(Debug, Serialize)]
struct Latency {
    calls: usize,
    median_ms: f64,
    p90_ms: f64,
    min_ms: f64,
}

async fn emulator_latency(stack: &TestStack) -> Latency {
    let calls = 50;
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        let _ = stack.store.get("BENCH#latency", "PROBE").await.expect("GetItem answers");
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(|a, b| a.total_cmp(b));
    Latency { calls, median_ms: percentile(&times, 0.5), p90_ms: percentile(&times, 0.9), min_ms: times[0] }
}

// ---------------------------------------------------------------- report

fn fmt_ops(by: &BTreeMap<String, usize>) -> String {
    by.iter().map(|(op, n)| if *n == 1 { op.clone() } else { format!("{op}×{n}") }).collect::<Vec<_>>().join(" + ")
}

fn verdict(meets: Option<bool>) -> &'static str {
    match meets {
        Some(true) => "meets",
        Some(false) => "MISSES",
        None => "",
    }
}

/// The claim path's per-operation table.
fn render_operations(ops: &[OperationFigures]) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{:<34} {:>4} {:>3} {:>3} {:>6} {:>6}  {:<48} {}\n",
        "operation", "reqs", "rd", "wr", "RCU", "WCU", "DynamoDB requests", "target"
    ));
    for f in ops {
        let target = match &f.target {
            Some(t) => format!("{t}: {}", verdict(f.meets_target)),
            None => String::new(),
        };
        // Requests to other services ride along in the target column
        // (`+ SSM:GetParameters`: the claim that reads secrets), less the
        // dev host's trigger pollers that happened to poll meanwhile.
        let polling = |op: &str| op.starts_with("DynamoDB Streams:") || op == "SQS:ReceiveMessage";
        let others = f.other_services.iter().filter(|(op, _)| !polling(op)).map(|(op, n)| {
            if *n == 1 {
                op.clone()
            } else {
                format!("{op}×{n}")
            }
        });
        let target = others.map(|op| format!("+ {op} ")).collect::<String>() + &target;
        s.push_str(&format!(
            "{:<34} {:>4} {:>3} {:>3} {:>6.1} {:>6.1}  {:<48} {}\n",
            f.name,
            f.requests,
            f.read_requests,
            f.write_requests,
            f.read_units,
            f.write_units,
            fmt_ops(&f.by_operation),
            target
        ));
    }
    s.push_str("   (rd/wr: read/write requests; RCU/WCU: read/write capacity units as AWS would bill them;\n");
    s.push_str("    a transaction counts each of its items twice)\n\n");
    s
}

fn render_contention(cont: &[ContentionFigures]) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{:>7} {:>3} {:>6} {:>5} {:>9} {:>10} {:>8} {:>6} {:>8} {:>7} {:>7} {:>9} {:>7}  {}\n",
        "runners",
        "ws",
        "claims",
        "empty",
        "failed-cw",
        "failed/clm",
        "backlog",
        "tail",
        "reqs/clm",
        "RCU/clm",
        "WCU/clm",
        "claim p50",
        "wall s",
        "target"
    ));
    for c in cont {
        let target = match &c.target {
            Some(t) => format!("{t}: {}", verdict(c.meets_target)),
            None => String::new(),
        };
        s.push_str(&format!(
            "{:>7} {:>3} {:>6} {:>5} {:>9} {:>10.3} {:>8.3} {:>6.2} {:>8.2} {:>7.2} {:>7.2} {:>7.0}ms {:>7.1}  {}\n",
            c.runners,
            c.workspaces,
            c.claims,
            c.empty_claims,
            c.failed_conditional_writes,
            c.failed_conditional_writes_per_claim,
            c.failed_per_claim_backlog,
            c.failed_per_claim_tail,
            c.dynamodb_requests_per_claim,
            c.read_units_per_claim,
            c.write_units_per_claim,
            c.claim_http_median_ms,
            c.wall_seconds,
            target
        ));
        if c.claim_errors > 0 {
            s.push_str(&format!("        ({} claim/complete calls answered an error)\n", c.claim_errors));
        }
    }
    s.push_str(&format!(
        "   (failed-cw: conditional writes that failed, mostly lost claim races; failed/clm: per successful claim,\n\
         \x20   over the whole drain, then split: backlog = while ≥ {HEAD_READ} jobs were left (the claim window), tail = the last\n\
         \x20   {HEAD_READ}; empty: 204 answers; wall seconds and latencies are information only: the emulator is slow)\n"
    ));
    for c in cont {
        let times: Vec<String> = c.median_ms_by_operation.iter().map(|(op, ms)| format!("{op} {ms:.0} ms")).collect();
        s.push_str(&format!(
            "   emulator median answer, {} runner(s), {} workspace(s): {}\n",
            c.runners,
            c.workspaces,
            times.join(", ")
        ));
    }
    s
}

fn render_idle(idle: &[(cost::IdleRunner, cost::Usage)]) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{:>6} {:>6} {:>12} {:>14} {:>8} {:>8} {:>9} {:>9} {:>9}\n",
        "wait", "pause", "polls/month", "RCU per poll", "invoc", "$/month", "Lambda", "DynamoDB", "API GW"
    ));
    for (i, per_poll) in idle {
        s.push_str(&format!(
            "{:>5.0}s {:>5.0}s {:>12.0} {:>14.1} {:>8.2} {:>8.3} {:>9.3} {:>9.3} {:>9.3}\n",
            i.wait_s,
            i.pause_s,
            i.polls_per_month,
            per_poll.dynamodb_read_units,
            per_poll.lambda_invocations,
            i.cost.total,
            i.cost.lambda,
            i.cost.dynamodb,
            i.cost.api_gateway
        ));
    }
    s.push_str(&format!(
        "   (first row: the agent's default, a 20 s long poll back to back; the claim function is billed for the time\n\
         \x20   it holds a poll open, at {} MB. Second row: `--claim-wait-s 0`, the agent then backs off to the\n\
         \x20   session's poll_interval_s, 5 s by default. Reads per poll measured; no writes while idle)\n",
        cost::FUNCTION_MEMORY_MB
    ));
    s
}

/// The previous main's report: the one file in `bench/baseline/`, named
/// after its commit.
fn baseline_report() -> Option<(String, serde_json::Value)> {
    let dir = root().join("bench/baseline");
    let path = std::fs::read_dir(&dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))?;
    let commit = path.file_stem()?.to_string_lossy().into_owned();
    let report = serde_json::from_str(&std::fs::read_to_string(&path).ok()?).ok()?;
    Some((commit, report))
}

/// The agent's default keep-alive period (`--push-ping-s`).
const PUSH_PING_S: f64 = 540.0;

fn render_idle_pushed(p: &cost::IdlePushedRunner, per_connect: &cost::Usage, long_poll_month: Option<f64>) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{:>12} {:>8} {:>13} {:>14} {:>9} {:>9} {:>9} {:>9}   {}\n",
        "safety poll",
        "ping",
        "polls/month",
        "connects/month",
        "$/month",
        "API GW",
        "Lambda",
        "DynamoDB",
        "target ≤ $0.05"
    ));
    s.push_str(&format!(
        "{:>11.0}s {:>7.0}s {:>13.0} {:>14.0} {:>9.4} {:>9.4} {:>9.4} {:>9.4}   {}\n",
        p.safety_poll_s,
        p.ping_s,
        p.polls_per_month,
        p.connects_per_month,
        p.cost.total,
        p.cost.api_gateway,
        p.cost.lambda,
        p.cost.dynamodb,
        if p.cost.total <= 0.05 { "meets" } else { "MISSES" }
    ));
    s.push_str(&format!(
        "   (API GW: 43,200 connection-minutes, a ping and its reply every {:.0} s, and the safety polls' HTTP requests;\n\
         \x20   a socket measured at {:.1} RCU, {:.1} WCU, {:.0} invocations ($connect, $disconnect), renewed every 2 h;\n\
         \x20   each safety poll is the `--claim-wait-s 0` poll above. Previous main (20 s long polls): {})\n",
        p.ping_s,
        per_connect.dynamodb_read_units,
        per_connect.dynamodb_write_units,
        per_connect.lambda_invocations,
        long_poll_month.map_or("not measured".to_string(), |m| format!("${m:.2} a month"))
    ));
    s
}

#[tokio::main]
async fn main() {
    let mut opts = options();
    if std::env::var("BATON_AWS_ENDPOINT").is_err() {
        eprintln!("BATON_AWS_ENDPOINT is not set: run `make bench` (scripts/bench.sh starts moto)");
        std::process::exit(2);
    }
    if let Some(dir) = opts.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).expect("creating the output directory");
        if let (Ok(dir), Some(name)) = (std::fs::canonicalize(dir), opts.out.file_name()) {
            opts.out = dir.join(name);
        }
    }
    let log = opts.out.with_file_name("functions-stdout.log");
    let quiet = QuietStdout::to(&log);
    eprintln!("bench: provisioning a stack on {} …", endpoint());

    let recorder = Recorder::default();
    let stack = Arc::new(start_stack(&recorder, false).await);
    let context = stack.context();
    let mut text = String::from(
        "Baton benchmark: every AWS request counted by an SDK interceptor (the functions' too); DynamoDB units computed\n\
         from item sizes; money at us-east-1 list prices (bench/src/cost.rs)\n",
    );
    let mut json = serde_json::Map::new();
    let mut section = 0;
    let mut heading = |text: &mut String, title: &str| {
        section += 1;
        text.push_str(&format!("\n{section}. {title}\n"));
    };

    if opts.wants("claim-path") {
        eprintln!("bench: claim path, per operation …");
        let ops = per_operation(&stack, &recorder, &context).await;
        heading(&mut text, "Claim path, per operation, uncontended (1 runner)");
        text.push_str(&render_operations(&ops));
        json.insert("operations".into(), json!(ops));
    }

    if opts.wants("artifacts") {
        eprintln!("bench: a 100 MB artifact and cache entry, up and down …");
        let moved = transfers::measure(&stack, &recorder).await;
        heading(&mut text, "Artifacts and caches: a 100 MB archive per job, counted (bytes straight to S3)");
        text.push_str(&transfers::render(&moved));
        json.insert("transfers".into(), json!(moved));
    }

    if opts.wants("fleet") {
        eprintln!("bench: elastic fleet (local provisioner) against a fixed one …");
        let fleet_stack = TestStack::start().await;
        let shape = fleet::FleetShape {
            max_instances: opts.fleet_size.max(1),
            bursts: opts.fleet_bursts.max(1),
            burst_jobs: opts.fleet_burst_jobs.max(1),
            gap: Duration::from_secs(opts.fleet_gap_s),
            job_seconds: opts.fleet_job_s,
            idle_timeout_s: opts.fleet_idle_timeout_s.max(10),
            cold_runs: opts.fleet_cold_runs.max(1),
        };
        let work = opts.out.with_file_name("fleet-work");
        let measured = fleet::measure(&fleet_stack, &opts.runner_bin, &work, shape).await;
        heading(
            &mut text,
            "Elastic fleet (local provisioner, real runner processes) against a fixed fleet of the same size",
        );
        text.push_str(&fleet::render(&measured, shape));
        json.insert("fleet".into(), json!(measured));
        fleet_stack.host.stop().await;
    }

    if opts.wants("workflows") {
        let wf_recorder = Recorder::default();
        let wf_stack = Arc::new(start_stack(&wf_recorder, true).await);
        let uncounted = AwsClients::local(&endpoint()).await;
        let work_root = opts.out.with_file_name("work");
        let shapes = workflows::run_all(
            wf_stack.clone(),
            &wf_recorder,
            &uncounted,
            &opts.shapes,
            opts.workflow_runners,
            opts.runs,
            &work_root,
        )
        .await;
        heading(
            &mut text,
            &format!(
                "Whole workflows: {} run(s) a shape, {} in-process baton-runner agents, steps `true`",
                opts.runs, opts.workflow_runners
            ),
        );
        text.push_str(&workflows::render(&shapes));
        json.insert("workflows".into(), json!(shapes));
        if let Ok(stack) = Arc::try_unwrap(wf_stack) {
            stack.host.stop().await;
        }
    }

    if opts.wants("idle") {
        eprintln!("bench: an idle runner's long polls …");
        let ws = format!("bench-idle-{}", &unique_stage()[1..]);
        let mut idle = Vec::new();
        for (wait_s, pause_s, polls) in [(20, 5.0_f64, 2), (0, 5.0, 5)] {
            let per_poll = workflows::idle_poll(&stack, &recorder, &ws, wait_s, polls).await;
            let pause_s = if wait_s == 0 { pause_s } else { 0.0 };
            idle.push((cost::idle_runner(wait_s as f64, pause_s, &per_poll, cost::FUNCTION_MEMORY_MB), per_poll));
        }
        heading(&mut text, "Idle cost of one polling runner, per 30-day month");
        text.push_str(&render_idle(&idle));
        json.insert(
            "idle_runner".into(),
            json!(idle.iter().map(|(i, p)| json!({"month": i, "per_poll": p})).collect::<Vec<_>>()),
        );
        eprintln!("bench: an idle runner on its push socket …");
        let per_connect = workflows::idle_connect(&stack, &recorder, &ws, 5).await;
        let quick_poll = idle.iter().find(|(i, _)| i.wait_s == 0.0).map(|(_, p)| *p).unwrap_or_default();
        let safety = stack.host.config.push.safety_poll.as_secs_f64();
        let pushed = cost::idle_pushed_runner(safety, PUSH_PING_S, &quick_poll, &per_connect);
        heading(&mut text, "Idle cost of one runner holding its push socket, per 30-day month (the agent's default)");
        text.push_str(&render_idle_pushed(&pushed, &per_connect, idle.first().map(|(i, _)| i.cost.total)));
        json.insert("idle_pushed_runner".into(), json!({"month": pushed, "per_connect": per_connect}));
    }

    if opts.wants("contention") {
        let mut cont = Vec::new();
        for &workspaces in &opts.workspaces {
            for &runners in &opts.runners {
                eprintln!("bench: {runners} runner(s) draining {} jobs over {workspaces} workspace(s) …", opts.jobs);
                cont.push(
                    contention(stack.clone(), &recorder, runners, opts.jobs, workspaces, opts.priority_spread).await,
                );
            }
        }
        heading(
            &mut text,
            &format!("Contention: R runners drain {} jobs (HTTP claim + complete in a loop)", opts.jobs),
        );
        text.push_str(&render_contention(&cont));
        json.insert("contention".into(), json!(cont));
    }

    if opts.wants("cold-start") {
        eprintln!("bench: cold starts of the release binaries in {} …", opts.bin_dir.display());
        let mut env = baton_devhost::function_env(&stack.provisioned, &HashMap::new());
        env.insert("BATON_AWS_ENDPOINT".into(), endpoint());
        let report = cold_start::measure(&opts.bin_dir, &env, opts.cold_runs).await;
        heading(&mut text, "Cold start proxy: release binary size, process start → first handled event");
        text.push_str(&cold_start::render(&report));
        json.insert("cold_start".into(), json!(report));
    }

    eprintln!("bench: emulator latency …");
    let latency = emulator_latency(&stack).await;
    heading(&mut text, "The emulator, for scale");
    text.push_str(&format!(
        "single GetItem over {} calls: median {:.1} ms, p90 {:.1} ms, min {:.1} ms (DynamoDB in-region: single-digit ms)\n",
        latency.calls, latency.median_ms, latency.p90_ms, latency.min_ms
    ));
    json.insert("generated_at".into(), json!(Utc::now()));
    if let Some((commit, previous)) = baseline_report() {
        heading(&mut text, &format!("Side by side: the previous main ({commit}, bench/baseline/) and this tree"));
        text.push_str(&baton_bench::baseline::render(&commit, &previous, &serde_json::Value::Object(json.clone())));
    }
    text.push_str(&format!("\nJSON: {}\n", opts.out.display()));

    if let Some(quiet) = quiet {
        quiet.restore();
    }
    print!("{text}");
    json.insert("endpoint".into(), json!(endpoint()));
    json.insert("emulator_get_item_latency_ms".into(), json!(latency));
    json.insert(
        "units".into(),
        json!("read_units/write_units: DynamoDB capacity units computed from item sizes (1 KB per write unit, twice in a transaction; 4 KB per read unit, half when eventually consistent); money in USD"),
    );
    std::fs::write(&opts.out, serde_json::to_string_pretty(&serde_json::Value::Object(json)).expect("JSON"))
        .expect("writing the JSON report");
    drop(context);
    if let Ok(stack) = Arc::try_unwrap(stack) {
        stack.host.stop().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, FromArgMatches};

    /// Parses `args` as the command line, ignoring the environment.
    fn parse(args: &[&str]) -> Result<Options, clap::Error> {
        let command = Options::command().mut_args(|arg| arg.env(None));
        let matches = command.try_get_matches_from(std::iter::once("bench").chain(args.iter().copied()))?;
        Options::from_arg_matches(&matches).map(Options::at_least_one_run)
    }

    #[test]
    fn every_flag_also_reads_baton_bench_flag() {
        let command = Options::command();
        let flags: Vec<(String, Option<String>)> = command
            .get_arguments()
            .filter_map(|arg| arg.get_long().map(|long| (long, arg.get_env())))
            .filter(|(long, _)| *long != "help")
            .map(|(long, env)| (long.to_string(), env.map(|e| e.to_string_lossy().into_owned())))
            .collect();
        let names: Vec<&str> = flags.iter().map(|(long, _)| long.as_str()).collect();
        assert_eq!(
            names,
            [
                "sections",
                "jobs",
                "runners",
                "workspaces",
                "shapes",
                "runs",
                "workflow-runners",
                "priority-spread",
                "bin-dir",
                "cold-runs",
                "runner-bin",
                "fleet-size",
                "fleet-bursts",
                "fleet-burst-jobs",
                "fleet-gap-s",
                "fleet-job-s",
                "fleet-idle-timeout-s",
                "fleet-cold-runs",
                "out"
            ]
        );
        for (long, env) in &flags {
            assert_eq!(env.as_deref(), Some(format!("BATON_BENCH_{}", long.replace('-', "_").to_uppercase()).as_str()));
        }
    }

    #[test]
    fn defaults() {
        let o = parse(&[]).unwrap();
        // Every section but the fleet's, which runs for minutes.
        assert_eq!(o.sections, SECTIONS[..SECTIONS.len() - 1]);
        assert_eq!(SECTIONS.last(), Some(&"fleet"));
        assert_eq!(
            (o.fleet_size, o.fleet_bursts, o.fleet_burst_jobs, o.fleet_gap_s, o.fleet_job_s, o.fleet_cold_runs),
            (5, 3, 20, 300, 5, 3),
            "the issue's bursty shape: 3 bursts of 20 jobs, 5 minutes apart, against a fleet of 5"
        );
        assert_eq!((o.jobs, o.runners.as_slice(), o.workspaces.as_slice()), (1000, &[1, 8, 32, 64][..], &[1, 10][..]));
        assert_eq!(o.shapes, [workflows::Shape::Single, workflows::Shape::FanOut10, workflows::Shape::Chain50]);
        assert_eq!((o.runs, o.workflow_runners, o.cold_runs), (3, 4, 5));
        assert_eq!(o.bin_dir, PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release"));
        assert_eq!(o.out, PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/bench/bench.json"));
    }

    #[test]
    fn lists_are_comma_separated_and_the_last_flag_wins() {
        let o = parse(&[
            "--sections",
            "idle, cold-start",
            "--runners",
            "1,8",
            "--runners",
            "2",
            "--jobs",
            "200",
            "--jobs",
            "300",
            "--shapes",
            "chain,1",
            "--runs",
            "0",
            "--out",
            "x.json",
        ])
        .unwrap();
        assert_eq!(o.sections, ["idle", "cold-start"]);
        assert_eq!((o.runners.as_slice(), o.jobs), (&[2][..], 300));
        assert_eq!(o.shapes, [workflows::Shape::Chain50, workflows::Shape::Single]);
        assert_eq!(o.runs, 1);
        assert_eq!(o.out, PathBuf::from("x.json"));
    }

    #[test]
    fn unreadable_values_and_unknown_flags_are_errors() {
        for args in [
            &["--sections", "claim-path,nope"][..],
            &["--jobs", "many"],
            &["--runners", "1,,8"],
            &["--shapes", "star"],
            &["--jobs"],
            &["--bogus", "1"],
            &["stray"],
        ] {
            assert!(parse(args).is_err(), "{args:?}");
        }
    }
}
