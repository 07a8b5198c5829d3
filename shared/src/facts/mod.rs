//! Facts: past-tense domain events, written to the outbox in the same
//! DynamoDB transaction as the state change they describe, relayed to
//! EventBridge and consumed at least once by subscribers.
//!
//! Every fact's `detail` is a [`Fact`]: a common header (`schema_version`,
//! `event_id`, `occurred_at`, `workspace_id`) flattened with the fact's own
//! fields. Each detail type has a JSON Schema under `events/schemas/`.

pub mod catalog;
pub mod relay;
pub mod schema;
pub mod subscriber;

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use catalog::*;

/// Version of every fact's schema; bumped (with a new schema) on a breaking change.
pub const SCHEMA_VERSION: u32 = 1;

/// The bounded context a fact comes from; it is also the EventBridge `source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    Workflows,
    Runners,
}

impl Context {
    pub fn source(self) -> &'static str {
        match self {
            Context::Workflows => "baton.workflows",
            Context::Runners => "baton.runners",
        }
    }
}

/// A fact's own fields, with its stable `detail-type`.
pub trait FactDetail: Serialize + DeserializeOwned + Clone + std::fmt::Debug + Send + Sync {
    /// `baton.<context>.<entity>.<fact>`.
    const DETAIL_TYPE: &'static str;
    const CONTEXT: Context;
}

/// The common header of every fact.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FactHeader {
    pub schema_version: u32,
    /// Unique, and stable across redelivery: it is the outbox item's id.
    pub event_id: Uuid,
    pub occurred_at: DateTime<Utc>,
    pub workspace_id: String,
}

/// A whole fact: header plus detail, as it travels in an EventBridge `detail`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Fact<D> {
    #[serde(flatten)]
    pub header: FactHeader,
    #[serde(flatten)]
    pub detail: D,
}

impl<D: FactDetail> Fact<D> {
    /// A new fact about `workspace_id`, with a fresh id.
    pub fn new(workspace_id: impl Into<String>, occurred_at: DateTime<Utc>, detail: D) -> Self {
        Self {
            header: FactHeader {
                schema_version: SCHEMA_VERSION,
                event_id: crate::ids::new_id(),
                occurred_at,
                workspace_id: workspace_id.into(),
            },
            detail,
        }
    }

    pub fn detail_type(&self) -> &'static str {
        D::DETAIL_TYPE
    }
}

/// The source (context) named by a detail type, if it is one of Baton's.
pub fn source_of(detail_type: &str) -> Option<&'static str> {
    match detail_type.split('.').nth(1)? {
        "workflows" => Some(Context::Workflows.source()),
        "runners" => Some(Context::Runners.source()),
        _ => None,
    }
}
