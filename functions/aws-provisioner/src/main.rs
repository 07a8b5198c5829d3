//! The AWS provisioner's Lambda start-up: JSON logs, settings and clients
//! once per cold start (the provisioner token too), then one tick per
//! invocation, whatever woke it: its schedule, or a batch of wake-ups from
//! its queue when jobs were queued (neither event is read; a failed tick
//! fails the batch, which is tried again).

use baton_aws_provisioner::settings::Settings;
use baton_aws_provisioner::AwsProvisioner;
use lambda_runtime::{service_fn, Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    baton_telemetry::logs::init();
    let settings = Settings::from_env()?;
    let config = match std::env::var("BATON_AWS_ENDPOINT").ok().filter(|e| !e.is_empty()) {
        // The local emulator, as every function honours it (shared/src/aws.rs).
        Some(endpoint) => {
            aws_config::defaults(aws_config::BehaviorVersion::latest()).endpoint_url(endpoint).load().await
        }
        None => aws_config::defaults(aws_config::BehaviorVersion::latest()).load().await,
    };
    let provisioner = AwsProvisioner::start(
        settings,
        aws_sdk_ec2::Client::new(&config),
        aws_sdk_ssm::Client::new(&config),
        reqwest::Client::new(),
    )
    .await?;
    let provisioner = &provisioner;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<serde_json::Value>| async move {
        provisioner.tick(event.context.deadline()).await.map_err(Error::from)
    }))
    .await
}
