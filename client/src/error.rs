//! Every failure of a request, classified once, here, so that callers
//! decide on a kind, not on status codes: `lease-lost` stops a job without
//! a report, `session-exhausted` stops claiming, 401 re-registers (or, with
//! a `bpt_` token, means the provisioner was removed or its token revoked),
//! 5xx / 429 / network errors are retried with backoff, any other 4xx is a
//! permanent error that is logged with its code and message.

use baton_api::error::ErrorBody;

/// What went wrong with a request, in the terms a caller acts on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// 409 `lease-lost`: stop the job, do not report, claim again.
    #[error("lease lost: {0}")]
    LeaseLost(String),
    /// 409 `session-exhausted`: this session may claim no more.
    #[error("session exhausted: {0}")]
    SessionExhausted(String),
    /// 401: the token is unknown or expired (a session token: register again).
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),
    /// 5xx, 429, a timeout or a connection failure: worth retrying later.
    #[error("transient failure: {0}")]
    Transient(String),
    /// Any other answer (4xx, an unreadable body): retrying will not help.
    #[error("request refused ({status} {code}): {message}")]
    Permanent { status: u16, code: String, message: String },
}

impl ClientError {
    pub fn is_transient(&self) -> bool {
        matches!(self, ClientError::Transient(_))
    }

    /// The lease this request acted on is no longer ours: 409 `lease-lost`,
    /// or a lease token the server no longer knows (401) or places (404).
    pub fn means_lease_gone(&self) -> bool {
        match self {
            ClientError::LeaseLost(_) | ClientError::Unauthenticated(_) => true,
            ClientError::Permanent { status, .. } => *status == 404,
            _ => false,
        }
    }
}

/// Classifies a non-success answer from its status and body.
pub fn classify(status: u16, body: &str) -> ClientError {
    let (code, message) = match serde_json::from_str::<ErrorBody>(body) {
        Ok(parsed) => (parsed.error.code, parsed.error.message),
        Err(_) => (String::new(), body.chars().take(200).collect()),
    };
    match (status, code.as_str()) {
        (409, "lease-lost") => ClientError::LeaseLost(message),
        (409, "session-exhausted") => ClientError::SessionExhausted(message),
        (401, _) => ClientError::Unauthenticated(message),
        (429, _) | (500..=599, _) => ClientError::Transient(format!("HTTP {status} {code}: {message}")),
        _ => ClientError::Permanent { status, code, message },
    }
}

/// Classifies a failure to get any answer at all.
pub(crate) fn classify_transport(err: &reqwest::Error) -> ClientError {
    if err.is_builder() {
        ClientError::Permanent { status: 0, code: "invalid-request".into(), message: err.to_string() }
    } else {
        // reqwest's own text hides the cause (refused, DNS, TLS…): add the chain.
        let mut text = err.to_string();
        let mut source = std::error::Error::source(err);
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        ClientError::Transient(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(code: &str) -> String {
        serde_json::json!({"error": {"code": code, "message": "text"}}).to_string()
    }

    #[test]
    fn conflicts_are_told_apart_by_their_code() {
        assert_eq!(classify(409, &error("lease-lost")), ClientError::LeaseLost("text".into()));
        assert_eq!(classify(409, &error("session-exhausted")), ClientError::SessionExhausted("text".into()));
        assert!(matches!(
            classify(409, &error("registration-token-consumed")),
            ClientError::Permanent { status: 409, ref code, .. } if code == "registration-token-consumed"
        ));
    }

    #[test]
    fn unauthenticated_asks_for_a_new_registration() {
        assert_eq!(classify(401, &error("unauthenticated")), ClientError::Unauthenticated("text".into()));
        assert!(matches!(classify(401, ""), ClientError::Unauthenticated(_)), "even without a body");
    }

    #[test]
    fn server_errors_and_throttling_are_retried_other_client_errors_are_not() {
        for status in [500, 502, 503, 504, 429] {
            assert!(classify(status, &error("unavailable")).is_transient(), "{status}");
        }
        assert!(classify(502, "<html>bad gateway</html>").is_transient(), "a proxy's HTML page");
        for status in [400, 403, 404, 405, 413] {
            let err = classify(status, &error("invalid-request"));
            assert!(matches!(err, ClientError::Permanent { .. }), "{status}: {err:?}");
        }
    }

    #[test]
    fn a_permanent_error_keeps_the_code_and_message_for_the_log() {
        let err = classify(400, &error("invalid-labels"));
        assert_eq!(err.to_string(), "request refused (400 invalid-labels): text");
    }

    #[test]
    fn a_lease_is_gone_on_lease_lost_an_unknown_token_or_not_found() {
        assert!(classify(409, &error("lease-lost")).means_lease_gone());
        assert!(classify(401, &error("unauthenticated")).means_lease_gone());
        assert!(classify(404, &error("not-found")).means_lease_gone());
        assert!(!classify(503, &error("unavailable")).means_lease_gone());
        assert!(!classify(400, &error("invalid-request")).means_lease_gone());
    }
}
