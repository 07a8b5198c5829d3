use aws_lambda_events::sqs::SqsEvent;
use baton_shared::context::Context;
use lambda_runtime::{service_fn, Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let context = &Context::from_env().await?;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        Ok::<_, Error>(baton_reconcile::handle(context, event.payload).await)
    }))
    .await
}
