#[tokio::main]
async fn main() -> Result<(), baton_shared::context::Error> {
    baton_shared::context::serve_sqs(baton_job_outcomes::handle).await
}
