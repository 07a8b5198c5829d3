//! Error codes (api.md "Errors"): stable and kebab-case. A code is part of
//! the contract: clients switch on it, so codes are never renamed.

use serde::{Deserialize, Serialize};

/// Every error code the API can answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum ErrorCode {
    InvalidRequest,
    InvalidLabels,
    InvalidDefinition,
    /// A dispatch's inputs do not fit the pipeline's
    /// `on.workflow_dispatch.inputs` (the message names the input).
    InvalidInputs,
    Unauthenticated,
    /// A webhook delivery whose signature does not hold (or is missing).
    BadSignature,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    RegistrationTokenConsumed,
    SessionExhausted,
    LeaseLost,
    RunAlreadyFinished,
    RunNotTerminal,
    NoFailedJobs,
    TooManyLabelSets,
    /// The run's creator may not approve its own run's approval jobs.
    SelfApproval,
    /// The job is not an approval waiting for decisions.
    NotWaiting,
    /// The job is not a listening job, or does not listen yet.
    NotListening,
    /// Too many events wait for a listening job, or it took its most.
    TooManyEvents,
    /// An artifact would pass the job's or the run's cap.
    ArtifactCap,
    /// Another job of the run stored an artifact of that name, or this
    /// execution stored a different one under it.
    ArtifactExists,
    /// An `idempotency_key` already made something this request does not
    /// match (other settings, or a provisioner since removed).
    IdempotencyConflict,
    /// A webhook delivery's body over the most Baton reads.
    PayloadTooLarge,
    Unavailable,
    Internal,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "invalid-request",
            ErrorCode::InvalidLabels => "invalid-labels",
            ErrorCode::InvalidDefinition => "invalid-definition",
            ErrorCode::InvalidInputs => "invalid-inputs",
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::BadSignature => "bad-signature",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not-found",
            ErrorCode::MethodNotAllowed => "method-not-allowed",
            ErrorCode::RegistrationTokenConsumed => "registration-token-consumed",
            ErrorCode::SessionExhausted => "session-exhausted",
            ErrorCode::LeaseLost => "lease-lost",
            ErrorCode::RunAlreadyFinished => "run-already-finished",
            ErrorCode::RunNotTerminal => "run-not-terminal",
            ErrorCode::NoFailedJobs => "no-failed-jobs",
            ErrorCode::TooManyLabelSets => "too-many-label-sets",
            ErrorCode::SelfApproval => "self-approval",
            ErrorCode::NotWaiting => "not-waiting",
            ErrorCode::NotListening => "not-listening",
            ErrorCode::TooManyEvents => "too-many-events",
            ErrorCode::ArtifactCap => "artifact-cap",
            ErrorCode::ArtifactExists => "artifact-exists",
            ErrorCode::IdempotencyConflict => "idempotency-conflict",
            ErrorCode::PayloadTooLarge => "payload-too-large",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Internal => "internal",
        }
    }

    /// The HTTP status that goes with the code.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::InvalidRequest
            | ErrorCode::InvalidLabels
            | ErrorCode::InvalidDefinition
            | ErrorCode::InvalidInputs => 400,
            ErrorCode::Unauthenticated | ErrorCode::BadSignature => 401,
            ErrorCode::Forbidden | ErrorCode::SelfApproval => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::RegistrationTokenConsumed
            | ErrorCode::SessionExhausted
            | ErrorCode::LeaseLost
            | ErrorCode::RunAlreadyFinished
            | ErrorCode::RunNotTerminal
            | ErrorCode::NoFailedJobs
            | ErrorCode::TooManyLabelSets
            | ErrorCode::NotWaiting
            | ErrorCode::NotListening
            | ErrorCode::TooManyEvents
            | ErrorCode::ArtifactExists
            | ErrorCode::IdempotencyConflict => 409,
            ErrorCode::ArtifactCap | ErrorCode::PayloadTooLarge => 413,
            ErrorCode::Unavailable => 503,
            ErrorCode::Internal => 500,
        }
    }
}

/// The error document: `{"error": {"code", "message"}}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorDetail {
    /// One of the stable codes; clients switch on it.
    #[cfg_attr(feature = "openapi", schema(value_type = ErrorCode))]
    pub code: String,
    pub message: String,
}
