#[tokio::main]
async fn main() -> Result<(), baton_shared::context::Error> {
    baton_shared::context::serve_schedule(baton_demand_metrics::handle).await
}
