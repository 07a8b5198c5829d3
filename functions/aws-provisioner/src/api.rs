//! The provisioner routes of the API (api.md "Provisioners") as this
//! function calls them, with its `bpt_` token: it is a provisioner like any
//! other, so it uses the public contract (`baton_api::provisioners`) and
//! needs no access to Baton's table. (The runner crate has a client of the
//! same routes; depending on it would bring the runner's process code into
//! a Lambda function.)

use std::time::Duration;

use baton_api::provisioners::{
    Demand, InstanceEvent, InstanceList, InstanceReport, InstanceReportAnswer, ReserveRequest, Reserved,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

const TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 401: the provisioner was removed or its token revoked.
    #[error("the API refused the provisioner token (removed or revoked?): {0}")]
    Unauthenticated(String),
    /// 5xx, 429, a timeout, no connection: the next tick tries again.
    #[error("transient API failure: {0}")]
    Transient(String),
    /// Any other refusal: sending it again would be refused again.
    #[error("the API refused the request ({status}): {body}")]
    Refused { status: u16, body: String },
}

#[derive(Debug, Clone)]
pub struct ProvisionerApi {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl ProvisionerApi {
    pub fn new(http: reqwest::Client, base: &str, token: String) -> Self {
        Self { http, base: base.trim_end_matches('/').to_string(), token }
    }

    /// `GET /v1/provisioners/demand` without waiting: a tick reads what is
    /// needed now (a long poll would bill the function for the wait).
    pub async fn demand(&self) -> Result<Demand, ApiError> {
        self.send::<(), _>(reqwest::Method::GET, "/v1/provisioners/demand?wait_s=0", None).await
    }

    pub async fn reserve(&self, body: &ReserveRequest) -> Result<Reserved, ApiError> {
        self.send(reqwest::Method::POST, "/v1/provisioners/reservations", Some(body)).await
    }

    /// At most `MAX_INSTANCE_EVENTS` events (the caller batches).
    pub async fn report(&self, events: &[InstanceEvent]) -> Result<InstanceReportAnswer, ApiError> {
        let body = InstanceReport { events: events.to_vec() };
        self.send(reqwest::Method::POST, "/v1/provisioners/instances", Some(&body)).await
    }

    /// Every instance Baton knows of this provisioner, with its terminate
    /// intent: the same intents `?intent=terminate` lists, and the states
    /// Baton already holds, so that only news is reported.
    pub async fn instances(&self) -> Result<InstanceList, ApiError> {
        let mut all = InstanceList { items: Vec::new(), next_cursor: None };
        let mut path = "/v1/provisioners/instances".to_string();
        loop {
            let page: InstanceList = self.send::<(), _>(reqwest::Method::GET, &path, None).await?;
            all.items.extend(page.items);
            match page.next_cursor {
                // Ids are printable; the cursor is sent as a query value.
                Some(next) => {
                    let query: String = form_urlencoded::byte_serialize(next.as_bytes()).collect();
                    path = format!("/v1/provisioners/instances?cursor={query}");
                }
                None => return Ok(all),
            }
        }
    }

    async fn send<B: Serialize, T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<T, ApiError> {
        let mut request = self.http.request(method, format!("{}{path}", self.base)).bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response =
            request.timeout(TIMEOUT).send().await.map_err(|e| ApiError::Transient(format!("{path}: {e}")))?;
        let status = response.status().as_u16();
        let text = response.text().await.map_err(|e| ApiError::Transient(format!("{path}: {e}")))?;
        match status {
            200..=299 => serde_json::from_str(&text)
                .map_err(|e| ApiError::Refused { status, body: format!("{path}: unreadable answer: {e}") }),
            401 => Err(ApiError::Unauthenticated(text.chars().take(200).collect())),
            429 | 500..=599 => Err(ApiError::Transient(format!("{path}: HTTP {status}"))),
            _ => Err(ApiError::Refused { status, body: text.chars().take(500).collect() }),
        }
    }
}
