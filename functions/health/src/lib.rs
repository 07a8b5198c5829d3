//! The API's two unauthenticated meta routes: `GET /v1/health` (200 with
//! every check green, 503 naming the failing one) and `GET /v1/openapi.json`
//! (the OpenAPI document, generated from the contract's types).

use std::sync::OnceLock;

use baton_service::context::Context;
use baton_service::http::json_response;
use baton_service::usecases::health::check_all;
use lambda_http::{Body, Request, Response};

/// The route of the OpenAPI document; every other request to this function
/// is the health check.
pub const OPENAPI_PATH: &str = "/v1/openapi.json";

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    if req.uri().path().trim_end_matches('/').ends_with(OPENAPI_PATH) {
        return openapi();
    }
    let health = check_all(&context.clients, &context.config).await;
    let status = if health.is_ok() { http::StatusCode::OK } else { http::StatusCode::SERVICE_UNAVAILABLE };
    json_response(status, &health)
}

/// The document is the same for the life of the instance: built once.
fn openapi() -> Response<Body> {
    static DOCUMENT: OnceLock<String> = OnceLock::new();
    let json = DOCUMENT.get_or_init(baton_api::openapi::document_json);
    Response::builder()
        .status(http::StatusCode::OK)
        .header("content-type", "application/json")
        .header("cache-control", "public, max-age=300")
        .body(Body::Text(json.clone()))
        .unwrap_or_else(|_| Response::new(Body::Empty))
}
