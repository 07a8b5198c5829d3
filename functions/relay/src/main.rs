#[tokio::main]
async fn main() -> Result<(), baton_shared::context::Error> {
    baton_shared::context::serve_stream(baton_relay::handle).await
}
