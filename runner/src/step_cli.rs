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

/// What an upload in GitHub's way does when nothing matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum NoFiles {
    Error,
    Warn,
    Ignore,
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
        /// Restore only: save nothing after the job
        /// (`actions/cache/restore`).
        #[arg(long)]
        no_save: bool,
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// Saves PATHs under KEY after the job succeeded (`actions/cache/save`).
    Save {
        #[arg(long)]
        key: String,
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
        /// Upload as GitHub's `actions/upload-artifact` does (paths that
        /// match nothing passed over, entries under the paths' common
        /// ancestor), and when nothing matches at all: fail (`error`), say
        /// so as a warning (`warn`) or pass quietly (`ignore`).
        #[arg(long, value_enum)]
        if_no_files_found: Option<NoFiles>,
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// Unpacks the run's artifact NAME into DIR (default: the job's
    /// directory); without NAME, every artifact of the run (or those
    /// `--pattern` matches), each into DIR/<its name> unless
    /// `--merge-multiple` (GitHub's `actions/download-artifact`).
    Download {
        #[arg(long)]
        name: Option<String>,
        #[arg(long = "into", short = 'o')]
        into: Option<PathBuf>,
        #[arg(long, conflicts_with = "name")]
        pattern: Option<String>,
        #[arg(long, conflicts_with = "name")]
        merge_multiple: bool,
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
        StepCommand::Cache {
            command: CacheCommand::Restore { key, key_files, restore_keys, scope, no_save, paths },
        } => {
            let key = crate::caches::effective_key(&dir, &key, &key_files)?;
            let restore = crate::caches::Restore { key, restore_keys, scope, paths, save: !no_save };
            return crate::caches::restore(&client, &args.lease_token, args.execution, &dir, restore).await;
        }
        StepCommand::Cache { command: CacheCommand::Save { key, scope, paths } } => {
            return crate::caches::save_later(crate::caches::PendingSave { key, scope, paths });
        }
    };
    match command {
        Command::Upload { name, if_no_files_found, paths } => {
            let archive = match if_no_files_found {
                None => artifacts::pack(&dir, &paths)?,
                Some(when_none) => match artifacts::pack_as_github(&dir, &paths)? {
                    Some(archive) => archive,
                    None => {
                        let none = format!(
                            "No files were found with the provided path: {}. No artifacts will be uploaded.",
                            paths.join(", ")
                        );
                        return match when_none {
                            NoFiles::Error => Err(format!("artifact {name}: {none}")),
                            // A workflow command: the log shows it as a warning.
                            NoFiles::Warn => {
                                println!("::warning::{none}");
                                Ok(())
                            }
                            NoFiles::Ignore => {
                                println!("{none}");
                                Ok(())
                            }
                        };
                    }
                },
            };
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
        Command::Download { name, into, pattern, merge_multiple } => {
            // The job's lease: what every request of the step acts under.
            let lease = (args.lease_token.clone(), args.execution);
            let into = into.map(|d| if d.is_absolute() { d } else { dir.join(d) }).unwrap_or(dir);
            if let Some(name) = name {
                return download_one(&client, &lease, &name, &into).await;
            }
            let pattern =
                pattern.map(|p| glob::Pattern::new(&p).map_err(|e| format!("--pattern {p}: {e}"))).transpose()?;
            let listed = artifacts::runner_list(&client, &lease.0, lease.1)
                .await
                .map_err(|e| format!("listing the run's artifacts: {e}"))?;
            let names: Vec<String> = listed
                .artifacts
                .into_iter()
                .filter(|a| a.status == baton_api::artifacts::ArtifactStatus::Stored)
                .map(|a| a.name)
                .filter(|name| pattern.as_ref().is_none_or(|p| p.matches(name)))
                .collect();
            if names.is_empty() {
                println!("no artifact of the run matches; nothing downloaded");
            }
            for name in names {
                let target = if merge_multiple { into.clone() } else { into.join(&name) };
                download_one(&client, &lease, &name, &target).await?;
            }
            Ok(())
        }
    }
}

/// Downloads the run's artifact `name`, checked, and unpacks it into `into`.
async fn download_one(
    client: &Client,
    lease: &(String, Uuid),
    name: &str,
    into: &std::path::Path,
) -> Result<(), String> {
    let download = artifacts::runner_download(client, &lease.0, lease.1, name)
        .await
        .map_err(|e| format!("artifact {name}: {e}"))?;
    let bytes = artifacts::fetch(client, &download).await?;
    artifacts::unpack(&bytes, into)?;
    println!(
        "artifact {name}: {} bytes from job {} unpacked into {}",
        bytes.len(),
        download.artifact.job_key,
        into.display()
    );
    Ok(())
}
