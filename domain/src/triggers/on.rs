//! Reads `on:` as GitHub writes it: one event name, a list of them, or a
//! mapping of events to their settings. Every refusal names its field
//! (`on.push.branches[2]`) and says what is wrong; a valid setting is never
//! dropped: the events Baton cannot start runs on are kept by name.

use serde_json::{Number, Value};

use super::cron::Cron;
use super::glob::{Pattern, PatternList};
use super::{
    DispatchInput, DispatchTrigger, Filter, InputType, OtherEvent, PullRequestTrigger, PushTrigger, TriggerError,
    Triggers,
};
use crate::workflows::yaml::YamlNode;

/// Every event GitHub starts workflows on ("Events that trigger
/// workflows"), so that an unknown name is refused and a known one kept.
pub const GITHUB_EVENTS: &[&str] = &[
    "branch_protection_rule",
    "check_run",
    "check_suite",
    "create",
    "delete",
    "deployment",
    "deployment_status",
    "discussion",
    "discussion_comment",
    "fork",
    "gollum",
    "image_version",
    "issue_comment",
    "issues",
    "label",
    "merge_group",
    "milestone",
    "page_build",
    "project",
    "project_card",
    "project_column",
    "public",
    "pull_request",
    "pull_request_review",
    "pull_request_review_comment",
    "pull_request_target",
    "push",
    "registry_package",
    "release",
    "repository_dispatch",
    "schedule",
    "status",
    "watch",
    "workflow_call",
    "workflow_dispatch",
    "workflow_run",
];

/// A pull request's activity types, as GitHub lists them.
pub const PULL_REQUEST_TYPES: &[&str] = &[
    "assigned",
    "unassigned",
    "labeled",
    "unlabeled",
    "opened",
    "edited",
    "closed",
    "reopened",
    "synchronize",
    "converted_to_draft",
    "locked",
    "unlocked",
    "enqueued",
    "dequeued",
    "milestoned",
    "demilestoned",
    "ready_for_review",
    "review_requested",
    "review_request_removed",
    "auto_merge_enabled",
    "auto_merge_disabled",
];

/// What runs a pull request workflow when `types` is not given.
const DEFAULT_PULL_REQUEST_TYPES: &[&str] = &["opened", "synchronize", "reopened"];

const PUSH_FIELDS: &[&str] = &["branches", "branches-ignore", "tags", "tags-ignore", "paths", "paths-ignore"];
const PULL_REQUEST_FIELDS: &[&str] = &["types", "branches", "branches-ignore", "paths", "paths-ignore"];
const INPUT_FIELDS: &[&str] = &["description", "type", "required", "default", "options"];

/// Where a value sits under `on`.
#[derive(Clone)]
struct At(String);

impl At {
    fn key(&self, name: &str) -> Self {
        Self(format!("{}.{name}", self.0))
    }

    fn index(&self, position: usize) -> Self {
        Self(format!("{}[{position}]", self.0))
    }

    fn error(&self, message: impl Into<String>) -> TriggerError {
        TriggerError { field: self.0.clone(), message: message.into() }
    }

    fn expected(&self, what: &str, found: &YamlNode) -> TriggerError {
        self.error(format!("expected {what}, found {}", found.kind()))
    }
}

/// A mapping's entries by text key, refused when a key repeats or is not
/// one of `allowed` (`None`: any key).
fn entries<'a>(
    node: &'a YamlNode,
    at: &At,
    allowed: Option<&[&str]>,
    what: &str,
) -> Result<Vec<(String, &'a YamlNode)>, TriggerError> {
    let YamlNode::Mapping(mapping) = node else { return Err(at.expected(what, node)) };
    let mut out: Vec<(String, &YamlNode)> = Vec::with_capacity(mapping.len());
    for (key, value) in mapping {
        let Some(key) = key.scalar_text() else { return Err(at.expected("text keys", key)) };
        if out.iter().any(|(seen, _)| *seen == key) {
            return Err(at.key(&key).error("given more than once"));
        }
        if let Some(allowed) = allowed {
            if !allowed.contains(&key.as_str()) {
                return Err(at.key(&key).error(format!("unknown field, expected one of: {}", allowed.join(", "))));
            }
        }
        out.push((key, value));
    }
    Ok(out)
}

fn get<'a>(entries: &[(String, &'a YamlNode)], name: &str) -> Option<&'a YamlNode> {
    entries.iter().find(|(key, _)| key == name).map(|(_, value)| *value)
}

/// Reads `on:`. Nothing (`on:` left empty, or no `on:`) is no trigger: the
/// workflow is started by API only.
pub(crate) fn read_on(node: &YamlNode) -> Result<Triggers, TriggerError> {
    let at = At("on".into());
    let mut triggers = Triggers::default();
    let mut seen: Vec<String> = Vec::new();
    let mut add = |name: &str, settings: &YamlNode, at: &At, triggers: &mut Triggers| -> Result<(), TriggerError> {
        if seen.iter().any(|s| s == name) {
            return Err(at.error(format!("the event `{name}` is given more than once")));
        }
        seen.push(name.to_string());
        read_event(name, settings, at, triggers)
    };
    match node {
        YamlNode::Null => {}
        YamlNode::String(name) => add(name, &YamlNode::Null, &at, &mut triggers)?,
        YamlNode::Sequence(items) => {
            for (position, item) in items.iter().enumerate() {
                let at = at.index(position);
                let YamlNode::String(name) = item else { return Err(at.expected("an event name", item)) };
                add(name, &YamlNode::Null, &at, &mut triggers)?;
            }
        }
        YamlNode::Mapping(_) => {
            for (name, settings) in entries(node, &at, None, "")? {
                add(&name, settings, &at.key(&name), &mut triggers)?;
            }
        }
        YamlNode::Bool(_) | YamlNode::Integer(_) | YamlNode::Float(_) => {
            return Err(
                at.expected("an event name, a list of event names, or a mapping of events to their settings", node)
            )
        }
    }
    Ok(triggers)
}

fn read_event(name: &str, settings: &YamlNode, at: &At, triggers: &mut Triggers) -> Result<(), TriggerError> {
    match name {
        "push" => triggers.push = Some(read_push(settings, at)?),
        "pull_request" => triggers.pull_request = Some(read_pull_request(settings, at)?),
        "pull_request_target" => triggers.pull_request_target = Some(read_pull_request(settings, at)?),
        "schedule" => triggers.schedule = read_schedule(settings, at)?,
        "workflow_dispatch" => triggers.workflow_dispatch = Some(read_dispatch(settings, at)?),
        _ if GITHUB_EVENTS.contains(&name) => triggers.other.push(read_other(name, settings, at)?),
        _ => {
            return Err(
                at.error(format!("unknown event `{name}`, expected one of GitHub's: {}", GITHUB_EVENTS.join(", ")))
            )
        }
    }
    Ok(())
}

/// An event Baton does not honour: kept by name with its settings' names;
/// its settings are GitHub's to define, so they are not checked further.
fn read_other(name: &str, settings: &YamlNode, at: &At) -> Result<OtherEvent, TriggerError> {
    let settings = match settings {
        YamlNode::Null => Vec::new(),
        _ => entries(settings, at, None, "a mapping of the event's settings, or nothing")?
            .into_iter()
            .map(|(key, _)| key)
            .collect(),
    };
    Ok(OtherEvent { name: name.to_string(), settings })
}

fn read_push(settings: &YamlNode, at: &At) -> Result<PushTrigger, TriggerError> {
    if *settings == YamlNode::Null {
        return Ok(PushTrigger::default());
    }
    let fields = entries(settings, at, Some(PUSH_FIELDS), "a mapping of filters, or nothing")?;
    Ok(PushTrigger {
        branches: read_filter(&fields, "branches", at)?,
        tags: read_filter(&fields, "tags", at)?,
        paths: read_filter(&fields, "paths", at)?,
    })
}

fn read_pull_request(settings: &YamlNode, at: &At) -> Result<PullRequestTrigger, TriggerError> {
    let default_types = || DEFAULT_PULL_REQUEST_TYPES.iter().map(|t| t.to_string()).collect();
    if *settings == YamlNode::Null {
        return Ok(PullRequestTrigger { types: default_types(), branches: None, paths: None });
    }
    let fields = entries(settings, at, Some(PULL_REQUEST_FIELDS), "a mapping of filters, or nothing")?;
    let types = match get(&fields, "types") {
        None => default_types(),
        Some(node) => read_types(node, &at.key("types"))?,
    };
    Ok(PullRequestTrigger {
        types,
        branches: read_filter(&fields, "branches", at)?,
        paths: read_filter(&fields, "paths", at)?,
    })
}

fn read_types(node: &YamlNode, at: &At) -> Result<Vec<String>, TriggerError> {
    let items: Vec<(At, &YamlNode)> = match node {
        YamlNode::Sequence(items) => items.iter().enumerate().map(|(i, item)| (at.index(i), item)).collect(),
        _ => vec![(at.clone(), node)],
    };
    if items.is_empty() {
        return Err(at.error("lists no activity type: leave `types` out for opened, synchronize and reopened"));
    }
    let mut types = Vec::new();
    for (at, item) in items {
        let YamlNode::String(name) = item else { return Err(at.expected("an activity type", item)) };
        if !PULL_REQUEST_TYPES.contains(&name.as_str()) {
            return Err(
                at.error(format!("unknown activity type `{name}`, expected one of: {}", PULL_REQUEST_TYPES.join(", ")))
            );
        }
        if !types.contains(name) {
            types.push(name.clone());
        }
    }
    Ok(types)
}

/// `branches`/`branches-ignore` (or `tags…`, `paths…`): at most one of the
/// two, as GitHub requires.
fn read_filter(fields: &[(String, &YamlNode)], name: &str, at: &At) -> Result<Option<Filter>, TriggerError> {
    let ignore_name = format!("{name}-ignore");
    match (get(fields, name), get(fields, &ignore_name)) {
        (Some(_), Some(_)) => Err(at.key(&ignore_name).error(format!(
            "`{name}` and `{ignore_name}` may not both filter one event (as on GitHub): exclude with `!pattern` in `{name}`"
        ))),
        (Some(node), None) => Ok(Some(Filter { ignore: false, patterns: read_patterns(node, &at.key(name), false)? })),
        (None, Some(node)) => {
            Ok(Some(Filter { ignore: true, patterns: read_patterns(node, &at.key(&ignore_name), true)? }))
        }
        (None, None) => Ok(None),
    }
}

fn read_patterns(node: &YamlNode, at: &At, ignore: bool) -> Result<PatternList, TriggerError> {
    let items: Vec<(At, &YamlNode)> = match node {
        YamlNode::Sequence(items) => items.iter().enumerate().map(|(i, item)| (at.index(i), item)).collect(),
        YamlNode::String(_) => vec![(at.clone(), node)],
        _ => return Err(at.expected("a list of patterns", node)),
    };
    if items.is_empty() {
        return Err(at.error("lists no pattern: leave the filter out instead"));
    }
    let mut patterns = Vec::with_capacity(items.len());
    for (at, item) in items {
        let Some(text) = item.scalar_text() else { return Err(at.expected("a pattern", item)) };
        let pattern = Pattern::parse(&text).map_err(|err| at.error(format!("`{text}`: {err}")))?;
        patterns.push(pattern);
    }
    if !ignore && patterns.iter().all(Pattern::is_negated) {
        return Err(at.error(
            "every pattern starts with `!`, so nothing is included: add a pattern without `!` before them, or use the `-ignore` filter (as GitHub requires)",
        ));
    }
    Ok(PatternList::new(patterns))
}

fn read_schedule(settings: &YamlNode, at: &At) -> Result<Vec<Cron>, TriggerError> {
    let YamlNode::Sequence(items) = settings else {
        return Err(at.expected("a list of crons (`- cron: '30 5 * * *'`)", settings));
    };
    if items.is_empty() {
        return Err(at.error("lists no cron"));
    }
    let mut crons = Vec::with_capacity(items.len());
    for (position, item) in items.iter().enumerate() {
        let at = at.index(position);
        let fields = entries(item, &at, Some(&["cron"]), "a mapping with `cron`")?;
        let Some(node) = get(&fields, "cron") else { return Err(at.error("missing `cron`")) };
        let at = at.key("cron");
        let YamlNode::String(text) = node else { return Err(at.expected("a cron in quotes", node)) };
        crons.push(Cron::parse(text).map_err(|err| at.error(format!("`{text}`: {err}")))?);
    }
    Ok(crons)
}

fn read_dispatch(settings: &YamlNode, at: &At) -> Result<DispatchTrigger, TriggerError> {
    if *settings == YamlNode::Null {
        return Ok(DispatchTrigger::default());
    }
    let fields = entries(settings, at, Some(&["inputs"]), "a mapping with `inputs`, or nothing")?;
    let at = at.key("inputs");
    let mut inputs = Vec::new();
    if let Some(node) = get(&fields, "inputs").filter(|node| **node != YamlNode::Null) {
        for (id, settings) in entries(node, &at, None, "a mapping of inputs by id")? {
            inputs.push(read_input(&id, settings, &at.key(&id))?);
        }
    }
    Ok(DispatchTrigger { inputs })
}

fn read_input(id: &str, settings: &YamlNode, at: &At) -> Result<DispatchInput, TriggerError> {
    let mut chars = id.chars();
    let starts_well = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !starts_well || !chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(at.error("an input id starts with a letter or `_` and holds only letters, digits, `-` and `_`"));
    }
    let fields = match settings {
        YamlNode::Null => Vec::new(),
        _ => entries(settings, at, Some(INPUT_FIELDS), "a mapping of the input's settings")?,
    };
    let description = match get(&fields, "description") {
        None | Some(YamlNode::Null) => None,
        Some(node) => Some(node.scalar_text().ok_or_else(|| at.key("description").expected("a text", node))?),
    };
    let kind = match get(&fields, "type") {
        None => InputType::String,
        Some(node) => match node.scalar_text().as_deref() {
            Some("string") => InputType::String,
            Some("boolean") => InputType::Boolean,
            Some("number") => InputType::Number,
            Some("choice") => InputType::Choice,
            Some("environment") => InputType::Environment,
            _ => {
                return Err(at
                    .key("type")
                    .error("unknown input type, expected one of: string, boolean, number, choice, environment"))
            }
        },
    };
    let required = match get(&fields, "required") {
        None | Some(YamlNode::Null) => false,
        Some(YamlNode::Bool(value)) => *value,
        Some(node) => return Err(at.key("required").expected("true or false", node)),
    };
    let options = match (get(&fields, "options"), kind) {
        (None, InputType::Choice) => return Err(at.error("a `choice` input lists its `options`")),
        (None, _) => Vec::new(),
        (Some(node), InputType::Choice) => read_options(node, &at.key("options"))?,
        (Some(_), _) => return Err(at.key("options").error("only a `choice` input has `options`")),
    };
    let default = match get(&fields, "default") {
        None | Some(YamlNode::Null) => None,
        Some(node) => Some(read_default(node, kind, &options, &at.key("default"))?),
    };
    Ok(DispatchInput { id: id.to_string(), description, kind, required, default, options })
}

fn read_options(node: &YamlNode, at: &At) -> Result<Vec<String>, TriggerError> {
    let YamlNode::Sequence(items) = node else { return Err(at.expected("a list of options", node)) };
    if items.is_empty() {
        return Err(at.error("lists no option"));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| item.scalar_text().ok_or_else(|| at.index(i).expected("an option's text", item)))
        .collect()
}

fn read_default(node: &YamlNode, kind: InputType, options: &[String], at: &At) -> Result<Value, TriggerError> {
    let Some(text) = node.scalar_text() else { return Err(at.expected("a value", node)) };
    match kind {
        InputType::String | InputType::Environment => Ok(Value::String(text)),
        InputType::Choice if options.contains(&text) => Ok(Value::String(text)),
        InputType::Choice => Err(at.error(format!("`{text}` is not one of the options: {}", options.join(", ")))),
        InputType::Boolean => match node {
            YamlNode::Bool(value) => Ok(Value::Bool(*value)),
            YamlNode::String(text) if text == "true" || text == "false" => Ok(Value::Bool(text == "true")),
            _ => Err(at.error(format!("`{text}` is not a boolean (true or false)"))),
        },
        InputType::Number => number_of(node).ok_or_else(|| at.error(format!("`{text}` is not a number"))),
    }
}

/// A number from YAML: an integer, a float, or a string that reads as one.
fn number_of(node: &YamlNode) -> Option<Value> {
    match node {
        YamlNode::Integer(value) => match i64::try_from(*value) {
            Ok(value) => Some(Value::Number(Number::from(value))),
            Err(_) => Number::from_f64(*value as f64).map(Value::Number),
        },
        YamlNode::Float(value) => Number::from_f64(*value).map(Value::Number),
        YamlNode::String(text) => match text.trim().parse::<i64>() {
            Ok(value) => Some(Value::Number(Number::from(value))),
            Err(_) => text.trim().parse::<f64>().ok().and_then(Number::from_f64).map(Value::Number),
        },
        YamlNode::Null | YamlNode::Bool(_) | YamlNode::Sequence(_) | YamlNode::Mapping(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::triggers::test_trees::{deploy_dispatch, list, map, s};
    use crate::triggers::InputType;

    fn error(node: YamlNode) -> TriggerError {
        read_on(&node).unwrap_err()
    }

    #[test]
    fn the_three_forms() {
        let one = read_on(&s("push")).unwrap();
        assert_eq!(one.push, Some(PushTrigger::default()));
        let many = read_on(&list(&["push", "pull_request", "workflow_dispatch"])).unwrap();
        assert!(many.push.is_some() && many.workflow_dispatch.is_some());
        assert_eq!(many.pull_request.unwrap().types, ["opened", "synchronize", "reopened"]);
        let mapping = read_on(&map(vec![("pull_request", YamlNode::Null), ("merge_group", YamlNode::Null)])).unwrap();
        assert!(mapping.pull_request.is_some());
        assert_eq!(mapping.other, [OtherEvent { name: "merge_group".into(), settings: vec![] }]);
        assert!(read_on(&YamlNode::Null).unwrap().is_empty());
    }

    #[test]
    fn unknown_and_repeated_events_are_refused() {
        let err = error(s("pushh"));
        assert_eq!(err.field, "on");
        assert!(err.message.contains("unknown event `pushh`"));
        let err = error(list(&["push", "release", "push"]));
        assert_eq!(err.field, "on[2]");
        assert!(err.message.contains("more than once"));
        let err = error(YamlNode::Integer(3));
        assert!(err.message.contains("expected an event name"));
    }

    #[test]
    fn filters_are_read_and_checked() {
        let on = map(vec![(
            "push",
            map(vec![("branches", list(&["main", "releases/**", "!releases/**-alpha"])), ("tags-ignore", s("v*"))]),
        )]);
        let push = read_on(&on).unwrap().push.unwrap();
        let branches = push.branches.unwrap();
        assert!(!branches.ignore && branches.patterns.includes("releases/1") && !branches.patterns.includes("dev"));
        assert!(push.tags.unwrap().ignore);
        let err = error(map(vec![("push", map(vec![("branches", list(&["a"])), ("branches-ignore", list(&["b"]))]))]));
        assert_eq!(err.field, "on.push.branches-ignore");
        assert!(err.message.contains("may not both"));
        let err =
            error(map(vec![("pull_request", map(vec![("paths", list(&["a"])), ("paths-ignore", list(&["b"]))]))]));
        assert_eq!(err.field, "on.pull_request.paths-ignore");
        let err = error(map(vec![("push", map(vec![("branches", list(&["main", "ok", "[x"]))]))]));
        assert_eq!(err.field, "on.push.branches[2]");
        assert!(err.message.contains("never closed"), "{err}");
        let err = error(map(vec![("push", map(vec![("branches", list(&["!main"]))]))]));
        assert!(err.message.contains("nothing is included"));
        assert!(read_on(&map(vec![("push", map(vec![("branches-ignore", list(&["!main"]))]))])).is_ok());
        let err = error(map(vec![("push", map(vec![("types", list(&["x"]))]))]));
        assert_eq!(err.field, "on.push.types");
        let err = error(map(vec![("pull_request", map(vec![("tags", list(&["v1"]))]))]));
        assert_eq!(err.field, "on.pull_request.tags");
        let err = error(map(vec![("push", map(vec![("paths", YamlNode::Sequence(vec![]))]))]));
        assert!(err.message.contains("lists no pattern"));
    }

    #[test]
    fn pull_request_types() {
        let on = map(vec![("pull_request_target", map(vec![("types", list(&["opened", "labeled", "opened"]))]))]);
        assert_eq!(read_on(&on).unwrap().pull_request_target.unwrap().types, ["opened", "labeled"]);
        let single = map(vec![("pull_request", map(vec![("types", s("closed"))]))]);
        assert_eq!(read_on(&single).unwrap().pull_request.unwrap().types, ["closed"]);
        let err = error(map(vec![("pull_request", map(vec![("types", list(&["opened", "open"]))]))]));
        assert_eq!(err.field, "on.pull_request.types[1]");
        assert!(err.message.contains("unknown activity type `open`"));
    }

    #[test]
    fn schedules() {
        let on = map(vec![(
            "schedule",
            YamlNode::Sequence(vec![map(vec![("cron", s("30 5 * * 1,3"))]), map(vec![("cron", s("*/1 * * * *"))])]),
        )]);
        let triggers = read_on(&on).unwrap();
        assert_eq!(triggers.schedule.len(), 2);
        assert!(triggers.unsupported().is_empty(), "every minute is honoured, where GitHub stops at five");
        let err = error(map(vec![("schedule", YamlNode::Sequence(vec![map(vec![("cron", s("61 * * * *"))])]))]));
        assert_eq!(err.field, "on.schedule[0].cron");
        assert!(err.message.contains("minute: `61`") && err.message.contains("expected 0–59"), "{err}");
        let err = error(s("schedule"));
        assert!(err.message.contains("list of crons"));
        let err = error(map(vec![(
            "schedule",
            YamlNode::Sequence(vec![map(vec![("cron", s("0 0 * * *")), ("tz", s("x"))])]),
        )]));
        assert_eq!(err.field, "on.schedule[0].tz");
    }

    #[test]
    fn dispatch_inputs() {
        let dispatch = read_on(&deploy_dispatch()).unwrap().workflow_dispatch.unwrap();
        let kinds: Vec<InputType> = dispatch.inputs.iter().map(|i| i.kind).collect();
        assert_eq!(
            kinds,
            [
                InputType::Choice,
                InputType::String,
                InputType::Boolean,
                InputType::Number,
                InputType::Number,
                InputType::Environment,
                InputType::String
            ]
        );
        assert_eq!(dispatch.inputs[2].default, Some(Value::Bool(false)));
        assert_eq!(dispatch.inputs[3].default, None);
        assert_eq!(dispatch.inputs[4].default, Some(serde_json::json!(3)));
        assert!(dispatch.inputs[1].required);

        let bad =
            |input: YamlNode| error(map(vec![("workflow_dispatch", map(vec![("inputs", map(vec![("x", input)]))]))]));
        let err = bad(map(vec![("type", s("text"))]));
        assert_eq!(err.field, "on.workflow_dispatch.inputs.x.type");
        let err = bad(map(vec![("type", s("choice")), ("options", list(&["a", "b"])), ("default", s("c"))]));
        assert_eq!(err.field, "on.workflow_dispatch.inputs.x.default");
        assert!(err.message.contains("not one of the options"));
        let err = bad(map(vec![("type", s("choice"))]));
        assert!(err.message.contains("lists its `options`"));
        let err = bad(map(vec![("type", s("boolean")), ("default", s("yes"))]));
        assert!(err.message.contains("not a boolean"));
        let err = bad(map(vec![("type", s("number")), ("default", s("ten"))]));
        assert!(err.message.contains("not a number"));
        let err = bad(map(vec![("options", list(&["a"]))]));
        assert!(err.message.contains("only a `choice`"));
        let err = bad(map(vec![("required", s("maybe"))]));
        assert_eq!(err.field, "on.workflow_dispatch.inputs.x.required");
        let err = bad(map(vec![("secret", YamlNode::Bool(true))]));
        assert_eq!(err.field, "on.workflow_dispatch.inputs.x.secret");
        let err = error(map(vec![("workflow_dispatch", map(vec![("inputs", map(vec![("1x", YamlNode::Null)]))]))]));
        assert!(err.message.contains("input id"));
    }

    #[test]
    fn other_events_are_kept_and_listed_as_unsupported_but_workflow_call() {
        let on = map(vec![
            ("release", map(vec![("types", list(&["published"]))])),
            ("workflow_call", map(vec![("inputs", map(vec![]))])),
            ("delete", map(vec![("branches", list(&["feature**"]))])),
        ]);
        let triggers = read_on(&on).unwrap();
        assert_eq!(triggers.other.len(), 3);
        assert_eq!(triggers.other[0].settings, ["types"]);
        let fields: Vec<String> = triggers.unsupported().into_iter().map(|(field, _)| field).collect();
        // `workflow_call` starts nothing: it makes a pipeline callable.
        assert_eq!(fields, ["on.release", "on.delete"]);
        let err = error(map(vec![("release", s("published"))]));
        assert_eq!(err.field, "on.release");
    }
}
