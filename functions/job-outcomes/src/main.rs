use aws_lambda_events::sqs::SqsEvent;
use baton_job_outcomes::{handle, State};
use baton_shared::{aws::AwsClients, config::Config, telemetry};
use lambda_runtime::{service_fn, Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    telemetry::init();
    let state = State::new(Config::from_env()?, AwsClients::from_env().await);
    let state = &state;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        Ok::<_, Error>(handle(state, event.payload).await)
    }))
    .await
}
