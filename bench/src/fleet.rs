//! Elastic fleets (behaviour.md §15, issue 23's figures), measured with real
//! processes: the local reference provisioner (in this process) starting
//! real `baton-runner` processes for demand, against a fixed fleet of the
//! same size started by hand.
//!
//! - **Cold start**: a one-job run on an empty fleet, from the run's
//!   creation to its first step running (queued: the orchestration; claimed:
//!   the reservation, the runner's start and registration, its claim; the
//!   step: the job's own start), against the same on a warm fixed fleet.
//! - **Bursty work**: bursts of jobs some time apart; instance-seconds per
//!   job (the fleet's machines alive, integrated over time from Baton's
//!   instance list, sampled every second) against a fixed fleet of
//!   `max_instances` alive for the whole window, and how long each burst
//!   took to run.
//!
//! Wall-clock figures on the emulator: the shape of the comparison holds
//! (boot is a process start here, minutes of EC2 on AWS), the seconds do not.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use baton_runner::provisioner::local::{self, LocalConfig};
use baton_tests::provisioners::is_live;
use baton_tests::runs::Identified;
use baton_tests::TestStack;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{json, Value};

/// The label set of the fleet's jobs.
const LABEL: &str = "bench-fleet";

#[derive(Debug, Clone, Copy)]
pub struct FleetShape {
    pub max_instances: u32,
    pub bursts: usize,
    pub burst_jobs: usize,
    pub gap: Duration,
    pub job_seconds: u64,
    pub idle_timeout_s: u32,
    pub cold_runs: usize,
}

#[derive(Debug, Serialize)]
pub struct ColdStart {
    pub fleet: &'static str,
    /// Run created → job queued, → claimed, → first step running (ms).
    pub queued_ms: i64,
    pub claimed_ms: i64,
    pub first_step_ms: i64,
}

#[derive(Debug, Serialize)]
pub struct Bursty {
    pub fleet: &'static str,
    pub jobs: usize,
    /// First run created → last job finished.
    pub window_s: f64,
    pub instance_seconds: f64,
    pub instance_seconds_per_job: f64,
    /// Each burst: created → its last job finished.
    pub burst_s: Vec<f64>,
    /// The most machines alive at once.
    pub peak_instances: usize,
}

#[derive(Debug, Serialize)]
pub struct FleetFigures {
    pub cold_starts: Vec<ColdStart>,
    pub bursty: Vec<Bursty>,
}

fn time(value: &Value) -> Option<DateTime<Utc>> {
    value.as_str().and_then(|t| t.parse().ok())
}

/// Waits for `run` to end; its view.
async fn finished(stack: &TestStack, ws: &str, run: &str) -> Value {
    let ended = |view: &Value| matches!(view["status"].as_str(), Some("succeeded" | "failed" | "cancelled"));
    stack.wait_view_within(ws, run, &format!("run {run} to finish"), Duration::from_secs(600), ended).await
}

/// A run of `jobs` parallel jobs sleeping `seconds`; its id.
async fn create_burst(stack: &TestStack, ws: &str, jobs: usize, seconds: u64) -> String {
    let mut yaml = String::from("name: burst\njobs:\n");
    for i in 0..jobs {
        yaml.push_str(&format!("  j{i}:\n    runs-on: {LABEL}\n    steps: [{{run: 'sleep {seconds}'}}]\n"));
    }
    stack.create_run(ws, &yaml).await.id()
}

fn cold_start(fleet: &'static str, view: &Value) -> ColdStart {
    let created = time(&view["created_at"]).expect("created_at");
    let execution = &view["attempts"][0]["jobs"][0]["executions"][0];
    let ms = |at: Option<DateTime<Utc>>| at.map_or(-1, |at| (at - created).num_milliseconds());
    ColdStart {
        fleet,
        queued_ms: ms(time(&execution["queued_at"])),
        claimed_ms: ms(time(&execution["started_at"])),
        first_step_ms: ms(time(&execution["steps"][0]["started_at"])),
    }
}

/// Live (not ended) instances of the provisioner, as Baton lists them.
async fn live_instances(stack: &TestStack, token: &str) -> usize {
    stack.instances(token).await.iter().filter(|i| is_live(i)).count()
}

/// Runs the bursts; while they run, `sample` is called every second and
/// says how many machines are alive, integrated into instance-seconds.
async fn bursts<F, Fut>(stack: &TestStack, ws: &str, shape: FleetShape, fleet: &'static str, sample: F) -> Bursty
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    let started = Instant::now();
    let done = std::sync::atomic::AtomicBool::new(false);
    let sampling = async {
        let (mut instance_seconds, mut peak, mut last) = (0.0, 0, Instant::now());
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            let live = sample().await;
            let now = Instant::now();
            instance_seconds += live as f64 * (now - last).as_secs_f64();
            peak = peak.max(live);
            last = now;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        (instance_seconds, peak)
    };
    let work = async {
        let mut runs = Vec::new();
        for burst in 0..shape.bursts {
            if burst > 0 {
                tokio::time::sleep(shape.gap).await;
            }
            runs.push(create_burst(stack, ws, shape.burst_jobs, shape.job_seconds).await);
        }
        let mut burst_s = Vec::new();
        for run in &runs {
            let view = finished(stack, ws, run).await;
            assert_eq!(view["status"], "succeeded", "{view:#}");
            let created = time(&view["created_at"]).expect("created_at");
            let last = view["attempts"][0]["jobs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|j| time(&j["executions"][0]["finished_at"]))
                .max()
                .expect("finished jobs");
            burst_s.push((last - created).num_milliseconds() as f64 / 1000.0);
        }
        let window_s = started.elapsed().as_secs_f64();
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        (burst_s, window_s)
    };
    let ((burst_s, window_s), (instance_seconds, peak_instances)) = tokio::join!(work, sampling);
    let jobs = shape.bursts * shape.burst_jobs;
    Bursty {
        fleet,
        jobs,
        window_s,
        instance_seconds,
        instance_seconds_per_job: instance_seconds / jobs as f64,
        burst_s,
        peak_instances,
    }
}

/// Waits until the provisioner's fleet is back to no live machine.
async fn back_to_zero(stack: &TestStack, token: &str) -> f64 {
    let from = Instant::now();
    let deadline = from + Duration::from_secs(600);
    while live_instances(stack, token).await > 0 {
        assert!(Instant::now() < deadline, "the fleet never went back to zero");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    from.elapsed().as_secs_f64()
}

/// A fixed fleet: `n` runner processes, registered before the work comes.
struct FixedFleet {
    children: Vec<std::process::Child>,
}

impl FixedFleet {
    async fn start(stack: &TestStack, ws: &str, runner_bin: &Path, work: &Path, n: u32) -> Self {
        let token = stack.registration_token(ws, json!({})).await;
        let children = (0..n)
            .map(|i| {
                std::process::Command::new(runner_bin)
                    .args(["--api", &stack.api, "--labels", LABEL, "--tools", "none", "--json-logs"])
                    .arg("--work-dir")
                    .arg(work.join(format!("fixed-{i}")))
                    .env("BATON_REGISTRATION_TOKEN", &token)
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .expect("baton-runner starts")
            })
            .collect();
        Self { children }
    }

    fn stop(mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The whole section: the elastic fleet (cold starts, then bursts), then a
/// fixed fleet of the same size on the same work.
pub async fn measure(stack: &TestStack, runner_bin: &Path, work: &Path, shape: FleetShape) -> FleetFigures {
    assert!(runner_bin.is_file(), "no runner at {} (scripts/bench.sh builds it)", runner_bin.display());
    let elastic_ws = format!("bench-elastic-{}", &baton_tests::unique_stage()[1..]);
    let body = json!({
        "name": "bench", "label_sets": [[LABEL]], "max_instances": shape.max_instances,
        "jobs_per_instance": 1, "idle_timeout_s": shape.idle_timeout_s,
    });
    let (_, token) = stack.create_provisioner(&elastic_ws, body).await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let config = LocalConfig::new(&stack.api, &token, runner_bin.to_path_buf(), work.join("elastic"));
    let provisioner = tokio::spawn(local::run(config, stopped));

    let mut cold_starts = Vec::new();
    for _ in 0..shape.cold_runs {
        back_to_zero(stack, &token).await;
        let run = create_burst(stack, &elastic_ws, 1, 0).await;
        cold_starts.push(cold_start("elastic", &finished(stack, &elastic_ws, &run).await));
    }
    back_to_zero(stack, &token).await;
    let elastic = bursts(stack, &elastic_ws, shape, "elastic", || live_instances(stack, &token)).await;
    let _ = stop.send(true);
    let _ = provisioner.await;

    let fixed_ws = format!("bench-fixed-{}", &baton_tests::unique_stage()[1..]);
    let fleet = FixedFleet::start(stack, &fixed_ws, runner_bin, &work.join("fixed"), shape.max_instances).await;
    // Registered and polling before the work comes, as a fixed fleet is.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for _ in 0..shape.cold_runs {
        let run = create_burst(stack, &fixed_ws, 1, 0).await;
        cold_starts.push(cold_start("fixed", &finished(stack, &fixed_ws, &run).await));
    }
    let n = shape.max_instances as usize;
    let fixed = bursts(stack, &fixed_ws, shape, "fixed", || async move { n }).await;
    fleet.stop();
    FleetFigures { cold_starts, bursty: vec![elastic, fixed] }
}

pub fn render(figures: &FleetFigures, shape: FleetShape) -> String {
    let mut s = String::from(
        "cold start (one-job run, run created → …), ms:
",
    );
    s.push_str(&format!(
        "{:<10} {:>8} {:>8} {:>11}
",
        "fleet", "queued", "claimed", "first step"
    ));
    for c in &figures.cold_starts {
        s.push_str(&format!(
            "{:<10} {:>8} {:>8} {:>11}
",
            c.fleet, c.queued_ms, c.claimed_ms, c.first_step_ms
        ));
    }
    s.push_str(&format!(
        "
bursty: {} bursts of {} jobs (sleep {} s), {} s apart; max {} machines, 1 job a machine, idle timeout {} s
",
        shape.bursts,
        shape.burst_jobs,
        shape.job_seconds,
        shape.gap.as_secs(),
        shape.max_instances,
        shape.idle_timeout_s
    ));
    s.push_str(&format!(
        "{:<10} {:>5} {:>9} {:>11} {:>9} {:>5}  {}
",
        "fleet", "jobs", "window s", "instance-s", "per job", "peak", "each burst, s"
    ));
    for b in &figures.bursty {
        let each: Vec<String> = b.burst_s.iter().map(|x| format!("{x:.1}")).collect();
        s.push_str(&format!(
            "{:<10} {:>5} {:>9.1} {:>11.1} {:>9.2} {:>5}  {}
",
            b.fleet,
            b.jobs,
            b.window_s,
            b.instance_seconds,
            b.instance_seconds_per_job,
            b.peak_instances,
            each.join(", ")
        ));
    }
    s
}

/// The default runner binary (built by scripts/bench.sh).
pub fn default_runner_bin(root: &Path) -> PathBuf {
    root.join("target/debug/baton-runner")
}
