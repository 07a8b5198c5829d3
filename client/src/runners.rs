//! The runner routes (api.md "Runners"), each with the token it takes: a
//! `brt_` registration token, the session's `bst_` token, a lease's `blt_`.

use std::time::Duration;

use baton_api::runners::{
    ClaimRequest, ClaimResponse, CompleteRequest, CompleteResponse, HeartbeatResponse, RegisterRequest,
    RegisterResponse, StepAnswer, StepReport,
};
use reqwest::Method;
use uuid::Uuid;

use crate::error::ClientError;
use crate::Client;

impl Client {
    /// `POST /v1/runners/register` with a `brt_` token.
    pub async fn register(
        &self,
        registration_token: &str,
        body: &RegisterRequest,
    ) -> Result<RegisterResponse, ClientError> {
        self.send_for(Method::POST, "/v1/runners/register", registration_token, Some(body)).await
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
        self.send(Method::POST, "/v1/runners/claim", session_token, Some(&body), Duration::from_secs(wait_s)).await
    }

    pub async fn heartbeat(&self, lease_token: &str, execution: Uuid) -> Result<HeartbeatResponse, ClientError> {
        let path = format!("/v1/runners/leases/{execution}/heartbeat");
        self.send_for(Method::POST, &path, lease_token, Some(&serde_json::json!({}))).await
    }

    pub async fn report_step(
        &self,
        lease_token: &str,
        execution: Uuid,
        step: Uuid,
        report: &StepReport,
    ) -> Result<StepAnswer, ClientError> {
        self.send_for(Method::POST, &format!("/v1/runners/leases/{execution}/steps/{step}"), lease_token, Some(report))
            .await
    }

    pub async fn complete(
        &self,
        lease_token: &str,
        execution: Uuid,
        body: &CompleteRequest,
    ) -> Result<CompleteResponse, ClientError> {
        self.send_for(Method::POST, &format!("/v1/runners/leases/{execution}/complete"), lease_token, Some(body)).await
    }
}
