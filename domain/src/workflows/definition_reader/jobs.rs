//! `jobs:`: each job read, a matrix job expanded into its legs, and the
//! needs of a matrix job turned into its legs.

use std::collections::{BTreeMap, HashSet};

use super::concurrency_groups::{read_concurrency, Level};
use super::fields::{Fields, Location};
use super::permissions::check_permissions;
use super::scheduling::{read_condition, read_needs, read_priority, read_retry, read_runs_on, read_tools};
use super::steps::{read_defaults, read_steps, RunDefaults};
use super::strategy::{check_decided_when_due, decided_when_due, expand_matrix, leg_timeout, read_strategy};
use super::values::{
    check_output_name, is_expression, read_continue_on_error, read_env, read_names, read_text, read_text_list,
    read_timeout,
};
use super::waiting_jobs::{read_approval, read_listen};
use crate::workflows::definition::{
    DefinitionError, JobDefinition, OutputSource, DEFAULT_JOB_TIMEOUT_MINUTES, MAX_JOBS, MAX_JOB_ID_LEN,
    MAX_OUTPUTS_PER_JOB,
};
use crate::workflows::expressions::{self, Reference};
use crate::workflows::matrix::{MatrixGroup, Strategy};
use crate::workflows::runtime_matrix::RuntimeMatrix;
use crate::workflows::yaml::YamlNode;
use baton_api::runs::JobEnvironment;

const JOB_FIELDS: &[&str] = &[
    "name",
    "runs-on",
    "tools",
    "needs",
    "if",
    "timeout-minutes",
    "continue-on-error",
    "retry",
    "priority",
    "strategy",
    "env",
    "steps",
    "outputs",
    "mask-env",
    "approval",
    "listen",
    "concurrency",
    "permissions",
    "defaults",
    "environment",
];
/// What an approval job cannot have: it runs on no runner.
const NOT_FOR_APPROVALS: &[&str] = &[
    "runs-on",
    "tools",
    "steps",
    "strategy",
    "env",
    "outputs",
    "mask-env",
    "retry",
    "priority",
    "timeout-minutes",
    "listen",
    "defaults",
];

pub(super) fn read_jobs(
    node: Option<&YamlNode>,
    at: &Location,
    defaults: &RunDefaults,
) -> Result<(Vec<JobDefinition>, Vec<MatrixGroup>), DefinitionError> {
    let Some(node) = node else { return Err(at.error("required: a mapping of job ids to jobs")) };
    let YamlNode::Mapping(entries) = node else { return Err(at.expected("a mapping of job ids to jobs", node)) };
    if entries.is_empty() {
        return Err(at.error("at least one job is required"));
    }
    if entries.len() > MAX_JOBS {
        return Err(at.error(format!("{} jobs, at most {MAX_JOBS} are accepted", entries.len())));
    }
    let mut seen = HashSet::with_capacity(entries.len());
    let mut jobs = Vec::with_capacity(entries.len());
    let mut matrices = Vec::new();
    for (key, body) in entries {
        let Some(key) = key.scalar_text() else { return Err(at.expected("job ids as text", key)) };
        check_job_id(&key)?;
        if !seen.insert(key.clone()) {
            return Err(DefinitionError::in_job(key, None, "duplicate job id"));
        }
        let (job, matrix) = read_job(&key, body, defaults)?;
        match matrix {
            None => jobs.push(job),
            Some((strategy, runs_on, timeout)) => {
                let (legs, group) = expand_matrix(job, &strategy, &runs_on, timeout.as_deref())?;
                jobs.extend(legs);
                matrices.push(group);
            }
        }
        if jobs.len() > MAX_JOBS {
            return Err(DefinitionError::in_job(
                key,
                Some("strategy"),
                format!("the jobs with their matrix legs are more than {MAX_JOBS}, at most {MAX_JOBS} are accepted"),
            ));
        }
    }
    // A job that needs a matrix job waits for all of its legs.
    for job in &mut jobs {
        let mut needs = Vec::with_capacity(job.needs.len());
        for need in &job.needs {
            match matrices.iter().find(|group: &&MatrixGroup| &group.job == need) {
                Some(group) => needs.extend(group.legs.iter().cloned()),
                None => needs.push(need.clone()),
            }
        }
        job.needs = needs;
    }
    Ok((jobs, matrices))
}

/// `^[A-Za-z_][A-Za-z0-9_-]*$`, at most 100 characters.
fn check_job_id(key: &str) -> Result<(), DefinitionError> {
    let mut chars = key.chars();
    let well_formed = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if well_formed && key.len() <= MAX_JOB_ID_LEN {
        return Ok(());
    }
    let shown =
        if key.chars().count() > 40 { format!("{}…", key.chars().take(40).collect::<String>()) } else { key.into() };
    Err(DefinitionError::in_job(
        shown,
        None,
        format!(
            "invalid job id: it starts with a letter or '_', holds only letters, digits, '_' and '-', \
             and has at most {MAX_JOB_ID_LEN} characters"
        ),
    ))
}

/// A job as written; with a `strategy`, also the strategy and its `runs-on`
/// as written (each leg puts its values in before it is checked).
/// A job as read, and for a matrix job what each leg works out: its
/// strategy, its `runs-on` labels and its `timeout-minutes` expression.
type ReadJob = (JobDefinition, Option<(Strategy, Vec<String>, Option<String>)>);

fn read_job(key: &str, body: &YamlNode, defaults: &RunDefaults) -> Result<ReadJob, DefinitionError> {
    let at = Location::job(key);
    let fields = Fields::read(body, JOB_FIELDS, &at, "a mapping with `runs-on` and `steps`")?;
    let name = fields.get("name").map(|node| read_text(node, &at.field("name"))).transpose()?.flatten();
    if let Some(node) = fields.get("approval") {
        if let Some(field) = NOT_FOR_APPROVALS.iter().find(|field| fields.get(field).is_some()) {
            return Err(at.field(field).error(
                "an approval job runs on no runner: it has no `runs-on`, `steps`, `strategy`, `env`, `outputs`, \
                 `retry`, `priority`, `defaults` or `timeout-minutes` (its inputs are its outputs; \
                 `approval.timeout-minutes` bounds its wait)",
            ));
        }
        let approval = read_approval(node, &at.field("approval"))?;
        let (condition, when) = read_condition(fields.get("if"), &at.field("if"))?;
        let job = JobDefinition {
            key: key.to_string(),
            name,
            labels: Vec::new(),
            needs: read_needs(fields.get("needs"), &at.field("needs"))?,
            matrix: None,
            runtime_matrix: None,
            condition,
            when,
            outputs: BTreeMap::new(),
            mask_env: Vec::new(),
            timeout_minutes: approval.timeout_minutes,
            continue_on_error: read_continue_on_error(fields.get("continue-on-error"), &at.field("continue-on-error"))?,
            priority: None,
            retry: None,
            env: BTreeMap::new(),
            steps: Vec::new(),
            approval: Some(approval),
            listen: None,
            concurrency: read_concurrency(fields.get("concurrency"), &at.field("concurrency"), Level::Job)?,
            environment: read_environment(fields.get("environment"), &at.field("environment"))?,
        };
        return Ok((job, None));
    }
    let strategy_node = fields.get("strategy");
    let at_strategy = at.field("strategy");
    let when_due = strategy_node.map(|node| decided_when_due(node, &at_strategy)).transpose()?.unwrap_or(false);
    let strategy = match strategy_node {
        Some(node) if when_due => {
            check_decided_when_due(node, &at_strategy)?;
            None
        }
        Some(node) => Some(read_strategy(node, &at_strategy)?),
        None => None,
    };
    // `tools:` are labels of their own namespace (`runners::tools`), added
    // to `runs-on`'s: claims, demand and the unschedulable check match both.
    let tools = read_tools(fields.get("tools"), &at.field("tools"))?;
    let matrix_runs_on = || -> Result<Vec<String>, DefinitionError> {
        let Some(node) = fields.get("runs-on") else {
            return Err(at.field("runs-on").error("required: the labels a runner must offer to run this job"));
        };
        let mut runs_on = read_text_list(node, &at.field("runs-on"), "a label or a list of labels")?;
        runs_on.extend(tools.iter().cloned());
        Ok(runs_on)
    };
    let (labels, matrix) = match strategy {
        None if when_due => (Vec::new(), None),
        None => (read_runs_on(fields.get("runs-on"), &at.field("runs-on"), &tools)?, None),
        Some(strategy) => (Vec::new(), Some((strategy, matrix_runs_on()?))),
    };
    // `timeout-minutes: ${{ … }}` reads a leg's matrix values (CodeQL's
    // longer timeout for one language): worked out per leg when the run is
    // created, like `runs-on`.
    let timeout_node = fields.get("timeout-minutes");
    let timeout_expression = timeout_node.filter(|node| is_expression(node)).and_then(YamlNode::scalar_text);
    let matrix = matrix.map(|(strategy, runs_on)| (strategy, runs_on, timeout_expression.clone()));
    // A matrix decided when the job is due keeps what its legs will work
    // out then; what can be checked now is (its `runs-on` and an expression
    // `timeout-minutes` read only matrix values, as a written matrix's).
    let runtime_matrix = match strategy_node {
        Some(node) if when_due => {
            let runs_on = matrix_runs_on()?;
            let written = runs_on
                .iter()
                .map(|label| ("runs-on", label))
                .chain(timeout_expression.iter().map(|t| ("timeout-minutes", t)));
            for (field, text) in written {
                for reference in expressions::text_references(text).map_err(|err| at.field(field).error(err))? {
                    if !matches!(reference, Reference::Matrix(_)) {
                        return Err(at.field(field).error(format!(
                            "{reference} is not known when the run is created: {field} reads only matrix.<name>"
                        )));
                    }
                }
            }
            let strategy = serde_json::to_string(node).map_err(|err| at_strategy.error(err.to_string()))?;
            Some(RuntimeMatrix { strategy, runs_on, timeout: timeout_expression.clone() })
        }
        _ => None,
    };
    let needs = read_needs(fields.get("needs"), &at.field("needs"))?;
    let (condition, when) = read_condition(fields.get("if"), &at.field("if"))?;
    let timeout_minutes = match (&timeout_expression, &matrix) {
        (Some(_), _) if runtime_matrix.is_some() => DEFAULT_JOB_TIMEOUT_MINUTES,
        (Some(text), None) => leg_timeout(text, None, &at.field("timeout-minutes"))?,
        (Some(_), Some(_)) => DEFAULT_JOB_TIMEOUT_MINUTES,
        (None, _) => read_timeout(timeout_node, &at.field("timeout-minutes"))?.unwrap_or(DEFAULT_JOB_TIMEOUT_MINUTES),
    };
    let env = read_env(fields.get("env"), &at.field("env"))?;
    check_permissions(fields.get("permissions"), &at.field("permissions"))?;
    // The job's `defaults.run` over the workflow's, field by field.
    let defaults = defaults.overridden_by(read_defaults(fields.get("defaults"), &at.field("defaults"))?);
    let steps = read_steps(fields.get("steps"), &at.field("steps"), &defaults)?;
    let outputs = read_outputs(fields.get("outputs"), &at.field("outputs"))?;
    let mask_env = read_names(fields.get("mask-env"), &at.field("mask-env"))?;
    let continue_on_error = read_continue_on_error(fields.get("continue-on-error"), &at.field("continue-on-error"))?;
    let retry = read_retry(fields.get("retry"), &at.field("retry"))?;
    let priority = read_priority(fields.get("priority"), &at.field("priority"))?;
    let listen = match fields.get("listen") {
        None => None,
        Some(node) => {
            for field in ["strategy", "retry"] {
                if fields.get(field).is_some() {
                    return Err(at.field(field).error(
                        "a listening job runs once an event, one at a time: it takes no `strategy` or `retry`",
                    ));
                }
            }
            Some(read_listen(node, &at.field("listen"))?)
        }
    };
    let job = JobDefinition {
        priority,
        matrix: None,
        runtime_matrix,
        mask_env,
        continue_on_error,
        retry,
        key: key.to_string(),
        name,
        labels,
        needs,
        condition,
        when,
        outputs,
        timeout_minutes,
        env,
        steps,
        approval: None,
        listen,
        concurrency: read_concurrency(fields.get("concurrency"), &at.field("concurrency"), Level::Job)?,
        environment: read_environment(fields.get("environment"), &at.field("environment"))?,
    };
    Ok((job, matrix))
}

/// The longest environment name or URL kept.
const MAX_ENVIRONMENT_TEXT: usize = 1024;

/// `environment:`: a name, or `{name, url}` (GitHub's two forms). Kept as
/// written: GitHub evaluates it after the job, so its URL may read step
/// outputs, and Baton only shows it.
fn read_environment(node: Option<&YamlNode>, at: &Location) -> Result<Option<JobEnvironment>, DefinitionError> {
    let Some(node) = node else { return Ok(None) };
    let text = |node: &YamlNode, at: &Location| -> Result<String, DefinitionError> {
        let Some(text) = node.scalar_text().filter(|t| !t.trim().is_empty()) else {
            return Err(at.expected("a name", node));
        };
        if text.len() > MAX_ENVIRONMENT_TEXT {
            return Err(at.error(format!("{} characters, at most {MAX_ENVIRONMENT_TEXT}", text.len())));
        }
        Ok(text)
    };
    if let YamlNode::Mapping(_) = node {
        let fields = Fields::read(node, &["name", "url"], at, "a name, or a mapping with `name` and `url`")?;
        let Some(name) = fields.get("name") else {
            return Err(at.field("name").error("required: the environment's name"));
        };
        let name = text(name, &at.field("name"))?;
        let url = fields.get("url").map(|url| text(url, &at.field("url"))).transpose()?;
        return Ok(Some(JobEnvironment { name, url }));
    }
    Ok(Some(JobEnvironment { name: text(node, at)?, url: None }))
}

/// `outputs:`: a list of names (each the key of that name a step wrote),
/// or a mapping of names to `${{ steps.<id>.outputs.<key> }}`.
fn read_outputs(node: Option<&YamlNode>, at: &Location) -> Result<BTreeMap<String, OutputSource>, DefinitionError> {
    let Some(node) = node else { return Ok(BTreeMap::new()) };
    let mut outputs = BTreeMap::new();
    let check_name = |name: &str| check_output_name(name, at);
    match node {
        YamlNode::Sequence(_) | YamlNode::String(_) => {
            for name in read_text_list(node, at, "a list of output names")? {
                check_name(&name)?;
                outputs.insert(name.clone(), OutputSource { step: None, key: name });
            }
        }
        YamlNode::Mapping(entries) => {
            for (name, value) in entries {
                let Some(name) = name.scalar_text() else { return Err(at.expected("output names as text", name)) };
                check_name(&name)?;
                let source = match value {
                    YamlNode::String(text) => {
                        match expressions::text_references(text).map_err(|e| at.field(&name).error(e))?.as_slice() {
                            [Reference::StepOutput { step, name: key }]
                                if text.trim().starts_with("${{") && text.trim().ends_with("}}") =>
                            {
                                OutputSource { step: Some(step.clone()), key: key.clone() }
                            }
                            _ => return Err(at.field(&name).error("expected `${{ steps.<id>.outputs.<key> }}`")),
                        }
                    }
                    YamlNode::Null => OutputSource { step: None, key: name.clone() },
                    other => return Err(at.field(&name).expected("`${{ steps.<id>.outputs.<key> }}`", other)),
                };
                outputs.insert(name, source);
            }
        }
        other => return Err(at.expected("a list of output names or a mapping", other)),
    }
    if outputs.len() > MAX_OUTPUTS_PER_JOB {
        return Err(at.error(format!("{} outputs, at most {MAX_OUTPUTS_PER_JOB} are accepted", outputs.len())));
    }
    Ok(outputs)
}
