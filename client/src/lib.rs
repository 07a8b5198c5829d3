//! The one HTTP client of Baton's API, over the very request and response
//! types the functions use (`baton_api`), so that its callers and the server
//! cannot drift apart. The runner agent, the operator CLI, both reference
//! provisioners and the bench talk to Baton through it.
//!
//! - [`Client`] (here): one API's base URL, the request timeout, and the one
//!   way a request is sent and its answer read.
//! - [`error`]: every failure classified once ([`error::ClientError`]), so
//!   that callers decide on a kind, not on status codes.
//! - [`retry`]: a request tried again on transient failures, within a budget.
//! - [`backoff`]: the jittered exponential delays between tries.
//! - [`runners`]: the runner routes (register, claim, heartbeat, step
//!   reports, complete) with the token each takes.
//! - [`objects`]: presigned URLs of the log and artifact stores.
//! - [`provisioners`]: the `bpt_` routes (demand, reservations, reports,
//!   instances) and how reports are batched.
//! - [`operators`]: the `bat_` routes the `baton` CLI uses.
//!
//! It depends on the light `baton-api` crate only: a runner install or a
//! provisioner function compiles no server code through it.

pub mod backoff;
pub mod error;
pub mod objects;
pub mod operators;
pub mod provisioners;
pub mod retry;
pub mod runners;

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{classify, classify_transport, ClientError};

/// How long a request may take by default, beyond the wait of a long poll.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// One API: its base URL, the HTTP connection pool and the time a request
/// may take (a long poll adds its wait to it).
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    timeout: Duration,
}

impl Client {
    /// A client of the API at `api` with the runner's HTTP settings (its
    /// user agent, a 10 s connect timeout) and [`REQUEST_TIMEOUT`].
    pub fn new(api: &str) -> Result<Self, ClientError> {
        let http = reqwest::Client::builder()
            .user_agent(concat!("baton-runner/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| ClientError::Permanent { status: 0, code: "client".into(), message: e.to_string() })?;
        Ok(Self::with_http(http, api))
    }

    /// A client of the API at `api` over the caller's own HTTP client (a
    /// function builds one per cold start), with [`REQUEST_TIMEOUT`].
    pub fn with_http(http: reqwest::Client, api: &str) -> Self {
        Self { http, base: api.trim_end_matches('/').to_string(), timeout: REQUEST_TIMEOUT }
    }

    /// The same client with another request timeout.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The API's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Sends one request; `Ok(None)` on 204. `long_poll` is how long the
    /// server may hold the answer back (a long poll's wait, zero for any
    /// other route): the request may take that much longer.
    pub async fn send<B: Serialize, R: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<&B>,
        long_poll: Duration,
    ) -> Result<Option<R>, ClientError> {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(token)
            .timeout(self.timeout + long_poll);
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
        self.send_waiting_for(method, path, token, body, Duration::ZERO).await
    }

    /// As [`Client::send_for`], for a long poll that waits up to `long_poll`.
    pub async fn send_waiting_for<B: Serialize, R: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<&B>,
        long_poll: Duration,
    ) -> Result<R, ClientError> {
        self.send(method, path, token, body, long_poll).await?.ok_or_else(|| ClientError::Permanent {
            status: 204,
            code: "empty-response".into(),
            message: format!("{path} answered without a body"),
        })
    }
}
