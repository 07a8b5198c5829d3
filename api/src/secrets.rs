//! Workspace secrets (behaviour.md §17): values written through the API and
//! read only by the claim of a job that names them (`${{ secrets.NAME }}`);
//! no route ever answers a value.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The longest value accepted, in bytes (SSM Parameter Store's standard
/// tier holds 4 KB).
pub const MAX_SECRET_BYTES: usize = 4096;

/// The longest name accepted.
pub const MAX_SECRET_NAME_LEN: usize = 128;

/// `PUT /v1/workspaces/{ws}/secrets/{name}`.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PutSecretRequest {
    /// 1 to 4,096 bytes. Stored encrypted; never answered by any route.
    pub value: String,
}

impl std::fmt::Debug for PutSecretRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PutSecretRequest").finish_non_exhaustive()
    }
}

/// One secret of a workspace: its name and when it was last set.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SecretSummary {
    pub name: String,
    pub updated_at: Option<DateTime<Utc>>,
}

/// `GET /v1/workspaces/{ws}/secrets`: names only, sorted.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SecretList {
    pub items: Vec<SecretSummary>,
}

/// A secret name: a letter or `_`, then letters, digits and `_`, at most
/// 128 (what an env variable and `${{ secrets.NAME }}` can both spell).
pub fn valid_secret_name(name: &str) -> bool {
    name.len() <= MAX_SECRET_NAME_LEN
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_env_like_and_a_value_is_never_printed() {
        assert!(valid_secret_name("DEPLOY_TOKEN") && valid_secret_name("_x1"));
        for bad in ["", "1X", "A-B", "a.b", "a/b", &"x".repeat(129)] {
            assert!(!valid_secret_name(bad), "{bad}");
        }
        let request = PutSecretRequest { value: "hunter2".into() };
        assert!(!format!("{request:?}").contains("hunter2"));
    }
}
