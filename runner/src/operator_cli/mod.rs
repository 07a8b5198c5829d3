//! `baton`: the operator CLI. Registration tokens, provisioners, secrets,
//! artifacts and runs, over the API with an operator token; `baton fleet`
//! shows a provisioner's demand and instances with its own token.
//!
//! - `runs`: `baton run …`; `approvals` and `logs` hold its approval
//!   decisions, event deliveries and log reads, `run_lines` how a run
//!   view is printed.
//! - `provisioners`, `fleet`: `baton provisioner …` and `baton fleet`.
//! - `pipelines`, `hooks`: `baton pipeline …` (set, list, get, run, rm)
//!   and `baton hook …` (create, list, rotate, rm).
//! - `secrets`, `variables`, `tokens`, `artifacts`: `baton secret …`,
//!   `baton var …`, `baton token create`, `baton artifact download`;
//!   `named_values` holds the arguments `secret` and `var` share.
//! - `answer`: the JSON answer and the error every command shares.

mod answer;
mod approvals;
mod artifacts;
mod fleet;
mod hooks;
mod logs;
mod named_values;
mod pipelines;
mod provisioners;
mod run_lines;
mod runs;
mod secrets;
mod tokens;
mod variables;

use std::process::ExitCode;

use baton_client::operators::Operator;
use clap::{Parser, Subcommand};

use answer::CliError;
use artifacts::{artifact_command, ArtifactCommand};
use fleet::fleet_token;
use hooks::{hook_command, HookCommand};
use pipelines::{pipeline_command, PipelineCommand};
use provisioners::{provisioner_command, ProvisionerCommand};
use runs::{run_command, RunCommand};
use secrets::{secret_command, SecretCommand};
use tokens::{token_command, TokenCommand};
use variables::{variable_command, VariableCommand};

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
    /// Webhooks: the doors a workspace's forges deliver pushes through.
    Hook {
        #[command(subcommand)]
        command: HookCommand,
    },
    /// Pipelines: workflow files kept under a name, run on demand.
    Pipeline {
        #[command(subcommand)]
        command: PipelineCommand,
    },
    /// Workspace secrets, read by jobs as `${{ secrets.NAME }}`.
    Secret {
        #[command(subcommand)]
        command: SecretCommand,
    },
    /// Workspace variables, read by workflows as `${{ vars.NAME }}`.
    Var {
        #[command(subcommand)]
        command: VariableCommand,
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

async fn execute(cli: Cli) -> Result<ExitCode, CliError> {
    let operator = || {
        if cli.token.is_empty() {
            return Err(CliError::Usage("an operator token is required: --token or BATON_ADMIN_TOKEN".into()));
        }
        Ok(Operator::new(&cli.api, &cli.token)?)
    };
    match cli.command {
        Command::Token { command } => token_command(&operator()?, command, cli.json).await,
        Command::Run { command } => run_command(&operator()?, command, cli.json).await,
        Command::Provisioner { command } => provisioner_command(&operator()?, command, cli.json).await,
        Command::Hook { command } => hook_command(&operator()?, command, cli.json).await,
        Command::Pipeline { command } => pipeline_command(&operator()?, command, cli.json).await,
        Command::Secret { command } => secret_command(&operator()?, command, cli.json).await,
        Command::Var { command } => variable_command(&operator()?, command, cli.json).await,
        Command::Artifact { command } => artifact_command(&operator()?, command, cli.json).await,
        // The one command that acts as the provisioner, not the operator.
        Command::Fleet { provisioner_token, watch } => {
            let token = fleet_token(&cli.token, provisioner_token.as_deref())?;
            fleet::show(&cli.api, &token, watch, cli.json).await?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator_cli::provisioners::ProvisionerCommand;
    use baton_api::provisioners::CreateProvisioner;

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
        let Command::Provisioner { command: ProvisionerCommand::Create { provisioner, .. } } = cli.command else {
            panic!("not a create: {:?}", cli.command)
        };
        let body = CreateProvisioner::from(provisioner);
        assert_eq!(body.label_sets, vec![vec!["linux".to_string(), "x64".into()], vec!["gpu".into()]]);
        assert_eq!((body.max_instances, body.warm), (4, Some(1)));
    }
}
