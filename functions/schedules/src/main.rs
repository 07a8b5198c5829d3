#[tokio::main]
async fn main() -> Result<(), baton_service::context::Error> {
    baton_service::context::serve_schedule(baton_schedules::handle).await
}
