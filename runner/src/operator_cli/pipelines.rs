//! `baton pipeline`: workflow files kept under a name in a workspace
//! (put, list, show, delete), and runs of them started now (`run`).

use std::path::PathBuf;
use std::process::ExitCode;

use baton_api::pipelines::DispatchRequest;
use baton_client::operators::Operator;
use clap::Subcommand;

use super::answer::{print_deleted, print_json, CliError};
use super::runs::{parse_input, watch, DEFAULT_WATCH_INTERVAL_S};

#[derive(Debug, Subcommand)]
pub(super) enum PipelineCommand {
    /// Store a workflow file as the pipeline NAME (a new one, or a new
    /// version; the same text again changes nothing).
    #[command(visible_alias = "set")]
    Put {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        name: String,
        file: PathBuf,
    },
    /// List the workspace's pipelines: name, version and what starts them.
    List {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
    },
    /// Print a pipeline's workflow file as stored.
    #[command(visible_alias = "get")]
    Show {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        name: String,
    },
    /// Run a pipeline now; prints the run id on stdout.
    Run {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        name: String,
        /// Inputs as KEY=VALUE (repeatable), typed by the pipeline's
        /// `on.workflow_dispatch.inputs`.
        #[arg(long = "input", value_parser = parse_input)]
        inputs: Vec<(String, String)>,
        /// Then follow the run as `run watch` does (the run id goes to stderr).
        #[arg(long)]
        watch: bool,
    },
    /// Delete a pipeline; its runs keep their own copy of it.
    #[command(visible_alias = "rm")]
    Delete {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        name: String,
    },
}

pub(super) async fn pipeline_command(
    operator: &Operator,
    command: PipelineCommand,
    json: bool,
) -> Result<ExitCode, CliError> {
    match command {
        PipelineCommand::Put { workspace, name, file } => {
            let definition = std::fs::read_to_string(&file)
                .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", file.display())))?;
            let stored = operator.put_pipeline(&workspace, &name, definition).await?;
            if json {
                print_json(&stored);
            } else {
                println!("pipeline {} stored: version {}", stored.name, stored.version);
            }
        }
        PipelineCommand::List { workspace } => {
            let list = operator.list_pipelines(&workspace).await?;
            if json {
                print_json(&list);
            } else {
                for pipeline in &list.items {
                    let t = &pipeline.triggers;
                    let mut on: Vec<String> = Vec::new();
                    if t.push.is_some() {
                        on.push("push".into());
                    }
                    if t.pull_request.is_some() || t.pull_request_target.is_some() {
                        on.push("pull_request".into());
                    }
                    on.extend(t.schedule.iter().map(|s| format!("schedule '{}'", s.cron)));
                    if t.workflow_dispatch.is_some() {
                        on.push("workflow_dispatch".into());
                    }
                    let on = if on.is_empty() { "API only".to_string() } else { on.join(", ") };
                    println!(
                        "{}  {}  on: {on}  updated {}",
                        pipeline.name,
                        pipeline.version,
                        pipeline.updated_at.to_rfc3339()
                    );
                }
            }
        }
        PipelineCommand::Show { workspace, name } => {
            let pipeline = operator.get_pipeline(&workspace, &name).await?;
            if json {
                print_json(&pipeline);
            } else {
                print!("{}", pipeline.definition);
            }
        }
        PipelineCommand::Run { workspace, name, inputs, watch: follow } => {
            let inputs = (!inputs.is_empty())
                .then(|| inputs.into_iter().map(|(k, v)| (k, serde_json::Value::String(v))).collect());
            let view = operator.dispatch_pipeline(&workspace, &name, &DispatchRequest { inputs }).await?;
            if follow {
                eprintln!(
                    "run {} #{} started: {} (id {})",
                    view.header.name, view.header.number, view.header.status, view.header.id
                );
                return watch(operator, &workspace, view.header.id, DEFAULT_WATCH_INTERVAL_S, json).await;
            }
            if json {
                print_json(&view);
            } else {
                eprintln!("run {} #{} started: {}", view.header.name, view.header.number, view.header.status);
                println!("{}", view.header.id);
            }
        }
        PipelineCommand::Delete { workspace, name } => {
            operator.delete_pipeline(&workspace, &name).await?;
            print_deleted(json, "pipeline", "name", &name, &workspace);
        }
    }
    Ok(ExitCode::SUCCESS)
}
