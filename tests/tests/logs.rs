//! Job logs through the API, with chunks uploaded as a runner does (upload
//! URLs under its lease, then a `PUT` to each): reads are bounded however
//! the log was chunked, upload URLs never outlive their lease, and a
//! chunk's number is charged once and stored once.

use std::time::Duration;

use baton_shared::api::logs::{LogLine, LogStream, MAX_READ_BYTES};
use baton_shared::api::runners::ClaimResponse;
use baton_tests::{wait_for, TestStack};
use serde_json::{json, Value};
use uuid::Uuid;

/// A workspace no other test uses.
fn workspace() -> String {
    format!("ws-{}", &Uuid::now_v7().simple().to_string()[20..])
}

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
    let created =
        stack.post(&format!("/v1/workspaces/{ws}/runs"), &stack.admin_token, json!({ "definition": yaml })).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let run_id = created.body["id"].as_str().unwrap_or_default().to_string();
    let job_id = created.body["attempts"][0]["jobs"][0]["id"].as_str().unwrap_or_default().to_string();
    let runner = stack.runner(&ws, &["linux"]).await;
    let claim = wait_for("the job to be claimed", Duration::from_secs(60), || stack.claim(&runner.session_token)).await;
    Leased { ws, run_id, job_id, claim }
}

/// `POST …/logs` for `chunks` (`(seq, bytes)`) under the lease.
async fn ask_urls(stack: &TestStack, leased: &Leased, chunks: &[(u64, u64)]) -> baton_tests::runners::Answer {
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

fn texts(page: &Value) -> Vec<String> {
    page["lines"].as_array().into_iter().flatten().filter_map(|l| l["text"].as_str().map(String::from)).collect()
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
        let read = texts(&page);
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
    use baton_shared::logs::{execution_prefix, read_lines, LogCursor, ReadBudget};
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
        let read = read_lines(&stack.clients.s3, bucket, &prefix, cursor, budget, past, false).await.expect("a read");
        assert_eq!(read.lines.len(), 1, "{read:?}");
        assert_eq!(read.next, LogCursor { seq: cursor.seq + 1, line: 0 });
        seen.extend(read.lines.into_iter().map(|l| l.text));
        cursor = read.next;
    }
    assert_eq!(seen, (0..5).map(|seq| format!("line {seq}")).collect::<Vec<_>>());
    // With time to spare, one read takes every chunk there is.
    let later = tokio::time::Instant::now() + Duration::from_secs(30);
    let all = read_lines(&stack.clients.s3, bucket, &prefix, LogCursor::default(), budget, later, false).await.unwrap();
    assert_eq!((all.lines.len(), all.next, all.at_end), (5, LogCursor { seq: 5, line: 0 }, true));
}
