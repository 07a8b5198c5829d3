//! Where a value sits in the definition (for errors naming their job and
//! field), and a mapping's fields, checked against the ones allowed.

use crate::workflows::definition::DefinitionError;
use crate::workflows::yaml::YamlNode;

/// Where in the definition a value sits, to build precise errors.
#[derive(Debug, Clone, Default)]
pub(super) struct Location {
    job: Option<String>,
    path: Option<String>,
}

impl Location {
    pub(super) fn job(key: &str) -> Self {
        Self { job: Some(key.to_string()), path: None }
    }

    pub(super) fn field(&self, name: &str) -> Self {
        let path = match &self.path {
            Some(prefix) => format!("{prefix}.{name}"),
            None => name.to_string(),
        };
        Self { job: self.job.clone(), path: Some(path) }
    }

    pub(super) fn step(&self, position: usize) -> Self {
        Self { job: self.job.clone(), path: Some(format!("steps[{position}]")) }
    }

    /// Whether this is a job itself, not a field of one.
    fn is_job(&self) -> bool {
        self.job.is_some() && self.path.is_none()
    }

    pub(super) fn error(&self, message: impl Into<String>) -> DefinitionError {
        DefinitionError { job: self.job.clone(), field: self.path.clone(), message: message.into() }
    }

    pub(super) fn expected(&self, what: &str, found: &YamlNode) -> DefinitionError {
        self.error(format!("expected {what}, found {}", found.kind()))
    }
}

/// The entries of a mapping by key, refused if a key repeats or is not one
/// of `allowed`.
pub(super) struct Fields<'a> {
    entries: Vec<(String, &'a YamlNode)>,
}

impl<'a> Fields<'a> {
    pub(super) fn read(
        node: &'a YamlNode,
        allowed: &[&str],
        at: &Location,
        what: &str,
    ) -> Result<Self, DefinitionError> {
        let YamlNode::Mapping(mapping) = node else { return Err(at.expected(what, node)) };
        let mut entries: Vec<(String, &YamlNode)> = Vec::with_capacity(mapping.len());
        for (key, value) in mapping {
            let Some(key) = key.scalar_text() else { return Err(at.expected("text keys", key)) };
            if entries.iter().any(|(seen, _)| *seen == key) {
                return Err(at.field(&key).error("given more than once"));
            }
            if (key == "services" || key == "container") && at.is_job() {
                return Err(at.field(&key).error(format!(
                    "a job's `{key}:` runs in Docker containers, which a Baton runner does not start: run the \
                     service or tool on the runner's machine (a runner with it installed, chosen by `runs-on` or \
                     `tools`), or start it in a step"
                )));
            }
            if !allowed.contains(&key.as_str()) {
                return Err(at.field(&key).error(format!("unknown field, expected one of: {}", allowed.join(", "))));
            }
            entries.push((key, value));
        }
        Ok(Self { entries })
    }

    pub(super) fn get(&self, name: &str) -> Option<&'a YamlNode> {
        self.entries.iter().find(|(key, _)| key == name).map(|(_, value)| *value)
    }
}
