//! `baton run`: submit, list, show, follow, cancel and rerun runs; list
//! their artifacts, draw their graph, and hand approvals and events on
//! (`approvals`) and logs (`logs`) to their own modules.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use baton_api::runs::{CreateRunRequest, Decision, Disposition, EventDelivery, RerunMode, RunView};
use baton_api::status::RunStatus;
use baton_client::operators::Operator;
use clap::{Subcommand, ValueEnum};
use uuid::Uuid;

use super::answer::{print_json, CliError};
use super::approvals::{decide, deliver};
use super::logs::logs;
use super::run_lines::{changes, painted_changes};

#[derive(Debug, Subcommand)]
pub(super) enum RunCommand {
    /// Submit a workflow definition (YAML); prints the run id on stdout.
    Submit {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        file: PathBuf,
        #[arg(long)]
        idempotency_key: Option<String>,
        /// Inputs as KEY=VALUE (repeatable).
        #[arg(long = "input", value_parser = parse_input)]
        inputs: Vec<(String, String)>,
        /// Then follow the run as `run watch` does (the run id goes to stderr).
        #[arg(long)]
        watch: bool,
    },
    /// List the workspace's runs, newest first.
    List {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        /// Only runs with this status.
        #[arg(long, value_enum)]
        status: Option<StatusFilter>,
        /// Only runs of workflows whose name holds this text.
        #[arg(long)]
        workflow: Option<String>,
        /// Runs per page (1 to 100).
        #[arg(long)]
        limit: Option<u32>,
        /// The `next` cursor a previous page printed.
        #[arg(long)]
        cursor: Option<String>,
    },
    /// List the run's artifacts: name, size, the job that made it, status.
    Artifacts {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        run_id: Uuid,
    },
    /// Print the jobs' logs (each line `[job/step] text`), job after job.
    Logs {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        run_id: Uuid,
        /// Only this job (its key).
        #[arg(long)]
        job: Option<String>,
        /// The attempt (default: the current one).
        #[arg(long)]
        attempt: Option<u32>,
        /// Keep reading until each job has ended, printing lines as they come.
        #[arg(long, short = 'f')]
        follow: bool,
    },
    /// Print the run's job graph (current attempt) with statuses.
    Graph {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        run_id: Uuid,
        #[arg(long, value_enum, default_value_t = GraphFormat::Mermaid)]
        format: GraphFormat,
    },
    /// Show a run once.
    Get {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        run_id: Uuid,
    },
    /// Follow a run until it ends: one line per status change, with how long
    /// each finished job and step took (coloured on a terminal; NO_COLOR
    /// turns it off). Exits 0 when it succeeded.
    Watch {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        run_id: Uuid,
        /// Seconds between polls.
        #[arg(long, default_value_t = DEFAULT_WATCH_INTERVAL_S)]
        interval_s: u64,
    },
    /// Cancel a run.
    Cancel {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        run_id: Uuid,
    },
    /// Approve an approval job (by its key, or its id): each approver counts
    /// once, the run's creator never.
    Approve {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        run_id: Uuid,
        job: String,
        /// An input as NAME=VALUE (repeatable); a boolean input takes true or false.
        #[arg(long = "input", value_parser = parse_input)]
        inputs: Vec<(String, String)>,
        #[arg(long)]
        comment: Option<String>,
    },
    /// Reject an approval job: it fails (`rejected`) and what needs it is skipped.
    Reject {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        run_id: Uuid,
        job: String,
        #[arg(long)]
        comment: Option<String>,
    },
    /// Deliver an event to a listening job (by its key, or its id): it runs
    /// the job's steps once with the event, or ends the listening with
    /// --resolve. Delivering a `ref` again changes nothing.
    Event {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        run_id: Uuid,
        job: String,
        #[arg(long)]
        name: String,
        /// The event's own id (idempotency key).
        #[arg(long = "ref")]
        reference: String,
        /// End the listening instead of running the steps.
        #[arg(long)]
        resolve: bool,
        /// A JSON object the steps read as `${{ event.payload.<path> }}`.
        #[arg(long)]
        payload: Option<String>,
    },
    /// Start a new attempt of a finished run.
    Rerun {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        run_id: Uuid,
        #[arg(long, value_enum, default_value_t = Mode::Failed)]
        mode: Mode,
    },
}

/// Seconds between the polls of `run watch`.
pub(super) const DEFAULT_WATCH_INTERVAL_S: u64 = 1;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(super) enum StatusFilter {
    Pending,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl From<StatusFilter> for RunStatus {
    fn from(filter: StatusFilter) -> Self {
        match filter {
            StatusFilter::Pending => RunStatus::Pending,
            StatusFilter::Running => RunStatus::Running,
            StatusFilter::Succeeded => RunStatus::Succeeded,
            StatusFilter::Failed => RunStatus::Failed,
            StatusFilter::Cancelled => RunStatus::Cancelled,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(super) enum GraphFormat {
    Mermaid,
    Dot,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(super) enum Mode {
    Failed,
    All,
}

pub(super) fn parse_input(raw: &str) -> Result<(String, String), String> {
    raw.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("expected KEY=VALUE, got {raw:?}"))
}

pub(super) async fn run_command(operator: &Operator, command: RunCommand, json: bool) -> Result<ExitCode, CliError> {
    let view = match command {
        RunCommand::Submit { workspace, file, idempotency_key, inputs, watch: follow } => {
            let definition = std::fs::read_to_string(&file)
                .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", file.display())))?;
            let inputs = (!inputs.is_empty())
                .then(|| inputs.into_iter().map(|(k, v)| (k, serde_json::Value::String(v))).collect());
            let view =
                operator.submit_run(&workspace, &CreateRunRequest { definition, inputs, idempotency_key }).await?;
            if follow {
                eprintln!(
                    "run {} #{} submitted: {} (id {})",
                    view.header.name, view.header.number, view.header.status, view.header.id
                );
                return watch(operator, &workspace, view.header.id, DEFAULT_WATCH_INTERVAL_S, json).await;
            }
            if !json {
                eprintln!("run {} #{} submitted: {}", view.header.name, view.header.number, view.header.status);
                println!("{}", view.header.id);
                return Ok(ExitCode::SUCCESS);
            }
            view
        }
        RunCommand::List { workspace, status, workflow, limit, cursor } => {
            let status = status.map(RunStatus::from);
            let list = operator.list_runs(&workspace, status, workflow.as_deref(), limit, cursor.as_deref()).await?;
            if json {
                print_json(&list);
            } else {
                for run in &list.items {
                    let finished = run.header.finished_at.map_or("-".to_string(), |t| t.to_rfc3339());
                    let title = run.header.title.as_ref().map_or(String::new(), |title| format!("  {title}"));
                    println!(
                        "{}  {} #{}  {}  created {}  finished {}{title}",
                        run.header.id,
                        run.header.name,
                        run.header.number,
                        run.header.status,
                        run.header.created_at.to_rfc3339(),
                        finished
                    );
                }
                if let Some(next) = &list.next_cursor {
                    eprintln!("more: --cursor {next}");
                }
            }
            return Ok(ExitCode::SUCCESS);
        }
        RunCommand::Artifacts { workspace, run_id } => {
            let list = operator.list_artifacts(&workspace, run_id).await?;
            if json {
                print_json(&list);
            } else {
                for a in &list.artifacts {
                    let status = match a.status {
                        baton_api::artifacts::ArtifactStatus::Stored => "stored",
                        baton_api::artifacts::ArtifactStatus::Uploading => "uploading",
                    };
                    println!(
                        "{}  {} bytes  job {} (attempt {})  {status}  sha256 {}  expires {}",
                        a.name,
                        a.bytes,
                        a.job_key,
                        a.attempt,
                        a.sha256,
                        a.expires_at.to_rfc3339()
                    );
                }
            }
            return Ok(ExitCode::SUCCESS);
        }
        RunCommand::Logs { workspace, run_id, job, attempt, follow } => {
            return logs(operator, &workspace, run_id, job.as_deref(), attempt, follow, json).await;
        }
        RunCommand::Graph { workspace, run_id, format } => {
            let view = operator.get_run(&workspace, run_id).await?;
            if !json {
                print!(
                    "{}",
                    match format {
                        GraphFormat::Mermaid => crate::graph::mermaid(&view),
                        GraphFormat::Dot => crate::graph::dot(&view),
                    }
                );
                return Ok(ExitCode::SUCCESS);
            }
            view
        }
        RunCommand::Get { workspace, run_id } => {
            let view = operator.get_run(&workspace, run_id).await?;
            if !json {
                for line in changes(None, &view) {
                    println!("{line}");
                }
                return Ok(ExitCode::SUCCESS);
            }
            view
        }
        RunCommand::Watch { workspace, run_id, interval_s } => {
            return watch(operator, &workspace, run_id, interval_s, json).await
        }
        RunCommand::Cancel { workspace, run_id } => {
            let view = operator.cancel_run(&workspace, run_id).await?;
            if !json {
                println!("run {} #{} cancel requested: {}", view.header.name, view.header.number, view.header.status);
                return Ok(ExitCode::SUCCESS);
            }
            view
        }
        RunCommand::Approve { workspace, run_id, job, inputs, comment } => {
            return decide(operator, &workspace, run_id, &job, Decision::Approve, inputs, comment, json).await
        }
        RunCommand::Reject { workspace, run_id, job, comment } => {
            return decide(operator, &workspace, run_id, &job, Decision::Reject, Vec::new(), comment, json).await
        }
        RunCommand::Event { workspace, run_id, job, name, reference, resolve, payload } => {
            let payload = match payload {
                Some(text) => {
                    serde_json::from_str(&text).map_err(|e| CliError::Usage(format!("--payload: not JSON: {e}")))?
                }
                None => serde_json::Value::Null,
            };
            let disposition = if resolve { Disposition::Resolve } else { Disposition::Fire };
            let delivery = EventDelivery { name, disposition, reference, payload };
            return deliver(operator, &workspace, run_id, &job, &delivery, json).await;
        }
        RunCommand::Rerun { workspace, run_id, mode } => {
            let mode = match mode {
                Mode::Failed => RerunMode::Failed,
                Mode::All => RerunMode::All,
            };
            let view = operator.rerun(&workspace, run_id, mode).await?;
            if !json {
                println!(
                    "run {} #{} attempt {} started: {}",
                    view.header.name, view.header.number, view.header.current_attempt, view.header.status
                );
                return Ok(ExitCode::SUCCESS);
            }
            view
        }
    };
    print_json(&view);
    Ok(ExitCode::SUCCESS)
}

/// Polls the run view and prints what changed, until the run is terminal:
/// lines coloured on a terminal (not with `NO_COLOR`), or with `--json`
/// one view per change as a JSON line.
pub(super) async fn watch(
    operator: &Operator,
    workspace: &str,
    run: Uuid,
    interval_s: u64,
    json: bool,
) -> Result<ExitCode, CliError> {
    let colour = !json && std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let mut previous: Option<RunView> = None;
    let mut failures = 0u32;
    loop {
        match operator.get_run(workspace, run).await {
            Ok(view) => {
                failures = 0;
                let lines = painted_changes(previous.as_ref(), &view, colour);
                if json && !lines.is_empty() {
                    match serde_json::to_string(&view) {
                        Ok(text) => println!("{text}"),
                        Err(err) => eprintln!("baton: cannot print the view: {err}"),
                    }
                } else {
                    for line in lines {
                        println!("{line}");
                    }
                }
                if view.header.status.is_terminal() {
                    return Ok(if view.header.status == RunStatus::Succeeded {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::FAILURE
                    });
                }
                previous = Some(view);
            }
            Err(err) if err.is_transient() && failures < 10 => {
                failures += 1;
                eprintln!("baton: {err} (retrying)");
            }
            Err(err) => return Err(err.into()),
        }
        tokio::time::sleep(Duration::from_secs(interval_s.max(1))).await;
    }
}
