//! `baton var`: workspace variables (`${{ vars.NAME }}`), set, listed with
//! their values, deleted.

use std::process::ExitCode;

use baton_client::operators::Operator;
use clap::Subcommand;

use super::answer::{print_deleted, print_json, CliError};

#[derive(Debug, Subcommand)]
pub(super) enum VariableCommand {
    /// Set (or replace) a variable; runs created after read the new value.
    Set {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        name: String,
        value: String,
    },
    /// List the workspace's variables with their values.
    List {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
    },
    /// Delete a variable; runs created after read it as empty.
    Delete {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        name: String,
    },
}

pub(super) async fn variable_command(
    operator: &Operator,
    command: VariableCommand,
    json: bool,
) -> Result<ExitCode, CliError> {
    match command {
        VariableCommand::Set { workspace, name, value } => {
            let stored = operator.set_variable(&workspace, &name, value).await?;
            if json {
                print_json(&stored);
            } else {
                println!("variable {} set in workspace {workspace}", stored.name);
            }
        }
        VariableCommand::List { workspace } => {
            let list = operator.list_variables(&workspace).await?;
            if json {
                print_json(&list);
            } else {
                for variable in &list.items {
                    println!("{}={}", variable.name, variable.value);
                }
            }
        }
        VariableCommand::Delete { workspace, name } => {
            operator.delete_variable(&workspace, &name).await?;
            print_deleted(json, "variable", "name", &name, &workspace);
        }
    }
    Ok(ExitCode::SUCCESS)
}
