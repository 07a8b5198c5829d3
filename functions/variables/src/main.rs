#[tokio::main]
async fn main() -> Result<(), baton_service::context::Error> {
    baton_service::context::serve_http(baton_variables::handle).await
}
