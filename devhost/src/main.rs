//! `baton-devhost`: provisions the local stack on the emulator and runs every
//! function against it.
//!
//! - `baton-devhost plan [--stage S]` prints the resource plan (JSON) that the
//!   CDK tests compare the synthesized template with.
//! - `baton-devhost run` (the default) provisions stage `BATON_STAGE` (default
//!   `dev`) on `BATON_AWS_ENDPOINT`, serves the API on 127.0.0.1:`BATON_PORT`
//!   (default 8080) and prints the API URL and the admin token
//!   (`BATON_ADMIN_TOKEN`, or a new one). Ctrl-C stops it.
//!
//! The operator's tools for a deployed stack (the first admin token,
//! republishing the outbox) are `baton-ops`.

use std::sync::Arc;

use baton_localstack::faults::{FaultPlan, FAULTS_ENV};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::ExitCode;

use baton_devhost::{function_env, DevHost, HostOptions};
use baton_localstack::provision::{default_infra_dir, provision, Plan};
use baton_localstack::resources::{Naming, Resources};
use baton_service::aws::AwsClients;
use clap::{Parser, Subcommand};

/// Provisions the local stack on the emulator and runs every function against
/// it (`run`, the default), or prints the plan.
#[derive(Debug, Parser)]
#[command(name = "baton-devhost")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Provision stage BATON_STAGE (default dev) on BATON_AWS_ENDPOINT and
    /// serve the API on 127.0.0.1:BATON_PORT (default 8080), until Ctrl-C
    Run,
    /// Print the resource plan (JSON) that the CDK tests compare the
    /// synthesized template with
    Plan {
        /// The stage whose resource names the plan uses
        #[arg(long, value_name = "S", default_value = "dev")]
        stage: String,
    },
}

fn plan(stage: &str) -> Result<Plan, String> {
    Plan::new(&Resources::load(), &Naming::for_stage(stage), &default_infra_dir()).map_err(|e| e.to_string())
}

async fn run() -> Result<(), String> {
    let endpoint = std::env::var("BATON_AWS_ENDPOINT")
        .map_err(|_| "BATON_AWS_ENDPOINT is not set (use `make dev`, which starts the emulator)".to_string())?;
    let stage = std::env::var("BATON_STAGE").unwrap_or_else(|_| "dev".into());
    let port: u16 = match std::env::var("BATON_PORT") {
        Ok(raw) => raw.parse().map_err(|_| format!("BATON_PORT must be a port number, got {raw:?}"))?,
        Err(_) => 8080,
    };
    let admin_token = std::env::var("BATON_ADMIN_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
        .unwrap_or_else(baton_domain::tokens::new_operator_token);

    let clients = AwsClients::local(&endpoint).await;
    let plan = plan(&stage)?;
    let provisioned = provision(&clients, &plan).await.map_err(|e| e.to_string())?;
    let mut overrides: HashMap<String, String> =
        std::env::vars().filter(|(k, _)| k.starts_with("BATON_") && k != "BATON_AWS_ENDPOINT").collect();
    overrides.insert("BATON_STAGE".into(), stage.clone());
    overrides.insert("BATON_ADMIN_TOKEN".into(), admin_token.clone());
    let env = function_env(&provisioned, &overrides);
    let retry_delay = std::env::var("BATON_DEV_RETRY_DELAY_S").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let faults = FaultPlan::from_env().map_err(|e| e.to_string())?.map(Arc::new);
    let options = HostOptions {
        api_addr: SocketAddr::from(([127, 0, 0, 1], port)),
        sqs_retry_delay: std::time::Duration::from_secs(retry_delay),
        faults: faults.clone(),
        push: std::env::var("BATON_DEV_PUSH").map_or(true, |v| v != "0"),
        grants: std::env::var("BATON_DEV_GRANTS").map_or(true, |v| v != "0"),
        console_dir: console_dir(),
        ..HostOptions::default()
    };
    let options_console = options.console_dir.clone();
    let host = DevHost::start(&clients, &provisioned, &env, options).await.map_err(|e| e.to_string())?;
    println!("Baton dev stack is up (stage {stage}, emulator {endpoint})");
    match &options_console {
        Some(dir) => println!("  Console:     {}/  (from {})", host.api_url, dir.display()),
        None => println!("  Console:     not built (make dev builds it: web/dist)"),
    }
    println!("  API:         {}", host.api_url);
    println!("  Admin token: {admin_token}");
    if let Some(url) = &host.config.push.url {
        println!("  Push socket: {url}");
    }
    println!("  Try:         curl {}/v1/health", host.api_url);
    if let Some(plan) = &faults {
        println!("  Faults:      {plan:?} ({FAULTS_ENV})");
    }
    println!("Press Ctrl-C to stop.");

    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("installing SIGTERM handler: {e}"))?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    println!("Stopping…");
    if let Some(plan) = &faults {
        println!("Faults injected, by kind: {:?}", plan.injected_by_kind());
    }
    host.stop().await;
    Ok(())
}

/// The console's built files: `BATON_CONSOLE_DIR`, else `web/dist` under the
/// current directory (where `make dev` runs), when it holds a build.
fn console_dir() -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("BATON_CONSOLE_DIR").map_or_else(|| std::path::PathBuf::from("web/dist"), Into::into);
    dir.join("index.html").is_file().then_some(dir)
}

#[tokio::main]
async fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Some(Command::Plan { stage }) => plan(&stage).and_then(|plan| {
            serde_json::to_string_pretty(&plan).map(|json| println!("{json}")).map_err(|e| e.to_string())
        }),
        None | Some(Command::Run) => {
            baton_telemetry::logs::init();
            run().await
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("baton-devhost: {err}");
            ExitCode::FAILURE
        }
    }
}
