//! Helpers of the runner tests: the real `baton-runner` binary as a child
//! process against a [`TestStack`], jobs with chosen steps, and process
//! checks.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::Duration;

use baton_api::facts::{Fact, JobExecutionQueued, JobExecutionTerminated, StepSpec};
use baton_runner::process::live_members;
use baton_tests::runners::{queued_steps_fact, Queued};
use baton_tests::runs::Identified;
use baton_tests::{wait_for, TestStack, WAIT};
use chrono::Utc;
use uuid::Uuid;

/// A stack whose leases are short: heartbeat every 1 s, lease 3 s, first
/// heartbeat within 2 s.
pub async fn fast_lease_stack() -> TestStack {
    TestStack::start_with(
        |_| {},
        HashMap::from([
            ("BATON_HEARTBEAT_INTERVAL_S".into(), "1".into()),
            ("BATON_LEASE_DURATION_S".into(), "3".into()),
            ("BATON_FIRST_HEARTBEAT_GRACE_S".into(), "2".into()),
        ]),
    )
    .await
}

/// A fresh directory of this test (markers, work dirs).
pub fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("baton-runner-test-{}", Uuid::now_v7().simple()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// A queued job of `workspace` with `steps` as `(name, run)`, and `env` for
/// the job. Its step ids are derived as Baton's are, so its last step's
/// report settles it (behaviour.md §16).
pub fn job(workspace: &str, labels: &[&str], steps: &[(&str, &str)], env: &[(&str, &str)]) -> Queued {
    let mut queued = queued_steps_fact(workspace, labels, Utc::now(), steps.len());
    let execution = queued.detail.job_execution_id;
    queued.spec.work.env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    queued.spec.work.steps = steps
        .iter()
        .enumerate()
        .map(|(index, (name, run))| StepSpec {
            id: baton_domain::ids::step_id(execution, index),
            name: Some(name.to_string()),
            run: run.to_string(),
            ..StepSpec::default()
        })
        .collect();
    queued
}

/// Queues the job (its spec and its fact) and waits until it is claimable.
pub async fn queue(stack: &TestStack, queued: &Queued) {
    stack.publish(queued).await;
    stack.wait_runner_record(queued.detail.job_execution_id).await;
}

/// The orchestrator's word that the execution ended (here: cancelled).
pub fn terminated(fact: &Fact<JobExecutionQueued>) -> Fact<JobExecutionTerminated> {
    let d = &fact.detail;
    Fact::new(
        fact.header.workspace_id.clone(),
        Utc::now(),
        JobExecutionTerminated {
            run_id: d.run_id,
            attempt: d.attempt,
            job_id: d.job_id,
            job_execution_id: d.job_execution_id,
            status: "cancelled".into(),
            reason: Some("run_cancelled".into()),
        },
    )
}

/// A `baton-runner` process; killed (SIGKILL) when dropped if still running.
pub struct Runner {
    pub child: Child,
    pub work_dir: PathBuf,
}

impl Runner {
    /// Starts the real binary against `stack` with the registration token in
    /// the environment (as an operator would), plus `args`.
    pub fn start(stack: &TestStack, token: &str, labels: &str, args: &[&str]) -> Self {
        Self::launch(stack, token, labels, args, None, &[])
    }

    /// As [`Runner::start`], the process's environment changed by `env`
    /// (a `PATH` with a test's own tools first, say).
    pub fn start_with_env(stack: &TestStack, token: &str, labels: &str, args: &[&str], env: &[(&str, String)]) -> Self {
        Self::launch(stack, token, labels, args, None, env)
    }

    /// As [`Runner::start`], with JSON logs written to `log` (for checks on
    /// what the runner saw).
    pub fn start_logged(stack: &TestStack, token: &str, labels: &str, args: &[&str], log: &Path) -> Self {
        Self::launch(stack, token, labels, args, Some(log), &[])
    }

    fn launch(
        stack: &TestStack,
        token: &str,
        labels: &str,
        args: &[&str],
        log: Option<&Path>,
        env: &[(&str, String)],
    ) -> Self {
        let work_dir = scratch().join("work");
        let mut command = Command::new(env!("CARGO_BIN_EXE_runner-under-test"));
        command
            .arg("--api")
            .arg(&stack.api)
            .arg("--labels")
            .arg(labels)
            .arg("--work-dir")
            .arg(&work_dir)
            .arg("--kill-grace-s")
            .arg("2")
            .args(args)
            .env("BATON_REGISTRATION_TOKEN", token)
            .envs(env.iter().map(|(name, value)| (*name, value.as_str())));
        // What a test's jobs may need is its business, not this machine's.
        if !args.contains(&"--tools") {
            command.arg("--tools").arg("none");
        }
        if let Some(log) = log {
            command.arg("--json-logs").stdout(std::fs::File::create(log).expect("a log file"));
        }
        let child = command.spawn().expect("baton-runner starts");
        Self { child, work_dir }
    }

    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(self.child.id() as i32, signal) };
        assert_eq!(rc, 0, "signal delivered");
    }

    /// Waits for the process to exit.
    pub async fn exited(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(std::time::Instant::now() < deadline, "baton-runner did not exit within {timeout:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Waits for a step to write its process group id (its shell's `$$`) to `marker`.
pub async fn pgid_from(marker: &Path) -> i32 {
    wait_for("the step's pid marker", WAIT, || async {
        std::fs::read_to_string(marker).ok().and_then(|s| s.trim().parse::<i32>().ok())
    })
    .await
}

/// Waits until no live process is left in group `pgid`.
pub async fn group_gone(pgid: i32, timeout: Duration) {
    wait_for(&format!("process group {pgid} to be gone"), timeout, || async {
        live_members(pgid).is_empty().then_some(())
    })
    .await
}

/// Kills what is left of group `pgid` (after a runner was SIGKILLed).
pub fn kill_group(pgid: i32) {
    baton_runner::process::signal_group(pgid, libc::SIGKILL);
}

/// Waits for the `completed` fact of the execution.
pub async fn completed(stack: &TestStack, execution: Uuid) -> serde_json::Value {
    stack.wait_fact("baton.runners.job.completed", WAIT, |d| d["job_execution_id"] == execution.to_string()).await
}

impl Runner {
    /// Stops the runner as an operator would (SIGTERM: it stops its running
    /// steps and exits) and waits for it; SIGKILL if it does not exit in time.
    pub async fn stop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.signal(libc::SIGTERM);
            let deadline = std::time::Instant::now() + Duration::from_secs(15);
            while std::time::Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Kills process group `pgid` when dropped: a step left running by a
/// SIGKILLed runner, or by a test that failed half-way, does not outlive the
/// test.
pub struct GroupGuard(pub i32);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if !live_members(self.0).is_empty() {
            kill_group(self.0);
        }
    }
}

/// A `baton-provisioner local` process against a stack (terminate intents
/// read every second, a stopped runner SIGKILLed 5 s after SIGTERM);
/// killed when dropped.
pub struct LocalProvisioner(Child);

impl LocalProvisioner {
    /// Starts it with `token`; `runner_args` go to every runner it starts,
    /// and its JSON log to `log` (or nowhere).
    pub fn start(stack: &TestStack, token: &str, runner_args: &[&str], log: Option<&Path>) -> Self {
        let stdout = match log {
            Some(path) => std::process::Stdio::from(std::fs::File::create(path).expect("a log file")),
            None => std::process::Stdio::null(),
        };
        let child = Command::new(env!("CARGO_BIN_EXE_provisioner-under-test"))
            .args(["--json-logs", "local", "--intent-poll-s", "1", "--kill-grace-s", "5"])
            .arg("--api")
            .arg(&stack.api)
            .arg("--runner-bin")
            .arg(env!("CARGO_BIN_EXE_runner-under-test"))
            .arg("--work-dir")
            .arg(scratch())
            .arg("--")
            .args(runner_args)
            .env("BATON_PROVISIONER_TOKEN", token)
            .stdout(stdout)
            .spawn()
            .expect("baton-provisioner starts");
        Self(child)
    }

    /// SIGTERM, as a user stops it: it stops its runners and reports them.
    pub fn terminate(&self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
    }
}

impl Drop for LocalProvisioner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `baton` CLI as the admin.
pub async fn baton(stack: &TestStack, args: &[&str]) -> std::process::Output {
    baton_as(stack, &stack.admin_token, args).await
}

/// The `baton` CLI as the holder of `token`.
pub async fn baton_as(stack: &TestStack, token: &str, args: &[&str]) -> std::process::Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_baton-under-test"))
        .args(args)
        .env("BATON_API", &stack.api)
        .env("BATON_ADMIN_TOKEN", token)
        .kill_on_drop(true)
        .output()
        .await
        .expect("baton runs")
}

/// A process's output as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `env:` of a workflow that gives every job the absolute `dir` as `SHARED`.
pub fn shared_env(dir: &Path) -> String {
    format!("env:\n  SHARED: {}\n", dir.display())
}

/// `workflow` with the absolute `dir` as `SHARED` first in its `env:` (a
/// top-level `env:` block added before `jobs:` when it has none): fixtures
/// stay whole workflows as a user writes them, while each test's scratch
/// directory is known only when it runs.
pub fn with_shared(workflow: &str, dir: &Path) -> String {
    let entry = format!("  SHARED: {}\n", dir.display());
    if let Some(at) = workflow.find("\nenv:\n") {
        let at = at + "\nenv:\n".len();
        return format!("{}{entry}{}", &workflow[..at], &workflow[at..]);
    }
    let at = workflow.find("\njobs:\n").expect("a workflow with a top-level `jobs:` line") + 1;
    format!("{}env:\n{entry}{}", &workflow[..at], &workflow[at..])
}

/// Where most workflow tests start: a stack, a workspace of their own with
/// a runner registration token, and a fresh directory their workflows see
/// as `$SHARED` (see [`with_shared`]).
pub struct Scene {
    pub stack: TestStack,
    pub ws: String,
    pub token: String,
    pub shared: PathBuf,
}

impl Scene {
    /// On a stack with the default settings.
    pub async fn start() -> Self {
        Self::on(TestStack::start().await).await
    }

    /// On `stack` (one with settings of the test's own).
    pub async fn on(stack: TestStack) -> Self {
        let (ws, token) = stack.new_workspace().await;
        Self { stack, ws, token, shared: scratch() }
    }

    /// Starts a runner with `labels` and `args`, then creates the run of
    /// `workflow` given the scene's directory as `$SHARED`: the runner and
    /// the run's id.
    pub async fn run(&self, workflow: &str, labels: &str, args: &[&str]) -> (Runner, String) {
        let runner = Runner::start(&self.stack, &self.token, labels, args);
        let run_id = self.stack.create_run(&self.ws, &with_shared(workflow, &self.shared)).await.id();
        (runner, run_id)
    }
}

/// Ends a test: stops each of its `runners`, then checks every fact the
/// test emitted against its schema.
pub async fn stop_and_check_facts(stack: &TestStack, runners: &mut [&mut Runner]) {
    for runner in runners.iter_mut() {
        runner.stop().await;
    }
    stack.assert_all_facts_valid();
}
