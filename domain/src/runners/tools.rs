//! Tool capabilities (the seed's runner tool capabilities): a runner says
//! which tools it has (`docker`, `node@20.11.1`), a job which it needs
//! (`tools: [docker, node@20]`), and both become labels in a `tool:`
//! namespace, so a claim, a provisioner's demand and the unschedulable check
//! match them exactly as they match labels, with no second mechanism.
//!
//! A runner's tool offers its name and each dotted prefix of its version
//! (`node@20.11.1` offers `tool:node`, `tool:node@20`, `tool:node@20.11`,
//! `tool:node@20.11.1`); a job's requirement is one label (`node@20` is
//! `tool:node@20`), so `node` takes any version, `node@20` any 20.x, and
//! `node@20.11.1` that one. Ranges (`>=18`) are not a thing: name the
//! major you need.

/// The namespace of tool labels.
pub const TOOL_PREFIX: &str = "tool:";
/// The most tools a runner may advertise, or a job require.
pub const MAX_TOOLS: usize = 32;
/// The most version components a runner's tool offers prefixes of.
const MAX_VERSION_PARTS: usize = 4;
/// The longest tool name or version.
const MAX_PART_LEN: usize = 64;

/// Why a tool was refused: it names the tool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    #[error(
        "tool `{0}` is invalid: a name (a letter or digit, then letters, digits, '.', '_', '+' or '-'), \
         optionally `@` and a version (e.g. `node@20`), at most 64 characters each"
    )]
    Invalid(String),
    #[error("too many tools: {0}, at most {MAX_TOOLS}")]
    TooMany(usize),
}

impl From<ToolError> for crate::error::ApiError {
    fn from(err: ToolError) -> Self {
        crate::error::ApiError::new(crate::error::ErrorCode::InvalidLabels, err.to_string())
    }
}

fn valid_part(part: &str) -> bool {
    let mut chars = part.chars();
    let Some(first) = chars.next() else { return false };
    part.len() <= MAX_PART_LEN
        && (first.is_ascii_lowercase() || first.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '+' | '-'))
}

/// `name` or `name@version`, lowercased and checked: `(name, version)`.
fn parse(raw: &str) -> Result<(String, Option<String>), ToolError> {
    let text = raw.trim().to_lowercase();
    let (name, version) = match text.split_once('@') {
        Some((name, version)) => (name.to_string(), Some(version.to_string())),
        None => (text.clone(), None),
    };
    if !valid_part(&name) || version.as_deref().is_some_and(|v| !valid_part(v)) {
        return Err(ToolError::Invalid(raw.trim().to_string()));
    }
    Ok((name, version))
}

/// Whether `label` is a tool label (`tool:name` or `tool:name@version`).
pub fn is_tool_label(label: &str) -> bool {
    label.strip_prefix(TOOL_PREFIX).is_some_and(|spec| parse(spec).is_ok())
}

/// The labels a runner advertising `tools` offers.
pub fn offered_labels(tools: &[String]) -> Result<Vec<String>, ToolError> {
    let tools: Vec<&String> = tools.iter().filter(|t| !t.trim().is_empty()).collect();
    if tools.len() > MAX_TOOLS {
        return Err(ToolError::TooMany(tools.len()));
    }
    let mut labels = Vec::new();
    for raw in tools {
        let (name, version) = parse(raw)?;
        labels.push(format!("{TOOL_PREFIX}{name}"));
        if let Some(version) = version {
            let parts: Vec<&str> = version.split('.').collect();
            for end in 1..=parts.len().min(MAX_VERSION_PARTS) {
                labels.push(format!("{TOOL_PREFIX}{name}@{}", parts[..end].join(".")));
            }
            if parts.len() > MAX_VERSION_PARTS {
                labels.push(format!("{TOOL_PREFIX}{name}@{version}"));
            }
        }
    }
    Ok(labels)
}

/// The labels a job requiring `tools` requires: one each.
pub fn required_labels(tools: &[String]) -> Result<Vec<String>, ToolError> {
    if tools.len() > MAX_TOOLS {
        return Err(ToolError::TooMany(tools.len()));
    }
    tools
        .iter()
        .map(|raw| {
            let (name, version) = parse(raw)?;
            Ok(match version {
                Some(version) => format!("{TOOL_PREFIX}{name}@{version}"),
                None => format!("{TOOL_PREFIX}{name}"),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runners::labels::{canonicalize, is_subset};

    fn strings(raw: &[&str]) -> Vec<String> {
        raw.iter().map(|s| s.to_string()).collect()
    }

    fn fits(required: &[&str], offered: &[&str]) -> bool {
        let job = canonicalize(&required_labels(&strings(required)).unwrap()).unwrap();
        let runner = canonicalize(&offered_labels(&strings(offered)).unwrap()).unwrap();
        is_subset(&job, &runner)
    }

    #[test]
    fn a_tool_without_a_version_takes_any_and_a_version_takes_its_dotted_prefixes() {
        assert!(fits(&["node"], &["node@20.11.1"]));
        assert!(fits(&["node@20"], &["node@20.11.1"]));
        assert!(fits(&["Node@20.11"], &["node@20.11.1"]));
        assert!(fits(&["node@20.11.1", "docker"], &["docker@28.2.2", "node@20.11.1"]));
        assert!(!fits(&["node@18"], &["node@20.11.1"]));
        assert!(!fits(&["node@20.1"], &["node@20.11.1"]), "a prefix ends at a dot");
        assert!(!fits(&["node@20"], &["node"]), "a runner that does not say its version offers none");
        assert!(!fits(&["docker"], &["node@20"]));
    }

    #[test]
    fn bad_tools_are_refused_and_named() {
        for bad in ["", "@20", "node@", "no de", "node@>=18", "-node", "node@20@1"] {
            let error = required_labels(&strings(&[bad])).unwrap_err();
            assert_eq!(error, ToolError::Invalid(bad.trim().to_string()), "{bad}");
        }
        let many: Vec<String> = (0..=MAX_TOOLS).map(|i| format!("t{i}")).collect();
        assert_eq!(offered_labels(&many).unwrap_err(), ToolError::TooMany(MAX_TOOLS + 1));
        assert!(is_tool_label("tool:node@20") && is_tool_label("tool:docker"));
        assert!(!is_tool_label("tool:") && !is_tool_label("node@20") && !is_tool_label("tool:a b"));
    }
}
