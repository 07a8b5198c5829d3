//! `GET /v1/health`: 200 with every check green, 503 naming the failing one.

use baton_shared::aws::AwsClients;
use baton_shared::config::Config;
use baton_shared::health::check_all;
use baton_shared::http::json_response;
use lambda_http::{Body, Request, Response};

pub struct State {
    pub config: Config,
    pub clients: AwsClients,
}

pub async fn handle(state: &State, _req: Request) -> Response<Body> {
    let health = check_all(&state.clients, &state.config).await;
    let status = if health.is_ok() { http::StatusCode::OK } else { http::StatusCode::SERVICE_UNAVAILABLE };
    json_response(status, &health)
}
