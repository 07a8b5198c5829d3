//! `baton secret`: workspace secrets, set from stdin, listed by name, deleted.

use std::process::ExitCode;

use baton_client::operators::Operator;
use clap::Subcommand;

use super::answer::{print_deleted, print_json, CliError};
use super::named_values::{InWorkspace, Named};

#[derive(Debug, Subcommand)]
pub(super) enum SecretCommand {
    /// Set (or replace) a secret; its value is read from stdin (one
    /// trailing newline dropped), so it is in no shell history or argument.
    Set(Named),
    /// List the workspace's secrets: names and when each was set, never values.
    List(InWorkspace),
    /// Delete a secret; jobs that name it then fail when claimed, saying so.
    Delete(Named),
}

pub(super) async fn secret_command(
    operator: &Operator,
    command: SecretCommand,
    json: bool,
) -> Result<ExitCode, CliError> {
    match command {
        SecretCommand::Set(Named { workspace, name }) => {
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
        SecretCommand::List(InWorkspace { workspace }) => {
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
        SecretCommand::Delete(Named { workspace, name }) => {
            operator.delete_secret(&workspace, &name).await?;
            print_deleted(json, "secret", "name", &name, &workspace);
        }
    }
    Ok(ExitCode::SUCCESS)
}
