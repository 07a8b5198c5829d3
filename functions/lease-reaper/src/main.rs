#[tokio::main]
async fn main() -> Result<(), baton_shared::context::Error> {
    baton_shared::context::serve_schedule(baton_lease_reaper::handle).await
}
