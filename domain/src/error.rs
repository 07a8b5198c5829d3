//! What a client is answered when a request is refused: a stable code from
//! `baton_api::error`, with a message. The store's own failures are
//! `baton_store::StoreError`, converted into this at the edge.

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
