//! A typed HTTP client of the Baton API over the very request and response
//! types the functions use (`baton_api`, `baton_domain::workflows::view`),
//! so the runner and the server cannot drift apart.
//!
//! Every failure is classified once, here ([`ClientError`]), so that callers
//! decide on a kind, not on status codes: `lease-lost` stops a job without a
//! report, `session-exhausted` stops claiming, 401 re-registers, 5xx / 429 /
//! network errors are retried with backoff, any other 4xx is a permanent
//! error that is logged with its code and message.

use std::time::Duration;

use baton_api::error::ErrorBody;
use baton_api::runners::{
    ClaimRequest, ClaimResponse, CompleteRequest, CompleteResponse, HeartbeatResponse, RegisterRequest,
    RegisterResponse, StepAnswer, StepReport,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use uuid::Uuid;

use crate::backoff::Backoff;

/// How long a request may take, unless it is a long poll.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// What went wrong with a request, in the terms a caller acts on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// 409 `lease-lost`: stop the job, do not report, claim again.
    #[error("lease lost: {0}")]
    LeaseLost(String),
    /// 409 `session-exhausted`: this session may claim no more.
    #[error("session exhausted: {0}")]
    SessionExhausted(String),
    /// 401: the token is unknown or expired (a session token: register again).
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),
    /// 5xx, 429, a timeout or a connection failure: worth retrying later.
    #[error("transient failure: {0}")]
    Transient(String),
    /// Any other answer (4xx, an unreadable body): retrying will not help.
    #[error("request refused ({status} {code}): {message}")]
    Permanent { status: u16, code: String, message: String },
}

impl ClientError {
    pub fn is_transient(&self) -> bool {
        matches!(self, ClientError::Transient(_))
    }

    /// The lease this request acted on is no longer ours: 409 `lease-lost`,
    /// or a lease token the server no longer knows (401) or places (404).
    pub fn means_lease_gone(&self) -> bool {
        match self {
            ClientError::LeaseLost(_) | ClientError::Unauthenticated(_) => true,
            ClientError::Permanent { status, .. } => *status == 404,
            _ => false,
        }
    }
}

/// Classifies a non-success answer from its status and body.
pub fn classify(status: u16, body: &str) -> ClientError {
    let (code, message) = match serde_json::from_str::<ErrorBody>(body) {
        Ok(parsed) => (parsed.error.code, parsed.error.message),
        Err(_) => (String::new(), body.chars().take(200).collect()),
    };
    match (status, code.as_str()) {
        (409, "lease-lost") => ClientError::LeaseLost(message),
        (409, "session-exhausted") => ClientError::SessionExhausted(message),
        (401, _) => ClientError::Unauthenticated(message),
        (429, _) | (500..=599, _) => ClientError::Transient(format!("HTTP {status} {code}: {message}")),
        _ => ClientError::Permanent { status, code, message },
    }
}

/// Classifies a failure to get any answer at all.
fn classify_transport(err: &reqwest::Error) -> ClientError {
    if err.is_builder() {
        ClientError::Permanent { status: 0, code: "invalid-request".into(), message: err.to_string() }
    } else {
        // reqwest's own text hides the cause (refused, DNS, TLS…): add the chain.
        let mut text = err.to_string();
        let mut source = std::error::Error::source(err);
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        ClientError::Transient(text)
    }
}

#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    pub fn new(api: &str) -> Result<Self, ClientError> {
        let http = reqwest::Client::builder()
            .user_agent(concat!("baton-runner/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| ClientError::Permanent { status: 0, code: "client".into(), message: e.to_string() })?;
        Ok(Self { http, base: api.trim_end_matches('/').to_string() })
    }

    /// The API's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Sends one request; `Ok(None)` on 204.
    pub async fn send<B: Serialize, R: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<&B>,
        timeout: Duration,
    ) -> Result<Option<R>, ClientError> {
        let mut request = self.http.request(method, format!("{}{path}", self.base)).bearer_auth(token).timeout(timeout);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| classify_transport(&e))?;
        let status = response.status().as_u16();
        let text = response.text().await.map_err(|e| classify_transport(&e))?;
        if !(200..300).contains(&status) {
            return Err(classify(status, &text));
        }
        if status == 204 || text.trim().is_empty() {
            return Ok(None);
        }
        serde_json::from_str(&text).map(Some).map_err(|e| ClientError::Permanent {
            status,
            code: "unreadable-response".into(),
            message: format!("{e}: {}", text.chars().take(200).collect::<String>()),
        })
    }

    /// As [`Client::send`], for routes that always answer with a body.
    pub async fn send_for<B: Serialize, R: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<&B>,
    ) -> Result<R, ClientError> {
        self.send(method, path, token, body, REQUEST_TIMEOUT).await?.ok_or_else(|| ClientError::Permanent {
            status: 204,
            code: "empty-response".into(),
            message: format!("{path} answered without a body"),
        })
    }

    async fn post_for<B: Serialize, R: DeserializeOwned>(
        &self,
        path: &str,
        token: &str,
        body: &B,
    ) -> Result<R, ClientError> {
        self.send_for(reqwest::Method::POST, path, token, Some(body)).await
    }

    /// `POST /v1/runners/register` with a `brt_` token.
    pub async fn register(
        &self,
        registration_token: &str,
        body: &RegisterRequest,
    ) -> Result<RegisterResponse, ClientError> {
        self.post_for("/v1/runners/register", registration_token, body).await
    }

    /// `POST /v1/runners/claim`, long-polling up to `wait_s`: `None` on 204.
    /// `request_id` names this claim: send it again with each retry of it.
    pub async fn claim(
        &self,
        session_token: &str,
        wait_s: u64,
        request_id: Uuid,
        retry: bool,
    ) -> Result<Option<ClaimResponse>, ClientError> {
        let body = ClaimRequest { wait_s: Some(wait_s), request_id: Some(request_id), retry };
        let timeout = REQUEST_TIMEOUT + Duration::from_secs(wait_s);
        self.send(reqwest::Method::POST, "/v1/runners/claim", session_token, Some(&body), timeout).await
    }

    pub async fn heartbeat(&self, lease_token: &str, execution: Uuid) -> Result<HeartbeatResponse, ClientError> {
        self.post_for(&format!("/v1/runners/leases/{execution}/heartbeat"), lease_token, &serde_json::json!({})).await
    }

    pub async fn report_step(
        &self,
        lease_token: &str,
        execution: Uuid,
        step: Uuid,
        report: &StepReport,
    ) -> Result<StepAnswer, ClientError> {
        self.post_for(&format!("/v1/runners/leases/{execution}/steps/{step}"), lease_token, report).await
    }

    pub async fn complete(
        &self,
        lease_token: &str,
        execution: Uuid,
        body: &CompleteRequest,
    ) -> Result<CompleteResponse, ClientError> {
        self.post_for(&format!("/v1/runners/leases/{execution}/complete"), lease_token, body).await
    }
}

impl Client {
    /// `PUT`s `body` to a presigned URL (the log store), with the headers it
    /// was signed with. The API's error shape does not apply: any 2xx is
    /// done, 5xx and 429 are transient, the rest permanent.
    pub async fn put_bytes(
        &self,
        url: &str,
        headers: &std::collections::BTreeMap<String, String>,
        body: Vec<u8>,
    ) -> Result<(), ClientError> {
        let mut request = self.http.put(url).timeout(REQUEST_TIMEOUT).body(body);
        for (name, value) in headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let response = request.send().await.map_err(|e| classify_transport(&e))?;
        let status = response.status().as_u16();
        if is_stored(status, headers) {
            return Ok(());
        }
        Err(store_refusal("log store", status, response.text().await.unwrap_or_default()))
    }
}

impl Client {
    /// `PUT`s one part of an artifact to its presigned URL; S3's `ETag` of
    /// it, which completing the upload names.
    pub async fn put_part(&self, url: &str, body: Vec<u8>) -> Result<String, ClientError> {
        let response =
            self.http.put(url).timeout(TRANSFER_TIMEOUT).body(body).send().await.map_err(|e| classify_transport(&e))?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            let etag = response.headers().get("etag").and_then(|v| v.to_str().ok()).map(str::to_string);
            return etag.ok_or_else(|| ClientError::Transient("the artifact store answered no ETag".into()));
        }
        Err(store_refusal("artifact store", status, response.text().await.unwrap_or_default()))
    }

    /// `GET`s a presigned URL's object (an artifact archive).
    pub async fn get_bytes(&self, url: &str) -> Result<Vec<u8>, ClientError> {
        let response = self.http.get(url).timeout(TRANSFER_TIMEOUT).send().await.map_err(|e| classify_transport(&e))?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            return response.bytes().await.map(|b| b.to_vec()).map_err(|e| classify_transport(&e));
        }
        Err(store_refusal("artifact store", status, response.text().await.unwrap_or_default()))
    }
}

/// How long moving one part or one archive may take.
pub const TRANSFER_TIMEOUT: Duration = Duration::from_secs(600);

/// An object store's refusal: 5xx and 429 are worth retrying.
fn store_refusal(store: &str, status: u16, text: String) -> ClientError {
    let message = text.chars().take(300).collect::<String>();
    if status >= 500 || status == 429 {
        ClientError::Transient(format!("{store} answered {status}: {message}"))
    } else {
        ClientError::Permanent { status, code: store.replace(' ', "-"), message }
    }
}

/// Whether a PUT's answer means the object is stored. A URL that may not
/// replace an object (`If-None-Match: *`, signed in by the server so a
/// chunk is never overwritten) answers 412 when the object is there: a
/// try of this very upload whose answer was lost stored it already.
fn is_stored(status: u16, headers: &std::collections::BTreeMap<String, String>) -> bool {
    let create_only = headers.iter().any(|(name, value)| name.eq_ignore_ascii_case("if-none-match") && value == "*");
    (200..300).contains(&status) || (status == 412 && create_only)
}

/// Runs `op` until it succeeds, fails for good, or `budget` is spent on
/// transient failures (each retry after a jittered exponential delay).
pub async fn with_retries<T, F, Fut>(what: &str, budget: Duration, mut op: F) -> Result<T, ClientError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ClientError>>,
{
    let deadline = tokio::time::Instant::now() + budget;
    let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(15));
    loop {
        match op().await {
            Err(err) if err.is_transient() => {
                let delay = backoff.next_delay();
                if tokio::time::Instant::now() + delay > deadline {
                    return Err(err);
                }
                tracing::warn!(error = %err, retry_in_ms = delay.as_millis() as u64, "{what} failed, retrying");
                tokio::time::sleep(delay).await;
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_create_only_put_that_finds_its_chunk_there_stored_it_already() {
        let create_only = std::collections::BTreeMap::from([("If-None-Match".to_string(), "*".to_string())]);
        assert!(is_stored(200, &create_only));
        assert!(is_stored(412, &create_only), "a lost answer's retry finds the chunk stored");
        assert!(!is_stored(412, &Default::default()), "a 412 without the condition is a failure");
        assert!(!is_stored(403, &create_only));
    }

    fn error(code: &str) -> String {
        serde_json::json!({"error": {"code": code, "message": "text"}}).to_string()
    }

    #[test]
    fn conflicts_are_told_apart_by_their_code() {
        assert_eq!(classify(409, &error("lease-lost")), ClientError::LeaseLost("text".into()));
        assert_eq!(classify(409, &error("session-exhausted")), ClientError::SessionExhausted("text".into()));
        assert!(matches!(
            classify(409, &error("registration-token-consumed")),
            ClientError::Permanent { status: 409, ref code, .. } if code == "registration-token-consumed"
        ));
    }

    #[test]
    fn unauthenticated_asks_for_a_new_registration() {
        assert_eq!(classify(401, &error("unauthenticated")), ClientError::Unauthenticated("text".into()));
        assert!(matches!(classify(401, ""), ClientError::Unauthenticated(_)), "even without a body");
    }

    #[test]
    fn server_errors_and_throttling_are_retried_other_client_errors_are_not() {
        for status in [500, 502, 503, 504, 429] {
            assert!(classify(status, &error("unavailable")).is_transient(), "{status}");
        }
        assert!(classify(502, "<html>bad gateway</html>").is_transient(), "a proxy's HTML page");
        for status in [400, 403, 404, 405, 413] {
            let err = classify(status, &error("invalid-request"));
            assert!(matches!(err, ClientError::Permanent { .. }), "{status}: {err:?}");
        }
    }

    #[test]
    fn a_permanent_error_keeps_the_code_and_message_for_the_log() {
        let err = classify(400, &error("invalid-labels"));
        assert_eq!(err.to_string(), "request refused (400 invalid-labels): text");
    }

    #[test]
    fn a_lease_is_gone_on_lease_lost_an_unknown_token_or_not_found() {
        assert!(classify(409, &error("lease-lost")).means_lease_gone());
        assert!(classify(401, &error("unauthenticated")).means_lease_gone());
        assert!(classify(404, &error("not-found")).means_lease_gone());
        assert!(!classify(503, &error("unavailable")).means_lease_gone());
        assert!(!classify(400, &error("invalid-request")).means_lease_gone());
    }

    #[tokio::test]
    async fn retries_stop_at_a_permanent_error() {
        let mut calls = 0;
        let result: Result<(), _> = with_retries("test", Duration::from_secs(10), || {
            calls += 1;
            let answer = if calls < 2 { classify(503, "") } else { classify(400, "") };
            async move { Err(answer) }
        })
        .await;
        assert!(matches!(result, Err(ClientError::Permanent { status: 400, .. })));
        assert_eq!(calls, 2);
    }

    #[tokio::test]
    async fn retries_give_up_when_the_budget_is_spent() {
        let mut calls = 0;
        let result: Result<(), _> = with_retries("test", Duration::from_secs(2), || {
            calls += 1;
            async { Err(ClientError::Transient("down".into())) }
        })
        .await;
        assert!(result.is_err());
        assert!((2..6).contains(&calls), "{calls} calls");
    }
}
