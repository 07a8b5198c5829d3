//! Reachability of each backend, for `GET /v1/health`.

use std::time::Duration;

use crate::aws::AwsClients;
use crate::config::Config;
use baton_store::display_sdk_error;

/// How long one backend check may take before it counts as down.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

pub use baton_api::health::{Checks, Health};

async fn check<T, E: std::fmt::Display>(fut: impl std::future::Future<Output = Result<T, E>>) -> String {
    match tokio::time::timeout(CHECK_TIMEOUT, fut).await {
        Ok(Ok(_)) => "ok".into(),
        Ok(Err(err)) => format!("error: {err}"),
        Err(_) => "error: timed out".into(),
    }
}

/// Checks every backend concurrently with read-only, cheap calls.
pub async fn check_all(clients: &AwsClients, config: &Config) -> Health {
    let dynamodb = check(async {
        clients
            .dynamodb()
            .describe_table()
            .table_name(&config.table_name)
            .send()
            .await
            .map_err(|e| display_sdk_error(&e))
    });
    let sqs =
        check(async { clients.sqs().list_queues().max_results(1).send().await.map_err(|e| display_sdk_error(&e)) });
    let eventbridge = check(async {
        clients
            .eventbridge()
            .describe_event_bus()
            .name(&config.bus_name)
            .send()
            .await
            .map_err(|e| display_sdk_error(&e))
    });
    let stepfunctions = check(async {
        match &config.run_state_machine_arn {
            Some(arn) => clients
                .sfn()
                .describe_state_machine()
                .state_machine_arn(arn)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| display_sdk_error(&e)),
            None => clients
                .sfn()
                .list_state_machines()
                .max_results(1)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| display_sdk_error(&e)),
        }
    });
    let (dynamodb, sqs, eventbridge, stepfunctions) = tokio::join!(dynamodb, sqs, eventbridge, stepfunctions);
    let checks = Checks { dynamodb, sqs, eventbridge, stepfunctions };
    let all_ok = [&checks.dynamodb, &checks.sqs, &checks.eventbridge, &checks.stepfunctions].iter().all(|c| *c == "ok");
    Health { status: if all_ok { "ok" } else { "degraded" }.into(), version: env!("CARGO_PKG_VERSION").into(), checks }
}
