//! `baton hook`: a workspace's webhooks for its forges (create, list,
//! rotate, rm). A hook's secret is printed once, when it is made or
//! rotated, to be set in the forge's webhook settings.

use std::process::ExitCode;

use baton_api::hooks::{CreateHookRequest, HookProvider};
use baton_client::operators::Operator;
use clap::{Subcommand, ValueEnum};
use uuid::Uuid;

use super::answer::{print_deleted, print_json, CliError};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(super) enum Provider {
    Github,
    Gitlab,
    Generic,
}

impl From<Provider> for HookProvider {
    fn from(provider: Provider) -> Self {
        match provider {
            Provider::Github => HookProvider::Github,
            Provider::Gitlab => HookProvider::Gitlab,
            Provider::Generic => HookProvider::Generic,
        }
    }
}

#[derive(Debug, Subcommand)]
pub(super) enum HookCommand {
    /// Create a webhook; prints its payload URL and its secret (once).
    Create {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        #[arg(long, value_enum)]
        provider: Provider,
        /// A pipeline its deliveries may start (repeatable); every pipeline
        /// of the workspace when none is named.
        #[arg(long = "pipeline")]
        pipelines: Vec<String>,
    },
    /// List the workspace's webhooks (never their secrets).
    List {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
    },
    /// A new secret for a webhook, printed once; the old one keeps
    /// working for 24 hours while the forge's settings are changed.
    Rotate {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        id: Uuid,
    },
    /// Delete a webhook: its deliveries are refused from then on.
    #[command(visible_alias = "delete")]
    Rm {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        id: Uuid,
    },
}

pub(super) async fn hook_command(operator: &Operator, command: HookCommand, json: bool) -> Result<ExitCode, CliError> {
    match command {
        HookCommand::Create { workspace, provider, pipelines } => {
            let body = CreateHookRequest {
                provider: provider.into(),
                pipelines: (!pipelines.is_empty()).then_some(pipelines),
            };
            let created = operator.create_hook(&workspace, &body).await?;
            if json {
                print_json(&created);
            } else {
                eprintln!("hook {} created: set this URL and secret in the forge's webhook settings (the secret is not shown again)", created.id);
                println!("url: {}", created.url);
                println!("secret: {}", created.secret);
            }
        }
        HookCommand::List { workspace } => {
            let list = operator.list_hooks(&workspace).await?;
            if json {
                print_json(&list);
            } else {
                for hook in &list.items {
                    let provider = serde_json::to_value(hook.provider)
                        .ok()
                        .and_then(|v| v.as_str().map(String::from))
                        .unwrap_or_default();
                    let pipelines = hook.pipelines.as_ref().map_or("every pipeline".to_string(), |p| p.join(", "));
                    println!("{}  {provider}  {pipelines}  created {}", hook.id, hook.created_at.to_rfc3339());
                }
            }
        }
        HookCommand::Rotate { workspace, id } => {
            let rotated = operator.rotate_hook(&workspace, id).await?;
            if json {
                print_json(&rotated);
            } else {
                eprintln!("hook {id}: the old secret works until {}", rotated.previous_valid_until.to_rfc3339());
                println!("secret: {}", rotated.secret);
            }
        }
        HookCommand::Rm { workspace, id } => {
            operator.delete_hook(&workspace, id).await?;
            print_deleted(json, "hook", "id", &id.to_string(), &workspace);
        }
    }
    Ok(ExitCode::SUCCESS)
}
