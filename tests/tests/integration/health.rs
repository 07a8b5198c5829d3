//! `GET /v1/health` reports each backend's reachability; `GET
//! /v1/openapi.json` describes the API.

use std::collections::HashMap;

use baton_service::usecases::health::Health;
use baton_tests::TestStack;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_green_when_every_backend_answers() {
    let stack = TestStack::start().await;
    let response = stack.http.get(stack.url("/v1/health")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let health: Health = response.json().await.unwrap();
    assert_eq!(health.status, "ok");
    assert_eq!(
        [health.checks.dynamodb, health.checks.sqs, health.checks.eventbridge, health.checks.stepfunctions],
        ["ok", "ok", "ok", "ok"].map(String::from)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_503_and_names_the_failing_backend() {
    let stack =
        TestStack::start_with(|_| {}, HashMap::from([("BATON_TABLE".to_string(), "no-such-table".to_string())])).await;
    let response = stack.http.get(stack.url("/v1/health")).send().await.unwrap();
    assert_eq!(response.status(), 503);
    let health: Health = response.json().await.unwrap();
    assert_eq!(health.status, "degraded");
    assert!(health.checks.dynamodb.starts_with("error"), "{:?}", health.checks);
    assert_eq!(health.checks.eventbridge, "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_route_is_a_404_with_the_error_document() {
    let stack = TestStack::start().await;
    let response = stack.http.get(stack.url("/v1/nothing-here")).send().await.unwrap();
    assert_eq!(response.status(), 404);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "not-found");
}

/// Any client can fetch the API's description without a token, and it is
/// the committed document (which a unit test holds to the Rust types).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_is_served_without_a_token_and_is_the_committed_one() {
    let stack = TestStack::start().await;
    let response = stack.http.get(stack.url("/v1/openapi.json")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    let served: serde_json::Value = response.json().await.unwrap();
    let committed: serde_json::Value =
        serde_json::from_str(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../api/openapi.json"))).unwrap();
    assert_eq!(served, committed);
    assert!(served["openapi"].as_str().unwrap_or_default().starts_with("3.1"));
    for route in &stack.provisioned.plan.routes {
        let method = route.method.to_lowercase();
        assert!(served["paths"][&route.path][&method].is_object(), "{method} {} is not documented", route.path);
    }
}
