//! An action's `action.yml` (or `action.yaml`): its inputs, outputs and
//! how it runs, as GitHub's runner reads them.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_norway::Value;

#[derive(Debug, Deserialize)]
pub struct Manifest {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub inputs: BTreeMap<String, InputSpec>,
    #[serde(default)]
    pub outputs: BTreeMap<String, OutputSpec>,
    pub runs: Runs,
}

#[derive(Debug, Default, Deserialize)]
pub struct InputSpec {
    #[serde(default)]
    pub default: Option<Value>,
    #[serde(default)]
    pub required: Option<Value>,
}

impl InputSpec {
    /// `required: true` (a boolean, or the text `true`).
    pub fn is_required(&self) -> bool {
        match &self.required {
            Some(Value::Bool(required)) => *required,
            Some(Value::String(text)) => text.trim().eq_ignore_ascii_case("true"),
            _ => false,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
pub struct OutputSpec {
    /// A composite action's `value:` (a JavaScript action sets its own).
    #[serde(default)]
    pub value: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct Runs {
    pub using: String,
    #[serde(default)]
    pub main: Option<String>,
    #[serde(default)]
    pub pre: Option<String>,
    #[serde(default)]
    pub post: Option<String>,
    #[serde(default)]
    pub steps: Vec<CompositeStep>,
}

/// One step of a composite action.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct CompositeStep {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default, rename = "if")]
    pub when: Option<Value>,
    #[serde(default)]
    pub run: Option<String>,
    #[serde(default)]
    pub shell: Option<String>,
    #[serde(default)]
    pub uses: Option<String>,
    #[serde(default)]
    pub with: BTreeMap<String, Value>,
    #[serde(default)]
    pub env: BTreeMap<String, Value>,
    #[serde(default)]
    pub working_directory: Option<String>,
    #[serde(default)]
    pub continue_on_error: Option<Value>,
}

/// How an action runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Node,
    Composite,
    Docker,
}

impl Manifest {
    /// Reads `action.yml`, else `action.yaml`, in `dir`.
    pub fn read(dir: &Path) -> Result<Self, String> {
        let (path, text) = ["action.yml", "action.yaml"]
            .iter()
            .map(|name| dir.join(name))
            .find_map(|path| std::fs::read_to_string(&path).ok().map(|text| (path, text)))
            .ok_or_else(|| format!("{}: no action.yml or action.yaml there", dir.display()))?;
        serde_norway::from_str(&text).map_err(|err| format!("{}: {err}", path.display()))
    }

    pub fn kind(&self) -> Result<Kind, String> {
        match self.runs.using.trim().to_ascii_lowercase().as_str() {
            "node12" | "node16" | "node20" | "node24" => Ok(Kind::Node),
            "composite" => Ok(Kind::Composite),
            "docker" => Ok(Kind::Docker),
            other => Err(format!("`runs.using: {other}` is not a kind of action a Baton runner runs")),
        }
    }
}

/// A YAML scalar as the text GitHub would hand on (`true`, `3`, `1.5`).
pub fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::Null => Some(String::new()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_and_a_composite_manifest_read() {
        let node: Manifest = serde_norway::from_str(
            "name: x\ninputs:\n  who: {default: world}\n  token: {required: true}\n  n: {default: 3}\nruns:\n  using: node20\n  main: dist/index.js\n  post: dist/post.js\n",
        )
        .unwrap();
        assert_eq!(node.kind().unwrap(), Kind::Node);
        assert!(node.inputs["token"].is_required() && !node.inputs["who"].is_required());
        assert_eq!(node.inputs["n"].default.as_ref().and_then(scalar_text).as_deref(), Some("3"));
        let composite: Manifest = serde_norway::from_str(
            "runs:\n  using: composite\n  steps:\n    - run: echo hi\n      shell: bash\n      working-directory: sub\n    - uses: ./other\n      with: {a: 1}\n",
        )
        .unwrap();
        assert_eq!(composite.kind().unwrap(), Kind::Composite);
        assert_eq!(composite.runs.steps[0].working_directory.as_deref(), Some("sub"));
        let docker: Manifest = serde_norway::from_str("runs: {using: docker, image: Dockerfile}").unwrap();
        assert_eq!(docker.kind().unwrap(), Kind::Docker);
    }
}
