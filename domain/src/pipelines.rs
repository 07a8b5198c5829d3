//! Pipelines (behaviour.md §18): a workflow definition kept under a name in
//! a workspace. What is decided here, without I/O: whether a name and a
//! definition may be stored (its `on:` included, refused naming the field
//! when Baton cannot honour it), the version a text is, the triggers as the
//! API shows them, and a dispatch's inputs.

use baton_api::pipelines::{
    DispatchInputView, DispatchView, FilterView, PipelineTriggers, PullRequestTriggerView, PushTriggerView,
    ScheduleView,
};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::error::{ApiError, ErrorCode};
use crate::triggers::{self, Filter, InputType, PullRequestTrigger, Triggers};
use crate::workflows::reusable::CalledWorkflows;
use crate::workflows::{parse_definition_with, DefinitionError, WorkflowDefinition};

/// A pipeline name: the workspace id's pattern (letters, digits, `-`, `_`
/// and `.`, starting with a letter or digit, at most 64).
pub fn name(raw: &str) -> Result<&str, ApiError> {
    crate::limits::workspace_id(raw).map_err(|_| {
        ApiError::invalid_request(format!(
            "pipeline names are 1 to {} characters of letters, digits, '-', '_' and '.', starting with a letter or digit",
            crate::limits::MAX_WORKSPACE_ID_LEN
        ))
    })
}

/// The version of a definition's text: its digest, so putting the same
/// text again is no change and any edit is a new version.
pub fn version_of(definition: &str) -> String {
    format!("sha256:{:x}", Sha256::digest(definition.as_bytes()))
}

/// A definition read for storing as a pipeline.
#[derive(Debug, Clone)]
pub struct ReadPipeline {
    pub definition: WorkflowDefinition,
    pub triggers: Triggers,
}

/// Reads `text` as a pipeline's definition: the workflow as a run would
/// take it, and its `on:`, refusing what Baton cannot honour (a workflow
/// posted as a run keeps such an `on:` as documentation; a pipeline's
/// starts runs, so it must mean what it says). Its calls of other
/// pipelines are expanded from `called`.
pub fn read(text: &str, called: &CalledWorkflows) -> Result<ReadPipeline, ApiError> {
    let definition = parse_definition_with(text, called)?;
    let triggers = triggers::read_triggers(text).map_err(|err| DefinitionError {
        job: None,
        field: Some(err.field.clone()),
        message: err.message.clone(),
    })?;
    if let Some((field, message)) = triggers.unsupported().into_iter().next() {
        return Err(DefinitionError { job: None, field: Some(field), message }.into());
    }
    Ok(ReadPipeline { definition, triggers })
}

/// The triggers as the API shows them.
pub fn triggers_view(triggers: &Triggers) -> PipelineTriggers {
    let filter = |filter: &Option<Filter>| {
        filter.as_ref().map(|f| FilterView {
            patterns: f.patterns.patterns().iter().map(|p| p.text().to_string()).collect(),
            ignore: f.ignore,
        })
    };
    let pull_request = |trigger: &PullRequestTrigger| PullRequestTriggerView {
        types: trigger.types.clone(),
        branches: filter(&trigger.branches),
        paths: filter(&trigger.paths),
    };
    PipelineTriggers {
        push: triggers.push.as_ref().map(|push| PushTriggerView {
            branches: filter(&push.branches),
            tags: filter(&push.tags),
            paths: filter(&push.paths),
        }),
        pull_request: triggers.pull_request.as_ref().map(pull_request),
        pull_request_target: triggers.pull_request_target.as_ref().map(pull_request),
        schedule: triggers.schedule.iter().map(|cron| ScheduleView { cron: cron.text().to_string() }).collect(),
        workflow_dispatch: triggers.workflow_dispatch.as_ref().map(|dispatch| DispatchView {
            inputs: dispatch
                .inputs
                .iter()
                .map(|input| DispatchInputView {
                    id: input.id.clone(),
                    kind: input_type_name(input.kind).to_string(),
                    required: input.required,
                    default: input.default.clone(),
                    options: input.options.clone(),
                    description: input.description.clone(),
                })
                .collect(),
        }),
    }
}

fn input_type_name(kind: InputType) -> &'static str {
    match kind {
        InputType::String => "string",
        InputType::Boolean => "boolean",
        InputType::Number => "number",
        InputType::Choice => "choice",
        InputType::Environment => "environment",
    }
}

/// A dispatch's inputs: typed by `on.workflow_dispatch.inputs` where the
/// pipeline declares it (defaults filled in, a missing required input or a
/// value of the wrong type refused naming it, 400 `invalid-inputs`); as
/// given where it does not (the API may run any pipeline, as a posted
/// file runs with whatever inputs it is given).
pub fn dispatch_inputs(
    triggers: &Triggers,
    given: Option<&Map<String, Value>>,
) -> Result<Map<String, Value>, ApiError> {
    let given = given.cloned().unwrap_or_default();
    let Some(dispatch) = &triggers.workflow_dispatch else { return Ok(given) };
    let typed = triggers::dispatch_inputs(dispatch, &given)
        .map_err(|err| ApiError::new(ErrorCode::InvalidInputs, format!("inputs.{}: {}", err.input, err.message)))?;
    Ok(typed.into_iter().collect())
}

/// The inputs of a run an event started (a push, a pull request): each
/// declared dispatch input's default, or GitHub's empty value for its type,
/// as GitHub gives a workflow that reads `inputs.*` outside a dispatch.
pub fn event_inputs(triggers: &Triggers) -> Map<String, Value> {
    let Some(dispatch) = &triggers.workflow_dispatch else { return Map::new() };
    dispatch
        .inputs
        .iter()
        .map(|input| {
            let value = input.default.clone().unwrap_or(match input.kind {
                InputType::Boolean => Value::Bool(false),
                InputType::Number => Value::from(0),
                InputType::String | InputType::Choice | InputType::Environment => Value::String(String::new()),
            });
            (input.id.clone(), value)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const JOBS: &str = "jobs:\n  a: {runs-on: linux, steps: [{run: 'true'}]}\n";

    #[test]
    fn a_version_is_the_texts_digest() {
        let one = version_of(JOBS);
        assert!(one.starts_with("sha256:") && one.len() == 7 + 64, "{one}");
        assert_eq!(one, version_of(JOBS));
        assert_ne!(one, version_of(&format!("{JOBS}# a comment is a change\n")));
    }

    #[test]
    fn a_pipeline_refuses_an_on_it_cannot_honour_naming_the_field() {
        let refused = |on: &str| read(&format!("{on}{JOBS}"), &CalledWorkflows::none()).unwrap_err().message;
        assert!(refused("on:\n  release:\n    types: [published]\n").contains("on.release"));
        assert!(refused("on:\n  schedule:\n    - cron: '61 * * * *'\n").contains("on.schedule[0].cron"));
        assert!(
            read(&format!("on:\n  schedule:\n    - cron: '* * * * *'\n{JOBS}"), &CalledWorkflows::none()).is_ok(),
            "every minute is honoured"
        );
        assert!(refused("on:\n  push:\n    branches: ['[x']\n").contains("on.push.branches[0]"));
        let read = read(
            &format!("on:\n  push:\n    branches: [main]\n    paths-ignore: ['docs/**']\n{JOBS}"),
            &CalledWorkflows::none(),
        )
        .unwrap();
        let view = triggers_view(&read.triggers);
        let push = view.push.unwrap();
        assert_eq!(push.branches.unwrap().patterns, vec!["main"]);
        let paths = push.paths.unwrap();
        assert!(paths.ignore && paths.patterns == vec!["docs/**"]);
    }

    #[test]
    fn names_follow_the_workspace_ids_pattern() {
        assert!(name("deploy-prod.v2").is_ok());
        for bad in ["", "-x", "a/b", "a b", &"x".repeat(65)] {
            assert_eq!(name(bad).unwrap_err().code, ErrorCode::InvalidRequest, "{bad}");
        }
    }

    #[test]
    fn a_dispatch_is_typed_by_the_declared_inputs_with_defaults_and_names_the_bad_one() {
        let text = format!(
            "on:\n  workflow_dispatch:\n    inputs:\n      env: {{type: choice, options: [staging, prod], required: true}}\n      dry: {{type: boolean, default: true}}\n      n: {{type: number}}\n{JOBS}"
        );
        let triggers = read(&text, &CalledWorkflows::none()).unwrap().triggers;
        let given = json!({"env": "prod", "n": "3"});
        let inputs = dispatch_inputs(&triggers, given.as_object()).unwrap();
        assert_eq!(Value::Object(inputs), json!({"env": "prod", "dry": true, "n": 3}));
        let missing = dispatch_inputs(&triggers, json!({}).as_object()).unwrap_err();
        assert_eq!(missing.code, ErrorCode::InvalidInputs);
        assert!(missing.message.contains("inputs.env"), "{}", missing.message);
        let wrong = dispatch_inputs(&triggers, json!({"env": "qa"}).as_object()).unwrap_err();
        assert!(wrong.message.contains("not one of the options"), "{}", wrong.message);
        let untyped = read(JOBS, &CalledWorkflows::none()).unwrap().triggers;
        let given = json!({"anything": 1});
        assert_eq!(Value::Object(dispatch_inputs(&untyped, given.as_object()).unwrap()), given);
    }
}
