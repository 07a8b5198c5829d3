//! `baton-runner`: the reference runner agent. Thin: arguments, logs,
//! signals; the agent itself is `baton_runner::agent`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::agent::{self, AgentConfig, PushSettings};
use crate::Shutdown;
use clap::Parser;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

/// Runs Baton jobs on this machine: registers, claims jobs whose labels this
/// runner has, runs their steps with `sh -c` (or the action a step `uses`),
/// and reports the results.
#[derive(Debug, Parser)]
#[command(name = "baton-runner", version)]
struct Args {
    /// Base URL of the Baton API, e.g. http://127.0.0.1:8080.
    #[arg(long, env = "BATON_API")]
    api: String,
    /// Registration token (`brt_…`) of the workspace.
    #[arg(long, env = "BATON_REGISTRATION_TOKEN", hide_env_values = true)]
    token: String,
    /// This runner's labels, comma-separated (e.g. linux,x64).
    #[arg(long, env = "BATON_LABELS", value_delimiter = ',', required = true)]
    labels: Vec<String>,
    /// The tools this runner advertises, comma-separated (`docker`,
    /// `node@20`): `auto` (the default) detects the common ones on the PATH
    /// with their versions, `none` advertises none; `auto,terraform@1.7`
    /// adds to what is detected. Jobs' `tools:` match them.
    #[arg(long, env = "BATON_TOOLS", value_delimiter = ',', default_value = "auto")]
    tools: Vec<String>,
    /// A name shown to operators (default: the host name).
    #[arg(long, env = "BATON_RUNNER_NAME")]
    name: Option<String>,
    /// Where each job gets a fresh directory (default: $TMPDIR/baton-runner).
    #[arg(long, env = "BATON_WORK_DIR")]
    work_dir: Option<PathBuf>,
    /// Run one job, then exit.
    #[arg(long, env = "BATON_ONCE")]
    once: bool,
    /// Stop claiming after N jobs; exit when they ended.
    #[arg(long, env = "BATON_MAX_JOBS")]
    max_jobs: Option<u64>,
    /// How many jobs may run at once.
    #[arg(long, env = "BATON_CONCURRENCY", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    concurrency: u16,
    /// On SIGINT/SIGTERM, let running jobs finish and report (a second signal abandons them).
    #[arg(long, env = "BATON_DRAIN")]
    drain: bool,
    /// Long-poll duration of each claim, in seconds (0..=20).
    #[arg(long, env = "BATON_CLAIM_WAIT_S", default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=20))]
    claim_wait_s: u64,
    /// Seconds between SIGTERM and SIGKILL when a step is stopped.
    #[arg(long, env = "BATON_KILL_GRACE_S", default_value_t = 10)]
    kill_grace_s: u64,
    /// Keep each job's work directory after the job (for debugging).
    #[arg(long, env = "BATON_KEEP_WORK_DIRS")]
    keep_work_dirs: bool,
    /// Log JSON lines (tracing) instead of text; step output becomes events too.
    #[arg(long, env = "BATON_JSON_LOGS")]
    json_logs: bool,
    /// The most a job's stored log may weigh, in bytes; past it one note says
    /// so (the server holds its own cap too).
    #[arg(long, env = "BATON_LOG_CAP_BYTES", default_value_t = 32 * 1024 * 1024)]
    log_cap_bytes: u64,
    /// Never hold the server's push socket: long-poll for work instead.
    #[arg(long, env = "BATON_NO_PUSH")]
    no_push: bool,
    /// Connect the push socket here instead of where the server says.
    #[arg(long, env = "BATON_PUSH_URL")]
    push_url: Option<String>,
    /// While the push socket is open, claim this often anyway (in case a
    /// nudge was lost); default: the server's figure (300 s).
    #[arg(long, env = "BATON_SAFETY_POLL_S", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    safety_poll_s: Option<u64>,
    /// Keep-alive period of the push socket (API Gateway closes a socket
    /// idle for 10 minutes).
    #[arg(long, env = "BATON_PUSH_PING_S", default_value_t = 540, value_parser = clap::value_parser!(u64).range(1..=590))]
    push_ping_s: u64,
    /// Where a step's `uses: owner/repo@ref` is fetched from (with git).
    #[arg(long, env = "BATON_ACTIONS_HOST", default_value = "https://github.com")]
    actions_host: String,
    /// What runs JavaScript actions (a name on the PATH, or a path).
    #[arg(long, env = "BATON_NODE", default_value = "node")]
    node: String,
}

/// The `baton-runner` command: parses its arguments from the process and runs.
pub fn main() -> ExitCode {
    // `baton-runner artifact …` and `… cache …` are what a step runs.
    if crate::step_cli::is_step_command() {
        return crate::step_cli::main();
    }
    let args = Args::parse();
    init_logs(args.json_logs);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("baton-runner: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(args))
}

async fn run(args: Args) -> ExitCode {
    let (shutdown_tx, shutdown_rx) = watch::channel(Shutdown::Running);
    if let Err(err) = watch_signals(shutdown_tx, args.drain) {
        tracing::error!(error = %err, "cannot install the signal handlers");
        return ExitCode::FAILURE;
    }
    let max_jobs = if args.once { Some(1) } else { args.max_jobs };
    let config = AgentConfig {
        api: args.api,
        registration_token: args.token,
        labels: args.labels.iter().map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect(),
        tools: crate::tools::resolve(&args.tools).await,
        name: args.name.or_else(host_name),
        work_dir: args.work_dir.unwrap_or_else(|| std::env::temp_dir().join("baton-runner")),
        max_jobs,
        concurrency: usize::from(args.concurrency),
        claim_wait_s: args.claim_wait_s,
        kill_grace: Duration::from_secs(args.kill_grace_s),
        json_logs: args.json_logs,
        keep_work_dirs: args.keep_work_dirs,
        log_cap_bytes: args.log_cap_bytes,
        push: PushSettings {
            enabled: !args.no_push,
            url: args.push_url,
            safety_poll: args.safety_poll_s.map(Duration::from_secs),
            ping_every: Duration::from_secs(args.push_ping_s),
        },
        actions: crate::actions::ActionSettings { default_host: args.actions_host, node: args.node },
    };
    match agent::run(config, shutdown_rx).await {
        Ok(_) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = %err, "baton-runner stopped");
            ExitCode::FAILURE
        }
    }
}

/// First SIGINT/SIGTERM: stop claiming, and drain or abandon the running
/// jobs; a second signal abandons them in any case.
fn watch_signals(shutdown: watch::Sender<Shutdown>, drain: bool) -> std::io::Result<()> {
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        let mut seen = 0;
        loop {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = interrupt.recv() => {}
            }
            seen += 1;
            let next = if drain && seen == 1 { Shutdown::Drain } else { Shutdown::Abandon };
            tracing::warn!(
                drain = next == Shutdown::Drain,
                "signal received: no more claims; {}",
                if next == Shutdown::Drain {
                    "finishing the running jobs (signal again to abandon them)"
                } else {
                    "abandoning the running jobs"
                }
            );
            shutdown.send_replace(next);
        }
    });
    Ok(())
}

/// Text logs (or JSON lines) filtered by `BATON_LOG` (default `info`);
/// `baton-provisioner` logs the same way.
pub(crate) fn init_logs(json: bool) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("BATON_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    if json {
        let _ = tracing_subscriber::fmt().json().with_env_filter(filter).with_current_span(false).try_init();
    } else {
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
        let _ =
            tracing_subscriber::fmt().with_env_filter(filter).with_target(false).with_ansi(ansi).compact().try_init();
    }
}

fn host_name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}
