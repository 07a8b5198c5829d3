use baton_shared::context::Context;
use lambda_http::{service_fn, Error, Request};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let context = &Context::from_env().await?;
    lambda_http::run(service_fn(move |req: Request| async move {
        Ok::<_, Error>(baton_register::handle(context, req).await)
    }))
    .await
}
