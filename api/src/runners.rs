//! Request and response bodies of the runner API (api.md "Runners" and the
//! registration-token routes), defined once and used by the functions and by
//! clients (the runner agent), so the contract cannot drift.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::facts::{JobOutcome, JobWork, StepResult};
use crate::status::StepStatus;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateRegistrationToken {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub expires_in_s: Option<u64>,
    #[serde(default)]
    pub single_use: bool,
    #[serde(default)]
    pub max_claims: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreatedRegistrationToken {
    pub id: Uuid,
    pub token: String,
    pub expires_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegistrationTokenSummary {
    pub id: Uuid,
    pub name: Option<String>,
    pub expires_at: Option<DateTime<Utc>>,
    pub single_use: bool,
    pub max_claims: Option<u64>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegistrationTokenList {
    pub items: Vec<RegistrationTokenSummary>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegisterRequest {
    pub labels: Vec<String>,
    /// The tools this runner has, `name` or `name@version` (`docker`,
    /// `node@20.11.1`; at most 32): each becomes labels in the `tool:`
    /// namespace (`tool:node`, `tool:node@20`, …), answered among `labels`,
    /// which jobs' `tools:` match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    #[serde(default)]
    pub name: Option<String>,
    /// Chosen by the runner for one registration and sent again with each
    /// retry of it: a retry whose earlier try made the session (its answer
    /// lost) gets that same session and token, so a single-use token's
    /// retry is not refused `registration-token-consumed` and a reusable
    /// one's does not make a second session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<Uuid>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegisterResponse {
    pub session_id: Uuid,
    pub session_token: String,
    pub session_expires_at: DateTime<Utc>,
    pub workspace_id: String,
    pub labels: Vec<String>,
    pub max_claims: Option<u64>,
    pub heartbeat_interval_s: u64,
    pub poll_interval_s: u64,
    /// Where to hold a WebSocket (opened with the session token as a bearer
    /// token) over which Baton nudges the runner when work it fits becomes
    /// claimable or a lease it holds is cancelled. Absent when the
    /// deployment has no push; the runner then long-polls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_url: Option<String>,
    /// With push, how often the runner claims anyway (a nudge can be lost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safety_poll_s: Option<u64>,
}

/// What Baton sends a runner over its push socket. A nudge is a hint, never
/// a grant: the runner claims or heartbeats over HTTP, which decides.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PushMessage {
    /// Work the runner fits has become claimable.
    Work,
    /// A lease the runner holds was flagged for cancellation.
    Cancel { job_execution_id: Uuid },
}

/// What a runner sends over its push socket to keep it open (API Gateway
/// closes a socket idle for 10 minutes); routed on `action`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PushPing {
    pub action: String,
}

impl Default for PushPing {
    fn default() -> Self {
        Self { action: PUSH_PING_ACTION.to_string() }
    }
}

/// The route key of the keep-alive message.
pub const PUSH_PING_ACTION: &str = "ping";

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClaimRequest {
    #[serde(default)]
    pub wait_s: Option<u64>,
    /// Chosen by the runner for one claim and sent again with each retry of
    /// it: if an earlier try was applied but its answer was lost, the retry
    /// is answered with the same job under the same lease token, instead of
    /// leaving that job leased to nobody.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<Uuid>,
    /// This try repeats an earlier one of the same `request_id` whose
    /// answer never arrived (that try may still be running). An empty
    /// answer to a retry is final for the claim: the earlier try can no
    /// longer take a job for it afterwards.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retry: bool,
}

/// The longest long poll a claim may ask for.
pub const MAX_CLAIM_WAIT_S: u64 = 20;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LeaseGrant {
    pub token: String,
    pub epoch: u64,
    pub expires_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClaimedJob {
    /// The job's spec, its timeout what is left of it after the wait.
    #[serde(flatten)]
    pub work: JobWork,
    /// The workspace secrets this claim put in (`${{ secrets.NAME }}`):
    /// masked like `mask_env`'s. In this answer only, never stored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_values: Vec<String>,
    /// Secrets the job names that its workspace does not have: the runner
    /// fails the job at once, saying which.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_secrets: Vec<String>,
}

impl ClaimedJob {
    /// The values to mask: those of the `mask_env` variables, wherever set,
    /// and the secrets the claim put in.
    pub fn masks(&self) -> Vec<String> {
        let work = &self.work;
        let envs = std::iter::once(&work.env).chain(work.steps.iter().map(|s| &s.env));
        let mut values: Vec<String> = envs
            .flat_map(|env| work.mask_env.iter().filter_map(move |name| env.get(name)))
            .chain(self.secret_values.iter())
            .filter(|v| !v.trim().is_empty())
            .cloned()
            .collect();
        values.sort();
        values.dedup();
        values
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClaimResponse {
    pub job_execution_id: Uuid,
    pub job_id: Uuid,
    pub run_id: Uuid,
    pub attempt: u32,
    pub workspace_id: String,
    /// When the orchestrator queued the job (how long it waited for a runner).
    pub queued_at: DateTime<Utc>,
    pub lease: LeaseGrant,
    pub job: ClaimedJob,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HeartbeatResponse {
    pub cancel: bool,
    pub expires_at: DateTime<Utc>,
    pub heartbeat_interval_s: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StepReport {
    pub status: StepStatus,
    /// A `failed` step whose `continue-on-error` let the job go on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub soft_failed: bool,
    #[serde(default)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub finished_at: Option<DateTime<Utc>>,
    /// The job's outputs, on the report of its last step: that report
    /// settles the job (behaviour.md §16), so they ride with it. At most
    /// `MAX_OUTPUTS_BYTES` as JSON text; ignored on any other report.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub outputs: BTreeMap<String, serde_json::Value>,
    /// The runner's word that this is the job's last step: only such a
    /// report may settle the job, so every other report is one conditional
    /// write with no read. The server checks it against the job (a report
    /// that says so wrongly is recorded like any other).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub last: bool,
}

/// The step route's answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StepAnswer {
    /// The job is cancelled: stop it.
    pub cancel: bool,
    /// The report made every step of the job terminal, and the job
    /// finished with this outcome in the same write: the lease has ended,
    /// and no complete is needed (one that follows answers this outcome).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled: Option<JobOutcome>,
}

/// A complete's `outputs`, as JSON text (they travel in the completed fact).
pub const MAX_OUTPUTS_BYTES: usize = 32 * 1024;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CompleteRequest {
    pub status: JobOutcome,
    #[serde(default)]
    pub steps: Vec<StepResult>,
    #[serde(default)]
    pub outputs: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CompleteResponse {
    pub status: JobOutcome,
}
