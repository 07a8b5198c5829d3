//! The commands a step runs: `baton-runner artifact upload|download` hands
//! files to later jobs of its run (the `upload:` and `download:` steps),
//! `baton-runner cache restore` restores a cache and has the runner save it
//! after the job (the `cache:` step). They act under the job's lease, from
//! the variables the runner gives every step: `BATON_API`,
//! `BATON_LEASE_TOKEN` (masked in the job's log like a secret),
//! `BATON_JOB_EXECUTION_ID`, `BATON_WORK_DIR` and `BATON_CACHE_SAVES`.

use std::path::PathBuf;
use std::process::ExitCode;

use baton_client::Client;
use clap::{Parser, Subcommand};
use uuid::Uuid;

use crate::artifacts;

/// What a step of a Baton job may run.
#[derive(Debug, Parser)]
#[command(name = "baton-runner", version)]
struct Args {
    #[command(subcommand)]
    command: StepCommand,
    #[arg(long, env = "BATON_API", hide = true)]
    api: String,
    #[arg(long, env = "BATON_LEASE_TOKEN", hide_env_values = true, hide = true)]
    lease_token: String,
    #[arg(long, env = "BATON_JOB_EXECUTION_ID", hide = true)]
    execution: Uuid,
    /// Paths are relative to this directory (default: the job's).
    #[arg(long, env = "BATON_WORK_DIR")]
    work_dir: Option<PathBuf>,
    /// The most bytes a second an artifact upload sends (tests slow a
    /// runner down with it, as a slow link would).
    #[arg(long, env = "BATON_UPLOAD_BYTES_PER_S", hide = true)]
    upload_bytes_per_s: Option<u64>,
}

#[derive(Debug, Subcommand)]
enum StepCommand {
    /// Hand files to later jobs of the run.
    Artifact {
        #[command(subcommand)]
        command: Command,
    },
    /// Restore a cache now; the runner saves it when the job succeeded.
    Cache {
        #[command(subcommand)]
        command: CacheCommand,
    },
}

#[derive(Debug, Subcommand)]
enum CacheCommand {
    /// Restores KEY (else the newest entry under each --restore-key) into
    /// the job's directory; unless KEY itself was found, PATHs are saved
    /// under KEY after the job succeeded.
    Restore {
        #[arg(long)]
        key: String,
        /// Files whose contents make part of the key (`KEY-<hash>`): a
        /// lock file, say.
        #[arg(long = "key-file")]
        key_files: Vec<String>,
        #[arg(long = "restore-key")]
        restore_keys: Vec<String>,
        /// Look here first, then workspace-wide; save here.
        #[arg(long, default_value = "")]
        scope: String,
        #[arg(required = true)]
        paths: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Archives PATHs (files, directories, globs) as artifact NAME of the run.
    Upload {
        #[arg(long)]
        name: String,
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// Unpacks the run's artifact NAME into DIR (default: the job's directory).
    Download {
        #[arg(long)]
        name: String,
        #[arg(long = "into", short = 'o')]
        into: Option<PathBuf>,
    },
}

/// Whether the command line is a step's command (`artifact …`, `cache …`)
/// rather than the agent's.
pub fn is_step_command() -> bool {
    matches!(std::env::args().nth(1).as_deref(), Some("artifact" | "cache"))
}

/// `baton-runner artifact …` / `baton-runner cache …`.
pub fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("baton-runner: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("baton-runner: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    let client = Client::new(&args.api).map_err(|e| e.to_string())?;
    let dir = match args.work_dir {
        Some(dir) => dir,
        None => std::env::current_dir().map_err(|e| e.to_string())?,
    };
    let command = match args.command {
        StepCommand::Artifact { command } => command,
        StepCommand::Cache { command: CacheCommand::Restore { key, key_files, restore_keys, scope, paths } } => {
            let key = crate::caches::effective_key(&dir, &key, &key_files)?;
            let restore = crate::caches::Restore { key, restore_keys, scope, paths };
            return crate::caches::restore(&client, &args.lease_token, args.execution, &dir, restore).await;
        }
    };
    match command {
        Command::Upload { name, paths } => {
            let archive = artifacts::pack(&dir, &paths)?;
            let size = archive.bytes.len();
            match artifacts::upload(
                &client,
                &args.lease_token,
                args.execution,
                &name,
                &archive,
                args.upload_bytes_per_s,
            )
            .await
            {
                Ok(_) => {
                    println!("artifact {name}: {} files, {size} bytes, sha256 {}", archive.files, archive.sha256);
                    Ok(())
                }
                Err(err) => Err(format!("artifact {name}: {err}")),
            }
        }
        Command::Download { name, into } => {
            let download = artifacts::runner_download(&client, &args.lease_token, args.execution, &name)
                .await
                .map_err(|e| format!("artifact {name}: {e}"))?;
            let bytes = artifacts::fetch(&client, &download).await?;
            let into = into.map(|d| if d.is_absolute() { d } else { dir.join(d) }).unwrap_or(dir);
            artifacts::unpack(&bytes, &into)?;
            println!(
                "artifact {name}: {} bytes from job {} unpacked into {}",
                bytes.len(),
                download.artifact.job_key,
                into.display()
            );
            Ok(())
        }
    }
}
