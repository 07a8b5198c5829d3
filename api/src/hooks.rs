//! Webhooks (behaviour.md §18, api.md "Pipelines and hooks"): a
//! workspace's door for one forge, and what a delivery started.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The forge a hook receives deliveries from.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum HookProvider {
    /// `X-Hub-Signature-256`, `X-GitHub-Event`, `X-GitHub-Delivery`.
    Github,
    /// `X-Gitlab-Token`, `X-Gitlab-Event`, `X-Gitlab-Event-UUID`.
    Gitlab,
    /// `X-Baton-Signature: t=<unix s>,v1=<hex HMAC-SHA256 of "t.body">`,
    /// `X-Baton-Delivery` (docs/triggers.md).
    Generic,
}

/// `POST /v1/workspaces/{ws}/hooks`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateHookRequest {
    pub provider: HookProvider,
    /// The pipelines its deliveries may start (by name); every pipeline
    /// of the workspace when left out.
    #[serde(default)]
    pub pipelines: Option<Vec<String>>,
}

/// A new hook: the URL to give the forge and its secret, shown this once.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HookCreated {
    pub id: Uuid,
    /// The delivery URL (`…/v1/hooks/{id}`).
    pub url: String,
    /// The secret the forge signs with: never answered again.
    pub secret: String,
}

impl std::fmt::Debug for HookCreated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookCreated").field("id", &self.id).field("url", &self.url).finish_non_exhaustive()
    }
}

/// A hook as listed: never its secret.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HookSummary {
    pub id: Uuid,
    pub provider: HookProvider,
    /// `null`: every pipeline of the workspace.
    pub pipelines: Option<Vec<String>>,
    pub created_at: DateTime<Utc>,
}

/// `GET /v1/workspaces/{ws}/hooks`, oldest first.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HookList {
    pub items: Vec<HookSummary>,
}

/// `POST /v1/workspaces/{ws}/hooks/{id}/rotate`.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HookSecretRotated {
    /// The new secret, shown this once.
    pub secret: String,
    /// Until when the secret it replaces still verifies deliveries.
    pub previous_valid_until: DateTime<Utc>,
}

impl std::fmt::Debug for HookSecretRotated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookSecretRotated")
            .field("previous_valid_until", &self.previous_valid_until)
            .finish_non_exhaustive()
    }
}

/// What a delivery did (`POST /v1/hooks/{id}`, 202): the runs it started,
/// and why each other pipeline did not start (a forge shows this in its
/// delivery log). A redelivery answers the first delivery's runs.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeliveryAnswer {
    pub runs: Vec<StartedRun>,
    pub ignored: Vec<IgnoredPipeline>,
    /// For a delivery that concerns no pipeline (a ping, an event Baton
    /// does not start runs on): what it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StartedRun {
    pub pipeline: String,
    pub run_id: Uuid,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct IgnoredPipeline {
    pub pipeline: String,
    pub reason: String,
}
