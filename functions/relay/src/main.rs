use aws_lambda_events::dynamodb::Event;
use baton_relay::{handle, State};
use baton_shared::{aws::AwsClients, config::Config, telemetry};
use lambda_runtime::{service_fn, Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    telemetry::init();
    let state = State { config: Config::from_env()?, clients: AwsClients::from_env().await };
    let state = &state;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| async move {
        Ok::<_, Error>(handle(state, event.payload).await)
    }))
    .await
}
