//! `baton-provisioner`: the reference provisioners. Thin: arguments, logs,
//! signals; the local provisioner itself is `baton_runner::provisioner::local`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

use crate::provisioner::local::{self, LocalConfig};

/// Makes and destroys runner instances for a Baton provisioner (`bpt_`
/// token): reads demand, reserves capacity, starts runners with the
/// reservations' ephemeral tokens, and stops the instances Baton wants gone.
#[derive(Debug, Parser)]
#[command(name = "baton-provisioner", version)]
struct Args {
    /// Log JSON lines (tracing) instead of text.
    #[arg(long, env = "BATON_JSON_LOGS", global = true)]
    json_logs: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Instances are `baton-runner` processes on this machine.
    Local(LocalArgs),
}

#[derive(Debug, clap::Args)]
struct LocalArgs {
    /// Base URL of the Baton API, e.g. http://127.0.0.1:8080.
    #[arg(long, env = "BATON_API")]
    api: String,
    /// The provisioner token (`bpt_…`) `baton provisioner create` printed.
    #[arg(long, env = "BATON_PROVISIONER_TOKEN", hide_env_values = true)]
    token: String,
    /// The runner each instance runs (default: the `baton-runner` next to
    /// this executable).
    #[arg(long, env = "BATON_RUNNER_BIN")]
    runner_bin: Option<PathBuf>,
    /// Each instance works in a directory of its own under this one
    /// (default: $TMPDIR/baton-provisioner).
    #[arg(long, env = "BATON_WORK_DIR")]
    work_dir: Option<PathBuf>,
    /// At most this many runners at once on this machine (the provisioner's
    /// `max_instances` bounds them too).
    #[arg(long, env = "BATON_LOCAL_MAX_INSTANCES")]
    max_instances: Option<u32>,
    /// Seconds between SIGTERM and SIGKILL when an instance is stopped
    /// (keep it above the runners' own --kill-grace-s, 10 by default).
    #[arg(long, default_value_t = 20)]
    kill_grace_s: u64,
    /// Seconds between two reads of the instances Baton wants gone.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=60))]
    intent_poll_s: u64,
    /// Expiry of each reservation in seconds. Short, because a local
    /// runner registers within seconds, and a reservation whose answer was
    /// lost (a 504 after it was made) holds its slot until it expires.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u32).range(1..=3_600))]
    reservation_expiry_s: u32,
    /// More arguments for every runner, after `--` (e.g. `-- --no-push`).
    #[arg(last = true)]
    runner_args: Vec<String>,
}

/// The `baton-provisioner` command: parses its arguments from the process and runs.
pub fn main() -> ExitCode {
    let args = Args::parse();
    crate::agent_cli::init_logs(args.json_logs);
    // One thread: the runners are asked to die with the thread that started
    // them (PR_SET_PDEATHSIG), which must then live as long as the process.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("baton-provisioner: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match args.command {
        Command::Local(local) => runtime.block_on(run_local(local)),
    }
}

async fn run_local(args: LocalArgs) -> ExitCode {
    let runner_bin = match args.runner_bin {
        Some(path) => path,
        None => match std::env::current_exe() {
            Ok(own) => default_runner_bin(&own),
            Err(err) => {
                tracing::error!(error = %err, "cannot find this executable's directory: pass --runner-bin");
                return ExitCode::FAILURE;
            }
        },
    };
    if !runner_bin.is_file() {
        tracing::error!(runner_bin = %runner_bin.display(), "no runner there: build it (cargo build -p baton-runner) or pass --runner-bin");
        return ExitCode::FAILURE;
    }
    let work_dir = args.work_dir.unwrap_or_else(|| std::env::temp_dir().join("baton-provisioner"));
    let config = LocalConfig {
        runner_args: args.runner_args,
        kill_grace: Duration::from_secs(args.kill_grace_s),
        intent_poll: Duration::from_secs(args.intent_poll_s),
        max_instances: args.max_instances,
        reservation_expiry_s: Some(args.reservation_expiry_s),
        ..LocalConfig::new(&args.api, &args.token, runner_bin, work_dir)
    };
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    if let Err(err) = watch_signals(shutdown_tx) {
        tracing::error!(error = %err, "cannot install the signal handlers");
        return ExitCode::FAILURE;
    }
    match local::run(config, shutdown_rx).await {
        Ok(_) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = %err, "baton-provisioner stopped");
            ExitCode::FAILURE
        }
    }
}

/// `baton-runner` in the directory of `own` (this executable): where cargo
/// and an install put both.
pub fn default_runner_bin(own: &Path) -> PathBuf {
    own.with_file_name(format!("baton-runner{}", std::env::consts::EXE_SUFFIX))
}

/// SIGINT/SIGTERM: stop every instance, report them, exit.
fn watch_signals(shutdown: watch::Sender<bool>) -> std::io::Result<()> {
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = interrupt.recv() => {}
            }
            tracing::warn!("signal received: stopping every instance");
            shutdown.send_replace(true);
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_runner_is_the_one_beside_this_executable() {
        let own = Path::new("/opt/baton/bin/baton-provisioner");
        assert_eq!(default_runner_bin(own), PathBuf::from("/opt/baton/bin/baton-runner"));
    }

    #[test]
    fn extra_runner_arguments_follow_a_double_dash() {
        let args = Args::try_parse_from([
            "baton-provisioner",
            "local",
            "--api",
            "http://127.0.0.1:8080",
            "--token",
            "bpt_x",
            "--",
            "--no-push",
            "--kill-grace-s",
            "3",
        ])
        .expect("parses");
        let Command::Local(local) = args.command;
        assert_eq!(local.runner_args, vec!["--no-push", "--kill-grace-s", "3"]);
        assert_eq!(local.kill_grace_s, 20);
    }
}
