//! Job logs through the API, with chunks uploaded as a runner does (upload
//! URLs under its lease, then a `PUT` to each): reads are bounded however
//! the log was chunked, upload URLs never outlive their lease, and a
//! chunk's number is charged once and stored once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use baton_api::logs::{LogLine, LogStream, MAX_CHUNK_SEQ, MAX_READ_BYTES};
use baton_api::runners::ClaimResponse;
use baton_localstack::faults::FaultPlan;
use baton_service::context::Context;
use baton_tests::runs::{log_texts, Identified, LeasedRun};
use baton_tests::{workspace, TestStack};
use serde_json::{json, Value};
use uuid::Uuid;

/// A job of a new run, claimed by a new runner: its lease.
struct Leased {
    ws: String,
    run_id: String,
    job_id: String,
    claim: ClaimResponse,
}

impl Leased {
    fn execution(&self) -> Uuid {
        self.claim.job_execution_id
    }

    fn logs_path(&self) -> String {
        format!("/v1/workspaces/{}/runs/{}/jobs/{}/logs", self.ws, self.run_id, self.job_id)
    }
}

async fn leased_job(stack: &TestStack) -> Leased {
    let ws = workspace();
    let yaml = "name: logs\njobs:\n  build:\n    runs-on: linux\n    steps: [{run: make}]\n";
    let LeasedRun { view, claim, .. } = stack.leased_run(&ws, yaml).await;
    let job_id = view["attempts"][0]["jobs"][0]["id"].as_str().unwrap_or_default().to_string();
    Leased { ws, run_id: view.id(), job_id, claim }
}

/// `POST …/logs` for `chunks` (`(seq, bytes)`) under the lease.
async fn ask_urls(stack: &TestStack, leased: &Leased, chunks: &[(u64, u64)]) -> baton_tests::http::Answer {
    let chunks: Vec<Value> = chunks.iter().map(|(seq, bytes)| json!({ "seq": seq, "bytes": bytes })).collect();
    let path = format!("/v1/runners/leases/{}/logs", leased.execution());
    stack.post(&path, &leased.claim.lease.token, json!({ "chunks": chunks })).await
}

/// The `PUT` of one upload the API answered, as a runner sends it.
async fn put(stack: &TestStack, upload: &Value, body: Vec<u8>) -> u16 {
    let mut request = stack.http.put(upload["url"].as_str().expect("a URL"));
    for (name, value) in upload["headers"].as_object().into_iter().flatten() {
        request = request.header(name.as_str(), value.as_str().unwrap_or_default());
    }
    request.body(body).send().await.expect("S3 answers").status().as_u16()
}

/// Asks for chunk `seq`'s URL and uploads `body` with it.
async fn upload(stack: &TestStack, leased: &Leased, seq: u64, body: Vec<u8>) {
    let answer = ask_urls(stack, leased, &[(seq, body.len() as u64)]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(put(stack, &answer.body["uploads"][0], body).await, 200);
}

/// A chunk of one line per text, as the runner writes them.
fn chunk(texts: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    for text in texts {
        let line =
            LogLine { at: chrono::Utc::now(), step_id: Uuid::nil(), stream: LogStream::Stdout, text: text.clone() };
        out.extend(serde_json::to_vec(&line).expect("a line"));
        out.push(b'\n');
    }
    out
}

/// One read of the log from `cursor`: the page and its size as answered.
async fn read_page(stack: &TestStack, leased: &Leased, cursor: &str) -> (Value, usize) {
    let path = format!("{}?cursor={cursor}", leased.logs_path());
    let response = stack.http.get(stack.url(&path)).bearer_auth(&stack.admin_token).send().await.expect("GET");
    assert_eq!(response.status().as_u16(), 200);
    let text = response.text().await.expect("a body");
    (serde_json::from_str(&text).expect("a page"), text.len())
}

/// What the lease was charged for its log so far.
async fn log_bytes(stack: &TestStack, execution: Uuid) -> u64 {
    let lease = stack.store.get(&format!("EXEC#{execution}"), "LEASE").await.expect("a read").expect("the lease");
    lease.get("log_bytes").and_then(|v| v.as_n().ok()).map_or(0, |n| n.parse().expect("a number"))
}

/// The stored object of chunk `seq`.
async fn stored_chunk(stack: &TestStack, leased: &Leased, seq: u64) -> Vec<u8> {
    let bucket = &stack.provisioned.buckets["BATON_LOGS_BUCKET"];
    let key = baton_service::usecases::logs::chunk_key(&leased.ws, leased.claim.run_id, leased.execution(), seq);
    let object = stack.clients.s3().get_object().bucket(bucket).key(key).send().await.expect("the chunk is stored");
    object.body.collect().await.expect("its bytes").into_bytes().to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_read_answers_at_most_its_byte_budget_and_every_read_moves_the_cursor_on() {
    let stack = TestStack::start().await;
    let leased = leased_job(&stack).await;
    // Three chunks of one 700 KB line each: together far past one response.
    let lines: Vec<String> = ["a", "b", "c"].iter().map(|c| c.repeat(700_000)).collect();
    for (seq, line) in lines.iter().enumerate() {
        upload(&stack, &leased, seq as u64, chunk(std::slice::from_ref(line))).await;
    }
    // A small chunk after them.
    upload(&stack, &leased, 3, chunk(&["tail".to_string()])).await;

    let mut cursor = "0.0".to_string();
    let mut seen = Vec::new();
    for _ in 0..8 {
        let (page, size) = read_page(&stack, &leased, &cursor).await;
        assert!(size <= MAX_READ_BYTES + 1024, "a page of {size} bytes");
        let next = page["next_cursor"].as_str().unwrap_or_default().to_string();
        let read = log_texts(&page);
        assert!(!read.is_empty() && next != cursor, "a read with lines left moves on: {cursor} -> {next}");
        seen.extend(read);
        cursor = next;
        if seen.last().map(String::as_str) == Some("tail") {
            break;
        }
    }
    let mut expected = lines.clone();
    expected.push("tail".into());
    assert!(seen == expected, "every line once, in order ({} lines read)", seen.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_past_its_time_budget_answers_what_it_has_with_a_cursor_after_it_and_never_stays_put() {
    use baton_service::usecases::logs::{execution_prefix, read_lines, LogCursor, ReadBudget};
    let stack = TestStack::start().await;
    let leased = leased_job(&stack).await;
    // A slow printer's log: a chunk a line.
    for seq in 0..5u64 {
        upload(&stack, &leased, seq, chunk(&[format!("line {seq}")])).await;
    }
    let bucket = &stack.provisioned.buckets["BATON_LOGS_BUCKET"];
    let prefix = execution_prefix(&leased.ws, leased.claim.run_id, leased.execution());
    let budget = ReadBudget { lines: 1000, bytes: MAX_READ_BYTES };
    // Its time is up before it starts: it still reads the first chunk, and
    // only that one, so the next read starts after it.
    let mut cursor = LogCursor::default();
    let mut seen = Vec::new();
    for _ in 0..5 {
        let past = tokio::time::Instant::now();
        let read = read_lines(stack.clients.s3(), bucket, &prefix, cursor, budget, past, false).await.expect("a read");
        assert_eq!(read.lines.len(), 1, "{read:?}");
        assert_eq!(read.next, LogCursor { seq: cursor.seq + 1, line: 0 });
        seen.extend(read.lines.into_iter().map(|l| l.text));
        cursor = read.next;
    }
    assert_eq!(seen, (0..5).map(|seq| format!("line {seq}")).collect::<Vec<_>>());
    // With time to spare, one read takes every chunk there is.
    let later = tokio::time::Instant::now() + Duration::from_secs(30);
    let all =
        read_lines(stack.clients.s3(), bucket, &prefix, LogCursor::default(), budget, later, false).await.unwrap();
    assert_eq!((all.lines.len(), all.next, all.at_end), (5, LogCursor { seq: 5, line: 0 }, true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_urls_expire_with_their_lease_never_later() {
    let stack = TestStack::start().await;
    let leased = leased_job(&stack).await;
    let answer = ask_urls(&stack, &leased, &[(0, 10), (1, 20)]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    // Nothing heartbeats: the lease expires when its claim said.
    let lease_expires = stack.store.lease(leased.execution()).await.unwrap().expect("the lease").expires_at;
    assert_eq!(lease_expires, leased.claim.lease.expires_at);
    for upload in answer.body["uploads"].as_array().expect("uploads") {
        let said: chrono::DateTime<chrono::Utc> =
            serde_json::from_value(upload["expires_at"].clone()).expect("an instant");
        assert!(said <= lease_expires, "the answer says {said}, the lease ends at {lease_expires}");
        // What S3 enforces: the signing instant plus the signed validity.
        let url = reqwest::Url::parse(upload["url"].as_str().unwrap()).expect("a URL");
        let query: std::collections::HashMap<_, _> = url.query_pairs().into_owned().collect();
        let signed_at = chrono::NaiveDateTime::parse_from_str(&query["X-Amz-Date"], "%Y%m%dT%H%M%SZ")
            .expect("X-Amz-Date")
            .and_utc();
        let valid_s: i64 = query["X-Amz-Expires"].parse().expect("X-Amz-Expires");
        let signed_until = signed_at + chrono::Duration::seconds(valid_s);
        assert!(signed_until <= lease_expires, "the URL works until {signed_until}, the lease ends at {lease_expires}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_number_past_the_bound_is_refused_and_charges_nothing() {
    let stack = TestStack::start().await;
    let leased = leased_job(&stack).await;
    for seq in [MAX_CHUNK_SEQ + 1, 10_000_000_000, u64::MAX] {
        let answer = ask_urls(&stack, &leased, &[(0, 10), (seq, 10)]).await;
        assert_eq!((answer.status, answer.code()), (400, "invalid-request"), "seq {seq}: {}", answer.body);
    }
    let twice = ask_urls(&stack, &leased, &[(3, 10), (3, 10)]).await;
    assert_eq!((twice.status, twice.code()), (400, "invalid-request"), "{}", twice.body);
    assert_eq!(log_bytes(&stack, leased.execution()).await, 0, "a refused request charges nothing");
    let last = ask_urls(&stack, &leased, &[(MAX_CHUNK_SEQ, 10)]).await;
    assert_eq!(last.status, 200, "{}", last.body);
    assert_eq!(log_bytes(&stack, leased.execution()).await, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_chunk_is_never_replaced_by_another_upload_of_its_number() {
    let stack = TestStack::start().await;
    let leased = leased_job(&stack).await;
    let original = chunk(&["the original".to_string()]);
    upload(&stack, &leased, 0, original.clone()).await;
    // Asked again, as a runner whose PUT's answer was lost does: a URL for
    // the same object, which S3 refuses to write over.
    let again = ask_urls(&stack, &leased, &[(0, original.len() as u64)]).await;
    assert_eq!(again.status, 200, "{}", again.body);
    let url = &again.body["uploads"][0];
    let condition =
        url["headers"].as_object().into_iter().flatten().find(|(name, _)| name.eq_ignore_ascii_case("if-none-match"));
    assert_eq!(condition.map(|(_, value)| value.clone()), Some(json!("*")), "{url:#}");
    let text = String::from_utf8(original.clone()).unwrap();
    let forged = text.replace("original", "forgery!").into_bytes();
    assert_eq!(forged.len(), original.len());
    assert_eq!(put(&stack, url, forged).await, 412, "S3 refuses to replace a stored chunk");
    assert_eq!(log_bytes(&stack, leased.execution()).await, original.len() as u64, "charged once");
    assert_eq!(stored_chunk(&stack, &leased, 0).await, original);
    let (page, _) = read_page(&stack, &leased, "0.0").await;
    assert_eq!(log_texts(&page), ["the original"]);
}

/// The upload request a runner sends, as the HTTP API hands it to the
/// function.
fn upload_request(leased: &Leased, chunks: &[(u64, u64)]) -> lambda_http::Request {
    use lambda_http::RequestExt;
    let chunks: Vec<Value> = chunks.iter().map(|(seq, bytes)| json!({ "seq": seq, "bytes": bytes })).collect();
    let execution = leased.execution().to_string();
    http::Request::builder()
        .method("POST")
        .uri(format!("http://localhost/v1/runners/leases/{execution}/logs"))
        .header("authorization", format!("Bearer {}", leased.claim.lease.token))
        .header("content-type", "application/json")
        .body(lambda_http::Body::Text(json!({ "chunks": chunks }).to_string()))
        .expect("a request")
        .with_path_parameters(HashMap::from([("execution_id".to_string(), execution)]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_bytes_are_counted_once_when_the_answers_of_their_charges_are_lost() {
    let stack = TestStack::start().await;
    let leased = leased_job(&stack).await;
    // The logs function alone meets the faults: its writes are applied,
    // then their answers lost, and the SDK sends them again.
    let plan = Arc::new(
        FaultPlan::parse("seed=9;dynamodb.UpdateItem:lost=0.5;dynamodb.TransactWriteItems:lost=0.5")
            .expect("a valid plan")
            .expect("rules"),
    );
    let faulty = Context::new(stack.host.config.clone(), baton_localstack::with_faults(&stack.clients, plan.clone()));
    let mut expected = 0;
    for seq in 0..12u64 {
        let bytes = 100 + seq;
        // A runner asks again while the answer is an error (every one of
        // the SDK's tries lost its answer).
        let mut status = 0;
        for _ in 0..10 {
            status = baton_logs::handle(&faulty, upload_request(&leased, &[(seq, bytes)])).await.status().as_u16();
            if status == 200 {
                break;
            }
            assert!(status >= 500, "chunk {seq} answered {status}");
        }
        assert_eq!(status, 200, "chunk {seq}");
        expected += bytes;
    }
    let lost = plan.injected_by_kind().get("lost").copied().unwrap_or(0);
    assert!(lost > 0, "answers were lost: {:?}", plan.injected_by_kind());
    assert_eq!(log_bytes(&stack, leased.execution()).await, expected, "{lost} answers lost");
}
