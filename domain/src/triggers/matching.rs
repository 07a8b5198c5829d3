//! Whether an event Baton receives starts a workflow, by GitHub's rules
//! ("Using filters"), and why not when it does not: a forge's delivery log
//! shows the reason.
//!
//! - A push names a branch (`refs/heads/…`) or a tag (`refs/tags/…`). With
//!   only tag filters a branch push does not run, and the other way round;
//!   with neither, both run. Path filters apply to branch pushes only.
//! - A pull request runs for its `types` (default opened, synchronize,
//!   reopened); `branches` filters its base branch.
//! - Paths: a run needs a changed path the filter lets through; no changed
//!   path at all runs nothing. When the changed paths are unknown (too many
//!   commits, a diff the forge did not give) the workflow runs, as GitHub's
//!   does when it has no diff.
//! - A dispatch's inputs are checked against `workflow_dispatch.inputs` and
//!   typed; defaults fill the ones not given.

use std::collections::BTreeMap;

use serde_json::{Map, Number, Value};

use super::glob::Pattern;
use super::{DispatchTrigger, Filter, InputType, PullRequestTrigger, PushTrigger, Triggers};

/// The files an event changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangedPaths {
    Known(Vec<String>),
    /// The forge did not say (too many, or no diff): path filters pass.
    Unknown,
}

/// A push: its ref (`refs/heads/main`, `refs/tags/v1.2`) and what changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushEvent {
    pub git_ref: String,
    pub paths: ChangedPaths,
}

/// A pull request's activity: its action (`opened`, `closed`, …), its base
/// and head branches (names, without `refs/heads/`) and what it changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequestEvent {
    pub action: String,
    pub base: String,
    pub head: String,
    pub paths: ChangedPaths,
}

/// An event Baton receives. A forge's pull request delivery is matched as
/// both `PullRequest` and `PullRequestTarget` (GitHub starts a run for each
/// of the two triggers a workflow has).
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Push(PushEvent),
    PullRequest(PullRequestEvent),
    PullRequestTarget(PullRequestEvent),
    /// A schedule's tick, naming its cron as written.
    Schedule {
        cron: String,
    },
    /// A manual run, with the inputs given.
    Dispatch {
        inputs: Map<String, Value>,
    },
}

/// A dispatch input refused: which, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    pub input: String,
    pub message: String,
}

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "input `{}`: {}", self.input, self.message)
    }
}

/// What an event does to a workflow.
#[derive(Debug, Clone, PartialEq)]
pub enum Match {
    /// It starts a run, of this event (`push`, `workflow_dispatch`, …) and
    /// with these inputs (a dispatch's, typed; empty otherwise).
    Run { event_name: &'static str, inputs: BTreeMap<String, Value> },
    /// It starts nothing, for this reason.
    Skip { reason: String },
    /// A dispatch whose inputs do not fit the workflow's.
    BadInputs(InputError),
}

impl Match {
    fn run(event_name: &'static str) -> Self {
        Match::Run { event_name, inputs: BTreeMap::new() }
    }

    fn skip(reason: impl Into<String>) -> Self {
        Match::Skip { reason: reason.into() }
    }
}

impl Triggers {
    /// Whether `event` starts this workflow; see the module doc.
    pub fn matches(&self, event: &Event) -> Match {
        match event {
            Event::Push(push) => match &self.push {
                Some(trigger) => match_push(trigger, push),
                None => Match::skip("the workflow has no `on.push`"),
            },
            Event::PullRequest(pr) => match &self.pull_request {
                Some(trigger) => match_pull_request(trigger, pr, "pull_request"),
                None => Match::skip("the workflow has no `on.pull_request`"),
            },
            Event::PullRequestTarget(pr) => match &self.pull_request_target {
                Some(trigger) => match_pull_request(trigger, pr, "pull_request_target"),
                None => Match::skip("the workflow has no `on.pull_request_target`"),
            },
            Event::Schedule { cron } => {
                if self.schedule.is_empty() {
                    Match::skip("the workflow has no `on.schedule`")
                } else if self.schedule.iter().any(|c| c.text() == cron.trim()) {
                    Match::run("schedule")
                } else {
                    Match::skip(format!("cron `{cron}` is not one of `on.schedule`"))
                }
            }
            Event::Dispatch { inputs } => match &self.workflow_dispatch {
                Some(trigger) => match dispatch_inputs(trigger, inputs) {
                    Ok(inputs) => Match::Run { event_name: "workflow_dispatch", inputs },
                    Err(err) => Match::BadInputs(err),
                },
                None => Match::skip("the workflow has no `on.workflow_dispatch`"),
            },
        }
    }
}

fn match_push(trigger: &PushTrigger, push: &PushEvent) -> Match {
    let field = "on.push";
    if let Some(branch) = push.git_ref.strip_prefix("refs/heads/") {
        match &trigger.branches {
            Some(filter) => {
                if let Some(reason) = refused_by(filter, branch, "branch", &format!("{field}.branches")) {
                    return Match::skip(reason);
                }
            }
            None if trigger.tags.is_some() => {
                return Match::skip(format!("branch `{branch}` pushed, and `{field}` filters tags only"))
            }
            None => {}
        }
        if let Some(reason) = paths_refuse(trigger.paths.as_ref(), &push.paths, field) {
            return Match::skip(reason);
        }
        Match::run("push")
    } else if let Some(tag) = push.git_ref.strip_prefix("refs/tags/") {
        match &trigger.tags {
            Some(filter) => match refused_by(filter, tag, "tag", &format!("{field}.tags")) {
                Some(reason) => Match::skip(reason),
                None => Match::run("push"),
            },
            None if trigger.branches.is_some() => {
                Match::skip(format!("tag `{tag}` pushed, and `{field}` filters branches only"))
            }
            // GitHub does not evaluate path filters for a tag's push.
            None => Match::run("push"),
        }
    } else {
        Match::skip(format!("ref `{}` is neither a branch nor a tag", push.git_ref))
    }
}

fn match_pull_request(trigger: &PullRequestTrigger, pr: &PullRequestEvent, event_name: &'static str) -> Match {
    let field = format!("on.{event_name}");
    if !trigger.types.contains(&pr.action) {
        return Match::skip(format!(
            "pull request action `{}` is not in `{field}.types` ({})",
            pr.action,
            trigger.types.join(", ")
        ));
    }
    if let Some(filter) = &trigger.branches {
        if let Some(reason) = refused_by(filter, &pr.base, "base branch", &format!("{field}.branches")) {
            return Match::skip(reason);
        }
    }
    if let Some(reason) = paths_refuse(trigger.paths.as_ref(), &pr.paths, &field) {
        return Match::skip(reason);
    }
    Match::run(event_name)
}

/// Why a name is filtered out, if it is (`field` is the include form's).
fn refused_by(filter: &Filter, name: &str, what: &str, field: &str) -> Option<String> {
    let deciding = filter.patterns.deciding(name);
    let included = deciding.is_some_and(|pattern| !pattern.is_negated());
    match (filter.ignore, included) {
        (false, true) | (true, false) => None,
        (false, false) => Some(match deciding {
            Some(pattern) => format!("{what} `{name}` is excluded by `{}` in `{field}`", pattern.text()),
            None => format!("{what} `{name}` is not in `{field}`"),
        }),
        (true, true) => Some(format!(
            "{what} `{name}` is ignored by `{}` in `{field}-ignore`",
            deciding.map(Pattern::text).unwrap_or_default()
        )),
    }
}

/// Why the changed paths start nothing, if they do not.
fn paths_refuse(filter: Option<&Filter>, paths: &ChangedPaths, event_field: &str) -> Option<String> {
    let filter = filter?;
    let ChangedPaths::Known(paths) = paths else { return None };
    if paths.is_empty() {
        return Some(format!("no file changed, and `{event_field}` filters paths"));
    }
    let passes = |path: &String| filter.patterns.includes(path) != filter.ignore;
    if paths.iter().any(passes) {
        return None;
    }
    Some(if filter.ignore {
        format!("every changed path is ignored by `{event_field}.paths-ignore` ({})", sample(paths))
    } else {
        format!("no changed path is in `{event_field}.paths` ({})", sample(paths))
    })
}

/// A few of the paths, for a reason that stays short.
fn sample(paths: &[String]) -> String {
    const SHOWN: usize = 3;
    let shown: Vec<String> = paths.iter().take(SHOWN).map(|p| format!("`{p}`")).collect();
    match paths.len().saturating_sub(SHOWN) {
        0 => shown.join(", "),
        more => format!("{}, and {more} more", shown.join(", ")),
    }
}

/// The run's inputs: each declared input, from what was given (checked and
/// typed) or its default; a required one missing, an unknown one, or a
/// value of the wrong type is refused. An optional input with no default
/// and no value gets GitHub's empty value for its type: `""`, `false`, `0`.
pub fn dispatch_inputs(
    trigger: &DispatchTrigger,
    given: &Map<String, Value>,
) -> Result<BTreeMap<String, Value>, InputError> {
    let error = |input: &str, message: String| InputError { input: input.to_string(), message };
    if let Some(unknown) = given.keys().find(|key| !trigger.inputs.iter().any(|input| input.id == **key)) {
        let declared: Vec<&str> = trigger.inputs.iter().map(|input| input.id.as_str()).collect();
        let expected = if declared.is_empty() { "none".to_string() } else { declared.join(", ") };
        return Err(error(unknown, format!("not an input of `on.workflow_dispatch` (its inputs: {expected})")));
    }
    let mut out = BTreeMap::new();
    for input in &trigger.inputs {
        let value = match given.get(&input.id).filter(|value| !value.is_null()) {
            Some(value) => coerce(value, input.kind, &input.options).map_err(|message| error(&input.id, message))?,
            None => match (&input.default, input.required) {
                (Some(default), _) => default.clone(),
                (None, true) => return Err(error(&input.id, "is required".into())),
                (None, false) => match input.kind {
                    InputType::Boolean => Value::Bool(false),
                    InputType::Number => Value::Number(Number::from(0)),
                    InputType::String | InputType::Choice | InputType::Environment => Value::String(String::new()),
                },
            },
        };
        out.insert(input.id.clone(), value);
    }
    Ok(out)
}

/// A given value as the input's type: inputs arrive as text from a form
/// or a command line (`--input n=3`), or typed from JSON; both are taken.
fn coerce(value: &Value, kind: InputType, options: &[String]) -> Result<Value, String> {
    let text = match value {
        Value::String(text) => text.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null | Value::Array(_) | Value::Object(_) => return Err("expected a string, number or boolean".into()),
    };
    match kind {
        InputType::String | InputType::Environment => Ok(Value::String(text)),
        InputType::Choice if options.contains(&text) => Ok(Value::String(text)),
        InputType::Choice => Err(format!("`{text}` is not one of the options: {}", options.join(", "))),
        InputType::Boolean => match text.as_str() {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(format!("`{text}` is not a boolean (true or false)")),
        },
        InputType::Number => match value {
            Value::Number(n) => Ok(Value::Number(n.clone())),
            _ => match text.trim().parse::<i64>() {
                Ok(n) => Ok(Value::Number(Number::from(n))),
                Err(_) => text
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .and_then(Number::from_f64)
                    .map(Value::Number)
                    .ok_or_else(|| format!("`{text}` is not a number")),
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::triggers::read_on;
    use crate::triggers::test_trees::{deploy_dispatch, list, map, s};
    use crate::workflows::yaml::YamlNode;

    fn push(git_ref: &str, paths: &[&str]) -> Event {
        Event::Push(PushEvent {
            git_ref: git_ref.into(),
            paths: ChangedPaths::Known(paths.iter().map(|p| p.to_string()).collect()),
        })
    }

    fn pr(action: &str, base: &str, paths: &[&str]) -> PullRequestEvent {
        PullRequestEvent {
            action: action.into(),
            base: base.into(),
            head: "feature/x".into(),
            paths: ChangedPaths::Known(paths.iter().map(|p| p.to_string()).collect()),
        }
    }

    fn reason(m: Match) -> String {
        match m {
            Match::Skip { reason } => reason,
            other => panic!("expected a skip, got {other:?}"),
        }
    }

    fn runs(m: &Match) -> bool {
        matches!(m, Match::Run { .. })
    }

    #[test]
    fn push_to_branches() {
        let triggers = read_on(&map(vec![("push", map(vec![("branches", list(&["main", "releases/**"]))]))])).unwrap();
        assert!(runs(&triggers.matches(&push("refs/heads/main", &["a.rs"]))));
        assert!(runs(&triggers.matches(&push("refs/heads/releases/1/x", &["a.rs"]))));
        assert_eq!(
            reason(triggers.matches(&push("refs/heads/dev", &["a.rs"]))),
            "branch `dev` is not in `on.push.branches`"
        );
        assert_eq!(
            reason(triggers.matches(&push("refs/tags/v1", &[]))),
            "tag `v1` pushed, and `on.push` filters branches only"
        );
        assert!(reason(triggers.matches(&push("refs/pull/1/merge", &[]))).contains("neither a branch nor a tag"));
    }

    #[test]
    fn negated_and_ignored_branches_say_which_pattern() {
        let triggers =
            read_on(&map(vec![("push", map(vec![("branches", list(&["releases/**", "!releases/**-alpha"]))]))]))
                .unwrap();
        assert_eq!(
            reason(triggers.matches(&push("refs/heads/releases/10-alpha", &["a"]))),
            "branch `releases/10-alpha` is excluded by `!releases/**-alpha` in `on.push.branches`"
        );
        let ignoring = read_on(&map(vec![("push", map(vec![("branches-ignore", list(&["dev*"]))]))])).unwrap();
        assert_eq!(
            reason(ignoring.matches(&push("refs/heads/dev2", &["a"]))),
            "branch `dev2` is ignored by `dev*` in `on.push.branches-ignore`"
        );
        assert!(runs(&ignoring.matches(&push("refs/heads/main", &["a"]))));
        // Branch filters only: tags do not run.
        assert!(!runs(&ignoring.matches(&push("refs/tags/v1", &[]))));
    }

    #[test]
    fn push_of_tags() {
        let triggers =
            read_on(&map(vec![("push", map(vec![("tags", list(&["v*"])), ("paths", list(&["src/**"]))]))])).unwrap();
        assert!(runs(&triggers.matches(&push("refs/tags/v1.2", &[]))), "paths are not evaluated for tags");
        assert!(reason(triggers.matches(&push("refs/tags/x1", &[]))).contains("tag `x1` is not in `on.push.tags`"));
        assert_eq!(
            reason(triggers.matches(&push("refs/heads/main", &["src/a"]))),
            "branch `main` pushed, and `on.push` filters tags only"
        );
        let plain = read_on(&s("push")).unwrap();
        assert!(runs(&plain.matches(&push("refs/tags/v1", &[]))));
        assert!(runs(&plain.matches(&push("refs/heads/any/branch", &[]))));
    }

    #[test]
    fn paths_and_paths_ignore() {
        let only =
            read_on(&map(vec![("push", map(vec![("paths", list(&["sub-project/**", "!sub-project/docs/**"]))]))]))
                .unwrap();
        assert!(runs(&only.matches(&push("refs/heads/main", &["README.md", "sub-project/src/index.js"]))));
        assert_eq!(
            reason(only.matches(&push("refs/heads/main", &["sub-project/docs/readme.md"]))),
            "no changed path is in `on.push.paths` (`sub-project/docs/readme.md`)"
        );
        assert!(reason(only.matches(&push("refs/heads/main", &[]))).contains("no file changed"));
        let unknown = Event::Push(PushEvent { git_ref: "refs/heads/main".into(), paths: ChangedPaths::Unknown });
        assert!(runs(&only.matches(&unknown)), "unknown paths run, as GitHub does without a diff");

        let ignore = read_on(&map(vec![("push", map(vec![("paths-ignore", list(&["docs/**", "*.md"]))]))])).unwrap();
        assert!(runs(&ignore.matches(&push("refs/heads/main", &["docs/a.md", "src/lib.rs"]))));
        assert_eq!(
            reason(ignore.matches(&push("refs/heads/main", &["docs/a.md", "README.md", "docs/b", "CHANGES.md"]))),
            "every changed path is ignored by `on.push.paths-ignore` (`docs/a.md`, `README.md`, `docs/b`, and 1 more)"
        );
    }

    #[test]
    fn branches_and_paths_must_both_pass() {
        let triggers =
            read_on(&map(vec![("push", map(vec![("branches", list(&["releases/**"])), ("paths", list(&["**.js"]))]))]))
                .unwrap();
        assert!(runs(&triggers.matches(&push("refs/heads/releases/1", &["app/index.js"]))));
        assert!(!runs(&triggers.matches(&push("refs/heads/releases/1", &["app/index.ts"]))));
        assert!(!runs(&triggers.matches(&push("refs/heads/main", &["app/index.js"]))));
    }

    #[test]
    fn pull_requests() {
        let triggers = read_on(&map(vec![
            ("pull_request", map(vec![("branches", list(&["main"])), ("paths", list(&["src/**"]))])),
            ("pull_request_target", map(vec![("types", list(&["labeled"]))])),
        ]))
        .unwrap();
        let opened = pr("opened", "main", &["src/lib.rs"]);
        assert_eq!(
            triggers.matches(&Event::PullRequest(opened.clone())),
            Match::Run { event_name: "pull_request", inputs: BTreeMap::new() }
        );
        assert_eq!(
            reason(triggers.matches(&Event::PullRequest(pr("closed", "main", &["src/lib.rs"])))),
            "pull request action `closed` is not in `on.pull_request.types` (opened, synchronize, reopened)"
        );
        assert_eq!(
            reason(triggers.matches(&Event::PullRequest(pr("opened", "dev", &["src/lib.rs"])))),
            "base branch `dev` is not in `on.pull_request.branches`"
        );
        assert!(reason(triggers.matches(&Event::PullRequest(pr("synchronize", "main", &["docs/x"])))).contains("paths"));
        assert!(reason(triggers.matches(&Event::PullRequestTarget(opened))).contains("on.pull_request_target.types"));
        assert!(runs(&triggers.matches(&Event::PullRequestTarget(pr("labeled", "x", &[])))));
        let none = read_on(&s("push")).unwrap();
        assert_eq!(
            reason(none.matches(&Event::PullRequest(pr("opened", "main", &[])))),
            "the workflow has no `on.pull_request`"
        );
    }

    #[test]
    fn schedule_ticks() {
        let triggers = read_on(&map(vec![(
            "schedule",
            YamlNode::Sequence(vec![map(vec![("cron", s("30 5 * * 1,3"))]), map(vec![("cron", s("0 4 * * *"))])]),
        )]))
        .unwrap();
        assert!(runs(&triggers.matches(&Event::Schedule { cron: "0 4 * * *".into() })));
        assert!(reason(triggers.matches(&Event::Schedule { cron: "0 5 * * *".into() })).contains("not one of"));
        assert!(reason(read_on(&s("push")).unwrap().matches(&Event::Schedule { cron: "x".into() }))
            .contains("no `on.schedule`"));
    }

    fn dispatch(triggers: &Triggers, inputs: Value) -> Match {
        let Value::Object(inputs) = inputs else { panic!("object") };
        triggers.matches(&Event::Dispatch { inputs })
    }

    fn deploy() -> Triggers {
        read_on(&deploy_dispatch()).unwrap()
    }

    #[test]
    fn dispatch_fills_defaults_and_types_values() {
        let m = dispatch(&deploy(), json!({"version": "1.2", "dry_run": "true", "replicas": "3"}));
        let Match::Run { event_name, inputs } = m else { panic!("{m:?}") };
        assert_eq!(event_name, "workflow_dispatch");
        assert_eq!(
            Value::Object(inputs.into_iter().collect()),
            json!({
                "environment": "staging", "version": "1.2", "dry_run": true, "replicas": 3, "count": 3, "target": "",
                "note": ""
            })
        );
        let Match::Run { inputs, .. } = dispatch(
            &deploy(),
            json!({"version": "2", "environment": "production", "dry_run": false, "replicas": 2.5}),
        ) else {
            panic!()
        };
        assert_eq!(inputs["environment"], json!("production"));
        assert_eq!(inputs["replicas"], json!(2.5));
        let Match::Run { inputs, .. } = dispatch(&deploy(), json!({"version": "3"})) else { panic!() };
        assert_eq!(inputs["replicas"], json!(0));
        assert_eq!(inputs["dry_run"], json!(false));
    }

    #[test]
    fn dispatch_refuses_bad_inputs_naming_them() {
        let bad = |inputs: Value| match dispatch(&deploy(), inputs) {
            Match::BadInputs(err) => err.to_string(),
            other => panic!("{other:?}"),
        };
        assert_eq!(bad(json!({})), "input `version`: is required");
        assert!(bad(json!({"version": "1", "environment": "prod"}))
            .starts_with("input `environment`: `prod` is not one of the options"));
        assert!(bad(json!({"version": "1", "dry_run": "yes"})).starts_with("input `dry_run`: `yes` is not a boolean"));
        assert!(
            bad(json!({"version": "1", "replicas": "many"})).starts_with("input `replicas`: `many` is not a number")
        );
        assert!(bad(json!({"version": "1", "colour": "red"})).starts_with("input `colour`: not an input"));
        assert!(bad(json!({"version": ["1"]})).contains("expected a string"));
        let no_dispatch = read_on(&s("push")).unwrap();
        assert!(reason(dispatch(&no_dispatch, json!({}))).contains("no `on.workflow_dispatch`"));
        let bare = read_on(&s("workflow_dispatch")).unwrap();
        assert!(runs(&dispatch(&bare, json!({}))));
    }
}
