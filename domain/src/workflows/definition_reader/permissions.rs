//! `permissions:` on a workflow or a job: GitHub's scopes of the token it
//! hands a job (`GITHUB_TOKEN`). Baton hands a job no GitHub token, so
//! there is nothing for it to limit: the field is read, checked and
//! dropped. Accepting it lets a GitHub workflow run unchanged (most carry
//! one); checking it keeps a misspelt scope from passing unnoticed.

use super::fields::{Fields, Location};
use crate::workflows::definition::DefinitionError;
use crate::workflows::yaml::YamlNode;

/// The scopes GitHub documents for `permissions:`.
const SCOPES: &[&str] = &[
    "actions",
    "attestations",
    "checks",
    "contents",
    "deployments",
    "discussions",
    "id-token",
    "issues",
    "models",
    "packages",
    "pages",
    "pull-requests",
    "repository-projects",
    "security-events",
    "statuses",
];

const WHAT: &str = "read-all, write-all, or a mapping of scopes to read, write or none";

/// Checks a `permissions:` value: `read-all`, `write-all`, `{}` or a
/// mapping of GitHub's scopes to `read`, `write` or `none`.
pub(super) fn check_permissions(node: Option<&YamlNode>, at: &Location) -> Result<(), DefinitionError> {
    let Some(node) = node else { return Ok(()) };
    if let YamlNode::Mapping(_) = node {
        let fields = Fields::read(node, SCOPES, at, WHAT)?;
        for scope in SCOPES {
            let Some(level) = fields.get(scope) else { continue };
            if !matches!(level.scalar_text().as_deref(), Some("read" | "write" | "none")) {
                return Err(at.field(scope).error(format!("expected read, write or none, found {}", level.kind())));
            }
        }
        return Ok(());
    }
    match node.scalar_text().as_deref() {
        Some("read-all" | "write-all") => Ok(()),
        _ => Err(at.expected(WHAT, node)),
    }
}

#[cfg(test)]
mod tests {
    use crate::workflows::parse_definition;

    fn with(permissions: &str) -> Result<(), String> {
        let yaml = format!(
            "name: p\npermissions: {permissions}\njobs:\n  a:\n    runs-on: linux\n    permissions: {permissions}\n    steps: [{{run: x}}]\n"
        );
        parse_definition(&yaml).map(|_| ()).map_err(|e| e.to_string())
    }

    #[test]
    fn github_permissions_are_accepted_on_a_workflow_and_a_job() {
        for fine in [
            "read-all",
            "write-all",
            "{}",
            "{contents: read}",
            "{contents: write, id-token: write, pull-requests: none}",
        ] {
            assert_eq!(with(fine), Ok(()), "{fine}");
        }
    }

    #[test]
    fn a_misspelt_scope_or_level_is_refused_naming_it() {
        let refused = with("{content: read}").expect_err("a misspelt scope");
        assert!(refused.contains("permissions.content") && refused.contains("contents"), "{refused}");
        let refused = with("{contents: admin}").expect_err("an unknown level");
        assert!(refused.contains("permissions.contents") && refused.contains("read, write or none"), "{refused}");
        assert!(with("read").expect_err("not a level of its own").contains("read-all"));
    }
}
