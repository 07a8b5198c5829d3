//! The values many fields share the form of: text, lists of text, env
//! mappings, timeouts, `continue-on-error`, output names.

use std::collections::BTreeMap;

use super::fields::Location;
use crate::workflows::definition::{DefinitionError, MAX_OUTPUT_NAME_LEN, MAX_TIMEOUT_MINUTES};
use crate::workflows::yaml::YamlNode;

/// `env`: a mapping of names to scalars (numbers and booleans are turned
/// into their text, null into the empty string, as a shell would see them).
pub(super) fn read_env(node: Option<&YamlNode>, at: &Location) -> Result<BTreeMap<String, String>, DefinitionError> {
    let Some(node) = node else { return Ok(BTreeMap::new()) };
    let YamlNode::Mapping(entries) = node else {
        return if *node == YamlNode::Null { Ok(BTreeMap::new()) } else { Err(at.expected("a mapping", node)) };
    };
    let mut env = BTreeMap::new();
    for (name, value) in entries {
        let Some(name) = name.scalar_text() else { return Err(at.expected("variable names as text", name)) };
        if name.is_empty() || name.contains(['=', '\0']) {
            return Err(at.error(format!("invalid variable name `{name}`: not empty, no '=' and no NUL")));
        }
        let value = match value {
            YamlNode::Null => String::new(),
            scalar => scalar.scalar_text().ok_or_else(|| at.field(&name).expected("a string", scalar))?,
        };
        if env.insert(name.clone(), value).is_some() {
            return Err(at.error(format!("variable `{name}` is given more than once")));
        }
    }
    Ok(env)
}

/// A list of variable names (`mask-env`).
pub(super) fn read_names(node: Option<&YamlNode>, at: &Location) -> Result<Vec<String>, DefinitionError> {
    let Some(node) = node else { return Ok(Vec::new()) };
    let mut names = read_text_list(node, at, "a list of variable names")?;
    names.sort();
    names.dedup();
    Ok(names)
}

/// `timeout-minutes`: a whole number of minutes, 1 to 30 days.
pub(super) fn read_timeout(node: Option<&YamlNode>, at: &Location) -> Result<Option<u32>, DefinitionError> {
    let Some(node) = node else { return Ok(None) };
    match node {
        YamlNode::Integer(minutes) if (1..=i128::from(MAX_TIMEOUT_MINUTES)).contains(minutes) => {
            Ok(u32::try_from(*minutes).ok())
        }
        _ if is_expression(node) => Err(at.error(format!(
            "an expression is not supported here yet: a whole number of minutes from 1 to {MAX_TIMEOUT_MINUTES}"
        ))),
        _ => Err(at.error(format!("must be a whole number of minutes from 1 to {MAX_TIMEOUT_MINUTES}"))),
    }
}

/// Whether a value is a `${{ … }}` expression, for the fields that do not
/// take one yet: the refusal says so rather than naming the value's type.
pub(super) fn is_expression(node: &YamlNode) -> bool {
    matches!(node, YamlNode::String(text) if text.contains("${{"))
}

/// A display name: any scalar as text; null means none.
pub(super) fn read_text(node: &YamlNode, at: &Location) -> Result<Option<String>, DefinitionError> {
    match node {
        YamlNode::Null => Ok(None),
        scalar => scalar.scalar_text().map(Some).ok_or_else(|| at.expected("a string", scalar)),
    }
}

/// A string, or a list of strings.
pub(super) fn read_text_list(node: &YamlNode, at: &Location, what: &str) -> Result<Vec<String>, DefinitionError> {
    match node {
        YamlNode::String(single) => Ok(vec![single.clone()]),
        YamlNode::Sequence(items) => items
            .iter()
            .map(|item| match item {
                YamlNode::String(text) => Ok(text.clone()),
                other => Err(at.expected(what, other)),
            })
            .collect(),
        other => Err(at.expected(what, other)),
    }
}

/// `continue-on-error`: `true` or `false`, or one `${{ … }}` decided when
/// the job is queued (it holds when it comes to `true`, so
/// `${{ inputs.experimental }}` given `'false'` does not). `false` is the
/// same as leaving it out.
pub(super) fn read_continue_on_error(
    node: Option<&YamlNode>,
    at: &Location,
) -> Result<Option<String>, DefinitionError> {
    const EXPECTED: &str = "true, false or one expression `${{ … }}`";
    match node {
        None | Some(YamlNode::Bool(false)) => Ok(None),
        Some(YamlNode::Bool(true)) => Ok(Some("true".into())),
        Some(YamlNode::String(text)) => {
            let text = text.trim();
            let single = text.starts_with("${{") && text.ends_with("}}") && text.matches("${{").count() == 1;
            match text {
                "true" => Ok(Some("true".into())),
                "false" => Ok(None),
                _ if single => Ok(Some(text.to_string())),
                _ => Err(at.error(format!("expected {EXPECTED}, found `{text}`"))),
            }
        }
        Some(other) => Err(at.expected(EXPECTED, other)),
    }
}

/// Checks an output's name (an approval's inputs are its outputs: the same
/// rule).
pub(super) fn check_output_name(name: &str, at: &Location) -> Result<(), DefinitionError> {
    let valid = !name.is_empty()
        && name.len() <= MAX_OUTPUT_NAME_LEN
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if valid {
        Ok(())
    } else {
        Err(at
            .error(format!("invalid output name `{name}`: 1 to {MAX_OUTPUT_NAME_LEN} of letters, digits, '_' and '-'")))
    }
}
