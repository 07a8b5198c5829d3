//! Cache entries through the real function and S3 (behaviour.md §17): a
//! restore finds the exact key, else the newest entry under a prefix, in
//! its scope then the workspace's; a saved key is not saved again; a save
//! the lease's end overtakes is never stored; bad keys and sizes are
//! refused; another workspace's entries are never found.

use std::collections::HashMap;
use std::time::Duration;

use baton_api::runners::ClaimResponse;
use baton_tests::http::Answer;
use baton_tests::{workspace, TestStack};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// A job of workspace `ws` leased to a new runner.
async fn leased(stack: &TestStack, ws: &str) -> ClaimResponse {
    let yaml = "name: c\njobs:\n  build:\n    runs-on: linux\n    steps: [{run: make}]\n";
    stack.leased_run(ws, yaml).await.claim
}

async fn restore(stack: &TestStack, job: &ClaimResponse, body: Value) -> Answer {
    stack.post(&format!("/v1/runners/leases/{}/caches/restore", job.job_execution_id), &job.lease.token, body).await
}

/// Saves `bytes` under `key` in `scope` as the runner does; the save's first answer.
async fn save(stack: &TestStack, job: &ClaimResponse, scope: &str, key: &str, bytes: &[u8]) -> Answer {
    let digest = format!("{:x}", Sha256::digest(bytes));
    let path = format!("/v1/runners/leases/{}/caches", job.job_execution_id);
    let begun = stack
        .post(&path, &job.lease.token, json!({"key": key, "scope": scope, "bytes": bytes.len(), "sha256": digest}))
        .await;
    if begun.status != 200 || begun.body["stored"] == true {
        return begun;
    }
    let parts = stack.put_parts(&begun.body, bytes).await;
    let done = json!({"key": key, "scope": scope, "parts": parts});
    let complete = stack.post(&format!("{path}/complete"), &job.lease.token, done).await;
    assert_eq!(complete.status, 200, "{}", complete.body);
    begun
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_finds_the_key_else_the_newest_under_a_prefix_in_its_scope_then_the_workspaces() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let job = leased(&stack, &ws).await;
    let miss = restore(&stack, &job, json!({"key": "deps-a", "restore_keys": ["deps-"]})).await;
    assert_eq!((miss.status, miss.body["hit"].as_str()), (200, Some("miss")), "{}", miss.body);

    save(&stack, &job, "", "deps-a", b"first").await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    save(&stack, &job, "", "deps-b", b"second").await;
    save(&stack, &job, "main", "deps-main", b"on main").await;
    // A saved key is not saved again (entries are immutable).
    assert_eq!(save(&stack, &job, "", "deps-a", b"other bytes").await.body["stored"], true);

    let exact = restore(&stack, &job, json!({"key": "deps-a", "restore_keys": ["deps-"]})).await;
    assert_eq!((exact.body["hit"].as_str(), exact.body["entry"]["key"].as_str()), (Some("exact"), Some("deps-a")));
    let fetched = stack.http.get(exact.body["url"].as_str().unwrap()).send().await.unwrap().bytes().await.unwrap();
    assert_eq!(&fetched[..], b"first");
    // The newest under the prefix, in the workspace-wide scope.
    let prefix = restore(&stack, &job, json!({"key": "deps-c", "restore_keys": ["nothing-", "deps-"]})).await;
    assert_eq!((prefix.body["hit"].as_str(), prefix.body["entry"]["key"].as_str()), (Some("prefix"), Some("deps-b")));
    // A scope is looked in first, then the workspace's.
    let scoped = restore(&stack, &job, json!({"key": "deps-c", "restore_keys": ["deps-"], "scope": "main"})).await;
    assert_eq!(scoped.body["entry"]["key"], "deps-main");
    let branch = restore(&stack, &job, json!({"key": "deps-a", "scope": "feature"})).await;
    assert_eq!((branch.body["hit"].as_str(), branch.body["entry"]["scope"].as_str()), (Some("exact"), Some("")));

    // Another workspace finds none of them.
    let other = leased(&stack, &workspace()).await;
    let theirs = restore(&stack, &other, json!({"key": "deps-a", "restore_keys": ["deps-"]})).await;
    assert_eq!(theirs.body["hit"], "miss");
}

/// Keys sort by name, not by age: among 1,200 entries under a prefix (more
/// than one page of the old thousand-item read), the newest one sorts near
/// the end, and is the one restored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefix_restore_finds_the_newest_entry_among_more_than_a_page_whatever_its_key() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let job = leased(&stack, &ws).await;
    let now = chrono::Utc::now();
    const NEWEST: usize = 1150;
    let entries: Vec<(String, chrono::DateTime<chrono::Utc>)> = (0..1200)
        .map(|i| {
            // Ages shuffled (719 is coprime to 1,200): neither key order nor
            // its reverse is age order; the newest is NEWEST's, a second old.
            let age = if i == NEWEST { 1 } else { 60 + (i * 719 % 1200) as i64 * 60 };
            (format!("deps-{i:04}"), now - chrono::Duration::seconds(age))
        })
        .collect();
    stack.pile_up_cache_entries(&ws, "", &entries).await;
    let found = restore(&stack, &job, json!({"key": "deps-x", "restore_keys": ["deps-"]})).await;
    assert_eq!(found.status, 200, "{}", found.body);
    assert_eq!(
        (found.body["hit"].as_str(), found.body["entry"]["key"].as_str()),
        (Some("prefix"), Some(format!("deps-{NEWEST:04}").as_str())),
        "{}",
        found.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_keys_big_entries_and_a_save_after_the_lease_ended_are_refused() {
    let overrides = HashMap::from([("BATON_CACHE_ENTRY_CAP_BYTES".to_string(), "2048".to_string())]);
    let stack = TestStack::start_with(|_| {}, overrides).await;
    let ws = workspace();
    let job = leased(&stack, &ws).await;
    for body in [json!({"key": "a b"}), json!({"key": "a,b"}), json!({"key": "k", "restore_keys": ["x y"]})] {
        let refused = restore(&stack, &job, body.clone()).await;
        assert_eq!((refused.status, refused.code()), (400, "invalid-request"), "{body}: {}", refused.body);
    }
    let big = save(&stack, &job, "", "big", &[7u8; 4096]).await;
    assert_eq!((big.status, big.code()), (413, "artifact-cap"), "{}", big.body);

    // Begun under the lease, completed after it ended: never stored.
    let path = format!("/v1/runners/leases/{}/caches", job.job_execution_id);
    let digest = format!("{:x}", Sha256::digest(b"late"));
    let begun = stack.post(&path, &job.lease.token, json!({"key": "late", "bytes": 4, "sha256": digest})).await;
    assert_eq!(begun.status, 200, "{}", begun.body);
    let parts = stack.put_parts(&begun.body, b"late").await;
    let done =
        stack.complete(&job.lease.token, job.job_execution_id, json!({"status": "succeeded", "steps": []})).await;
    assert_eq!(done.status, 200);
    let complete = json!({"key": "late", "parts": parts});
    let refused = stack.post(&format!("{path}/complete"), &job.lease.token, complete).await;
    assert_eq!((refused.status, refused.code()), (409, "lease-lost"), "{}", refused.body);
    let next = leased(&stack, &ws).await;
    assert_eq!(restore(&stack, &next, json!({"key": "late"})).await.body["hit"], "miss", "never stored");
}
