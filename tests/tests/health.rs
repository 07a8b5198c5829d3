//! `GET /v1/health` reports each backend's reachability.

use std::collections::HashMap;

use baton_shared::health::Health;
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
