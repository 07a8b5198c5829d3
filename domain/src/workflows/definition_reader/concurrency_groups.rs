//! `concurrency:`, of the workflow or of a job.

use super::fields::{Fields, Location};
use super::values::read_continue_on_error;
use crate::workflows::concurrency::{self, ConcurrencySpec, MAX_QUEUE};
use crate::workflows::definition::DefinitionError;
use crate::workflows::expressions::{self, Reference};
use crate::workflows::yaml::YamlNode;

const CONCURRENCY_FIELDS: &[&str] = &["group", "cancel-in-progress", "queue", "limit"];

/// Where a `concurrency:` stands: what its expressions may read.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Level {
    Workflow,
    Job,
}

impl Level {
    fn readable(self, reference: &Reference) -> bool {
        match self {
            Level::Workflow => concurrency::readable(reference),
            Level::Job => concurrency::readable_by_job(reference),
        }
    }

    fn known(self) -> &'static str {
        match self {
            Level::Workflow => "inputs, vars, baton.workspace_id and baton.run_id are",
            Level::Job => "inputs, vars, matrix, baton.job, baton.workspace_id and baton.run_id are",
        }
    }
}

/// `concurrency:`: a group name (`concurrency: deploy-${{ inputs.env }}`),
/// or `{group, cancel-in-progress, queue, limit}`; `queue` is how many
/// may wait, 1 (the default: a newer waiting one replaces the older) to
/// 100, or `max` (100). The group and `cancel-in-progress` may read
/// `inputs`, `baton.workspace_id` and `baton.run_id` (a job's also
/// `matrix` and `baton.job`): they are expanded, and checked, when the run
/// is created.
pub(super) fn read_concurrency(
    node: Option<&YamlNode>,
    at: &Location,
    level: Level,
) -> Result<Option<ConcurrencySpec>, DefinitionError> {
    let Some(node) = node else { return Ok(None) };
    let (group_node, cancel, queue, limit) = match node {
        YamlNode::Mapping(_) => {
            let fields = Fields::read(node, CONCURRENCY_FIELDS, at, "a group name or a mapping with `group`")?;
            let Some(group) = fields.get("group") else {
                return Err(at.field("group").error("required: the group's name"));
            };
            (group, fields.get("cancel-in-progress"), fields.get("queue"), fields.get("limit"))
        }
        other => (other, None, None, None),
    };
    let group_at = at.field("group");
    let group = match group_node {
        YamlNode::String(text) if !text.trim().is_empty() => text.trim().to_string(),
        YamlNode::Integer(_) => group_node.scalar_text().unwrap_or_default(),
        other => return Err(group_at.expected("a group name", other)),
    };
    for reference in expressions::text_references(&group).map_err(|e| group_at.error(e))? {
        if !level.readable(&reference) {
            return Err(group_at.error(format!("{reference} is not known when the run is created: {}", level.known())));
        }
    }
    let cancel_at = at.field("cancel-in-progress");
    let cancel_in_progress = read_continue_on_error(cancel, &cancel_at)?;
    if let Some(text) = &cancel_in_progress {
        for reference in expressions::text_references(text).map_err(|e| cancel_at.error(e))? {
            if !level.readable(&reference) {
                return Err(cancel_at.error(format!("{reference} is not known when the run is created")));
            }
        }
    }
    let queue = match queue {
        None => 1,
        Some(YamlNode::String(text)) if text == "max" => MAX_QUEUE,
        Some(YamlNode::Integer(n)) if (1..=i128::from(MAX_QUEUE)).contains(n) => *n as u32,
        Some(_) => {
            return Err(at.field("queue").error(format!("must be a whole number from 1 to {MAX_QUEUE}, or `max`")))
        }
    };
    let limit = match limit {
        None => 1,
        Some(YamlNode::Integer(n)) if (1..=i128::from(concurrency::MAX_LIMIT)).contains(n) => *n as u32,
        Some(_) => {
            return Err(at.field("limit").error(format!("must be a whole number from 1 to {}", concurrency::MAX_LIMIT)))
        }
    };
    Ok(Some(ConcurrencySpec { group, cancel_in_progress, queue, limit }))
}
