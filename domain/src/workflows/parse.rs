//! Parses a YAML workflow definition into a [`WorkflowDefinition`] and
//! validates it completely (behaviour.md §8): the reader checks each job and
//! field, then the checks across jobs (needs, references) and the sizes of
//! what will be stored.
//!
//! A definition is validated completely before anything is written.
//! Fields Baton does not support (`services`, `container`, …) are
//! refused with a message instead of being ignored: a silently ignored key
//! would run a job differently from what its author wrote. Only the
//! top-level `on:` is accepted and ignored, since Baton runs are started by
//! API and GitHub-style files commonly carry it.

use std::time::Duration;

use uuid::Uuid;

use super::definition::{
    DefinitionError, WorkflowDefinition, MAX_DEFINITION_BYTES, MAX_JOB_SPEC_BYTES, MAX_SNAPSHOT_BYTES,
    MAX_WORKFLOW_NAME_LEN,
};
use super::definition_reader::read_workflow;
use super::references::check_references;
use super::reusable::{expand_calls, CalledWorkflows};
use super::spec::job_spec;
use super::yaml::YamlNode;

/// Parses and fully validates a YAML workflow definition that calls no
/// reusable workflow (a call is refused, naming the pipeline missing).
pub fn parse_definition(yaml: &str) -> Result<WorkflowDefinition, DefinitionError> {
    parse_definition_with(yaml, &CalledWorkflows::none())
}

/// Parses and fully validates a YAML workflow definition, its calls of
/// reusable workflows expanded from `called` (`reusable::missing_calls`
/// says what to fetch first).
pub fn parse_definition_with(yaml: &str, called: &CalledWorkflows) -> Result<WorkflowDefinition, DefinitionError> {
    if yaml.len() > MAX_DEFINITION_BYTES {
        return Err(DefinitionError::document(format!(
            "the definition is {} bytes, at most {MAX_DEFINITION_BYTES} are accepted",
            yaml.len()
        )));
    }
    let root = YamlNode::parse(yaml).map_err(|err| DefinitionError::document(format!("invalid YAML: {err}")))?;
    let root = expand_calls(root, called)?;
    let definition = read_workflow(&root)?;
    check_needs(&definition)?;
    check_references(&definition)?;
    check_stored_sizes(&definition)?;
    Ok(definition)
}

/// What the definition becomes in the table fits there: its name in a key,
/// each job's spec, the whole snapshot in one item. A definition inside the
/// byte, job and step limits can still expand past these (the workflow env
/// is copied into every job), so they are checked on what is stored.
fn check_stored_sizes(definition: &WorkflowDefinition) -> Result<(), DefinitionError> {
    if let Some(name) = &definition.name {
        if name.len() > MAX_WORKFLOW_NAME_LEN {
            return Err(DefinitionError::document(format!(
                "`name` is {} bytes, at most {MAX_WORKFLOW_NAME_LEN} are accepted",
                name.len()
            )));
        }
    }
    for job in &definition.jobs {
        let spec = job_spec(definition, job, Uuid::nil(), Duration::from_secs(60), None);
        let size = serde_json::to_string(&spec).map_or(usize::MAX, |text| text.len());
        if size > MAX_JOB_SPEC_BYTES {
            return Err(DefinitionError::in_job(
                &job.key,
                None,
                format!(
                    "its steps and env (with the workflow's env) are {size} bytes, at most {MAX_JOB_SPEC_BYTES} are accepted"
                ),
            ));
        }
    }
    let size = serde_json::to_string(definition).map_or(usize::MAX, |text| text.len());
    if size > MAX_SNAPSHOT_BYTES {
        return Err(DefinitionError::document(format!(
            "the parsed definition is {size} bytes, at most {MAX_SNAPSHOT_BYTES} are accepted: fewer or shorter steps"
        )));
    }
    Ok(())
}

/// Every need names a job of the definition, and the needs form no cycle
/// (a cycle would leave its jobs waiting on each other forever).
fn check_needs(definition: &WorkflowDefinition) -> Result<(), DefinitionError> {
    let graph = definition.needs_graph();
    for (position, job) in definition.jobs.iter().enumerate() {
        if !graph.has_unknown_needs(position) {
            continue;
        }
        if let Some(unknown) = job.needs.iter().find(|need| graph.index_of(need).is_none()) {
            return Err(DefinitionError::in_job(&job.key, Some("needs"), format!("unknown job `{unknown}`")));
        }
    }
    if let Some(cycle) = graph.find_cycle() {
        let first = cycle.first().cloned().unwrap_or_default();
        return Err(DefinitionError::in_job(first, Some("needs"), format!("dependency cycle {}", cycle.join(" → "))));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
