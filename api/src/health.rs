//! The answer of `GET /v1/health`: each backend's reachability.

use serde::{Deserialize, Serialize};

/// `status` is `ok` when every check is; otherwise `degraded`, and the route
/// answers 503 with the same document, the failing check naming its error.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Health {
    pub status: String,
    pub version: String,
    pub checks: Checks,
}

/// `ok`, or `error: <why>`, for each backend.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Checks {
    pub dynamodb: String,
    pub sqs: String,
    pub eventbridge: String,
    pub stepfunctions: String,
}

impl Health {
    pub fn is_ok(&self) -> bool {
        self.status == "ok"
    }
}
