#[tokio::main]
async fn main() -> Result<(), baton_service::context::Error> {
    baton_service::context::serve_sqs(baton_schedule_sync::handle).await
}
