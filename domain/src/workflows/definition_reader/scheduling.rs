//! What decides when and where a job runs: `runs-on` and `tools`, `needs`,
//! `if`, `priority`, `retry`.

use super::fields::{Fields, Location};
use super::values::read_text_list;
use crate::runners::labels;
use crate::workflows::condition::{JobCondition, SUPPORTED_CONDITIONS};
use crate::workflows::definition::DefinitionError;
use crate::workflows::expressions;
use crate::workflows::retry::{RetryPolicy, RetryWhen, MAX_BACKOFF_S, MAX_RETRIES};
use crate::workflows::yaml::YamlNode;
use baton_api::facts::PRIORITY_RANGE;

const RETRY_FIELDS: &[&str] = &["max", "when", "exit-codes", "backoff"];

pub(super) fn read_runs_on(
    node: Option<&YamlNode>,
    at: &Location,
    tools: &[String],
) -> Result<Vec<String>, DefinitionError> {
    let Some(node) = node else { return Err(at.error("required: the labels a runner must offer to run this job")) };
    let mut raw = read_text_list(node, at, "a label or a list of labels")?;
    raw.extend(tools.iter().cloned());
    labels::canonicalize(&raw).map_err(|err| at.error(err.to_string()))
}

/// `tools:`: the tools a runner must have, `name` or `name@version`
/// (`[docker, node@20]`), as the labels they require.
pub(super) fn read_tools(node: Option<&YamlNode>, at: &Location) -> Result<Vec<String>, DefinitionError> {
    let Some(node) = node else { return Ok(Vec::new()) };
    let tools = read_text_list(node, at, "a tool or a list of tools (`docker`, `node@20`)")?;
    crate::runners::tools::required_labels(&tools).map_err(|err| at.error(err.to_string()))
}

pub(super) fn read_needs(node: Option<&YamlNode>, at: &Location) -> Result<Vec<String>, DefinitionError> {
    let Some(node) = node else { return Ok(Vec::new()) };
    let mut needs: Vec<String> = Vec::new();
    for need in read_text_list(node, at, "a job id or a list of job ids")? {
        if !needs.contains(&need) {
            needs.push(need);
        }
    }
    Ok(needs)
}

/// `if:`: a status function, an expression over outputs, inputs and the
/// needs' results, or a status function `&&` such an expression.
pub(super) fn read_condition(
    node: Option<&YamlNode>,
    at: &Location,
) -> Result<(JobCondition, Option<String>), DefinitionError> {
    let Some(node) = node else { return Ok((JobCondition::default(), None)) };
    let YamlNode::String(raw) = node else { return Err(at.expected(SUPPORTED_CONDITIONS, node)) };
    if let Some(condition) = JobCondition::parse(raw) {
        return Ok((condition, None));
    }
    let (status, rest) = expressions::split_condition(raw).map_err(|err| {
        at.error(format!(
            "`{}`: {err}; a condition is {SUPPORTED_CONDITIONS}, an expression, or one `&&` the other",
            raw.trim()
        ))
    })?;
    let condition = match status {
        Some(status) => JobCondition::of_status(&status).unwrap_or_default(),
        None => JobCondition::default(),
    };
    let mut text = raw.trim();
    if let Some(inner) = text.strip_prefix("${{").and_then(|rest| rest.strip_suffix("}}")) {
        text = inner.trim();
    }
    // Stored as written; the status function, if any, is decided apart and
    // evaluates as true inside the expression.
    Ok((condition, rest.map(|_| text.to_string())))
}

/// `priority`: a whole number from -100 to 100 (0, the default, is the
/// same as leaving it out), or one `${{ … }}` decided when the job is
/// queued; a value that is not a whole number there counts as 0, one out of
/// range as the nearest bound.
pub(super) fn read_priority(node: Option<&YamlNode>, at: &Location) -> Result<Option<String>, DefinitionError> {
    let (low, high) = (*PRIORITY_RANGE.start(), *PRIORITY_RANGE.end());
    match node {
        None => Ok(None),
        Some(YamlNode::Integer(p)) if (i128::from(low)..=i128::from(high)).contains(p) => {
            Ok((*p != 0).then(|| p.to_string()))
        }
        Some(YamlNode::String(text)) if text.trim().starts_with("${{") && text.trim().ends_with("}}") => {
            Ok(Some(text.trim().to_string()))
        }
        Some(_) => {
            Err(at.error(format!("must be a whole number from {low} to {high}, or one expression `${{{{ … }}}}`")))
        }
    }
}

/// `retry:`: a number of retries for any failure (`retry: 2`), or
/// `{max, when: [runner_lost, timed_out, step_failed], exit-codes: [...],
/// backoff: <seconds>}` (`when` defaults to all three; `exit-codes` narrows
/// `step_failed`; `backoff` delays the first retry, doubling after).
/// `0` is the same as leaving it out.
pub(super) fn read_retry(node: Option<&YamlNode>, at: &Location) -> Result<Option<RetryPolicy>, DefinitionError> {
    let Some(node) = node else { return Ok(None) };
    let read_max = |node: &YamlNode, at: &Location| match node {
        YamlNode::Integer(max) if (0..=i128::from(MAX_RETRIES)).contains(max) => Ok(*max as u32),
        _ => Err(at.error(format!("must be a whole number of retries from 0 to {MAX_RETRIES}"))),
    };
    let policy = match node {
        YamlNode::Integer(_) => RetryPolicy {
            max: read_max(node, at)?,
            when: RetryWhen::ALL.to_vec(),
            exit_codes: Vec::new(),
            backoff_s: 0,
        },
        YamlNode::Mapping(_) => {
            let fields = Fields::read(node, RETRY_FIELDS, at, "a mapping with `max`")?;
            let Some(max) = fields.get("max") else { return Err(at.field("max").error("required: the most retries")) };
            let max = read_max(max, &at.field("max"))?;
            let when = match fields.get("when") {
                None => RetryWhen::ALL.to_vec(),
                Some(node) => {
                    let at = at.field("when");
                    let mut when = Vec::new();
                    for text in read_text_list(node, &at, "a list of failure classes")? {
                        let class = RetryWhen::parse(&text).ok_or_else(|| {
                            at.error(format!("unknown failure class `{text}`: runner_lost, timed_out or step_failed"))
                        })?;
                        if !when.contains(&class) {
                            when.push(class);
                        }
                    }
                    if when.is_empty() {
                        return Err(at.error("at least one failure class"));
                    }
                    when.sort();
                    when
                }
            };
            let exit_codes = match fields.get("exit-codes") {
                None => Vec::new(),
                Some(YamlNode::Sequence(items)) => {
                    let at = at.field("exit-codes");
                    let mut codes = Vec::new();
                    for item in items {
                        match item {
                            YamlNode::Integer(code) if (0..=255).contains(code) => codes.push(*code as i32),
                            other => return Err(at.expected("exit codes from 0 to 255", other)),
                        }
                    }
                    codes.sort_unstable();
                    codes.dedup();
                    codes
                }
                Some(other) => return Err(at.field("exit-codes").expected("a list of exit codes", other)),
            };
            if !exit_codes.is_empty() && !when.contains(&RetryWhen::StepFailed) {
                return Err(at.field("exit-codes").error("narrows step_failed, which `when` does not list"));
            }
            let backoff_s = match fields.get("backoff") {
                None => 0,
                Some(YamlNode::Integer(s)) if (1..=i128::from(MAX_BACKOFF_S)).contains(s) => *s as u32,
                Some(_) => {
                    return Err(at
                        .field("backoff")
                        .error(format!("must be a whole number of seconds from 1 to {MAX_BACKOFF_S}")))
                }
            };
            RetryPolicy { max, when, exit_codes, backoff_s }
        }
        other => return Err(at.expected("a number of retries or a mapping with `max`", other)),
    };
    Ok((policy.max > 0).then_some(policy))
}
