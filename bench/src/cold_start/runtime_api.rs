//! A one-invocation emulator of the Lambda Runtime API (version
//! 2018-06-01) on `127.0.0.1`: the function under measure polls it for its
//! first event and posts its answer, and the emulator records what it did.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tokio::sync::{mpsc, watch};

/// The deadline the emulator gives an invocation, as Lambda's function timeout.
const INVOCATION_DEADLINE: Duration = Duration::from_secs(30);

/// What the function did on the Runtime API.
#[derive(Debug)]
pub(super) enum Outcome {
    /// It polled `next` and got the event (init is over).
    Next,
    Response {
        body: Bytes,
        at: Instant,
    },
    InvocationError {
        error_type: String,
        body: String,
        at: Instant,
    },
    InitError {
        error_type: String,
        body: String,
    },
    /// A request this emulator does not serve (e.g. SnapStart's `restore/next`).
    Unexpected(String),
}

/// A one-invocation Lambda Runtime API (version 2018-06-01): the first
/// `next` gets the event; later polls wait, as in a frozen sandbox, until the
/// emulator stops.
pub(super) struct RuntimeApi {
    pub(super) addr: SocketAddr,
    pub(super) outcomes: mpsc::UnboundedReceiver<Outcome>,
    stop: watch::Sender<bool>,
    server: tokio::task::JoinHandle<()>,
}

struct Invocation {
    request_id: String,
    event: serde_json::Value,
    function_arn: String,
}

#[derive(Clone)]
struct Shared {
    pending: Arc<Mutex<Option<Invocation>>>,
    outcomes: mpsc::UnboundedSender<Outcome>,
    stop: watch::Receiver<bool>,
}

impl Shared {
    fn record(&self, outcome: Outcome) {
        // The receiver only goes away with the run; nothing to record then.
        let _ = self.outcomes.send(outcome);
    }
}

pub(super) const API_PREFIX: &str = "/2018-06-01/runtime";

impl RuntimeApi {
    pub(super) async fn start(event: serde_json::Value, function_arn: String) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let (outcomes_tx, outcomes) = mpsc::unbounded_channel();
        let (stop, stop_rx) = watch::channel(false);
        let invocation = Invocation { request_id: uuid::Uuid::new_v4().to_string(), event, function_arn };
        let shared = Shared { pending: Arc::new(Mutex::new(Some(invocation))), outcomes: outcomes_tx, stop: stop_rx };
        let app = Router::new()
            .route(&format!("{API_PREFIX}/invocation/next"), get(next))
            .route(&format!("{API_PREFIX}/invocation/{{id}}/response"), post(response))
            .route(&format!("{API_PREFIX}/invocation/{{id}}/error"), post(invocation_error))
            .route(&format!("{API_PREFIX}/init/error"), post(init_error))
            .fallback(unexpected)
            .with_state(shared.clone());
        let mut shutdown = shared.stop.clone();
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = shutdown.wait_for(|stopped| *stopped).await;
                })
                .await;
        });
        Ok(Self { addr, outcomes, stop, server })
    }

    /// Releases waiting polls and stops serving.
    pub(super) async fn stop(self) {
        let _ = self.stop.send(true);
        let mut server = self.server;
        // A connection that does not close must not hold the bench up.
        if tokio::time::timeout(Duration::from_secs(2), &mut server).await.is_err() {
            server.abort();
        }
    }
}

async fn next(State(shared): State<Shared>) -> Response {
    let invocation = shared.pending.lock().unwrap_or_else(|e| e.into_inner()).take();
    let Some(invocation) = invocation else {
        let mut stop = shared.stop.clone();
        let _ = stop.wait_for(|stopped| *stopped).await;
        return (StatusCode::SERVICE_UNAVAILABLE, "the emulator stopped").into_response();
    };
    shared.record(Outcome::Next);
    let deadline = SystemTime::now()
        .checked_add(INVOCATION_DEADLINE)
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis());
    let trace = format!(
        "Root=1-{:08x}-{};Parent={};Sampled=0",
        chrono::Utc::now().timestamp(),
        &uuid::Uuid::new_v4().simple().to_string()[..24],
        &uuid::Uuid::new_v4().simple().to_string()[..16]
    );
    let mut headers = HeaderMap::new();
    for (name, value) in [
        ("lambda-runtime-aws-request-id", invocation.request_id),
        ("lambda-runtime-deadline-ms", deadline.to_string()),
        ("lambda-runtime-invoked-function-arn", invocation.function_arn),
        ("lambda-runtime-trace-id", trace),
        ("content-type", "application/json".to_string()),
    ] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    (StatusCode::OK, headers, invocation.event.to_string()).into_response()
}

/// The runtime's error posts carry the type in a header and a JSON body.
fn error_type(headers: &HeaderMap) -> String {
    headers
        .get("lambda-runtime-function-error-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("(no Lambda-Runtime-Function-Error-Type)")
        .to_string()
}

fn accepted() -> Response {
    (StatusCode::ACCEPTED, axum::Json(serde_json::json!({ "status": "OK" }))).into_response()
}

async fn response(State(shared): State<Shared>, body: Bytes) -> Response {
    shared.record(Outcome::Response { body, at: Instant::now() });
    accepted()
}

async fn invocation_error(State(shared): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let at = Instant::now();
    let body = String::from_utf8_lossy(&body).into_owned();
    shared.record(Outcome::InvocationError { error_type: error_type(&headers), body, at });
    accepted()
}

async fn init_error(State(shared): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let body = String::from_utf8_lossy(&body).into_owned();
    shared.record(Outcome::InitError { error_type: error_type(&headers), body });
    accepted()
}

async fn unexpected(State(shared): State<Shared>, method: Method, uri: Uri) -> Response {
    shared.record(Outcome::Unexpected(format!("{method} {uri}")));
    (StatusCode::NOT_FOUND, "not served by the bench's Runtime API emulator").into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cold_start::events::function_arn;

    #[tokio::test]
    async fn the_emulator_serves_next_and_records_the_response() {
        let event = serde_json::json!({ "Records": [] });
        let mut api = RuntimeApi::start(event.clone(), function_arn("claim")).await.unwrap();
        let base = format!("http://{}{API_PREFIX}", api.addr);
        let http = reqwest::Client::new();

        let next = http.get(format!("{base}/invocation/next")).send().await.unwrap();
        assert_eq!(next.status(), 200);
        let header = |name: &str| next.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
        let request_id = header("lambda-runtime-aws-request-id").unwrap();
        let deadline: u128 = header("lambda-runtime-deadline-ms").unwrap().parse().unwrap();
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis();
        assert!(deadline > now && deadline <= now + INVOCATION_DEADLINE.as_millis());
        assert_eq!(header("lambda-runtime-invoked-function-arn").unwrap(), function_arn("claim"));
        assert!(header("lambda-runtime-trace-id").unwrap().starts_with("Root=1-"));
        assert_eq!(next.json::<serde_json::Value>().await.unwrap(), event);
        assert!(matches!(api.outcomes.recv().await, Some(Outcome::Next)));

        let posted = http
            .post(format!("{base}/invocation/{request_id}/response"))
            .body(r#"{"batchItemFailures":[]}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(posted.status(), 202);
        match api.outcomes.recv().await {
            Some(Outcome::Response { body, .. }) => assert_eq!(&body[..], br#"{"batchItemFailures":[]}"#),
            other => panic!("expected the response, got {other:?}"),
        }

        // The second poll waits (a frozen sandbox) until the emulator stops.
        let second = tokio::spawn({
            let http = http.clone();
            let url = format!("{base}/invocation/next");
            async move { http.get(url).send().await.map(|r| r.status()) }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!second.is_finished());
        api.stop().await;
        let status = second.await.unwrap();
        assert!(status.as_ref().map_or(true, |s| *s == 503), "{status:?}");
    }
}
