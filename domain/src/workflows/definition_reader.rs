//! Reads a parsed YAML tree into a [`WorkflowDefinition`], field by field,
//! so that every refusal names its job and field (behaviour.md §8).
//!
//! Cross-job rules (unknown needs, cycles) are checked afterwards by
//! `parse::parse_definition`, once every job has been read.

mod artifact_actions;
mod concurrency_groups;
mod fields;
mod jobs;
mod permissions;
mod scheduling;
mod steps;
mod strategy;
mod values;
mod waiting_jobs;

pub(crate) use strategy::{call_legs, runtime_legs, with_decided};

use crate::triggers;
use crate::workflows::definition::{DefinitionError, WorkflowDefinition, DEFAULT_RUN_TIMEOUT_MINUTES};
use crate::workflows::yaml::YamlNode;
use concurrency_groups::{read_concurrency, Level};
use fields::{Fields, Location};
use jobs::read_jobs;
use permissions::check_permissions;
use values::{read_env, read_names, read_text, read_timeout};

const WORKFLOW_FIELDS: &[&str] =
    &["name", "run-name", "env", "mask-env", "timeout-minutes", "concurrency", "jobs", "on", "permissions", "defaults"];

/// Reads the whole workflow; see the module doc.
pub(super) fn read_workflow(root: &YamlNode) -> Result<WorkflowDefinition, DefinitionError> {
    if *root == YamlNode::Null {
        return Err(DefinitionError::document("the definition is empty"));
    }
    let top = Location::default();
    let fields = Fields::read(root, WORKFLOW_FIELDS, &top, "a mapping with `jobs`")?;
    check_on(fields.get("on"))?;
    let name = fields.get("name").map(|node| read_text(node, &top.field("name"))).transpose()?.flatten();
    let run_name_at = top.field("run-name");
    let run_name = fields.get("run-name").map(|node| read_text(node, &run_name_at)).transpose()?.flatten();
    if let Some(text) = &run_name {
        crate::workflows::run_name::check(text).map_err(|why| run_name_at.error(why))?;
    }
    let env = read_env(fields.get("env"), &top.field("env"))?;
    check_permissions(fields.get("permissions"), &top.field("permissions"))?;
    let timeout_minutes = read_timeout(fields.get("timeout-minutes"), &top.field("timeout-minutes"))?
        .unwrap_or(DEFAULT_RUN_TIMEOUT_MINUTES);
    let defaults = steps::read_defaults(fields.get("defaults"), &top.field("defaults"))?;
    let (jobs, matrices) = read_jobs(fields.get("jobs"), &top.field("jobs"), &defaults)?;
    let mask_env = read_names(fields.get("mask-env"), &top.field("mask-env"))?;
    let concurrency = read_concurrency(fields.get("concurrency"), &top.field("concurrency"), Level::Workflow)?;
    Ok(WorkflowDefinition { name, run_name, env, mask_env, timeout_minutes, concurrency, jobs, matrices })
}

/// `on:` must be valid GitHub syntax (a bad cron or glob is refused here,
/// naming its field); what it says is not kept: a run posted as a file is
/// started by that post. Events Baton cannot start runs on are accepted
/// here: refusing them is the pipeline store's (`Triggers::unsupported`).
fn check_on(on: Option<&YamlNode>) -> Result<(), DefinitionError> {
    let Some(on) = on else { return Ok(()) };
    triggers::read_on(on).map(|_| ()).map_err(|err| DefinitionError {
        job: None,
        field: Some(err.field),
        message: err.message,
    })
}
