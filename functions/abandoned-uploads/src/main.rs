#[tokio::main]
async fn main() -> Result<(), baton_shared::context::Error> {
    baton_shared::context::serve_sqs(baton_abandoned_uploads::handle).await
}
