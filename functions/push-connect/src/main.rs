// The runtime future over the WebSocket event type nests deeper than the
// compiler's default layout-query depth.
#![recursion_limit = "256"]

#[tokio::main]
async fn main() -> Result<(), baton_service::context::Error> {
    baton_service::context::serve_websocket(baton_push_connect::handle).await
}
