//! Artifacts through the real function and S3 (behaviour.md §17): an
//! archive goes to the bucket in parts with URLs issued under the lease,
//! a repeat charges nothing twice, a later job and an operator get it back
//! byte-identical; caps, names, other jobs, other workspaces and a lease
//! that ended are refused with clear errors and change nothing.

use std::collections::HashMap;
use std::time::Duration;

use baton_api::artifacts::ARTIFACT_PART_BYTES;
use baton_api::runners::ClaimResponse;
use baton_tests::http::Answer;
use baton_tests::runs::Identified;
use baton_tests::{wait_for, workspace, TestStack};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const PIPELINE: &str = "name: artifacts\njobs:\n  build:\n    runs-on: linux\n    steps: [{run: make}]\n  test:\n    needs: build\n    runs-on: linux\n    steps: [{run: make test}]\n";

fn sha256(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// A run of `PIPELINE` in a new workspace, its `build` job claimed.
struct Run {
    ws: String,
    id: String,
    session: String,
    build: ClaimResponse,
}

async fn run_with_build_leased(stack: &TestStack) -> Run {
    let ws = workspace();
    let leased = stack.leased_run(&ws, PIPELINE).await;
    Run { ws, id: leased.view.id(), session: leased.session_token, build: leased.claim }
}

/// Ends `job`'s lease as a runner's complete does.
async fn finish(stack: &TestStack, job: &ClaimResponse) {
    let done =
        stack.complete(&job.lease.token, job.job_execution_id, json!({"status": "succeeded", "steps": []})).await;
    assert_eq!(done.status, 200, "{}", done.body);
}

async fn begin(stack: &TestStack, job: &ClaimResponse, name: &str, bytes: u64, digest: &str) -> Answer {
    let path = format!("/v1/runners/leases/{}/artifacts", job.job_execution_id);
    stack.post(&path, &job.lease.token, json!({"name": name, "bytes": bytes, "sha256": digest})).await
}

async fn complete_upload(stack: &TestStack, job: &ClaimResponse, name: &str, parts: &[Value]) -> Answer {
    let path = format!("/v1/runners/leases/{}/artifacts/{name}/complete", job.job_execution_id);
    stack.post(&path, &job.lease.token, json!({ "parts": parts })).await
}

/// The run's artifact bytes charged so far, and what `job`'s lease was charged.
async fn charged(stack: &TestStack, run: &str, job: &ClaimResponse) -> (u64, u64) {
    let number = |item: Option<HashMap<String, aws_sdk_dynamodb::types::AttributeValue>>, field: &str| {
        item.and_then(|i| i.get(field).and_then(|v| v.as_n().ok()).map(|n| n.parse().expect("a number"))).unwrap_or(0)
    };
    let usage = stack.store.get(&format!("RUN#{run}"), "ARTIFACTS").await.expect("a read");
    let lease = stack.store.get(&format!("EXEC#{}", job.job_execution_id), "LEASE").await.expect("a read");
    (number(usage, "bytes"), number(lease, "artifact_bytes"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_artifact_goes_to_s3_in_parts_under_the_lease_and_a_later_job_and_an_operator_get_it_byte_identical() {
    let stack = TestStack::start().await;
    let run = run_with_build_leased(&stack).await;
    // Two parts: a full one and a short last one.
    let archive: Vec<u8> = (0..ARTIFACT_PART_BYTES + 1_000).map(|i| (i * 7 % 251) as u8).collect();
    let (size, digest) = (archive.len() as u64, sha256(&archive));

    let begun = begin(&stack, &run.build, "dist", size, &digest).await;
    assert_eq!(begun.status, 200, "{}", begun.body);
    assert_eq!(begun.body["stored"], false);
    let sizes: Vec<u64> =
        begun.body["parts"].as_array().unwrap().iter().map(|p| p["bytes"].as_u64().unwrap()).collect();
    assert_eq!(sizes, vec![ARTIFACT_PART_BYTES, 1_000]);
    assert_eq!(begun.body["part_count"], 2);
    // A window from a later part (how a big archive's URLs are asked for).
    let path = format!("/v1/runners/leases/{}/artifacts", run.build.job_execution_id);
    let body = json!({"name": "dist", "bytes": size, "sha256": digest, "first_part": 2});
    let window = stack.post(&path, &run.build.lease.token, body).await;
    assert_eq!(window.status, 200, "{}", window.body);
    let numbers: Vec<u64> =
        window.body["parts"].as_array().unwrap().iter().map(|p| p["part_number"].as_u64().unwrap()).collect();
    assert_eq!((numbers, window.body["part_count"].as_u64()), (vec![2], Some(2)));
    // The runner asks again (its answer lost): the same upload, charged once.
    let again = begin(&stack, &run.build, "dist", size, &digest).await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(charged(&stack, &run.id, &run.build).await, (size, size));
    // Another archive under the same name, by the same job, is refused.
    let other = begin(&stack, &run.build, "dist", size, &sha256(b"other")).await;
    assert_eq!((other.status, other.code()), (409, "artifact-exists"));

    let parts = stack.put_parts(&again.body, &archive).await;
    let stored = complete_upload(&stack, &run.build, "dist", &parts).await;
    assert_eq!(stored.status, 200, "{}", stored.body);
    assert_eq!((stored.body["status"].as_str(), stored.body["bytes"].as_u64()), (Some("stored"), Some(size)));
    assert_eq!(stored.body["job_key"], "build");
    // A repeat of the complete, and of the begin, find it stored.
    assert_eq!(complete_upload(&stack, &run.build, "dist", &parts).await.body["status"], "stored");
    assert_eq!(begin(&stack, &run.build, "dist", size, &digest).await.body["stored"], true);

    // Listed for operators, and in the run view.
    let list = stack.get(&format!("/v1/workspaces/{}/runs/{}/artifacts", run.ws, run.id), &stack.admin_token).await;
    assert_eq!(list.status, 200, "{}", list.body);
    assert_eq!(list.body["artifacts"][0]["name"], "dist");
    assert_eq!(list.body["artifacts"][0]["sha256"], digest.as_str());
    let view = stack.get(&format!("/v1/workspaces/{}/runs/{}", run.ws, run.id), &stack.admin_token).await;
    assert_eq!(view.body["artifacts"][0]["name"], "dist", "{}", view.body);

    // The next job downloads it under its own lease.
    finish(&stack, &run.build).await;
    let test = stack.wait_claim(&run.session).await;
    let path = format!("/v1/runners/leases/{}/artifacts/dist", test.job_execution_id);
    let download = stack.get(&path, &test.lease.token).await;
    assert_eq!(download.status, 200, "{}", download.body);
    let fetched = stack.http.get(download.body["url"].as_str().unwrap()).send().await.unwrap().bytes().await.unwrap();
    assert_eq!(sha256(&fetched), digest, "byte-identical");
    // It may not take the name another job of the run stored.
    let taken = begin(&stack, &test, "dist", 10, &sha256(b"x")).await;
    assert_eq!((taken.status, taken.code()), (409, "artifact-exists"), "{}", taken.body);
    let missing =
        stack.get(&format!("/v1/runners/leases/{}/artifacts/nope", test.job_execution_id), &test.lease.token).await;
    assert_eq!((missing.status, missing.code()), (404, "not-found"));

    // An operator downloads it too.
    let path = format!("/v1/workspaces/{}/runs/{}/artifacts/dist", run.ws, run.id);
    let download = stack.get(&path, &stack.admin_token).await;
    assert_eq!(download.status, 200, "{}", download.body);
    let fetched = stack.http.get(download.body["url"].as_str().unwrap()).send().await.unwrap().bytes().await.unwrap();
    assert_eq!(fetched.len() as u64, size);
    assert_eq!(sha256(&fetched), digest);

    // The test job fails; after its lease it gets nothing more.
    let failed =
        stack.complete(&test.lease.token, test.job_execution_id, json!({"status": "failed", "steps": []})).await;
    assert_eq!(failed.status, 200, "{}", failed.body);
    let late =
        stack.get(&format!("/v1/runners/leases/{}/artifacts/dist", test.job_execution_id), &test.lease.token).await;
    assert_eq!((late.status, late.code()), (409, "lease-lost"));

    // A `failed` rerun runs test again; the carried-over build's artifact is there for it.
    stack.wait_run_status(&run.ws, &run.id, "failed").await;
    let view_path = format!("/v1/workspaces/{}/runs/{}", run.ws, run.id);
    let rerun = stack.post(&format!("{view_path}/rerun"), &stack.admin_token, json!({"mode": "failed"})).await;
    assert_eq!(rerun.status, 201, "{}", rerun.body);
    let again = stack.wait_claim(&run.session).await;
    assert_eq!(again.attempt, 2);
    let path = format!("/v1/runners/leases/{}/artifacts/dist", again.job_execution_id);
    let download = stack.get(&path, &again.lease.token).await;
    assert_eq!((download.status, download.body["artifact"]["sha256"].as_str()), (200, Some(digest.as_str())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caps_names_other_workspaces_and_an_ended_lease_are_refused_and_charge_nothing() {
    let overrides = HashMap::from([
        ("BATON_ARTIFACT_JOB_CAP_BYTES".to_string(), "4096".to_string()),
        ("BATON_ARTIFACT_RUN_CAP_BYTES".to_string(), "5000".to_string()),
    ]);
    let stack = TestStack::start_with(|_| {}, overrides).await;
    let run = run_with_build_leased(&stack).await;
    let digest = sha256(b"archive");

    for (body, why) in [
        (json!({"name": "../up", "bytes": 10, "sha256": digest}), "a name with a path"),
        (json!({"name": "dist", "bytes": 0, "sha256": digest}), "an empty archive"),
        (json!({"name": "dist", "bytes": 10, "sha256": "XYZ"}), "not a SHA-256"),
        (json!({"name": "dist", "bytes": 10, "sha256": digest, "first_part": 2}), "a part a 1-part archive lacks"),
    ] {
        let path = format!("/v1/runners/leases/{}/artifacts", run.build.job_execution_id);
        let refused = stack.post(&path, &run.build.lease.token, body).await;
        assert_eq!((refused.status, refused.code()), (400, "invalid-request"), "{why}: {}", refused.body);
    }
    let too_big = begin(&stack, &run.build, "big", 5_000, &digest).await;
    assert_eq!((too_big.status, too_big.code()), (413, "artifact-cap"), "{}", too_big.body);
    assert!(too_big.body["error"]["message"].as_str().unwrap().contains("4096"));

    assert_eq!(begin(&stack, &run.build, "one", 3_000, &digest).await.status, 200);
    let over_job = begin(&stack, &run.build, "two", 1_500, &digest).await;
    assert_eq!((over_job.status, over_job.code()), (413, "artifact-cap"), "the job's 4096 bytes: {}", over_job.body);
    assert_eq!(charged(&stack, &run.id, &run.build).await, (3_000, 3_000), "a refusal charges nothing");

    // An upload the lease's end overtakes never becomes an artifact.
    let late = begin(&stack, &run.build, "late", 100, &sha256(&[1u8; 100])).await;
    assert_eq!(late.status, 200, "{}", late.body);
    let parts = stack.put_parts(&late.body, &[1u8; 100]).await;
    finish(&stack, &run.build).await;
    let refused = complete_upload(&stack, &run.build, "late", &parts).await;
    assert_eq!((refused.status, refused.code()), (409, "lease-lost"), "{}", refused.body);
    // And the part URLs themselves: the lease's end (its fact) aborts the
    // upload, so S3 refuses a part sent after it, well before the URL expires.
    let part_url = late.body["parts"][0]["url"].as_str().unwrap().to_string();
    // (S3 answers 404 `NoSuchUpload`; moto, whose `UploadPart` does not
    // look the upload up first, fails with a 500: refused either way.)
    let refused_by_s3 = wait_for("the ended lease's upload URL to be refused", Duration::from_secs(30), || async {
        let status = stack.http.put(&part_url).body(vec![1u8; 100]).send().await.unwrap().status().as_u16();
        (status >= 400).then_some(status)
    })
    .await;
    assert!(matches!(refused_by_s3, 404 | 500), "{refused_by_s3}");
    let again = begin(&stack, &run.build, "later", 100, &digest).await;
    assert_eq!((again.status, again.code()), (409, "lease-lost"));
    let path = format!("/v1/workspaces/{}/runs/{}/artifacts/late", run.ws, run.id);
    assert_eq!(stack.get(&path, &stack.admin_token).await.status, 404, "never stored, never downloadable");

    // The run's cap holds across its jobs.
    let test = stack.wait_claim(&run.session).await;
    let over_run = begin(&stack, &test, "reports", 2_000, &digest).await;
    assert_eq!((over_run.status, over_run.code()), (413, "artifact-cap"), "the run's 5000 bytes: {}", over_run.body);
    assert_eq!(charged(&stack, &run.id, &test).await, (3_100, 0));

    // Another workspace's operator learns nothing of the run.
    let stranger = stack.workspace_token(&workspace()).await;
    let list = format!("/v1/workspaces/{}/runs/{}/artifacts", run.ws, run.id);
    assert_eq!(stack.get(&list, &stranger).await.status, 404);
    let theirs = stack.workspace_token("elsewhere").await;
    let path = format!("/v1/workspaces/elsewhere/runs/{}/artifacts", run.id);
    assert_eq!(stack.get(&path, &theirs).await.status, 404);
    let path = format!("/v1/workspaces/elsewhere/runs/{}/artifacts/one", run.id);
    assert_eq!(stack.get(&path, &theirs).await.status, 404);
}

/// Past its expiry an artifact is gone from the bucket (its lifecycle rule
/// acts on time) while DynamoDB's TTL deletes its item up to days later
/// (moto, like a slow TTL, never does): the item still there, it is neither
/// listed nor offered for download, to an operator or to a later job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_artifact_whose_item_ttl_has_not_deleted_yet_is_neither_listed_nor_served() {
    let stack = TestStack::start().await;
    let run = run_with_build_leased(&stack).await;
    let archive = b"dist archive".to_vec();
    let begun = begin(&stack, &run.build, "dist", archive.len() as u64, &sha256(&archive)).await;
    assert_eq!(begun.status, 200, "{}", begun.body);
    let parts = stack.put_parts(&begun.body, &archive).await;
    assert_eq!(complete_upload(&stack, &run.build, "dist", &parts).await.body["status"], "stored");
    let list_path = format!("/v1/workspaces/{}/runs/{}/artifacts", run.ws, run.id);
    assert_eq!(stack.get(&list_path, &stack.admin_token).await.body["artifacts"][0]["name"], "dist");

    // A day past its expiry, as a late TTL leaves it.
    let expired = baton_domain::time::format(chrono::Utc::now() - chrono::Duration::days(1));
    stack
        .clients
        .dynamodb()
        .update_item()
        .table_name(&stack.store.table)
        .key("pk", aws_sdk_dynamodb::types::AttributeValue::S(format!("RUN#{}", run.id)))
        .key("sk", aws_sdk_dynamodb::types::AttributeValue::S("ARTIFACT#dist".into()))
        .update_expression("SET expires_at = :e")
        .expression_attribute_values(":e", aws_sdk_dynamodb::types::AttributeValue::S(expired))
        .send()
        .await
        .expect("the item is there to age");

    let list = stack.get(&list_path, &stack.admin_token).await;
    assert_eq!((list.status, &list.body["artifacts"]), (200, &json!([])), "{}", list.body);
    let operator = stack.get(&format!("{list_path}/dist"), &stack.admin_token).await;
    assert_eq!((operator.status, operator.code()), (404, "not-found"), "{}", operator.body);
    finish(&stack, &run.build).await;
    let test = stack.wait_claim(&run.session).await;
    let runner =
        stack.get(&format!("/v1/runners/leases/{}/artifacts/dist", test.job_execution_id), &test.lease.token).await;
    assert_eq!((runner.status, runner.code()), (404, "not-found"), "{}", runner.body);
}

/// A 50 GiB archive (the largest cap) has 3,200 parts, and on AWS each URL
/// carries the signer's session token (about 2 KB): one answer listing
/// them all would be about 6 MB, at Lambda's response limit. Answers carry
/// a window of at most 256 URLs, and the runner asks for the next window
/// from the part after it: 13 answers cover every part, once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_50_gib_archive_is_answered_in_windows_of_part_urls_that_cover_every_part_once() {
    let overrides = HashMap::from([
        ("BATON_ARTIFACT_JOB_CAP_BYTES".to_string(), (50u64 << 30).to_string()),
        ("BATON_ARTIFACT_RUN_CAP_BYTES".to_string(), (50u64 << 30).to_string()),
    ]);
    let stack = TestStack::start_with(|_| {}, overrides).await;
    let run = run_with_build_leased(&stack).await;
    let (size, digest) = (50u64 << 30, sha256(b"a big build"));
    let path = format!("/v1/runners/leases/{}/artifacts", run.build.job_execution_id);
    let (mut numbers, mut answers, mut first_part) = (Vec::new(), 0, 1u64);
    while first_part <= 3_200 {
        let body = json!({"name": "huge", "bytes": size, "sha256": digest, "first_part": first_part});
        let answer = stack.post(&path, &run.build.lease.token, body).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(answer.body["part_count"], 3_200);
        let parts = answer.body["parts"].as_array().unwrap();
        assert!(!parts.is_empty() && parts.len() <= 256, "{} URLs in one answer", parts.len());
        numbers.extend(parts.iter().map(|p| p["part_number"].as_u64().unwrap()));
        first_part = numbers.last().unwrap() + 1;
        answers += 1;
    }
    assert_eq!(answers, 13);
    assert_eq!(numbers, (1..=3_200).collect::<Vec<u64>>());
    assert_eq!(charged(&stack, &run.id, &run.build).await, (size, size), "charged once, whatever the asks");
}
