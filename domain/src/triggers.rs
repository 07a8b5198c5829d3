//! Runs that start themselves (behaviour.md §18): a workflow's `on:` in
//! GitHub's syntax, read into plain types, and whether an event Baton
//! receives (a push, a pull request, a schedule's tick, a dispatch) starts
//! it, with the reason when it does not.
//!
//! - `on` reads `on:` (`read_on`), every event GitHub has, so nothing is
//!   silently dropped; the ones Baton cannot start runs on yet are kept as
//!   [`OtherEvent`]s and listed by [`Triggers::unsupported`], for the
//!   pipeline store to refuse (a workflow posted as a run carries `on:`
//!   for documentation only, so they are not errors there);
//! - `glob`: GitHub's filter patterns for branches, tags and paths;
//! - `cron`: `on.schedule` crons, their next firing and their interval;
//! - `matching`: an event against the triggers.
//!
//! No I/O: the hooks, the schedules and the pipeline store call these.

pub mod cron;
pub mod glob;
mod matching;
mod on;
#[cfg(test)]
mod test_trees;

use serde_json::Value;

pub use cron::{Cron, CronError};
pub use glob::{GlobError, Pattern, PatternList};
pub use matching::{dispatch_inputs, ChangedPaths, Event, InputError, Match, PullRequestEvent, PushEvent};
pub(crate) use on::read_on;
pub use on::{GITHUB_EVENTS, PULL_REQUEST_TYPES};

use crate::workflows::yaml::YamlNode;

/// The `on:` of a workflow's YAML text, read and validated (none: the
/// workflow starts only when asked through the API).
pub fn read_triggers(yaml: &str) -> Result<Triggers, TriggerError> {
    let root = YamlNode::parse(yaml)
        .map_err(|err| TriggerError { field: String::new(), message: format!("invalid YAML: {err}") })?;
    let YamlNode::Mapping(entries) = &root else { return Ok(Triggers::default()) };
    match entries.iter().find(|(key, _)| key.scalar_text().as_deref() == Some("on")) {
        Some((_, on)) => read_on(on),
        None => Ok(Triggers::default()),
    }
}

/// A workflow's `on:`, read and validated.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Triggers {
    pub push: Option<PushTrigger>,
    pub pull_request: Option<PullRequestTrigger>,
    pub pull_request_target: Option<PullRequestTrigger>,
    /// `on.schedule`, in the order written (empty: no schedule).
    pub schedule: Vec<Cron>,
    pub workflow_dispatch: Option<DispatchTrigger>,
    /// GitHub's events Baton cannot start runs on yet, in the order written.
    pub other: Vec<OtherEvent>,
}

/// A branch, tag or path filter: the patterns of `branches` (names
/// included) or of `branches-ignore` (names left out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// Whether this is the `-ignore` form.
    pub ignore: bool,
    pub patterns: PatternList,
}

/// `on.push`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushTrigger {
    pub branches: Option<Filter>,
    pub tags: Option<Filter>,
    pub paths: Option<Filter>,
}

/// `on.pull_request` or `on.pull_request_target`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequestTrigger {
    /// The actions that start a run (GitHub's default: opened,
    /// synchronize, reopened).
    pub types: Vec<String>,
    /// Matched against the pull request's base branch.
    pub branches: Option<Filter>,
    pub paths: Option<Filter>,
}

/// `on.workflow_dispatch`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DispatchTrigger {
    /// In the order written.
    pub inputs: Vec<DispatchInput>,
}

/// One of `on.workflow_dispatch.inputs`.
#[derive(Debug, Clone, PartialEq)]
pub struct DispatchInput {
    pub id: String,
    pub description: Option<String>,
    pub kind: InputType,
    pub required: bool,
    /// Typed as the input is: a string, a boolean or a number.
    pub default: Option<Value>,
    /// A `choice`'s options.
    pub options: Vec<String>,
}

/// A dispatch input's `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputType {
    String,
    Boolean,
    Number,
    Choice,
    /// GitHub offers the repository's environments; Baton reads a string.
    Environment,
}

/// An event of GitHub's that Baton reads but cannot start runs on yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtherEvent {
    pub name: String,
    /// The names of its settings (`types`, `branches`, …), as written.
    pub settings: Vec<String>,
}

/// Why an `on:` is refused: the field (`on.push.branches[2]`) and what is
/// wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriggerError {
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for TriggerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "field `{}`: {}", self.field, self.message)
    }
}

impl std::error::Error for TriggerError {}

impl Triggers {
    /// Whether `on:` names no event at all.
    pub fn is_empty(&self) -> bool {
        self.push.is_none()
            && self.pull_request.is_none()
            && self.pull_request_target.is_none()
            && self.schedule.is_empty()
            && self.workflow_dispatch.is_none()
            && self.other.is_empty()
    }

    /// What valid GitHub syntax Baton cannot honour, as (field, why): the
    /// pipeline store refuses a definition with any (behaviour.md §18: "an
    /// `on:` Baton cannot honour is a 400 naming the field at store time").
    pub fn unsupported(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        // `workflow_call` starts nothing: it makes the pipeline callable by
        // a job's `uses:` (`workflows::reusable`).
        for event in self.other.iter().filter(|event| event.name != "workflow_call") {
            let why = format!(
                "Baton does not start runs on `{}` events; it starts them on push, pull_request, pull_request_target, schedule and workflow_dispatch",
                event.name
            );
            out.push((format!("on.{}", event.name), why));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::workflows::parse_definition;

    const JOBS: &str = "jobs:\n  a: {runs-on: l, steps: [{run: x}]}\n";

    fn refusal(on: &str) -> (Option<String>, String) {
        let err = parse_definition(&format!("{on}{JOBS}")).unwrap_err();
        (err.field, err.message)
    }

    #[test]
    fn a_workflows_triggers_are_read_from_its_text() {
        let read = super::read_triggers(&format!("on:\n  push:\n    branches: [main]\n{JOBS}")).unwrap();
        assert!(read.push.is_some() && read.schedule.is_empty());
        assert_eq!(super::read_triggers(JOBS).unwrap(), super::Triggers::default(), "no on: starts by API only");
        let err = super::read_triggers("on:\n  schedule: [{cron: 'x'}]\n").unwrap_err();
        assert_eq!(err.field, "on.schedule[0].cron");
    }

    #[test]
    fn a_posted_definition_refuses_a_malformed_on_naming_the_field() {
        let (field, message) = refusal("on:\n  schedule:\n    - cron: '0 0 * *'\n");
        assert_eq!(field.as_deref(), Some("on.schedule[0].cron"));
        assert!(message.contains("five fields"), "{message}");
        let (field, _) = refusal("on:\n  push:\n    branches: [main]\n    branches-ignore: [dev]\n");
        assert_eq!(field.as_deref(), Some("on.push.branches-ignore"));
        let (field, _) = refusal("on:\n  push:\n    paths: ['src/**', '[oops']\n");
        assert_eq!(field.as_deref(), Some("on.push.paths[1]"));
        let (field, _) = refusal("on:\n  workflow_dispatch:\n    inputs:\n      x: {type: text}\n");
        assert_eq!(field.as_deref(), Some("on.workflow_dispatch.inputs.x.type"));
        let (field, _) = refusal("on: [push, pusj]\n");
        assert_eq!(field.as_deref(), Some("on[1]"));
    }

    #[test]
    fn a_posted_definition_keeps_accepting_events_baton_does_not_start_runs_on() {
        for on in [
            "on: [push]\n",
            "on:\n",
            "on:\n  release:\n    types: [published]\n  workflow_call:\n    inputs:\n      t: {type: string}\n",
            "on:\n  schedule:\n    - cron: '* * * * *'\n",
            "on:\n  merge_group:\n  pull_request:\n",
        ] {
            assert!(parse_definition(&format!("{on}{JOBS}")).is_ok(), "{on}");
        }
    }
}
