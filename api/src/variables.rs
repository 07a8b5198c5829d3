//! Workspace variables: GitHub's configuration variables, read by a
//! workflow as `${{ vars.NAME }}`. Not secrets: their values are answered,
//! shown and logged as a workflow's other text is (a secret goes in
//! `secrets`). A run is created with a copy of the ones it reads: setting
//! one later changes the runs created after, not a run under way.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The longest value accepted, in bytes (GitHub's limit: 48 KB).
pub const MAX_VARIABLE_BYTES: usize = 48 * 1024;

/// The longest name accepted.
pub const MAX_VARIABLE_NAME_LEN: usize = 100;

/// The most variables one workspace holds.
pub const MAX_VARIABLES: usize = 500;

/// `PUT /v1/workspaces/{ws}/variables/{name}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PutVariableRequest {
    /// Up to 48 KiB (may be empty).
    pub value: String,
}

/// One variable of a workspace.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Variable {
    /// Upper-cased, as `vars.NAME` reads it whatever its case.
    pub name: String,
    pub value: String,
    pub updated_at: DateTime<Utc>,
}

/// `GET /v1/workspaces/{ws}/variables`: sorted by name.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VariableList {
    pub items: Vec<Variable>,
}

/// A variable's name as stored, if `name` is one: a letter or `_`, then
/// letters, digits and `_`, at most 100, not starting with `GITHUB_`
/// (GitHub's rules); upper-cased, since GitHub's names are
/// case-insensitive.
pub fn variable_name(name: &str) -> Option<String> {
    let upper = name.to_ascii_uppercase();
    let valid = upper.len() <= MAX_VARIABLE_NAME_LEN
        && upper.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && upper.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !upper.starts_with("GITHUB_");
    valid.then_some(upper)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_githubs_rules_and_are_upper_cased() {
        assert_eq!(variable_name("deploy_Target").as_deref(), Some("DEPLOY_TARGET"));
        assert_eq!(variable_name("_x1").as_deref(), Some("_X1"));
        for bad in ["", "1X", "A-B", "a.b", "a/b", "github_token", &"x".repeat(101)] {
            assert_eq!(variable_name(bad), None, "{bad}");
        }
    }
}
