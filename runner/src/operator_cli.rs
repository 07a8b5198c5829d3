//! `baton`: the operator CLI. Registration tokens, provisioners and runs,
//! over the API; `baton fleet` shows a provisioner's demand and instances.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::client::ClientError;
use std::io::IsTerminal;

use crate::operator::{changes, painted_changes, Operator};
use baton_api::provisioners::{CreateProvisioner, ProvisionerSummary};
use baton_api::runners::CreateRegistrationToken;
use baton_api::runs::RerunMode;
use baton_api::runs::{
    ApprovalInputKind, ApprovalRequest, CreateRunRequest, Decision, Disposition, EventDelivery, RunView,
};
use baton_api::status::RunStatus;
use clap::{Parser, Subcommand, ValueEnum};
use uuid::Uuid;

#[derive(Debug, Parser)]
#[command(name = "baton", version, about = "Operate Baton: registration tokens, provisioners and runs")]
struct Cli {
    /// Base URL of the Baton API, e.g. http://127.0.0.1:8080.
    #[arg(long, env = "BATON_API", global = true, default_value = "http://127.0.0.1:8080")]
    api: String,
    /// Operator API token (`bat_…`); for `fleet`, a provisioner token (`bpt_…`).
    #[arg(long, env = "BATON_ADMIN_TOKEN", global = true, hide_env_values = true, default_value = "")]
    token: String,
    /// Print the API's JSON answer instead of a summary.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Registration tokens for runners.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Workflow runs.
    Run {
        #[command(subcommand)]
        command: RunCommand,
    },
    /// Provisioners: the controllers that make and destroy runner machines.
    Provisioner {
        #[command(subcommand)]
        command: ProvisionerCommand,
    },
    /// A run's artifacts: what its jobs uploaded for later jobs.
    Artifact {
        #[command(subcommand)]
        command: ArtifactCommand,
    },
    /// Workspace secrets, read by jobs as `${{ secrets.NAME }}`.
    Secret {
        #[command(subcommand)]
        command: SecretCommand,
    },
    /// A provisioner's demand per label set and its instances, read with its
    /// own token (`--token bpt_…` or BATON_PROVISIONER_TOKEN).
    Fleet {
        /// The provisioner token, when `--token` is not one.
        #[arg(long, env = "BATON_PROVISIONER_TOKEN", hide_env_values = true)]
        provisioner_token: Option<String>,
        /// Keep redrawing: at once when demand changes, else every few seconds.
        #[arg(long)]
        watch: bool,
    },
}

#[derive(Debug, Subcommand)]
enum ArtifactCommand {
    /// Download a stored artifact, check its SHA-256, unpack it into DIR
    /// (default: the current directory).
    Download {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        run_id: Uuid,
        name: String,
        #[arg(long = "output", short = 'o', default_value = ".")]
        output: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum SecretCommand {
    /// Set (or replace) a secret; its value is read from stdin (one
    /// trailing newline dropped), so it is in no shell history or argument.
    Set {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        name: String,
    },
    /// List the workspace's secrets: names and when each was set, never values.
    List {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
    },
    /// Delete a secret; jobs that name it then fail when claimed, saying so.
    Delete {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        name: String,
    },
}

#[derive(Debug, Subcommand)]
enum ProvisionerCommand {
    /// Register a provisioner; prints its token (shown once) on stdout.
    Create {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        #[arg(long)]
        name: String,
        /// A label set its machines serve, comma-separated (repeatable).
        #[arg(long = "label-set", required = true, value_parser = parse_label_set)]
        label_sets: Vec<Vec<String>>,
        /// The most instances it may hold at once (1 to 10,000).
        #[arg(long)]
        max_instances: u32,
        /// Jobs each instance takes before it goes (1, the default: ephemeral).
        #[arg(long)]
        jobs_per_instance: Option<u32>,
        /// An instance idle this long goes (default 300).
        #[arg(long)]
        idle_timeout_s: Option<u32>,
        /// An instance whose runner has not registered by then goes (default 600).
        #[arg(long)]
        boot_timeout_s: Option<u32>,
        /// Idle instances to keep ready (default 0).
        #[arg(long)]
        warm: Option<u32>,
    },
    /// List the workspace's provisioners (no tokens).
    List {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
    },
    /// Remove a provisioner: its token stops working, its instances are asked to go.
    Remove {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        id: Uuid,
    },
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Create a registration token; prints the secret (shown once) on stdout.
    Create {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        #[arg(long)]
        name: Option<String>,
        /// The token registers one runner session only.
        #[arg(long)]
        single_use: bool,
        /// Each session made from it may claim at most N jobs.
        #[arg(long)]
        max_claims: Option<u64>,
        #[arg(long)]
        expires_in_s: Option<u64>,
    },
}

#[derive(Debug, Subcommand)]
enum RunCommand {
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
const DEFAULT_WATCH_INTERVAL_S: u64 = 1;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum StatusFilter {
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
enum GraphFormat {
    Mermaid,
    Dot,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Mode {
    Failed,
    All,
}

/// `linux,x64` as the label set `["linux", "x64"]` (blanks dropped).
fn parse_label_set(raw: &str) -> Result<Vec<String>, String> {
    let labels: Vec<String> = raw.split(',').map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect();
    if labels.is_empty() {
        return Err(format!("expected labels separated by commas, got {raw:?}"));
    }
    Ok(labels)
}

/// The provisioner token of `baton fleet`: `--token` when it is one (the
/// global flag, which otherwise holds the operator's), else
/// `--provisioner-token` / BATON_PROVISIONER_TOKEN.
fn fleet_token(global: &str, provisioner: Option<&str>) -> Result<String, CliError> {
    if global.starts_with("bpt_") {
        return Ok(global.to_string());
    }
    match provisioner.filter(|t| !t.is_empty()) {
        Some(token) => Ok(token.to_string()),
        None => {
            Err(CliError::Usage("a provisioner token is required: --token bpt_… or BATON_PROVISIONER_TOKEN".into()))
        }
    }
}

fn parse_input(raw: &str) -> Result<(String, String), String> {
    raw.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("expected KEY=VALUE, got {raw:?}"))
}

/// The `baton` command: parses its arguments from the process and runs.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("baton: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(execute(cli)) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("baton: {err}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error("{0}")]
    Api(#[from] ClientError),
    #[error("{0}")]
    Usage(String),
}

async fn execute(cli: Cli) -> Result<ExitCode, CliError> {
    let operator = || {
        if cli.token.is_empty() {
            return Err(CliError::Usage("an operator token is required: --token or BATON_ADMIN_TOKEN".into()));
        }
        Ok(Operator::new(&cli.api, &cli.token)?)
    };
    match cli.command {
        Command::Token { command: TokenCommand::Create { workspace, name, single_use, max_claims, expires_in_s } } => {
            let body = CreateRegistrationToken { name, expires_in_s, single_use, max_claims };
            let created = operator()?.create_registration_token(&workspace, &body).await?;
            if cli.json {
                print_json(&created);
            } else {
                let expiry = created.expires_at.map_or("never".to_string(), |t| t.to_rfc3339());
                eprintln!(
                    "registration token {} for workspace {workspace} (expires: {expiry}); shown once:",
                    created.id
                );
                println!("{}", created.token);
            }
        }
        Command::Run { command } => return run_command(&operator()?, command, cli.json).await,
        Command::Provisioner { command } => return provisioner_command(&operator()?, command, cli.json).await,
        Command::Secret { command } => return secret_command(&operator()?, command, cli.json).await,
        Command::Artifact { command } => return artifact_command(&operator()?, command, cli.json).await,
        // The one command that acts as the provisioner, not the operator.
        Command::Fleet { provisioner_token, watch } => {
            let token = fleet_token(&cli.token, provisioner_token.as_deref())?;
            crate::provisioner::fleet::show(&cli.api, &token, watch, cli.json).await?;
            return Ok(ExitCode::SUCCESS);
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn provisioner_command(
    operator: &Operator,
    command: ProvisionerCommand,
    json: bool,
) -> Result<ExitCode, CliError> {
    match command {
        ProvisionerCommand::Create {
            workspace,
            name,
            label_sets,
            max_instances,
            jobs_per_instance,
            idle_timeout_s,
            boot_timeout_s,
            warm,
        } => {
            let body = CreateProvisioner {
                name,
                label_sets,
                max_instances,
                jobs_per_instance,
                idle_timeout_s,
                boot_timeout_s,
                warm,
            };
            let created = operator.create_provisioner(&workspace, &body).await?;
            if json {
                print_json(&created);
            } else {
                eprintln!("{} in workspace {workspace}; its token, shown once:", describe(&created.provisioner));
                println!("{}", created.token);
            }
        }
        ProvisionerCommand::List { workspace } => {
            let list = operator.list_provisioners(&workspace).await?;
            if json {
                print_json(&list);
            } else {
                for provisioner in &list.items {
                    println!("{}", describe(provisioner));
                }
            }
        }
        ProvisionerCommand::Remove { workspace, id } => {
            operator.remove_provisioner(&workspace, id).await?;
            if json {
                print_json(&serde_json::json!({"id": id, "removed": true}));
            } else {
                println!("provisioner {id} removed: its token no longer works, its instances are asked to go");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn secret_command(operator: &Operator, command: SecretCommand, json: bool) -> Result<ExitCode, CliError> {
    match command {
        SecretCommand::Set { workspace, name } => {
            let mut value = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut value)
                .map_err(|e| CliError::Usage(format!("reading the secret from stdin: {e}")))?;
            let value =
                value.strip_suffix('\n').map(|v| v.strip_suffix('\r').unwrap_or(v)).unwrap_or(&value).to_string();
            if value.is_empty() {
                return Err(CliError::Usage("no value on stdin: `echo -n VALUE | baton secret set NAME`".into()));
            }
            operator.set_secret(&workspace, &name, value).await?;
            if json {
                print_json(&serde_json::json!({"name": name, "set": true}));
            } else {
                println!("secret {name} set in workspace {workspace}");
            }
        }
        SecretCommand::List { workspace } => {
            let list = operator.list_secrets(&workspace).await?;
            if json {
                print_json(&list);
            } else {
                for secret in &list.items {
                    let when = secret.updated_at.map(|t| t.to_rfc3339()).unwrap_or_else(|| "-".into());
                    println!("{}  set {when}", secret.name);
                }
            }
        }
        SecretCommand::Delete { workspace, name } => {
            operator.delete_secret(&workspace, &name).await?;
            if json {
                print_json(&serde_json::json!({"name": name, "deleted": true}));
            } else {
                println!("secret {name} deleted from workspace {workspace}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn artifact_command(operator: &Operator, command: ArtifactCommand, json: bool) -> Result<ExitCode, CliError> {
    let ArtifactCommand::Download { workspace, run_id, name, output } = command;
    let download = operator.artifact_download(&workspace, run_id, &name).await?;
    let bytes = crate::artifacts::fetch(&operator.client, &download).await.map_err(CliError::Usage)?;
    crate::artifacts::unpack(&bytes, &output).map_err(CliError::Usage)?;
    if json {
        print_json(&download.artifact);
    } else {
        println!(
            "artifact {name}: {} bytes (sha256 {}) from job {} unpacked into {}",
            bytes.len(),
            download.artifact.sha256,
            download.artifact.job_key,
            output.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// One line about a provisioner.
fn describe(p: &ProvisionerSummary) -> String {
    let sets: Vec<String> = p.label_sets.iter().map(|set| set.join(",")).collect();
    format!(
        "provisioner {} {}  label sets {}  max {} (reserved {})  jobs/instance {}  idle {}s  boot {}s  warm {}  created {}",
        p.id,
        p.name,
        sets.join(" "),
        p.max_instances,
        p.reserved_instances,
        p.jobs_per_instance,
        p.idle_timeout_s,
        p.boot_timeout_s,
        p.warm,
        p.created_at.to_rfc3339()
    )
}

async fn run_command(operator: &Operator, command: RunCommand, json: bool) -> Result<ExitCode, CliError> {
    let view = match command {
        RunCommand::Submit { workspace, file, idempotency_key, inputs, watch: follow } => {
            let definition = std::fs::read_to_string(&file)
                .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", file.display())))?;
            let inputs = (!inputs.is_empty())
                .then(|| inputs.into_iter().map(|(k, v)| (k, serde_json::Value::String(v))).collect());
            let view =
                operator.submit_run(&workspace, &CreateRunRequest { definition, inputs, idempotency_key }).await?;
            if follow {
                eprintln!("run {} #{} submitted: {} (id {})", view.name, view.number, view.status, view.id);
                return watch(operator, &workspace, view.id, DEFAULT_WATCH_INTERVAL_S, json).await;
            }
            if !json {
                eprintln!("run {} #{} submitted: {}", view.name, view.number, view.status);
                println!("{}", view.id);
                return Ok(ExitCode::SUCCESS);
            }
            view
        }
        RunCommand::List { workspace, status, limit, cursor } => {
            let list = operator.list_runs(&workspace, status.map(RunStatus::from), limit, cursor.as_deref()).await?;
            if json {
                print_json(&list);
            } else {
                for run in &list.items {
                    let finished = run.finished_at.map_or("-".to_string(), |t| t.to_rfc3339());
                    println!(
                        "{}  {} #{}  {}  created {}  finished {}",
                        run.id,
                        run.name,
                        run.number,
                        run.status,
                        run.created_at.to_rfc3339(),
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
                println!("run {} #{} cancel requested: {}", view.name, view.number, view.status);
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
            let view = operator.get_run(&workspace, run_id).await?;
            let job = job_of(&view, &job)?;
            let delivery = EventDelivery { name, disposition, reference, payload };
            let answer = operator.deliver_event(&workspace, run_id, job, &delivery).await?;
            if json {
                print_json(&answer);
            } else if answer.delivered {
                println!("delivered");
            } else {
                println!("not delivered (its ref was delivered before, or the job ended)");
            }
            return Ok(ExitCode::SUCCESS);
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
                    view.name, view.number, view.current_attempt, view.status
                );
                return Ok(ExitCode::SUCCESS);
            }
            view
        }
    };
    print_json(&view);
    Ok(ExitCode::SUCCESS)
}

/// The id of job `job` (its key, or its id) in the run's current attempt.
fn job_of(view: &RunView, job: &str) -> Result<Uuid, CliError> {
    view.attempts
        .iter()
        .find(|a| a.attempt == view.current_attempt)
        .and_then(|a| a.jobs.iter().find(|j| j.key == job || j.id.to_string() == job))
        .map(|j| j.id)
        .ok_or_else(|| CliError::Usage(format!("run {} has no job {job} in its current attempt", view.id)))
}

/// Approves or rejects approval job `job` (a key of the current attempt, or
/// an id): its inputs typed as the job declares them (a boolean input's
/// `true`/`false` is sent as a boolean).
#[allow(clippy::too_many_arguments)]
async fn decide(
    operator: &Operator,
    workspace: &str,
    run: Uuid,
    job: &str,
    decision: Decision,
    inputs: Vec<(String, String)>,
    comment: Option<String>,
    json: bool,
) -> Result<ExitCode, CliError> {
    let view = operator.get_run(workspace, run).await?;
    let id = job_of(&view, job)?;
    let found = view
        .attempts
        .iter()
        .flat_map(|a| a.jobs.iter())
        .find(|j| j.id == id)
        .ok_or_else(|| CliError::Usage(format!("run {run} has no job {job} in its current attempt")))?;
    let declared = found.approval.as_ref().map(|a| a.inputs.clone()).unwrap_or_default();
    let inputs = inputs
        .into_iter()
        .map(|(name, value)| {
            let typed = match declared.get(&name).map(|input| input.kind) {
                Some(ApprovalInputKind::Boolean) => match value.as_str() {
                    "true" => serde_json::Value::Bool(true),
                    "false" => serde_json::Value::Bool(false),
                    _ => return Err(CliError::Usage(format!("--input {name}: true or false"))),
                },
                _ => serde_json::Value::String(value),
            };
            Ok((name, typed))
        })
        .collect::<Result<_, CliError>>()?;
    let request = ApprovalRequest { decision, comment, inputs };
    let answer = operator.decide_approval(workspace, run, found.id, &request).await?;
    if json {
        print_json(&answer);
    } else {
        let approvals = answer
            .approval
            .as_ref()
            .map_or(0, |a| a.decisions.iter().filter(|d| d.decision == Decision::Approve).count());
        let required = answer.approval.as_ref().map_or(0, |a| a.required);
        println!("job {}: {} ({approvals} of {required} approvals)", answer.key, answer.status);
    }
    Ok(ExitCode::SUCCESS)
}

/// Polls the run view and prints what changed, until the run is terminal:
/// lines coloured on a terminal (not with `NO_COLOR`), or with `--json`
/// one view per change as a JSON line.
async fn watch(
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
                if view.status.is_terminal() {
                    return Ok(if view.status == RunStatus::Succeeded { ExitCode::SUCCESS } else { ExitCode::FAILURE });
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

/// How long one read of `run logs --follow` waits for new lines.
const FOLLOW_WAIT_S: u64 = 20;

/// Prints the logs of the attempt's jobs (or of one), job after job: each
/// from its first line to its last, following a running one if asked.
async fn logs(
    operator: &Operator,
    workspace: &str,
    run: Uuid,
    only: Option<&str>,
    attempt: Option<u32>,
    follow: bool,
    json: bool,
) -> Result<ExitCode, CliError> {
    let view = operator.get_run(workspace, run).await?;
    let wanted = attempt.unwrap_or(view.current_attempt);
    let attempt = view
        .attempts
        .iter()
        .find(|a| a.attempt == wanted)
        .ok_or_else(|| CliError::Usage(format!("run {run} has no attempt {wanted}")))?;
    let jobs: Vec<_> = attempt.jobs.iter().filter(|j| only.is_none_or(|key| j.key == key)).collect();
    if jobs.is_empty() {
        return Err(CliError::Usage(format!("no job {} in attempt {wanted}", only.unwrap_or("at all"))));
    }
    for job in jobs {
        let names: std::collections::HashMap<Uuid, String> = job
            .executions
            .iter()
            .flat_map(|e| e.steps.iter().enumerate())
            .map(|(i, s)| (s.id, s.name.clone().unwrap_or_else(|| format!("step-{}", i + 1))))
            .collect();
        // Every execution's log, oldest first: a retried job's tries, a
        // listening job's events (the last one is followed).
        let executions: Vec<Option<Uuid>> = match job.executions.len() {
            0 | 1 => vec![None],
            _ => job.executions.iter().map(|e| Some(e.id)).collect(),
        };
        let last = executions.len() - 1;
        for (index, execution) in executions.into_iter().enumerate() {
            let follow = follow && index == last;
            let mut cursor = "0.0".to_string();
            loop {
                let wait_s = if follow { FOLLOW_WAIT_S } else { 0 };
                let page = operator.read_logs(workspace, run, job.id, wanted, execution, &cursor, wait_s).await?;
                for line in &page.lines {
                    if json {
                        print_line_json(line);
                    } else {
                        let step = names.get(&line.step_id).map_or("?", String::as_str);
                        println!("[{}/{step}] {}", job.key, line.text);
                    }
                }
                cursor = page.next_cursor.clone();
                if page.complete || (!follow && page.lines.is_empty()) {
                    break;
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_line_json(line: &baton_api::logs::LogLine) {
    match serde_json::to_string(line) {
        Ok(text) => println!("{text}"),
        Err(err) => eprintln!("baton: cannot print a line: {err}"),
    }
}

pub(crate) fn print_json<T: serde::Serialize>(value: &T) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => println!("{text}"),
        Err(err) => eprintln!("baton: cannot print the answer: {err}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_set_is_its_comma_separated_labels() {
        assert_eq!(parse_label_set("linux, x64,"), Ok(vec!["linux".to_string(), "x64".to_string()]));
        assert!(parse_label_set(" , ").is_err(), "an empty set is refused here, not by the API");
    }

    #[test]
    fn provisioner_create_takes_repeated_label_sets() {
        let cli = Cli::try_parse_from([
            "baton",
            "provisioner",
            "create",
            "--workspace",
            "demo",
            "--name",
            "local",
            "--label-set",
            "linux,x64",
            "--label-set",
            "gpu",
            "--max-instances",
            "4",
            "--warm",
            "1",
        ])
        .expect("parses");
        let Command::Provisioner { command: ProvisionerCommand::Create { label_sets, max_instances, warm, .. } } =
            cli.command
        else {
            panic!("not a create: {:?}", cli.command)
        };
        assert_eq!(label_sets, vec![vec!["linux".to_string(), "x64".into()], vec!["gpu".into()]]);
        assert_eq!((max_instances, warm), (4, Some(1)));
    }

    #[test]
    fn fleet_takes_a_provisioner_token_from_token_or_its_own_variable() {
        assert_eq!(fleet_token("bpt_a", None).ok(), Some("bpt_a".to_string()), "--token bpt_…");
        assert_eq!(fleet_token("bat_admin", Some("bpt_b")).ok(), Some("bpt_b".to_string()), "the admin's is not it");
        assert_eq!(fleet_token("", Some("bpt_b")).ok(), Some("bpt_b".to_string()));
        assert!(matches!(fleet_token("bat_admin", None), Err(CliError::Usage(_))));
        assert!(matches!(fleet_token("", Some("")), Err(CliError::Usage(_))));
    }
}
