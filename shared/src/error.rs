//! Errors with stable, kebab-case codes (api.md "Errors"). A code is part of the
//! contract: clients switch on it, so codes are never renamed.

use http::StatusCode;
use serde::Serialize;

/// Every error code the API can answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorCode {
    InvalidRequest,
    InvalidLabels,
    InvalidDefinition,
    Unauthenticated,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    RegistrationTokenConsumed,
    SessionExhausted,
    LeaseLost,
    RunAlreadyFinished,
    RunNotTerminal,
    NoFailedJobs,
    Unavailable,
    Internal,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "invalid-request",
            ErrorCode::InvalidLabels => "invalid-labels",
            ErrorCode::InvalidDefinition => "invalid-definition",
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not-found",
            ErrorCode::MethodNotAllowed => "method-not-allowed",
            ErrorCode::RegistrationTokenConsumed => "registration-token-consumed",
            ErrorCode::SessionExhausted => "session-exhausted",
            ErrorCode::LeaseLost => "lease-lost",
            ErrorCode::RunAlreadyFinished => "run-already-finished",
            ErrorCode::RunNotTerminal => "run-not-terminal",
            ErrorCode::NoFailedJobs => "no-failed-jobs",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Internal => "internal",
        }
    }

    /// The HTTP status that goes with the code.
    pub fn status(self) -> StatusCode {
        match self {
            ErrorCode::InvalidRequest | ErrorCode::InvalidLabels | ErrorCode::InvalidDefinition => {
                StatusCode::BAD_REQUEST
            }
            ErrorCode::Unauthenticated => StatusCode::UNAUTHORIZED,
            ErrorCode::Forbidden => StatusCode::FORBIDDEN,
            ErrorCode::NotFound => StatusCode::NOT_FOUND,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::RegistrationTokenConsumed
            | ErrorCode::SessionExhausted
            | ErrorCode::LeaseLost
            | ErrorCode::RunAlreadyFinished
            | ErrorCode::RunNotTerminal
            | ErrorCode::NoFailedJobs => StatusCode::CONFLICT,
            ErrorCode::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// An error answered to an API client: a stable code and a human message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", code.as_str())]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }
    pub fn unauthenticated() -> Self {
        Self::new(ErrorCode::Unauthenticated, "missing or invalid bearer token")
    }
    pub fn not_found(what: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, format!("{} not found", what.into()))
    }
    pub fn internal() -> Self {
        Self::new(ErrorCode::Internal, "internal error")
    }
    pub fn status(&self) -> StatusCode {
        self.code.status()
    }
}

/// A failure of the store or another backend. Never shown to a client as is:
/// handlers log it and answer `internal`.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("dynamodb: {0}")]
    DynamoDb(String),
    #[error("a conditional write failed: {0}")]
    ConditionFailed(String),
    #[error("item is malformed: {0}")]
    Malformed(String),
    #[error("{0}")]
    Other(String),
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        tracing::error!(error = %err, "store error");
        ApiError::internal()
    }
}

impl From<serde_dynamo::Error> for StoreError {
    fn from(err: serde_dynamo::Error) -> Self {
        StoreError::Malformed(err.to_string())
    }
}
