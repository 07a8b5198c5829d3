//! Pipelines (behaviour.md §18): named workflow definitions kept in a
//! workspace, each change a new version, and the runs started from them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// `PUT /v1/workspaces/{ws}/pipelines/{name}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PutPipelineRequest {
    /// The workflow file's text (YAML), as in run creation; its `on:`
    /// says when the pipeline runs by itself.
    pub definition: String,
}

/// A pipeline as listed: what it is called, its version and when it runs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PipelineSummary {
    pub name: String,
    /// The digest of the definition's text (`sha256:` and 64 hex digits):
    /// a change is a new version, putting the same text again is not.
    pub version: String,
    pub triggers: PipelineTriggers,
    pub updated_at: DateTime<Utc>,
}

/// `GET /v1/workspaces/{ws}/pipelines/{name}`: the summary and the text.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Pipeline {
    pub name: String,
    pub version: String,
    pub definition: String,
    pub triggers: PipelineTriggers,
    pub updated_at: DateTime<Utc>,
}

/// `GET /v1/workspaces/{ws}/pipelines`, by name.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PipelineList {
    pub items: Vec<PipelineSummary>,
}

/// The pipeline's `on:`, as read: the events that start it by themselves.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PipelineTriggers {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push: Option<PushTriggerView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<PullRequestTriggerView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_request_target: Option<PullRequestTriggerView>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedule: Vec<ScheduleView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_dispatch: Option<DispatchView>,
}

/// `on.push`: each filter as written (a `-ignore` filter leaves names out).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PushTriggerView {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branches: Option<FilterView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<FilterView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths: Option<FilterView>,
}

/// `on.pull_request` (or `pull_request_target`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PullRequestTriggerView {
    /// The activity types that start it (GitHub's default: opened,
    /// synchronize, reopened).
    pub types: Vec<String>,
    /// Matched against the pull request's base branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branches: Option<FilterView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths: Option<FilterView>,
}

/// A branch, tag or path filter: its patterns, and whether they name what
/// is left out (`branches-ignore`) rather than what is taken.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FilterView {
    pub patterns: Vec<String>,
    pub ignore: bool,
}

/// One `on.schedule` entry: five fields, UTC.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ScheduleView {
    pub cron: String,
}

/// `on.workflow_dispatch`: the inputs a dispatch is typed by.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DispatchView {
    pub inputs: Vec<DispatchInputView>,
}

/// One dispatch input, as declared.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DispatchInputView {
    pub id: String,
    /// `string`, `boolean`, `number`, `choice` or `environment`.
    #[serde(rename = "type")]
    pub kind: String,
    pub required: bool,
    /// Of the input's type (a boolean, a number or text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `POST /v1/workspaces/{ws}/pipelines/{name}/runs`: a dispatch.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DispatchRequest {
    /// Typed by `on.workflow_dispatch.inputs` where the pipeline declares
    /// them (text is taken for a number or a boolean, as a form sends it).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<std::collections::HashMap<String, serde_json::Value>>))]
    pub inputs: Option<serde_json::Map<String, serde_json::Value>>,
}

/// What started a run (a run's view, `trigger`). A view from a server
/// before triggers has none: it was a run posted to the API.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunTrigger {
    pub kind: TriggerKind,
    /// The git ref the run is for (`refs/heads/main`), when known.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub git_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha: Option<String>,
    /// Who caused it: the forge's user, or the operator token's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// The forge's delivery id, for a run a webhook started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TriggerKind {
    Push,
    PullRequest,
    Schedule,
    Dispatch,
    /// A whole workflow file posted to `POST …/runs`.
    #[default]
    Api,
}

/// The pipeline version a run ran (a run's view, `pipeline`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PipelineVersion {
    pub name: String,
    pub version: String,
}
