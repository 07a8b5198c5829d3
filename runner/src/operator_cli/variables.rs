//! `baton var`: workspace variables (`${{ vars.NAME }}`), set, listed with
//! their values, deleted.

use std::process::ExitCode;

use baton_client::operators::Operator;
use clap::Subcommand;

use super::answer::{print_deleted, print_json, CliError};
use super::named_values::{InWorkspace, Named};

#[derive(Debug, Subcommand)]
pub(super) enum VariableCommand {
    /// Set (or replace) a variable; runs created after read the new value.
    Set {
        #[command(flatten)]
        named: Named,
        value: String,
    },
    /// List the workspace's variables with their values.
    List(InWorkspace),
    /// Delete a variable; runs created after read it as empty.
    Delete(Named),
}

pub(super) async fn variable_command(
    operator: &Operator,
    command: VariableCommand,
    json: bool,
) -> Result<ExitCode, CliError> {
    match command {
        VariableCommand::Set { named: Named { workspace, name }, value } => {
            let stored = operator.set_variable(&workspace, &name, value).await?;
            if json {
                print_json(&stored);
            } else {
                println!("variable {} set in workspace {workspace}", stored.name);
            }
        }
        VariableCommand::List(InWorkspace { workspace }) => {
            let list = operator.list_variables(&workspace).await?;
            if json {
                print_json(&list);
            } else {
                for variable in &list.items {
                    println!("{}={}", variable.name, variable.value);
                }
            }
        }
        VariableCommand::Delete(Named { workspace, name }) => {
            operator.delete_variable(&workspace, &name).await?;
            print_deleted(json, "variable", "name", &name, &workspace);
        }
    }
    Ok(ExitCode::SUCCESS)
}
