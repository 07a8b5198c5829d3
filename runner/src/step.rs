//! One step being run: its processes (a shell step's `sh -c`, or its
//! `shell:` run as GitHub's runner runs one (`crate::shell`), an action's
//! `node` or its composite steps) with the env GitHub's runner gives a step
//! and Baton's own variables, under the step's and the job's limits, their
//! output streamed to the job's log; and what a step hands the steps after
//! it (`$GITHUB_ENV`, `$GITHUB_PATH`, an action's `post`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use baton_api::facts::StepSpec;
use baton_api::runners::ClaimResponse;
use tokio::sync::watch;
use tokio::time::Instant as TokioInstant;
use uuid::Uuid;

use crate::actions::settings::ActionSettings;
use crate::logs::LogSink;
use crate::outputs;
use crate::process::{exit_code, signal_group, terminate_group};
use crate::shell;
use crate::streams::{read_step_output, Shown};
use crate::Stop;

/// What every step of one runner shares (from its settings).
#[derive(Clone, Copy)]
pub(crate) struct Runtime<'a> {
    /// The API's base URL (`$BATON_API`).
    pub api: &'a str,
    /// Between SIGTERM and SIGKILL when a step is stopped.
    pub kill_grace: Duration,
    /// Output lines as tracing events (JSON logs) instead of plain lines.
    pub json_output: bool,
    /// Where the runner keeps its jobs' directories and its actions.
    pub work_root: &'a Path,
    pub actions: &'a ActionSettings,
}

/// A JavaScript action's `post`, run after the job's last step.
pub(crate) struct Post {
    /// The step whose action it is (its log lines go there).
    pub step_id: Uuid,
    pub script: PathBuf,
    /// `INPUT_*` and `STATE_*` as the action's `main` left them.
    pub env: Vec<(String, String)>,
    pub files: ProcFiles,
}

/// `RUNNER_OS` as GitHub spells it.
pub fn runner_os() -> &'static str {
    match std::env::consts::OS {
        "linux" => "Linux",
        "macos" => "macOS",
        "windows" => "Windows",
        other => other,
    }
}

/// `RUNNER_ARCH` as GitHub spells it.
pub fn runner_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "X64",
        "aarch64" => "ARM64",
        "x86" => "X86",
        "arm" => "ARM",
        other => other,
    }
}

/// Environment variables of the runner that a job must never see.
pub(crate) const SECRET_VARS: &[&str] = &["BATON_REGISTRATION_TOKEN", "BATON_ADMIN_TOKEN", "BATON_TOKEN"];

/// How one step's process ended.
pub(crate) enum Ended {
    Exited,
    StepTimeout(u64),
    JobTimeout(u64),
    Stopped(Stop),
    SpawnFailed(String),
    /// The runner failed the step before or around its processes, saying
    /// why: an action that could not be fetched or read, a required input
    /// not given.
    Failed(String),
}

/// Beside the steps' output files: the saves the job's `cache:` steps ask
/// for (`$BATON_CACHE_SAVES`, `crate::caches`).
pub(crate) const CACHE_SAVES: &str = "cache-saves";

/// Beside the steps' output files: the job's `$RUNNER_TEMP`.
pub(crate) const TEMP: &str = "temp";

/// What the steps of a job hand on to the steps after them, as GitHub's
/// runner does for every step: variables appended to `$GITHUB_ENV`,
/// directories appended to `$GITHUB_PATH`, and the `post` scripts of the
/// actions that ran.
#[derive(Default)]
pub(crate) struct Carried {
    pub env: BTreeMap<String, String>,
    /// Newest first: each is put before the ones already there.
    pub path: Vec<String>,
    pub posts: Vec<Post>,
}

impl Carried {
    /// Takes in what a process wrote to its `$GITHUB_ENV` and
    /// `$GITHUB_PATH` (and empties them, so a file shared by several
    /// processes of one step is read once).
    fn absorb(&mut self, files: &ProcFiles) -> Result<(), String> {
        if let Ok(text) = std::fs::read_to_string(&files.env) {
            let _ = std::fs::write(&files.env, "");
            self.env.extend(outputs::parse(&text).map_err(|e| format!("$GITHUB_ENV: {e}"))?);
        }
        if let Ok(text) = std::fs::read_to_string(&files.path) {
            let _ = std::fs::write(&files.path, "");
            for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
                self.path.retain(|p| p != line);
                self.path.insert(0, line.to_string());
            }
        }
        Ok(())
    }
}

/// The files one step (or one process of an action) writes for the runner:
/// `$GITHUB_OUTPUT` (also `$BATON_OUTPUT`), `$GITHUB_ENV`, `$GITHUB_PATH`,
/// `$GITHUB_STATE` and `$GITHUB_STEP_SUMMARY`.
pub(crate) struct ProcFiles {
    pub output: PathBuf,
    pub env: PathBuf,
    pub path: PathBuf,
    pub state: PathBuf,
    pub summary: PathBuf,
}

impl ProcFiles {
    pub(crate) fn new(dir: &Path, tag: &str) -> Self {
        Self {
            output: dir.join(tag),
            env: dir.join(format!("{tag}.env")),
            path: dir.join(format!("{tag}.path")),
            state: dir.join(format!("{tag}.state")),
            summary: dir.join(format!("{tag}.summary")),
        }
    }

    /// Each file there (empty if new), as a step may test for one.
    fn touch(&self) {
        for file in [&self.output, &self.env, &self.path, &self.state, &self.summary] {
            let _ = std::fs::OpenOptions::new().create(true).append(true).open(file);
        }
    }
}

/// One step being run: where, under which limits, and where its lines go.
#[derive(Clone, Copy)]
pub(crate) struct Exec<'a> {
    pub runtime: Runtime<'a>,
    pub claim: &'a ClaimResponse,
    pub step: &'a StepSpec,
    pub name: &'a str,
    /// The job's work directory (`$GITHUB_WORKSPACE`).
    pub dir: &'a Path,
    /// Where the runner keeps the job's step files.
    pub files_dir: &'a Path,
    /// Where its output lines go (masked) besides the runner's terminal.
    pub sink: &'a LogSink,
    job_deadline: TokioInstant,
    step_timeout: Option<(u64, TokioInstant)>,
}

impl<'a> Exec<'a> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        runtime: Runtime<'a>,
        claim: &'a ClaimResponse,
        step: &'a StepSpec,
        name: &'a str,
        dir: &'a Path,
        files_dir: &'a Path,
        sink: &'a LogSink,
        job_deadline: TokioInstant,
    ) -> Self {
        // The step's own timeout counts from its start, for all its processes.
        let step_timeout = step.timeout_s.map(|s| (s, TokioInstant::now() + Duration::from_secs(s)));
        Self { runtime, claim, step, name, dir, files_dir, sink, job_deadline, step_timeout }
    }

    /// The same step, its lines shown under `name` (a composite action's
    /// own steps).
    pub(crate) fn renamed<'b>(&'b self, name: &'b str) -> Exec<'b> {
        Exec { name, ..*self }
    }

    /// `$RUNNER_TEMP`.
    pub(crate) fn temp_dir(&self) -> PathBuf {
        self.files_dir.join(TEMP)
    }

    /// A line of the runner's about this step, in the job's log.
    pub(crate) fn say(&self, text: &str) {
        let line = self.sink.mask(text);
        if self.runtime.json_output {
            tracing::info!(target: "baton_runner::output", step = %self.name, line, "output");
        } else {
            println!("[{}/{}] {line}", self.claim.job.work.key, self.name);
        }
        self.sink.line(self.step.id, baton_api::logs::LogStream::System, line);
    }

    /// The step's `run`, in its `working-directory` (under the job's
    /// directory) if it has one: under its `shell:` as GitHub's runner runs
    /// one (the script in a file of `$RUNNER_TEMP`, run by the shell's
    /// template), or with `sh -c` when it names none, as every step ran
    /// before shells (so a definition without `shell:` runs as it did).
    pub(crate) async fn shell(
        &self,
        carried: &mut Carried,
        run: &str,
        files: &ProcFiles,
        stop_rx: &mut watch::Receiver<Stop>,
    ) -> (Ended, Option<i32>) {
        let cwd = match &self.step.working_directory {
            Some(dir) => match shell::working_dir(self.dir, dir) {
                Ok(cwd) => cwd,
                Err(why) => return (Ended::Failed(why), None),
            },
            None => self.dir.to_path_buf(),
        };
        let Some(named) = self.step.shell.as_deref() else {
            let args = ["-c".to_string(), run.to_string()];
            return self.process(carried, "sh", &args, &cwd, &[], files, self.name, stop_rx).await;
        };
        let file = self.temp_dir().join(format!("{}.{}", Uuid::now_v7().simple(), shell::extension(named)));
        if let Err(err) = std::fs::write(&file, shell::script(named, run)) {
            return (Ended::Failed(format!("cannot write the step's script to {}: {err}", file.display())), None);
        }
        let ran = match shell::command(named, &file) {
            Ok((program, args)) => self.process(carried, &program, &args, &cwd, &[], files, self.name, stop_rx).await,
            Err(why) => (Ended::Failed(why), None),
        };
        let _ = std::fs::remove_file(&file);
        ran
    }

    /// Runs one process of the step to its end, in `cwd`, with the job's,
    /// the carried and the step's env, then `extra`; takes in what it
    /// wrote to `$GITHUB_ENV` and `$GITHUB_PATH`. Returns how it ended and
    /// its exit code.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn process(
        &self,
        carried: &mut Carried,
        program: &str,
        args: &[String],
        cwd: &Path,
        extra: &[(String, String)],
        files: &ProcFiles,
        label: &str,
        stop_rx: &mut watch::Receiver<Stop>,
    ) -> (Ended, Option<i32>) {
        let (runtime, claim, step) = (self.runtime, self.claim, self.step);
        files.touch();
        let mut env: BTreeMap<String, String> = BTreeMap::new();
        env.extend(claim.job.work.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        env.extend(carried.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        env.extend(step.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        env.extend(extra.iter().cloned());
        env.extend(baton_vars(runtime.api, claim, step, self.name, self.dir));
        env.extend(self.github_vars(files));
        if !carried.path.is_empty() {
            let base = env.get("PATH").cloned().or_else(|| std::env::var("PATH").ok()).unwrap_or_default();
            let mut path = carried.path.join(":");
            if !base.is_empty() {
                path.push(':');
                path.push_str(&base);
            }
            env.insert("PATH".into(), path);
        }
        let command = |program: &str| {
            let mut command = tokio::process::Command::new(program);
            command
                .args(args)
                .current_dir(cwd)
                .envs(&env)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .process_group(0)
                .kill_on_drop(true);
            for var in SECRET_VARS {
                command.env_remove(var);
            }
            command
        };
        // The program is looked up on the step's own `PATH` (with what
        // `$GITHUB_PATH` added); `python` may be there as `python3` only.
        let spawned = match command(program).spawn() {
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => match shell::fallback(program) {
                Some(other) => command(other).spawn().map_err(|e| format!("{program} (nor {other}): {e}")),
                None => Err(format!("{program}: {err}")),
            },
            spawned => spawned.map_err(|err| format!("{program}: {err}")),
        };
        let mut child = match spawned {
            Ok(child) => child,
            Err(why) => return (Ended::SpawnFailed(why), None),
        };
        let pgid = child.id().map_or(0, |id| id as i32);
        let shown = Shown { prefix: format!("{}/{label}", claim.job.work.key), json: runtime.json_output };
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        let reader = tokio::spawn(read_step_output(stdout, stderr, shown, self.sink.clone(), step.id));
        let step_deadline = self.step_timeout.map_or(self.job_deadline, |(_, at)| at.min(self.job_deadline));
        let waited = tokio::select! {
            status = child.wait() => Ok(status.ok()),
            _ = tokio::time::sleep_until(step_deadline) => Err(match self.step_timeout {
                Some((s, at)) if at <= self.job_deadline => Ended::StepTimeout(s),
                _ => Ended::JobTimeout(claim.job.work.timeout_s),
            }),
            stop = stop_rx.wait_for(|s| *s != Stop::None) => Err(Ended::Stopped(stop.map(|s| *s).unwrap_or(Stop::Abandon))),
        };
        let (ended, status) = match waited {
            Ok(status) => (Ended::Exited, status),
            Err(ended) => (ended, terminate_group(&mut child, pgid, runtime.kill_grace).await),
        };
        // Whatever the step left running in its group goes with it.
        signal_group(pgid, libc::SIGKILL);
        let _ = tokio::time::timeout(Duration::from_secs(5), reader).await;
        let code = status.as_ref().and_then(exit_code);
        if let Err(why) = carried.absorb(files) {
            // Later steps would otherwise run with values nobody meant.
            return (Ended::Failed(why), code);
        }
        (ended, code)
    }

    /// What GitHub's runner gives every step besides its env: the files it
    /// reads after the step, where the job runs, and what runs it.
    fn github_vars(&self, files: &ProcFiles) -> Vec<(String, String)> {
        let path = |p: &Path| p.display().to_string();
        vec![
            ("BATON_OUTPUT".into(), path(&files.output)),
            ("BATON_CACHE_SAVES".into(), path(&files.output.with_file_name(CACHE_SAVES))),
            ("GITHUB_OUTPUT".into(), path(&files.output)),
            ("GITHUB_ENV".into(), path(&files.env)),
            ("GITHUB_PATH".into(), path(&files.path)),
            ("GITHUB_STATE".into(), path(&files.state)),
            ("GITHUB_STEP_SUMMARY".into(), path(&files.summary)),
            ("GITHUB_WORKSPACE".into(), path(self.dir)),
            ("GITHUB_ACTIONS".into(), "true".into()),
            ("RUNNER_TEMP".into(), path(&self.temp_dir())),
            ("RUNNER_OS".into(), runner_os().into()),
            ("RUNNER_ARCH".into(), runner_arch().into()),
        ]
    }
}

/// The variables every step sees.
pub(crate) fn baton_vars(
    settings_api: &str,
    claim: &ClaimResponse,
    step: &StepSpec,
    name: &str,
    dir: &Path,
) -> Vec<(String, String)> {
    vec![
        ("CI".into(), "true".into()),
        ("BATON".into(), "true".into()),
        ("BATON_WORKSPACE_ID".into(), claim.workspace_id.clone()),
        ("BATON_RUN_ID".into(), claim.run_id.to_string()),
        ("BATON_ATTEMPT".into(), claim.attempt.to_string()),
        ("BATON_JOB_ID".into(), claim.job_id.to_string()),
        ("BATON_JOB_KEY".into(), claim.job.work.key.clone()),
        ("BATON_JOB_EXECUTION_ID".into(), claim.job_execution_id.to_string()),
        ("BATON_STEP_ID".into(), step.id.to_string()),
        ("BATON_STEP_NAME".into(), name.to_string()),
        ("BATON_WORK_DIR".into(), dir.display().to_string()),
        // What `baton-runner artifact …` acts under: the job's own lease
        // (the token is masked in the log like a secret).
        ("BATON_API".into(), settings_api.to_string()),
        ("BATON_LEASE_TOKEN".into(), claim.lease.token.clone()),
        ("BATON_RUNNER".into(), runner_path()),
    ]
}

/// This runner's own executable: what the `upload:` and `download:` steps
/// call (`$BATON_RUNNER artifact …`).
pub(crate) fn runner_path() -> String {
    std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "baton-runner".into())
}
