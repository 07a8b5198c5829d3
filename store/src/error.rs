//! What the store and the other AWS backends fail with. Never shown to a
//! client as is: converted into an `ApiError` at the edge (`internal`, or
//! `unavailable` when trying again may succeed).

use baton_domain::error::{ApiError, ErrorCode};

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
