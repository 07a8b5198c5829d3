//! `baton-ops`: the operator's tools for a deployed stack. They reach the
//! stack's table and bus with the AWS credentials of the environment, as any
//! AWS tool (or `BATON_AWS_ENDPOINT` for the local emulator); no function
//! runs them, and the local stack's test equipment is not in them.
//!
//! - `baton-ops admin-token --table T [--workspace W]` stores a new operator
//!   token's hash and prints the token once: how an operator gets the first
//!   token after `cdk deploy`.
//! - `baton-ops republish-outbox --table T --bus B --since T1 --until T2`
//!   publishes again the outbox's facts of a time window: the recovery for a
//!   stream batch the relay gave up on.

use std::process::ExitCode;

use baton_service::aws::AwsClients;
use baton_store::Store;
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "baton-ops", about = "The operator's tools for a deployed Baton stack")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Store a new operator token's hash in a deployed table and print the
    /// token once (AWS credentials from the environment)
    AdminToken {
        /// The stack's table (its TableName output)
        #[arg(long, value_name = "T")]
        table: String,
        /// The workspace the token is for (default: an admin token, every workspace)
        #[arg(long, value_name = "W")]
        workspace: Option<String>,
        /// Who holds it (default `operator`, or `admin`): approvals count
        /// once per name, and a run's creator, by this name, cannot approve it
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        /// A group an approval's `from` may name (repeatable)
        #[arg(long = "group", value_name = "GROUP")]
        groups: Vec<String>,
    },
    /// Publish again the outbox's facts that occurred in a time window: the
    /// recovery for a stream batch the relay gave up on (its message in the
    /// `<relay>-stream-failures` queue gives the records' arrival times).
    /// It scans the table: an operator's recovery, never a hot path
    RepublishOutbox {
        /// The stack's table (its TableName output)
        #[arg(long, value_name = "T")]
        table: String,
        /// The stack's event bus
        #[arg(long, value_name = "B")]
        bus: String,
        /// The window's start, RFC 3339 (e.g. the batch's first arrival minus a minute)
        #[arg(long, value_name = "TIME")]
        since: chrono::DateTime<chrono::Utc>,
        /// The window's end, RFC 3339
        #[arg(long, value_name = "TIME")]
        until: chrono::DateTime<chrono::Utc>,
    },
}

async fn admin_token(
    table: String,
    workspace: Option<String>,
    name: Option<String>,
    groups: Vec<String>,
) -> Result<(), String> {
    let clients = AwsClients::from_env().await;
    let store = Store::new(clients.dynamodb().clone(), table);
    let token = baton_domain::tokens::new_operator_token();
    let default = if workspace.is_some() { "operator" } else { "admin" };
    let name = name.unwrap_or_else(|| default.to_string());
    store
        .put_operator_token_in_groups(&token, workspace.as_deref(), Some(&name), &groups)
        .await
        .map_err(|e| e.to_string())?;
    println!("{token}");
    Ok(())
}

async fn republish_outbox(
    table: String,
    bus: String,
    since: chrono::DateTime<chrono::Utc>,
    until: chrono::DateTime<chrono::Utc>,
) -> Result<(), String> {
    let clients = AwsClients::from_env().await;
    let store = Store::new(clients.dynamodb().clone(), table);
    let published =
        baton_service::facts::relay::republish_outbox(&store, clients.eventbridge(), &bus, since, until).await?;
    println!("published {published} facts again (consumers ignore the ones they had)");
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::AdminToken { table, workspace, name, groups } => admin_token(table, workspace, name, groups).await,
        Command::RepublishOutbox { table, bus, since, until } => republish_outbox(table, bus, since, until).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("baton-ops: {err}");
            ExitCode::FAILURE
        }
    }
}
