//! A matrix decided when its job is due (behaviour.md §17, GitHub's
//! `matrix: ${{ fromJSON(needs.setup.outputs.matrix) }}`): what the
//! definition keeps of it, and its expressions worked out (an attempt
//! decides it in `attempt::runtime_matrices`).

use serde::{Deserialize, Serialize};

use super::expressions::{self, Scope, Value};

/// A matrix that reads what is known only when its job is due (GitHub's
/// `matrix: ${{ fromJSON(needs.setup.outputs.matrix) }}`, or a dimension
/// so written): the job stays one job of the definition until then, when
/// the orchestrator works the expressions out and the attempt takes its
/// legs in its place (`AttemptState::matrices` keeps what they came to, so
/// the legs are the same every time the definition is read with it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeMatrix {
    /// `strategy:` as written (JSON text, keys in the order written), its
    /// expressions as text.
    pub strategy: String,
    /// `runs-on` as written: each leg puts its values in.
    pub runs_on: Vec<String>,
    /// `timeout-minutes` written as an expression, worked out per leg.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

impl RuntimeMatrix {
    /// The texts of the strategy that hold expressions.
    pub fn expressions(&self) -> Vec<String> {
        fn walk(value: &Value, out: &mut Vec<String>) {
            match value {
                Value::String(text) if text.contains("${{") => out.push(text.clone()),
                Value::Array(items) => items.iter().for_each(|item| walk(item, out)),
                Value::Object(entries) => entries.iter().for_each(|(_, item)| walk(item, out)),
                _ => {}
            }
        }
        let mut out = Vec::new();
        walk(&Value::from_json(&self.strategy).unwrap_or(Value::Null), &mut out);
        out
    }

    /// The strategy with its expressions worked out over `scope` (JSON
    /// text): a text that is one `${{ … }}` becomes its value as it is
    /// (`fromJSON` gives a list or a mapping), one with text around it the
    /// text it makes.
    pub fn evaluate(&self, scope: &dyn Scope) -> Result<String, String> {
        fn walk(value: Value, scope: &dyn Scope) -> Result<Value, String> {
            Ok(match value {
                Value::String(text) if text.contains("${{") => {
                    let expression = expressions::as_expression(&text)?;
                    let parsed = expressions::parse(&expression).map_err(|err| format!("`{text}`: {err}"))?;
                    expressions::evaluate(&parsed, scope).map_err(|err| format!("`{text}`: {err}"))?
                }
                Value::Array(items) => {
                    Value::Array(items.into_iter().map(|i| walk(i, scope)).collect::<Result<_, _>>()?)
                }
                Value::Object(entries) => Value::Object(
                    entries.into_iter().map(|(k, v)| Ok((k, walk(v, scope)?))).collect::<Result<_, String>>()?,
                ),
                other => other,
            })
        }
        let written = Value::from_json(&self.strategy)?;
        serde_json::to_string(&walk(written, scope)?).map_err(|err| err.to_string())
    }
}
