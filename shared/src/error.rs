//! Errors: what a client is answered (a stable code from
//! `baton_api::error`, with a message) and what the store and other backends
//! fail with.

pub use baton_api::error::{ErrorBody, ErrorCode, ErrorDetail};
use http::StatusCode;

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
        StatusCode::from_u16(self.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

/// A failure of the store or another backend. Never shown to a client as is:
/// handlers log it and answer `internal`.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("dynamodb: {0}")]
    DynamoDb(String),
    /// DynamoDB throttled the request (`ProvisionedThroughputExceeded`,
    /// `ThrottlingException`, `RequestLimitExceeded`): retry later.
    #[error("dynamodb throttled the request: {0}")]
    Throttled(String),
    /// A transaction was cancelled because another one held an item
    /// (`TransactionConflict`): a lost race, retry after reading again.
    #[error("transaction conflict: {0}")]
    TransactionConflict(String),
    /// DynamoDB failed on its side (a 5xx) even after the SDK's retries.
    /// The request may have been applied, so it is not sent again here; the
    /// caller is told to retry later (a client with its idempotency key).
    #[error("dynamodb is unavailable: {0}")]
    Unavailable(String),
    /// A read-decide-write use case kept losing races and gave up.
    #[error("too contended: {0}")]
    Contended(String),
    #[error("a conditional write failed: {0}")]
    ConditionFailed(String),
    #[error("item is malformed: {0}")]
    Malformed(String),
    #[error("{0}")]
    Other(String),
}

impl StoreError {
    /// Whether trying again later may succeed (throttling, a transaction
    /// conflict, lost races): the client is told 503, a message is redelivered.
    pub fn is_retriable(&self) -> bool {
        self.is_conflict_or_throttling() || matches!(self, StoreError::Contended(_) | StoreError::Unavailable(_))
    }

    /// A request that applied nothing because another transaction held an
    /// item or DynamoDB throttled it: sending it again is safe.
    pub fn is_conflict_or_throttling(&self) -> bool {
        matches!(self, StoreError::Throttled(_) | StoreError::TransactionConflict(_))
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        if err.is_retriable() {
            tracing::warn!(error = %err, "store busy");
            return ApiError::new(ErrorCode::Unavailable, "the service is busy, try again");
        }
        tracing::error!(error = %err, "store error");
        ApiError::internal()
    }
}

impl From<serde_dynamo::Error> for StoreError {
    fn from(err: serde_dynamo::Error) -> Self {
        StoreError::Malformed(err.to_string())
    }
}
