#[tokio::main]
async fn main() -> Result<(), baton_shared::context::Error> {
    baton_shared::context::serve_http(baton_caches::handle).await
}
