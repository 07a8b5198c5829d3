//! The jobs that wait instead of running at once: `approval:` (for people)
//! and `listen:` (for events).

use std::collections::BTreeMap;

use super::fields::{Fields, Location};
use super::values::{check_output_name, read_text, read_text_list, read_timeout};
use crate::workflows::approval::{self, ApprovalInput, ApprovalInputKind, ApprovalSpec, OnTimeout};
use crate::workflows::definition::DefinitionError;
use crate::workflows::expressions;
use crate::workflows::listening::{self, ListenSpec};
use crate::workflows::yaml::YamlNode;

const LISTEN_FIELDS: &[&str] = &["events", "timeout-minutes", "if"];
const APPROVAL_FIELDS: &[&str] = &["required", "from", "inputs", "timeout-minutes", "on-timeout"];
const APPROVAL_INPUT_FIELDS: &[&str] = &["type", "options", "required", "default", "description"];

/// `listen:` (behaviour.md §16): the event names it takes (1 to 20) and
/// how long it listens (`timeout-minutes`, default a day).
pub(super) fn read_listen(node: &YamlNode, at: &Location) -> Result<ListenSpec, DefinitionError> {
    let fields = Fields::read(node, LISTEN_FIELDS, at, "a mapping with `events`")?;
    let Some(events) = fields.get("events") else {
        return Err(at.field("events").error("required: the names of the events it listens for"));
    };
    let mut events = read_text_list(events, &at.field("events"), "an event name or a list of them")?;
    events.sort();
    events.dedup();
    let valid = |name: &String| {
        !name.is_empty()
            && name.len() <= listening::MAX_EVENT_NAME_LEN
            && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    };
    if events.is_empty() || events.len() > listening::MAX_EVENT_NAMES || !events.iter().all(valid) {
        return Err(at.field("events").error(format!(
            "1 to {} names of 1 to {} letters, digits, '_', '-' and '.'",
            listening::MAX_EVENT_NAMES,
            listening::MAX_EVENT_NAME_LEN
        )));
    }
    let timeout_minutes = read_timeout(fields.get("timeout-minutes"), &at.field("timeout-minutes"))?
        .unwrap_or(listening::DEFAULT_LISTEN_TIMEOUT_MINUTES);
    let when = match fields.get("if") {
        None => None,
        Some(node) => {
            let text = read_text(node, &at.field("if"))?.unwrap_or_default();
            let text = text.trim();
            // As a job's `if:`: with or without `${{ }}` around it.
            let text = text.strip_prefix("${{").and_then(|t| t.strip_suffix("}}")).unwrap_or(text).trim();
            if text.is_empty() {
                return Err(at.field("if").error("must not be empty"));
            }
            expressions::parse(text).map_err(|e| at.field("if").error(e))?;
            Some(text.to_string())
        }
    };
    Ok(ListenSpec { events, timeout_minutes, when })
}

/// `approval:` (behaviour.md §16): `required` approvals (default 1) from
/// `from` (token names or groups; any operator when absent), typed
/// `inputs`, `timeout-minutes` (default a day) and `on-timeout`
/// (`fail`, the default, `approve` or `skip`).
pub(super) fn read_approval(node: &YamlNode, at: &Location) -> Result<ApprovalSpec, DefinitionError> {
    let fields = Fields::read(node, APPROVAL_FIELDS, at, "a mapping with `required`, `from`, `inputs`, …")?;
    let required = match fields.get("required") {
        None => 1,
        Some(YamlNode::Integer(n)) if (1..=i128::from(approval::MAX_REQUIRED)).contains(n) => *n as u32,
        Some(_) => {
            return Err(at
                .field("required")
                .error(format!("must be a whole number from 1 to {}", approval::MAX_REQUIRED)))
        }
    };
    let mut from = match fields.get("from") {
        None => Vec::new(),
        Some(node) => read_text_list(node, &at.field("from"), "a token name or group, or a list of them")?,
    };
    from.sort();
    from.dedup();
    if from.len() > approval::MAX_APPROVERS || from.iter().any(|who| who.trim().is_empty()) {
        return Err(at
            .field("from")
            .error(format!("1 to {} non-empty token names or groups", approval::MAX_APPROVERS)));
    }
    let mut inputs = BTreeMap::new();
    if let Some(node) = fields.get("inputs") {
        let inputs_at = at.field("inputs");
        let YamlNode::Mapping(entries) = node else { return Err(inputs_at.expected("a mapping of input names", node)) };
        if entries.len() > approval::MAX_INPUTS {
            return Err(inputs_at.error(format!("at most {} inputs", approval::MAX_INPUTS)));
        }
        for (name, body) in entries {
            let Some(name) = name.scalar_text() else { return Err(inputs_at.expected("input names as text", name)) };
            check_output_name(&name, &inputs_at)?;
            let input = read_approval_input(body, &inputs_at.field(&name))?;
            if inputs.insert(name.clone(), input).is_some() {
                return Err(inputs_at.field(&name).error("given more than once"));
            }
        }
    }
    let timeout_minutes = read_timeout(fields.get("timeout-minutes"), &at.field("timeout-minutes"))?
        .unwrap_or(approval::DEFAULT_APPROVAL_TIMEOUT_MINUTES);
    let on_timeout = match fields.get("on-timeout") {
        None => OnTimeout::Fail,
        Some(YamlNode::String(text)) if text == "fail" => OnTimeout::Fail,
        Some(YamlNode::String(text)) if text == "approve" => OnTimeout::Approve,
        Some(YamlNode::String(text)) if text == "skip" => OnTimeout::Skip,
        Some(_) => return Err(at.field("on-timeout").error("must be `fail`, `approve` or `skip`")),
    };
    Ok(ApprovalSpec { required, from, inputs, timeout_minutes, on_timeout })
}

fn read_approval_input(node: &YamlNode, at: &Location) -> Result<ApprovalInput, DefinitionError> {
    let fields = Fields::read(node, APPROVAL_INPUT_FIELDS, at, "a mapping with `type`")?;
    let kind = match fields.get("type") {
        Some(YamlNode::String(text)) if text == "string" => ApprovalInputKind::String,
        Some(YamlNode::String(text)) if text == "boolean" => ApprovalInputKind::Boolean,
        Some(YamlNode::String(text)) if text == "choice" => ApprovalInputKind::Choice,
        _ => return Err(at.field("type").error("required: `string`, `boolean` or `choice`")),
    };
    let options = match fields.get("options") {
        None => Vec::new(),
        Some(node) => read_text_list(node, &at.field("options"), "a list of options")?,
    };
    match kind {
        ApprovalInputKind::Choice if options.is_empty() || options.len() > approval::MAX_INPUTS * 5 => {
            return Err(at.field("options").error("a choice needs 1 to 100 options"))
        }
        ApprovalInputKind::String | ApprovalInputKind::Boolean if !options.is_empty() => {
            return Err(at.field("options").error("only a `choice` has options"))
        }
        _ => {}
    }
    let required = match fields.get("required") {
        None => false,
        Some(YamlNode::Bool(b)) => *b,
        Some(_) => return Err(at.field("required").error("must be true or false")),
    };
    let default = match (kind, fields.get("default")) {
        (_, None | Some(YamlNode::Null)) => None,
        (ApprovalInputKind::Boolean, Some(YamlNode::Bool(b))) => Some(serde_json::Value::Bool(*b)),
        (ApprovalInputKind::String, Some(node)) if node.scalar_text().is_some() => {
            node.scalar_text().map(serde_json::Value::String)
        }
        (ApprovalInputKind::Choice, Some(YamlNode::String(text))) if options.contains(text) => {
            Some(serde_json::Value::String(text.clone()))
        }
        (_, Some(_)) => {
            return Err(at.field("default").error("must be a value of the input's type (a choice: one of its options)"))
        }
    };
    let description =
        fields.get("description").map(|node| read_text(node, &at.field("description"))).transpose()?.flatten();
    Ok(ApprovalInput { kind, options, required, default, description })
}
