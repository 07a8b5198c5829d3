//! The `vars` context: workspace variables as a run was created with them
//! (`RunState::vars`), read by the scopes of create time and queue time
//! alike.

/// Variable `name`'s value (upper-cased name) in `vars`; an unset one is
/// empty, as GitHub's `vars` context gives it.
pub fn value(vars: Option<&serde_json::Map<String, serde_json::Value>>, name: &str) -> String {
    match vars.and_then(|vars| vars.get(name)) {
        Some(serde_json::Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}
