//! Tokens, sessions and bad input on the runner routes: every refusal has its
//! documented status and code and writes nothing; no workspace sees another's
//! jobs (behaviour.md §2, api.md, §13 scenario 6).

use std::sync::Arc;

use baton_tests::TestStack;
use chrono::Utc;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_token_routes_need_an_operator_token_of_the_workspace() {
    let stack = TestStack::start().await;
    let path = "/v1/workspaces/ws1/registration-tokens";
    let none = stack.get(path, "").await;
    assert_eq!((none.status, none.code()), (401, "unauthenticated"));
    let wrong_kind = stack.runner("ws1", &["linux"]).await.session_token;
    let answer = stack.get(path, &wrong_kind).await;
    assert_eq!((answer.status, answer.code()), (401, "unauthenticated"));

    let scoped = stack.workspace_token("ws2").await;
    let answer = stack.post(path, &scoped, json!({})).await;
    assert_eq!((answer.status, answer.code()), (404, "not-found"), "another workspace is not revealed");
    let own = stack.post("/v1/workspaces/ws2/registration-tokens", &scoped, json!({"name": "ci"})).await;
    assert_eq!(own.status, 201);
    assert!(own.body["token"].as_str().unwrap().starts_with("brt_"));

    let listed = stack.get("/v1/workspaces/ws2/registration-tokens", &scoped).await;
    assert_eq!(listed.body["items"].as_array().unwrap().len(), 1);
    assert!(listed.body["items"][0].get("token").is_none(), "the secret is shown once");
    let stored = stack.store.get(&format!("REGTOKEN#{}", own.body["id"].as_str().unwrap()), "REGTOKEN").await.unwrap();
    let stored = format!("{stored:?}");
    assert!(!stored.contains(own.body["token"].as_str().unwrap()), "only a hash is stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_registration_token_requests_are_400_and_write_nothing() {
    let stack = TestStack::start().await;
    let path = "/v1/workspaces/ws1/registration-tokens";
    for body in [json!({"max_claims": 0}), json!({"expires_in_s": -5}), json!({"single_use": "yes"})] {
        let answer = stack.post(path, &stack.admin_token, body.clone()).await;
        assert_eq!((answer.status, answer.code()), (400, "invalid-request"), "{body}");
    }
    let malformed = stack.send(reqwest::Method::POST, path, &stack.admin_token, Some("{".into())).await;
    assert_eq!((malformed.status, malformed.code()), (400, "invalid-request"));
    let oversized = format!("{{\"name\": \"{}\"}}", "x".repeat(1024 * 1024 + 1));
    let answer = stack.send(reqwest::Method::POST, path, &stack.admin_token, Some(oversized)).await;
    assert_eq!((answer.status, answer.code()), (400, "invalid-request"));
    assert_eq!(stack.count_items("registration_token").await, 0);
    let unknown = stack
        .send(reqwest::Method::DELETE, &format!("{path}/{}", uuid::Uuid::now_v7()), &stack.admin_token, None)
        .await;
    assert_eq!((unknown.status, unknown.code()), (404, "not-found"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_refuses_revoked_expired_wrong_kind_and_invalid_labels_without_writing() {
    let stack = TestStack::start().await;
    let revoked = stack.post("/v1/workspaces/ws1/registration-tokens", &stack.admin_token, json!({})).await;
    let id = revoked.body["id"].as_str().unwrap();
    let deleted = stack
        .send(
            reqwest::Method::DELETE,
            &format!("/v1/workspaces/ws1/registration-tokens/{id}"),
            &stack.admin_token,
            None,
        )
        .await;
    assert_eq!(deleted.status, 204);
    let token = revoked.body["token"].as_str().unwrap();
    let answer = stack.post("/v1/runners/register", token, json!({"labels": ["linux"]})).await;
    assert_eq!((answer.status, answer.code()), (401, "unauthenticated"));

    let expiring = stack.registration_token("ws1", json!({"expires_in_s": 1})).await;
    baton_tests::wait_for("the token to expire", std::time::Duration::from_secs(10), || async {
        let answer = stack.post("/v1/runners/register", &expiring, json!({"labels": ["linux"]})).await;
        (answer.status == 401).then_some(())
    })
    .await;

    let valid = stack.registration_token("ws1", json!({})).await;
    let sessions_before = stack.count_items("session").await;
    let answer = stack.post("/v1/runners/register", &valid, json!({"labels": ["linux", "Bad Label!"]})).await;
    assert_eq!((answer.status, answer.code()), (400, "invalid-labels"));
    assert!(answer.body["error"]["message"].as_str().unwrap().contains("`Bad Label!`"), "{}", answer.body);
    let answer = stack.post("/v1/runners/register", &valid, json!({"labels": []})).await;
    assert_eq!((answer.status, answer.code()), (400, "invalid-labels"));
    let answer = stack.post("/v1/runners/register", &valid, json!({"labels": ["linux"], "tools": ["node@>=18"]})).await;
    assert_eq!((answer.status, answer.code()), (400, "invalid-labels"));
    assert!(answer.body["error"]["message"].as_str().unwrap().contains("tool `node@>=18`"), "{}", answer.body);
    let answer = stack.post("/v1/runners/register", &valid, json!({"labels": "linux"})).await;
    assert_eq!((answer.status, answer.code()), (400, "invalid-request"));
    let answer = stack.post("/v1/runners/register", &stack.admin_token, json!({"labels": ["linux"]})).await;
    assert_eq!(
        (answer.status, answer.code()),
        (401, "unauthenticated"),
        "an operator token is not a registration token"
    );
    let answer = stack.post("/v1/runners/register", &format!("{valid}x"), json!({"labels": ["linux"]})).await;
    assert_eq!((answer.status, answer.code()), (401, "unauthenticated"), "a wrong secret");
    assert_eq!(stack.count_items("session").await, sessions_before, "no refused registration made a session");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runners_tools_are_answered_among_its_labels_with_each_version_prefix() {
    let stack = TestStack::start().await;
    let token = stack.registration_token("ws1", json!({})).await;
    let body = json!({"labels": ["Linux"], "tools": ["docker", "node@20.11.1"]});
    let answer = stack.post("/v1/runners/register", &token, body).await;
    assert_eq!(answer.status, 201, "{}", answer.body);
    assert_eq!(
        answer.body["labels"],
        json!(["linux", "tool:docker", "tool:node", "tool:node@20", "tool:node@20.11", "tool:node@20.11.1"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_use_token_makes_exactly_one_session_under_concurrency() {
    let stack = Arc::new(TestStack::start().await);
    let token = stack.registration_token("ws1", json!({"single_use": true})).await;
    let answers = futures::future::join_all((0..4).map(|_| {
        let stack = stack.clone();
        let token = token.clone();
        async move { stack.post("/v1/runners/register", &token, json!({"labels": ["linux"]})).await }
    }))
    .await;
    let created = answers.iter().filter(|a| a.status == 201).count();
    let consumed = answers.iter().filter(|a| a.status == 409 && a.code() == "registration-token-consumed").count();
    assert_eq!((created, consumed), (1, 3));
    assert_eq!(stack.count_items("session").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_workspace_can_claim_heartbeat_or_complete_anothers_job() {
    let stack = TestStack::start().await;
    let outsider = stack.runner("ws2", &["linux"]).await;
    let insider = stack.runner("ws1", &["linux"]).await;
    stack.queue_job("ws1", &["linux"], Utc::now()).await;
    stack.queue_job("ws2", &["linux"], Utc::now()).await;

    let theirs = stack.claim(&outsider.session_token).await.expect("its own job");
    assert_eq!(theirs.workspace_id, "ws2");
    assert!(stack.claim(&outsider.session_token).await.is_none(), "never ws1's job");
    let ours = stack.claim(&insider.session_token).await.expect("ws1's job");
    assert_eq!(ours.workspace_id, "ws1");

    let before = stack.store.lease(ours.job_execution_id).await.unwrap();
    let answer = stack.heartbeat(&theirs.lease.token, ours.job_execution_id).await;
    assert_eq!((answer.status, answer.code()), (404, "not-found"));
    let answer = stack.complete(&theirs.lease.token, ours.job_execution_id, json!({"status": "failed"})).await;
    assert_eq!((answer.status, answer.code()), (404, "not-found"));
    let answer = stack.complete(&outsider.session_token, ours.job_execution_id, json!({"status": "failed"})).await;
    assert_eq!((answer.status, answer.code()), (401, "unauthenticated"));
    assert_eq!(stack.store.lease(ours.job_execution_id).await.unwrap(), before, "untouched");
    let listing = stack.get("/v1/workspaces/ws1/registration-tokens", &outsider.session_token).await;
    assert_eq!(listing.status, 401, "a runner session cannot read operator data");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_need_a_live_session_token() {
    let stack = TestStack::start().await;
    let runner = stack.runner("ws1", &["linux"]).await;
    let forged = format!("{}0", runner.session_token);
    for token in ["", "bst_nope", forged.as_str(), stack.admin_token.as_str()] {
        let answer = stack.post("/v1/runners/claim", token, json!({})).await;
        assert_eq!((answer.status, answer.code()), (401, "unauthenticated"), "token {token:?}");
    }
    let malformed =
        stack.send(reqwest::Method::POST, "/v1/runners/claim", &runner.session_token, Some("[".into())).await;
    assert_eq!((malformed.status, malformed.code()), (400, "invalid-request"));
}
