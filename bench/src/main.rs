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

mod claim_path;
mod contention;
mod fleet;
mod idle;
mod options;
mod recorder;
mod report;
mod transfers;
mod windows;
mod workflows;

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_bench::{cold_start, cost};
use baton_devhost::HostOptions;
use baton_localstack::provision::{default_infra_dir, Plan};
use baton_localstack::resources::{Naming, Resources};
use baton_service::aws::AwsClients;
use baton_tests::{endpoint, unique_stage, TestStack};
use chrono::Utc;
use recorder::Recorder;
use serde::Serialize;
use serde_json::json;

use crate::claim_path::per_operation;
use crate::contention::contention;
use crate::options::{options, root};
use crate::report::{render_contention, render_idle, render_idle_pushed, render_operations, PUSH_PING_S};
use crate::windows::percentile;

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
            let per_poll = idle::idle_poll(&stack, &recorder, &ws, wait_s, polls).await;
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
        let per_connect = idle::idle_connect(&stack, &recorder, &ws, 5).await;
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
    if let Some((commit, previous)) = baton_bench::baseline::previous(&root().join("bench/baseline")) {
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
