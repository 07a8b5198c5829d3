use baton_create_run::{handle, State};
use baton_shared::{aws::AwsClients, config::Config, telemetry};
use lambda_http::{service_fn, Error, Request};

#[tokio::main]
async fn main() -> Result<(), Error> {
    telemetry::init();
    let state = State::new(Config::from_env()?, AwsClients::from_env().await);
    let state = &state;
    lambda_http::run(service_fn(move |req: Request| async move { Ok::<_, Error>(handle(state, req).await) })).await
}
