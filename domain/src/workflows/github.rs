//! The `github` context as a ported workflow reads it (behaviour.md §18):
//! the fields a run's trigger fills (`event_name`, `ref`, `sha`, `actor`,
//! `event.*`…), kept on the run when it is created, and the ones Baton
//! knows of the run itself (`workflow`, `run_id`, `run_number`,
//! `run_attempt`, `job`).
//!
//! The server resolves these when a job is queued, like `inputs`; what only
//! the machine knows (`github.workspace`, `github.action_path`) stays the
//! runner's ([`Reference::Runner`] in a step's `if:` and an action's
//! `action.yml`).
//!
//! [`Reference::Runner`]: super::expressions::Reference::Runner

use baton_api::pipelines::TriggerKind;
use serde_json::{Map, Value};
use uuid::Uuid;

/// The fields the trigger fills, stored with the run.
pub const TRIGGER_FIELDS: &[&str] = &[
    "event_name",
    "event",
    "ref",
    "ref_name",
    "ref_type",
    "sha",
    "repository",
    "repository_owner",
    "actor",
    "triggering_actor",
    "head_ref",
    "base_ref",
    "server_url",
];

/// The fields Baton knows of the run itself.
pub const RUN_FIELDS: &[&str] = &["workflow", "run_id", "run_number", "run_attempt", "job"];

/// Whether `github.<field>` is resolved by the server (the rest of the
/// context is the runner's, or unknown).
pub fn is_server_field(field: &str) -> bool {
    let field = field.to_ascii_lowercase();
    TRIGGER_FIELDS.contains(&field.as_str()) || RUN_FIELDS.contains(&field.as_str())
}

/// Why a workflow may not read `github.<field>`, for the fields people
/// write that Baton does not give (`github.token` reads the `GITHUB_TOKEN`
/// secret: see the expression parser).
pub fn refusal(field: &str) -> String {
    format!(
        "unknown reference github.{}: a workflow reads github.{}, github.{} and github.token",
        field.to_ascii_lowercase(),
        TRIGGER_FIELDS.join("|"),
        RUN_FIELDS.join("|")
    )
}

/// What the run's expressions read of the run itself, beside the fields
/// its trigger stored.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GithubData {
    /// The trigger's fields ([`TRIGGER_FIELDS`]), as stored on the run.
    pub fields: Map<String, Value>,
    /// The workflow's name (`github.workflow`).
    pub workflow: String,
    /// `None` while the run has no number yet (a workflow's concurrency
    /// group is expanded before the number is taken).
    pub run_number: Option<u64>,
    /// What started the run (`baton.trigger`): `push`, `pull_request`,
    /// `schedule`, `dispatch` or `api`.
    pub trigger: String,
}

/// The run a `github.*` reference is resolved for.
#[derive(Debug, Clone, Copy)]
pub struct RunPlace<'a> {
    pub run_id: Uuid,
    pub attempt: u32,
    /// The job's key, when a job's expression reads it.
    pub job: Option<&'a str>,
}

impl GithubData {
    /// `github.<path>`'s value (a path's first part is the field, the rest
    /// reads into `event`), `None` when there is nothing by that name.
    pub fn value(&self, path: &[String], place: RunPlace<'_>) -> Option<Value> {
        let (field, rest) = path.split_first()?;
        let field = field.to_ascii_lowercase();
        let own = match field.as_str() {
            "workflow" => Some(Value::String(self.workflow.clone())),
            "run_id" => Some(Value::String(place.run_id.to_string())),
            "run_number" => self.run_number.map(|n| Value::String(n.to_string())),
            "run_attempt" => Some(Value::String(place.attempt.to_string())),
            "job" => place.job.map(|job| Value::String(job.to_string())),
            _ => None,
        };
        let mut value = match own {
            Some(value) => value,
            None => lookup(&self.fields, &field)?.clone(),
        };
        for part in rest {
            value = match value {
                Value::Object(map) => lookup(&map, part)?.clone(),
                Value::Array(items) => items.get(part.parse::<usize>().ok()?)?.clone(),
                _ => return None,
            };
        }
        Some(value)
    }
}

impl GithubData {
    /// The `github` context of a stored run. A run stored before triggers
    /// existed was asked for through the API: a dispatch.
    pub fn of_run(run: &super::attempt::RunState) -> GithubData {
        let stored = run.github.as_deref().and_then(|text| serde_json::from_str::<Map<String, Value>>(text).ok());
        let fields = stored.unwrap_or_else(|| {
            let inputs = run.inputs.as_deref().and_then(|text| serde_json::from_str::<Map<String, Value>>(text).ok());
            for_dispatch(run.created_by.as_deref(), inputs.as_ref())
        });
        let trigger = run.trigger.as_ref().map_or(TriggerKind::Api, |t| t.kind);
        GithubData { fields, workflow: run.name.clone(), run_number: Some(run.number), trigger: trigger_name(trigger) }
    }
}

/// A trigger kind's name, as `baton.trigger` and the facts spell it.
pub fn trigger_name(kind: TriggerKind) -> String {
    serde_json::to_value(kind).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()
}

/// A key of `map` read exactly, else ignoring case (as GitHub reads its
/// contexts).
fn lookup<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    map.get(key).or_else(|| map.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v))
}

/// A value as the text an expression's reference yields: a string as
/// itself, anything else as its JSON (`true`, `3`, `{"a":1}`).
pub fn as_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The trigger's fields of a run asked for through the API (a dispatch of
/// a pipeline, or a whole file posted): GitHub calls a run a person asked
/// for `workflow_dispatch`, with its inputs in `event.inputs`; the git
/// fields are empty, as no push caused it.
pub fn for_dispatch(actor: Option<&str>, inputs: Option<&Map<String, Value>>) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("event_name".into(), Value::String("workflow_dispatch".into()));
    let mut event = Map::new();
    event.insert("inputs".into(), Value::Object(inputs.cloned().unwrap_or_default()));
    fields.insert("event".into(), Value::Object(event));
    for empty in ["ref", "ref_name", "ref_type", "sha", "repository", "repository_owner", "head_ref", "base_ref"] {
        fields.insert(empty.into(), Value::String(String::new()));
    }
    if let Some(actor) = actor {
        fields.insert("actor".into(), Value::String(actor.to_string()));
        fields.insert("triggering_actor".into(), Value::String(actor.to_string()));
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn place() -> RunPlace<'static> {
        RunPlace { run_id: Uuid::nil(), attempt: 2, job: Some("build") }
    }

    fn path(text: &str) -> Vec<String> {
        text.split('.').map(String::from).collect()
    }

    #[test]
    fn a_reference_reads_the_triggers_fields_the_run_and_into_the_event() {
        let data = GithubData {
            fields: json!({"event_name": "pull_request", "ref": "refs/pull/7/merge",
                "event": {"pull_request": {"draft": false, "number": 7, "labels": [{"name": "bench"}]}}})
            .as_object()
            .cloned()
            .unwrap_or_default(),
            workflow: "CI".into(),
            run_number: Some(12),
            trigger: "pull_request".into(),
        };
        let text = |p: &str| data.value(&path(p), place()).map(|v| as_text(&v));
        assert_eq!(text("event_name").as_deref(), Some("pull_request"));
        assert_eq!(text("Event_Name").as_deref(), Some("pull_request"), "contexts read ignoring case");
        assert_eq!(text("event.pull_request.number").as_deref(), Some("7"));
        assert_eq!(data.value(&path("event.pull_request.draft"), place()), Some(Value::Bool(false)));
        assert_eq!(text("event.pull_request.labels.0.name").as_deref(), Some("bench"));
        assert_eq!(text("workflow").as_deref(), Some("CI"));
        assert_eq!(text("run_number").as_deref(), Some("12"));
        assert_eq!(text("run_attempt").as_deref(), Some("2"));
        assert_eq!(text("job").as_deref(), Some("build"));
        assert_eq!(text("event.pull_request.missing"), None);
        assert_eq!(text("sha"), None, "a field the trigger did not fill is null");
    }

    #[test]
    fn a_dispatched_run_is_a_workflow_dispatch_with_its_inputs_in_the_event() {
        let inputs = json!({"env": "staging"}).as_object().cloned();
        let data = GithubData { fields: for_dispatch(Some("ops"), inputs.as_ref()), ..GithubData::default() };
        let text = |p: &str| data.value(&path(p), place()).map(|v| as_text(&v));
        assert_eq!(text("event_name").as_deref(), Some("workflow_dispatch"));
        assert_eq!(text("event.inputs.env").as_deref(), Some("staging"));
        assert_eq!(text("actor").as_deref(), Some("ops"));
        assert_eq!(text("ref").as_deref(), Some(""));
        assert_eq!(text("run_number"), None, "no number yet");
    }

    #[test]
    fn the_fields_people_write_that_baton_does_not_give_are_refused_saying_what_a_workflow_reads() {
        assert!(refusal("retention_days").contains("github.event_name"));
        assert!(is_server_field("SHA") && is_server_field("run_number") && !is_server_field("workspace"));
    }
}
