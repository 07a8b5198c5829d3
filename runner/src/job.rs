//! Executes one claimed job: a fresh work directory, each step as
//! `sh -c <run>` or under its `shell:` in its `working-directory`
//! (`crate::shell`), or its action (`crate::actions`), in its own process group
//! with the job's env, what earlier steps put in `$GITHUB_ENV`, the step's
//! env and the `BATON_*` and `GITHUB_*` variables (`crate::step`), output streamed with a `[job/step]` prefix,
//! step and job timeouts enforced by killing the group, progress reported per
//! step. A step after a failed one is skipped unless its `if:` says
//! otherwise (`crate::conditions`). The last step's report,
//! sent once the log is stored and carrying the job's outputs, settles the
//! job on the server (behaviour.md §16); a complete with every step's
//! result is sent only when it does not (a report lost on the way, a
//! server before settling) or when the job failed for a reason beyond its
//! steps (a cancel, missing secrets, outputs too large), which only a
//! complete's message tells.
//!
//! Stopping early ([`Stop`]): on `cancel` the running step's group is
//! terminated and the job completes as `failed`; on a lost lease or when the
//! runner abandons its jobs, the group is terminated and nothing is reported.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_api::facts::{JobOutcome, StepResult, StepSpec, StepStatus};
use baton_api::runners::{ClaimResponse, CompleteRequest, StepAnswer, StepReport};
use baton_client::retry::with_retries;
use baton_client::Client;
use chrono::Utc;
use tokio::sync::watch;
use tokio::time::Instant as TokioInstant;

use crate::complete;
use crate::conditions::{self, Decision};
use crate::logs::{self, LogSettings, LogSink};
use crate::step::{runner_arch, runner_os, Carried, Ended, Exec, ProcFiles, Runtime, CACHE_SAVES, TEMP};
use crate::{caches, outputs};
use crate::{escalate, heartbeat, JobEnd, Shutdown, Stop};

/// How long progress reports are retried (they are optional: the job goes on).
const STEP_REPORT_BUDGET: Duration = Duration::from_secs(10);

/// What every job of one agent shares.
#[derive(Debug, Clone)]
pub struct JobSettings {
    pub client: Client,
    /// Each job gets `<work_root>/<job_execution_id>`, removed afterwards.
    pub work_root: PathBuf,
    /// Between SIGTERM and SIGKILL when a step is stopped.
    pub kill_grace: Duration,
    /// Output lines as tracing events (JSON logs) instead of plain lines.
    pub json_output: bool,
    /// Keep the work directory after the job (debugging).
    pub keep_work_dir: bool,
    /// How each job's log is shipped to the log store.
    pub logs: LogSettings,
    /// The push socket's nudges (a cancel wakes the job's heartbeat).
    pub nudges: std::sync::Arc<crate::push::Nudges>,
    /// Where actions (`uses:`) come from and what runs them.
    pub actions: crate::actions::ActionSettings,
}

/// Runs the claimed job to its end. `heartbeat_interval` is the session's
/// (the heartbeat answers may change it).
pub async fn run_job(
    settings: JobSettings,
    claim: ClaimResponse,
    heartbeat_interval: Duration,
    mut shutdown: watch::Receiver<Shutdown>,
) -> JobEnd {
    let execution = claim.job_execution_id;
    let key = claim.job.work.key.clone();
    let (stop_tx, mut stop_rx) = watch::channel(Stop::None);
    let stop_tx = Arc::new(stop_tx);
    let reporting = Arc::new(AtomicBool::new(false));
    let cancel_nudges = settings.nudges.watch_lease(execution);
    let heartbeat = tokio::spawn(heartbeat::keep_alive(
        settings.client.clone(),
        claim.lease.token.clone(),
        execution,
        heartbeat_interval,
        stop_tx.clone(),
        reporting.clone(),
        cancel_nudges.notify.clone(),
    ));
    let abandon = {
        let stop_tx = stop_tx.clone();
        tokio::spawn(async move {
            if shutdown.wait_for(|s| *s == Shutdown::Abandon).await.is_ok() {
                escalate(&stop_tx, Stop::Abandon);
            }
        })
    };

    let started = Instant::now();
    tracing::info!(job = %key, %execution, run = %claim.run_id, attempt = claim.attempt, steps = claim.job.work.steps.len(), "job started");
    let dir = settings.work_root.join(execution.to_string());
    let lease = logs::Lease { client: settings.client.clone(), token: claim.lease.token.clone(), execution };
    // The lease token is in every step's environment (for `baton-runner
    // artifact`): masked like a secret.
    let mut masks = claim.job.masks();
    masks.push(claim.lease.token.clone());
    let (sink, shipper) = logs::start(lease, settings.logs.clone(), masks);
    let (ran, message, outputs) = match prepare_dir(&dir).and_then(|()| prepare_dir(&output_dir(&dir))) {
        Ok(()) => run_steps(&settings, &claim, &dir, &sink, &stop_tx, &mut stop_rx).await,
        Err(err) => {
            tracing::error!(job = %key, dir = %dir.display(), error = %err, "cannot create the work directory");
            let skipped = claim.job.work.steps.iter().map(|s| skipped(s.id)).collect();
            let ran = Ran { results: skipped, unreported: true };
            (ran, Some(format!("the runner could not create its work directory: {err}")), BTreeMap::new())
        }
    };
    let Ran { results, unreported } = ran;

    // Outputs may carry a secret a step masked: they reach the run view.
    let outputs: BTreeMap<String, serde_json::Value> = outputs
        .into_iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(text) => (k, serde_json::Value::String(sink.mask(&text))),
            other => (k, other),
        })
        .collect();
    // The last lines reach the store before the job is reported (bounded:
    // a slow store delays the report by at most the drain timeout).
    drop(sink);
    match tokio::time::timeout(settings.logs.drain_timeout, shipper).await {
        Ok(Ok(shipped)) => {
            tracing::debug!(job = %key, %execution, chunks = shipped.chunks, bytes = shipped.bytes, failed = shipped.failed_chunks, dropped = shipped.dropped_lines, truncated = shipped.truncated, "log shipped");
        }
        _ => tracing::warn!(job = %key, %execution, "the job's last log lines were not all stored in time"),
    }

    // From here the last report's or the complete's own answer says whether
    // the lease was lost: a heartbeat racing it finds the lease it just ended.
    reporting.store(true, Ordering::SeqCst);
    let stop = *stop_rx.borrow();
    let end = match stop {
        Stop::LeaseLost => JobEnd::LeaseLost,
        Stop::Abandon => JobEnd::Abandoned,
        Stop::None | Stop::Cancel => {
            let token = claim.lease.token.as_str();
            // The steps tell the whole outcome: the last one's report
            // settles the job, with its outputs, and no complete follows.
            let settled = match (stop, &message, results.last()) {
                (Stop::None, None, Some(last)) if !unreported && results.len() == claim.job.work.steps.len() => {
                    settle(&settings, token, execution, last, &outputs, &stop_tx).await
                }
                _ => None,
            };
            match settled {
                Some(end) => end,
                // Also when the settling report's answers were all lost and
                // the heartbeat then found the lease ended: that report may
                // be what ended it, and only the complete's answer can tell
                // (a repeat finds the recorded outcome; a lease the reaper
                // took answers lease-lost). `deliver` sends it then, a few
                // times if its answers are lost too.
                None => {
                    // A skipped step fails nothing by itself (its `if:`
                    // was false, or a failure before it says so), as
                    // `settle::settled_outcome` reads the steps.
                    let succeeded = message.is_none()
                        && stop == Stop::None
                        && !results.iter().any(|r| r.status == StepStatus::Failed && !r.soft_failed);
                    let status = if succeeded { JobOutcome::Succeeded } else { JobOutcome::Failed };
                    let message =
                        if stop == Stop::Cancel { Some("cancelled by the server".to_string()) } else { message };
                    let body = CompleteRequest { status, steps: results, outputs, message };
                    // The heartbeat goes on until the complete is delivered or given up.
                    complete::deliver(|| settings.client.complete(token, execution, &body), &mut stop_rx).await
                }
            }
        }
    };
    heartbeat.abort();
    abandon.abort();
    if !settings.keep_work_dir {
        if let Err(err) = std::fs::remove_dir_all(&dir) {
            if err.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(dir = %dir.display(), error = %err, "cannot remove the work directory");
            }
        }
    }
    let duration_s = started.elapsed().as_secs_f64();
    match &end {
        JobEnd::Reported(outcome) => {
            tracing::info!(job = %key, status = %outcome_str(*outcome), duration_s = round(duration_s), %execution, "job finished")
        }
        JobEnd::LeaseLost => {
            tracing::warn!(job = %key, %execution, duration_s = round(duration_s), "job stopped: lease lost, nothing reported")
        }
        JobEnd::Abandoned => {
            tracing::warn!(job = %key, %execution, duration_s = round(duration_s), "job abandoned: runner shutting down")
        }
        JobEnd::ReportFailed(err) => {
            tracing::error!(job = %key, %execution, error = %err, "job finished but its result could not be reported")
        }
    }
    end
}

fn prepare_dir(dir: &Path) -> std::io::Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir)
}

async fn run_steps(
    settings: &JobSettings,
    claim: &ClaimResponse,
    dir: &Path,
    sink: &LogSink,
    stop_tx: &watch::Sender<Stop>,
    stop_rx: &mut watch::Receiver<Stop>,
) -> (Ran, Option<String>, BTreeMap<String, serde_json::Value>) {
    // The last step's terminal report is held back: sent after the log is
    // stored, it ends the lease (`settle`).
    let last = claim.job.work.steps.len().saturating_sub(1);
    let mut unreported = false;
    if !claim.job.missing_secrets.is_empty() {
        // Running without them would run something other than what was
        // written (an empty token, a placeholder): fail, saying which.
        let message = format!("secrets not set in this workspace: {}", claim.job.missing_secrets.join(", "));
        tracing::error!(job = %claim.job.work.key, %message, "job not run");
        if let Some(first) = claim.job.work.steps.first() {
            sink.line(first.id, baton_api::logs::LogStream::Stderr, message.clone());
        }
        let results: Vec<StepResult> = claim.job.work.steps.iter().map(|step| skipped(step.id)).collect();
        for result in &results[..last] {
            report(settings, claim, result, stop_tx).await;
        }
        return (Ran { results, unreported: true }, Some(message), BTreeMap::new());
    }
    let job_deadline = TokioInstant::now() + Duration::from_secs(claim.job.work.timeout_s.max(1));
    let mut results = Vec::with_capacity(claim.job.work.steps.len());
    let mut message = None;
    let mut failed = false;
    // Each step's `$BATON_OUTPUT`, beside the work directory (a step may
    // expect an empty one), and what each wrote there.
    let outputs_dir = output_dir(dir);
    let mut written: Vec<(uuid::Uuid, BTreeMap<String, String>)> = Vec::new();
    // `$RUNNER_TEMP`, beside the output files (emptied with them).
    if let Err(err) = std::fs::create_dir_all(outputs_dir.join(TEMP)) {
        tracing::warn!(job = %claim.job.work.key, error = %err, "cannot create the job's temporary directory");
    }
    // What a step hands the steps after it: `$GITHUB_ENV`, `$GITHUB_PATH`,
    // and the `post` of its actions.
    let mut carried = Carried::default();
    // What the steps' `if:` read of the steps before them.
    let mut earlier = conditions::Earlier::default();
    earlier.github.insert("workspace".into(), dir.display().to_string());
    earlier.runner.insert("os".into(), runner_os().into());
    earlier.runner.insert("arch".into(), runner_arch().into());
    earlier.runner.insert("temp".into(), outputs_dir.join(TEMP).display().to_string());
    // Past the job's timeout or a stop nothing more may run, whatever a
    // step's `if:` says (`always()` included).
    let mut halted = false;
    for (index, step) in claim.job.work.steps.iter().enumerate() {
        let name = step_name(step, index);
        let stop = *stop_rx.borrow();
        if stop >= Stop::LeaseLost {
            break;
        }
        earlier.failed = failed;
        earlier.env.clone_from(&carried.env);
        // A cancel stops every step (see `crate::conditions`).
        let mut decision =
            if halted || stop == Stop::Cancel { Decision::Skip } else { conditions::decide(step, &earlier) };
        // Its fields that read what only the runner knows, resolved now.
        let resolved = match decision {
            Decision::Run => {
                conditions::resolve_deferred(step, &earlier).map_err(|why| decision = Decision::Fail(why)).ok()
            }
            _ => None,
        };
        let step = resolved.as_deref().unwrap_or(step);
        if decision == Decision::Skip {
            tracing::info!(job = %claim.job.work.key, step = %name, status = %"skipped", "step skipped");
            let result = skipped(step.id);
            if index != last {
                unreported |= !report(settings, claim, &result, stop_tx).await;
            }
            if let Some(key) = &step.key {
                earlier.steps.insert(key.clone(), conditions::StepState::skipped());
            }
            results.push(result);
            continue;
        }
        let started_at = Utc::now();
        let running = StepResult {
            id: step.id,
            status: StepStatus::Running,
            soft_failed: false,
            exit_code: None,
            started_at: Some(started_at),
            finished_at: None,
        };
        // A lost progress report leaves the server's view behind only
        // until this step's end is reported.
        report(settings, claim, &running, stop_tx).await;
        tracing::info!(job = %claim.job.work.key, step = %name, "step started");
        let clock = Instant::now();
        let exec = Exec::new(runtime(settings), claim, step, &name, dir, &outputs_dir, sink, job_deadline);
        let files = ProcFiles::new(&outputs_dir, &format!("step-{index}"));
        let (ended, code) = match (&decision, &step.uses) {
            // An `if:` that could not be decided fails the step as the
            // runner's own failures do: no process, the reason in the log.
            (Decision::Fail(why), _) => (Ended::Failed(why.clone()), None),
            (_, Some(uses)) => crate::actions::run(&exec, &mut carried, uses, &step.with, &files, stop_rx).await,
            (_, None) => exec.shell(&mut carried, &step.run, &files, stop_rx).await,
        };
        halted |= matches!(ended, Ended::JobTimeout(_) | Ended::Stopped(_));
        if let Ended::Failed(why) | Ended::SpawnFailed(why) = &ended {
            // Why the runner failed it belongs in the job's log, forgiven or not.
            exec.say(why);
        }
        let output_file = files.output;
        let mut status =
            if matches!(ended, Ended::Exited) && code == Some(0) { StepStatus::Succeeded } else { StepStatus::Failed };
        // Why the step failed, if the job's message should say so.
        let mut step_message = None;
        let mut step_outputs = BTreeMap::new();
        match std::fs::read_to_string(&output_file).map(|text| outputs::parse(&text)) {
            Ok(Ok(values)) => {
                if step.key.is_some() {
                    step_outputs = values.clone();
                }
                written.push((step.id, values));
            }
            Ok(Err(err)) => {
                // A malformed output file fails the step: its dependants
                // would otherwise run on values nobody meant.
                status = StepStatus::Failed;
                step_message = Some(format!("step {name}: $BATON_OUTPUT: {err}"));
            }
            Err(_) => {}
        }
        // `continue-on-error` forgives the step's own failure (its exit,
        // its timeout, its output file), never a stop from outside or the
        // job's timeout, after which nothing more may run.
        let soft_failed = status == StepStatus::Failed
            && step.continue_on_error
            && matches!(ended, Ended::Exited | Ended::StepTimeout(_) | Ended::SpawnFailed(_) | Ended::Failed(_));
        let result = StepResult {
            id: step.id,
            status,
            soft_failed,
            exit_code: code,
            started_at: Some(started_at),
            finished_at: Some(Utc::now()),
        };
        let duration_s = round(clock.elapsed().as_secs_f64());
        let reason = match &ended {
            Ended::Exited => None,
            Ended::StepTimeout(s) => Some(format!("step timed out after {s} s")),
            Ended::JobTimeout(s) => Some(format!("job timed out after {s} s")),
            Ended::Stopped(Stop::Cancel) => Some("cancelled".to_string()),
            Ended::Stopped(_) => Some("stopped".to_string()),
            Ended::SpawnFailed(err) => Some(format!("could not start: {err}")),
            Ended::Failed(why) => Some(why.clone()),
        };
        tracing::info!(job = %claim.job.work.key, step = %name, status = %status_str(status), exit_code = code, duration_s,
            reason = reason.as_deref(), soft_failed, "step finished");
        if let (Ended::StepTimeout(_) | Ended::JobTimeout(_) | Ended::SpawnFailed(_) | Ended::Failed(_), Some(reason)) =
            (&ended, &reason)
        {
            step_message.get_or_insert_with(|| format!("step {name}: {reason}"));
        }
        if !soft_failed {
            if let Some(step_message) = step_message {
                message.get_or_insert(step_message);
            }
        }
        if *stop_rx.borrow() < Stop::LeaseLost && index != last {
            unreported |= !report(settings, claim, &result, stop_tx).await;
        }
        failed |= status != StepStatus::Succeeded && !soft_failed;
        if let Some(key) = &step.key {
            let state = conditions::StepState::ran(status == StepStatus::Succeeded, soft_failed, step_outputs);
            earlier.steps.insert(key.clone(), state);
        }
        results.push(result);
    }
    // The actions' `post` scripts, after every step, newest first, whatever
    // the steps did (as GitHub runs them); a failing one fails the job.
    while let Some(post) = carried.posts.pop() {
        if *stop_rx.borrow() >= Stop::LeaseLost {
            break;
        }
        let Some(step) = claim.job.work.steps.iter().find(|s| s.id == post.step_id) else { continue };
        let index = claim.job.work.steps.iter().position(|s| s.id == post.step_id).unwrap_or_default();
        let name = format!("post {}", step_name(step, index));
        let exec = Exec::new(runtime(settings), claim, step, &name, dir, &outputs_dir, sink, job_deadline);
        if let Err(why) = crate::actions::run_post(&exec, &mut carried, &post, stop_rx).await {
            tracing::info!(job = %claim.job.work.key, step = %name, reason = %why, "post failed");
            message.get_or_insert(format!("step {name}: {why}"));
            failed = true;
        }
    }
    // The `cache:` steps' saves, once every step succeeded, before the last
    // step's report ends the lease (a save is made under it).
    if !failed && message.is_none() && *stop_rx.borrow() == Stop::None {
        if let Some(last_step) = claim.job.work.steps.last() {
            for save in caches::pending_saves(&outputs_dir.join(CACHE_SAVES)) {
                let line = caches::save(&settings.client, &claim.lease.token, claim.job_execution_id, dir, &save).await;
                tracing::info!(job = %claim.job.work.key, "{line}");
                sink.line(last_step.id, baton_api::logs::LogStream::System, line);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&outputs_dir);
    let outputs = match outputs::select(&claim.job.work.outputs, &written) {
        Ok(outputs) => outputs,
        Err(err) => {
            message.get_or_insert(err);
            BTreeMap::new()
        }
    };
    (Ran { results, unreported }, message, outputs)
}

/// The steps' results, and whether a terminal report of one did not reach
/// the server (the job is then completed, not settled: the server would
/// not find every step ended).
struct Ran {
    results: Vec<StepResult>,
    unreported: bool,
}

/// Sends the last step's report with the job's outputs; the server settles
/// the job on it. `None` when it did not settle (the complete follows) or
/// the lease is gone (`stop_tx` says so).
async fn settle(
    settings: &JobSettings,
    token: &str,
    execution: uuid::Uuid,
    last: &StepResult,
    outputs: &BTreeMap<String, serde_json::Value>,
    stop_tx: &watch::Sender<Stop>,
) -> Option<JobEnd> {
    let body = StepReport { outputs: outputs.clone(), last: true, ..step_report(last) };
    let answer = with_retries("last step report", STEP_REPORT_BUDGET, || {
        settings.client.report_step(token, execution, last.id, &body)
    })
    .await;
    match answer {
        Ok(StepAnswer { settled: Some(outcome), .. }) => Some(JobEnd::Reported(outcome)),
        Ok(_) => None,
        Err(err) if err.means_lease_gone() => {
            escalate(stop_tx, Stop::LeaseLost);
            None
        }
        Err(err) => {
            tracing::warn!(%execution, error = %err, "the last step's report was not delivered; completing instead");
            None
        }
    }
}

fn step_report(result: &StepResult) -> StepReport {
    StepReport {
        status: result.status,
        soft_failed: result.soft_failed,
        exit_code: result.exit_code,
        started_at: result.started_at,
        finished_at: result.finished_at,
        outputs: BTreeMap::new(),
        last: false,
    }
}

/// Where a job's step output files go: next to its work directory.
fn output_dir(dir: &Path) -> std::path::PathBuf {
    let mut name = dir.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".outputs");
    dir.with_file_name(name)
}

/// Reports a step's progress (best effort); its answer may stop the job.
/// Whether it was delivered.
async fn report(
    settings: &JobSettings,
    claim: &ClaimResponse,
    result: &StepResult,
    stop_tx: &watch::Sender<Stop>,
) -> bool {
    let body = step_report(result);
    let token = claim.lease.token.as_str();
    let execution = claim.job_execution_id;
    let answer = with_retries("step report", STEP_REPORT_BUDGET, || {
        settings.client.report_step(token, execution, result.id, &body)
    })
    .await;
    match answer {
        Ok(answer) => {
            if answer.cancel {
                escalate(stop_tx, Stop::Cancel);
            }
            true
        }
        Err(err) if err.means_lease_gone() => {
            escalate(stop_tx, Stop::LeaseLost);
            false
        }
        Err(err) => {
            tracing::warn!(%execution, step = %result.id, error = %err, "step report not delivered");
            false
        }
    }
}

/// What every step of the job shares from the runner's settings.
fn runtime(settings: &JobSettings) -> Runtime<'_> {
    Runtime {
        api: settings.client.base(),
        kill_grace: settings.kill_grace,
        json_output: settings.json_output,
        work_root: &settings.work_root,
        actions: &settings.actions,
    }
}

fn step_name(step: &StepSpec, index: usize) -> String {
    step.name.clone().filter(|n| !n.trim().is_empty()).unwrap_or_else(|| format!("step-{}", index + 1))
}

fn skipped(id: uuid::Uuid) -> StepResult {
    StepResult {
        id,
        status: StepStatus::Skipped,
        soft_failed: false,
        exit_code: None,
        started_at: None,
        finished_at: None,
    }
}

fn status_str(status: StepStatus) -> &'static str {
    match status {
        StepStatus::Pending => "pending",
        StepStatus::Running => "running",
        StepStatus::Succeeded => "succeeded",
        StepStatus::Failed => "failed",
        StepStatus::Skipped => "skipped",
    }
}

fn outcome_str(outcome: JobOutcome) -> &'static str {
    match outcome {
        JobOutcome::Succeeded => "succeeded",
        JobOutcome::Failed => "failed",
    }
}

fn round(seconds: f64) -> f64 {
    (seconds * 100.0).round() / 100.0
}
