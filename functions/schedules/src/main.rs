// The scheduler tick future nests the store's transaction futures deeper than
// the default limit lets the compiler lay out.
#![recursion_limit = "256"]

#[tokio::main]
async fn main() -> Result<(), baton_service::context::Error> {
    baton_service::context::serve_event(baton_schedules::handle).await
}
