//! `baton-runner artifact upload|download`: what a step runs to hand files
//! to later jobs of its run (the `upload:` and `download:` steps run it).
//! It acts under the job's lease, from the variables the runner gives every
//! step: `BATON_API`, `BATON_LEASE_TOKEN` (masked in the job's log like a
//! secret), `BATON_JOB_EXECUTION_ID` and `BATON_WORK_DIR`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use uuid::Uuid;

use crate::artifacts;
use crate::client::Client;

/// Hands files between the jobs of a run.
#[derive(Debug, Parser)]
#[command(name = "baton-runner artifact", version)]
struct Args {
    #[command(subcommand)]
    command: Command,
    #[arg(long, env = "BATON_API", hide = true)]
    api: String,
    #[arg(long, env = "BATON_LEASE_TOKEN", hide_env_values = true, hide = true)]
    lease_token: String,
    #[arg(long, env = "BATON_JOB_EXECUTION_ID", hide = true)]
    execution: Uuid,
    /// Paths are relative to this directory (default: the job's).
    #[arg(long, env = "BATON_WORK_DIR")]
    work_dir: Option<PathBuf>,
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

/// The `baton-runner artifact …` command (argv[1] is `artifact`).
pub fn main() -> ExitCode {
    let args = Args::parse_from(std::env::args().skip(1));
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("baton-runner artifact: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("baton-runner artifact: {err}");
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
    match args.command {
        Command::Upload { name, paths } => {
            let archive = artifacts::pack(&dir, &paths)?;
            let size = archive.bytes.len();
            match artifacts::upload(&client, &args.lease_token, args.execution, &name, &archive).await {
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
