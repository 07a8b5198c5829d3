use aws_lambda_events::cloudwatch_events::CloudWatchEvent;
use baton_shared::context::Context;
use lambda_runtime::{service_fn, Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let context = &Context::from_env().await?;
    lambda_runtime::run(service_fn(move |_event: LambdaEvent<CloudWatchEvent>| async move {
        baton_lease_reaper::handle(context, chrono::Utc::now()).await.map_err(Error::from)
    }))
    .await
}
