//! `GET /v1/health`: 200 with every check green, 503 naming the failing one.

use baton_shared::context::Context;
use baton_shared::health::check_all;
use baton_shared::http::json_response;
use lambda_http::{Body, Request, Response};

pub async fn handle(context: &Context, _req: Request) -> Response<Body> {
    let health = check_all(&context.clients, &context.config).await;
    let status = if health.is_ok() { http::StatusCode::OK } else { http::StatusCode::SERVICE_UNAVAILABLE };
    json_response(status, &health)
}
