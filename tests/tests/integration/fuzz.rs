//! Every route of the API, fed random and near-valid input (bodies, path
//! parameters, tokens of every kind), deterministic by seed: no answer is a
//! 5xx, every refusal has the documented error shape and a documented code,
//! and no refused request writes anything. Half the bodies are derived from
//! the route's request schema in the served OpenAPI document (each field of
//! its declared type, at its edges, or swapped for junk), so cases reach the
//! checks behind the parser; the dev host checks every answer against the
//! same document.

use baton_api::error::ErrorCode;
use baton_tests::TestStack;
use chrono::Utc;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{json, Map, Value};
use std::time::Duration;

/// Cases per route.
const CASES: usize = 40;

/// The field names of every request body, so that random objects reach the
/// validation of real fields, not only the JSON parser.
const FIELDS: &[&str] = &[
    "definition",
    "inputs",
    "idempotency_key",
    "mode",
    "wait_s",
    "request_id",
    "labels",
    "name",
    "expires_in_s",
    "single_use",
    "max_claims",
    "status",
    "steps",
    "outputs",
    "message",
    "exit_code",
    "started_at",
    "finished_at",
    "id",
];

const CODES: &[ErrorCode] = &[
    ErrorCode::InvalidRequest,
    ErrorCode::InvalidLabels,
    ErrorCode::InvalidDefinition,
    ErrorCode::Unauthenticated,
    ErrorCode::Forbidden,
    ErrorCode::NotFound,
    ErrorCode::MethodNotAllowed,
    ErrorCode::RegistrationTokenConsumed,
    ErrorCode::SessionExhausted,
    ErrorCode::LeaseLost,
    ErrorCode::RunAlreadyFinished,
    ErrorCode::RunNotTerminal,
    ErrorCode::NoFailedJobs,
    ErrorCode::TooManyLabelSets,
];

fn scalar(rng: &mut StdRng) -> Value {
    match rng.random_range(0..12) {
        0 => Value::Null,
        1 => json!(rng.random::<bool>()),
        2 => json!(rng.random::<i64>()),
        3 => json!(1e300),
        4 => json!(-1.5e-200),
        5 => json!(""),
        6 => json!("x".repeat(rng.random_range(1..20_000))),
        7 => json!("succeeded"),
        8 => json!(uuid::Uuid::now_v7()),
        9 => json!("jobs:\n  a:\n    runs-on: linux\n    steps: [{run: 'true'}]\n"),
        10 => json!(["linux", "x64"]),
        _ => json!("\u{0}#/\n\u{202e}"),
    }
}

fn value(rng: &mut StdRng, depth: u32) -> Value {
    if depth == 0 || rng.random_bool(0.6) {
        return scalar(rng);
    }
    if rng.random_bool(0.5) {
        Value::Array((0..rng.random_range(0..4)).map(|_| value(rng, depth - 1)).collect())
    } else {
        object(rng, depth - 1)
    }
}

fn object(rng: &mut StdRng, depth: u32) -> Value {
    let mut fields = Map::new();
    for _ in 0..rng.random_range(0..5) {
        let name = FIELDS.choose(rng).copied().unwrap_or("x");
        fields.insert(name.to_string(), value(rng, depth));
    }
    Value::Object(fields)
}

/// A value for `schema` (a schema of the OpenAPI document `doc`): of its
/// type, often at an edge of it (empty, huge, zero, the largest integer, a
/// far date), and now and then junk of another type.
fn from_schema(rng: &mut StdRng, doc: &Value, schema: &Value, depth: u32) -> Value {
    if let Some(target) = schema["$ref"].as_str() {
        return from_schema(rng, doc, doc.pointer(target.trim_start_matches('#')).unwrap_or(&Value::Null), depth);
    }
    if rng.random_bool(0.15) || depth == 0 {
        return scalar(rng);
    }
    if let Some(choices) = schema["enum"].as_array() {
        return choices.choose(rng).cloned().unwrap_or(Value::Null);
    }
    if let Some(options) = schema["oneOf"].as_array().or(schema["anyOf"].as_array()) {
        return options.choose(rng).map(|o| from_schema(rng, doc, o, depth)).unwrap_or(Value::Null);
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec!["object"],
    };
    match types.choose(rng).copied().unwrap_or("null") {
        "null" => Value::Null,
        "boolean" => json!(rng.random::<bool>()),
        "integer" => match rng.random_range(0..6) {
            0 => json!(0),
            1 => json!(u64::MAX),
            2 => json!(i64::MIN),
            3 => json!(-1),
            _ => json!(rng.random_range(1..100_000)),
        },
        "number" => json!(rng.random::<f64>() * 1e9),
        "string" => match schema["format"].as_str() {
            Some("uuid") => json!(uuid::Uuid::now_v7()),
            Some("date-time") => {
                json!(["2026-12-03T04:00:00Z", "9999-12-31T23:59:59Z", "1970-01-01T00:00:00+02:00"].choose(rng))
            }
            _ => match rng.random_range(0..5) {
                0 => json!(""),
                1 => json!("x".repeat(rng.random_range(1..70_000))),
                2 => json!("jobs:\n  a:\n    runs-on: linux\n    steps: [{run: 'true'}]\n"),
                _ => json!(format!("v{}", rng.random_range(0..1000))),
            },
        },
        "array" => {
            let count = if rng.random_bool(0.1) { rng.random_range(100..200) } else { rng.random_range(0..4) };
            Value::Array((0..count).map(|_| from_schema(rng, doc, &schema["items"], depth - 1)).collect())
        }
        _ => {
            let mut fields = Map::new();
            let required: Vec<&str> =
                schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            for (name, property) in schema["properties"].as_object().into_iter().flatten() {
                let keep = if required.contains(&name.as_str()) { rng.random_bool(0.9) } else { rng.random_bool(0.6) };
                if keep {
                    fields.insert(name.clone(), from_schema(rng, doc, property, depth - 1));
                }
            }
            if let Some(extra) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for i in 0..rng.random_range(0..4) {
                    fields.insert(format!("k{i}"), from_schema(rng, doc, extra, depth - 1));
                }
            }
            Value::Object(fields)
        }
    }
}

/// The request schema the document declares for `method path`, if any.
fn request_schema<'a>(doc: &'a Value, method: &str, path: &str) -> Option<&'a Value> {
    doc["paths"][path][method.to_lowercase()].pointer("/requestBody/content/application~1json/schema")
}

/// The largest body a case sends (API Gateway's limit is 10 MB).
const MAX_CASE_BODY: usize = 1024 * 1024;

/// A request body: from the route's schema, JSON of any shape, or not JSON
/// at all.
fn body(rng: &mut StdRng, doc: &Value, schema: Option<&Value>) -> Option<String> {
    if let Some(schema) = schema.filter(|_| rng.random_bool(0.5)) {
        let body = from_schema(rng, doc, schema, 5).to_string();
        // A body over API Gateway's 10 MB never reaches a function: the
        // gateway refuses it while the client is still writing it (a
        // broken pipe, not an answer). Nested lists of long strings (a
        // provisioner's label sets) can get there; keep cases below it.
        return Some(if body.len() < MAX_CASE_BODY { body } else { "{}".into() });
    }
    match rng.random_range(0..8) {
        0 => None,
        1 => Some("{".into()),
        2 => Some("[]".into()),
        3 => Some("\u{fffd}\u{0}garbage".into()),
        _ => Some(object(rng, 3).to_string()),
    }
}

/// A path parameter: real ids, ids that cannot exist, and junk.
fn param(rng: &mut StdRng, real: &[String]) -> String {
    match rng.random_range(0..6) {
        0 | 1 => real.choose(rng).cloned().unwrap_or_default(),
        2 => uuid::Uuid::now_v7().to_string(),
        3 => "not-a-uuid".into(),
        4 => "a%23b".into(),
        _ => "w".repeat(rng.random_range(1..3000)),
    }
}

/// How many items the table holds (tests only: it scans).
async fn items(stack: &TestStack) -> i32 {
    let (mut count, mut start) = (0, None);
    loop {
        let out = stack
            .clients
            .dynamodb()
            .scan()
            .table_name(&stack.store.table)
            .select(aws_sdk_dynamodb::types::Select::Count)
            .set_exclusive_start_key(start)
            .send()
            .await
            .unwrap();
        count += out.count();
        start = out.last_evaluated_key;
        if start.is_none() {
            return count;
        }
    }
}

/// Waits until the table's item count holds still for a second (or
/// gives up after thirty: a test that then fails names the case).
async fn settled(stack: &TestStack) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let (mut last, mut still_since) = (items(stack).await, std::time::Instant::now());
    while still_since.elapsed() < Duration::from_secs(1) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = items(stack).await;
        if now != last {
            (last, still_since) = (now, std::time::Instant::now());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_route_answers_5xx_or_writes_anything_for_input_it_refuses() {
    let stack = TestStack::start().await;
    // Real credentials of every kind, and real ids, so that cases get past
    // authentication to the validation behind it.
    let registration = stack.registration_token("ws1", json!({})).await;
    let session = stack.register(&registration, &["linux"]).await.session_token;
    let queued = stack.queue_job("ws1", &["linux"], Utc::now()).await;
    let claim = stack.claim(&session).await.expect("the queued job");
    let created = stack
        .post(
            "/v1/workspaces/ws1/runs",
            &stack.admin_token,
            json!({"definition": "jobs:\n  a:\n    runs-on: gpu\n    steps: [{run: 'true'}]\n"}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let run_id = created.body["id"].as_str().unwrap_or_default().to_string();
    let tokens = [
        String::new(),
        "garbage".to_string(),
        stack.admin_token.clone(),
        session.clone(),
        registration.clone(),
        claim.lease.token.clone(),
        format!("bst_{}.{}", uuid::Uuid::now_v7().simple(), "x".repeat(43)),
        format!("blt_{}.1.{}", queued.detail.job_execution_id.simple(), "x".repeat(43)),
    ];
    let real_ids = vec![
        "ws1".to_string(),
        run_id,
        queued.detail.job_execution_id.to_string(),
        claim.job.work.steps[0].id.to_string(),
    ];

    // The document as any client reads it: served, unauthenticated.
    let served = stack.get("/v1/openapi.json", "").await;
    assert_eq!(served.status, 200, "{}", served.body);
    let doc = served.body;

    let mut rng = StdRng::seed_from_u64(13);
    let (mut cases, mut refused, mut accepted) = (0, 0, 0);
    for route in stack.provisioned.plan.routes.clone() {
        for _ in 0..CASES {
            let path = route
                .path
                .split('/')
                .map(|part| if part.starts_with('{') { param(&mut rng, &real_ids) } else { part.to_string() })
                .collect::<Vec<_>>()
                .join("/");
            let token = tokens.choose(&mut rng).cloned().unwrap_or_default();
            let method = reqwest::Method::from_bytes(route.method.as_bytes()).unwrap_or(reqwest::Method::POST);
            let schema = request_schema(&doc, route.method.as_str(), &route.path);
            let body = if method == reqwest::Method::GET { None } else { body(&mut rng, &doc, schema) };
            let before = items(&stack).await;
            let answer = stack.send(method.clone(), &path, &token, body.clone()).await;
            cases += 1;
            let case = format!("{method} {path} with {token:.12}… and {:.200}", body.as_deref().unwrap_or("no body"));
            assert!(answer.status < 500, "{case}: answered {} {}", answer.status, answer.body);
            if answer.status >= 400 {
                refused += 1;
                let code = answer.body["error"]["code"].as_str().unwrap_or_default();
                assert!(CODES.iter().any(|c| c.as_str() == code), "{case}: undocumented code {}", answer.body);
                assert!(answer.body["error"]["message"].is_string(), "{case}: no message {}", answer.body);
                assert_eq!(items(&stack).await, before, "{case}: a refused request wrote");
            } else {
                accepted += 1;
                // What an accepted write set going (a cancel's facts and
                // their consumers' writes) lands before the next case counts.
                if method != reqwest::Method::GET {
                    settled(&stack).await;
                }
            }
        }
    }
    eprintln!(
        "fuzz: {cases} cases over {} routes: {refused} refused, {accepted} accepted, 0 answered 5xx",
        stack.provisioned.plan.routes.len()
    );
    assert!(refused > cases / 2, "most random input is refused: {refused} of {cases}");
}
