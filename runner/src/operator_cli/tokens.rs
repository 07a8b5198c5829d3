//! `baton token`: registration tokens for runners.

use std::process::ExitCode;

use baton_api::runners::CreateRegistrationToken;
use baton_client::operators::Operator;
use clap::Subcommand;

use super::answer::{print_json, CliError};

#[derive(Debug, Subcommand)]
pub(super) enum TokenCommand {
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

pub(super) async fn token_command(
    operator: &Operator,
    command: TokenCommand,
    json: bool,
) -> Result<ExitCode, CliError> {
    let TokenCommand::Create { workspace, name, single_use, max_claims, expires_in_s } = command;
    let body = CreateRegistrationToken { name, expires_in_s, single_use, max_claims };
    let created = operator.create_registration_token(&workspace, &body).await?;
    if json {
        print_json(&created);
    } else {
        let expiry = created.expires_at.map_or("never".to_string(), |t| t.to_rfc3339());
        eprintln!("registration token {} for workspace {workspace} (expires: {expiry}); shown once:", created.id);
        println!("{}", created.token);
    }
    Ok(ExitCode::SUCCESS)
}
