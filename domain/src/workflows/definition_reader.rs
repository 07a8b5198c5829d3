//! Reads a parsed YAML tree into a [`WorkflowDefinition`], field by field,
//! so that every refusal names its job and field (behaviour.md §8).
//!
//! Cross-job rules (unknown needs, cycles) are checked afterwards by
//! `definition::parse_definition`, once every job has been read.

use std::collections::{BTreeMap, HashSet};

use super::approval::{self, ApprovalInput, ApprovalInputKind, ApprovalSpec, OnTimeout};
use super::concurrency::{self, ConcurrencySpec, MAX_QUEUE};
use super::condition::{JobCondition, SUPPORTED_CONDITIONS};
use super::definition::{
    DefinitionError, JobDefinition, OutputSource, StepDefinition, WorkflowDefinition, DEFAULT_JOB_TIMEOUT_MINUTES,
    DEFAULT_RUN_TIMEOUT_MINUTES, MAX_JOBS, MAX_JOB_ID_LEN, MAX_OUTPUTS_PER_JOB, MAX_OUTPUT_NAME_LEN, MAX_STEPS_PER_JOB,
    MAX_TIMEOUT_MINUTES,
};
use super::expressions::{self, Reference};
use super::listening::{self, ListenSpec};
use super::matrix::{self, Combination, MatrixGroup, MatrixLeg, Strategy};
use super::retry::{RetryPolicy, RetryWhen, MAX_BACKOFF_S, MAX_RETRIES};
use super::yaml::YamlNode;
use crate::runners::labels;
use baton_api::facts::PRIORITY_RANGE;

const WORKFLOW_FIELDS: &[&str] = &["name", "env", "mask-env", "timeout-minutes", "concurrency", "jobs", "on"];
const CONCURRENCY_FIELDS: &[&str] = &["group", "cancel-in-progress", "queue", "limit"];
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
];
const LISTEN_FIELDS: &[&str] = &["events", "timeout-minutes", "if"];
const APPROVAL_FIELDS: &[&str] = &["required", "from", "inputs", "timeout-minutes", "on-timeout"];
const APPROVAL_INPUT_FIELDS: &[&str] = &["type", "options", "required", "default", "description"];
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
];
const RETRY_FIELDS: &[&str] = &["max", "when", "exit-codes", "backoff"];
const STRATEGY_FIELDS: &[&str] = &["matrix", "fail-fast", "max-parallel"];
/// The most values a matrix dimension may list, and the most `include` or
/// `exclude` entries (the legs are bounded by the job limit anyway).
const MAX_MATRIX_ENTRIES: usize = 256;
const STEP_FIELDS: &[&str] =
    &["id", "name", "run", "upload", "download", "cache", "env", "timeout-minutes", "continue-on-error"];
const CACHE_FIELDS: &[&str] = &["key", "path", "restore-keys", "key-files", "scope"];
const UPLOAD_FIELDS: &[&str] = &["name", "path"];
const DOWNLOAD_FIELDS: &[&str] = &["name", "path"];

/// Where in the definition a value sits, to build precise errors.
#[derive(Debug, Clone, Default)]
struct Location {
    job: Option<String>,
    path: Option<String>,
}

impl Location {
    fn job(key: &str) -> Self {
        Self { job: Some(key.to_string()), path: None }
    }

    fn field(&self, name: &str) -> Self {
        let path = match &self.path {
            Some(prefix) => format!("{prefix}.{name}"),
            None => name.to_string(),
        };
        Self { job: self.job.clone(), path: Some(path) }
    }

    fn step(&self, position: usize) -> Self {
        Self { job: self.job.clone(), path: Some(format!("steps[{position}]")) }
    }

    fn error(&self, message: impl Into<String>) -> DefinitionError {
        DefinitionError { job: self.job.clone(), field: self.path.clone(), message: message.into() }
    }

    fn expected(&self, what: &str, found: &YamlNode) -> DefinitionError {
        self.error(format!("expected {what}, found {}", found.kind()))
    }
}

/// The entries of a mapping by key, refused if a key repeats or is not one
/// of `allowed`.
struct Fields<'a> {
    entries: Vec<(String, &'a YamlNode)>,
}

impl<'a> Fields<'a> {
    fn read(node: &'a YamlNode, allowed: &[&str], at: &Location, what: &str) -> Result<Self, DefinitionError> {
        let YamlNode::Mapping(mapping) = node else { return Err(at.expected(what, node)) };
        let mut entries: Vec<(String, &YamlNode)> = Vec::with_capacity(mapping.len());
        for (key, value) in mapping {
            let Some(key) = key.scalar_text() else { return Err(at.expected("text keys", key)) };
            if entries.iter().any(|(seen, _)| *seen == key) {
                return Err(at.field(&key).error("given more than once"));
            }
            if key == "uses" {
                return Err(at.field(&key).error("actions are not supported: a step runs a shell command with `run`"));
            }
            if !allowed.contains(&key.as_str()) {
                return Err(at.field(&key).error(format!("unknown field, expected one of: {}", allowed.join(", "))));
            }
            entries.push((key, value));
        }
        Ok(Self { entries })
    }

    fn get(&self, name: &str) -> Option<&'a YamlNode> {
        self.entries.iter().find(|(key, _)| key == name).map(|(_, value)| *value)
    }
}

/// Reads the whole workflow; see the module doc.
pub(super) fn read_workflow(root: &YamlNode) -> Result<WorkflowDefinition, DefinitionError> {
    if *root == YamlNode::Null {
        return Err(DefinitionError::document("the definition is empty"));
    }
    let top = Location::default();
    let fields = Fields::read(root, WORKFLOW_FIELDS, &top, "a mapping with `jobs`")?;
    let name = fields.get("name").map(|node| read_text(node, &top.field("name"))).transpose()?.flatten();
    let env = read_env(fields.get("env"), &top.field("env"))?;
    let timeout_minutes = read_timeout(fields.get("timeout-minutes"), &top.field("timeout-minutes"))?
        .unwrap_or(DEFAULT_RUN_TIMEOUT_MINUTES);
    let (jobs, matrices) = read_jobs(fields.get("jobs"), &top.field("jobs"))?;
    let mask_env = read_names(fields.get("mask-env"), &top.field("mask-env"))?;
    let concurrency = read_concurrency(fields.get("concurrency"), &top.field("concurrency"), Level::Workflow)?;
    Ok(WorkflowDefinition { name, env, mask_env, timeout_minutes, concurrency, jobs, matrices })
}

fn read_jobs(
    node: Option<&YamlNode>,
    at: &Location,
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
        let (job, matrix) = read_job(&key, body)?;
        match matrix {
            None => jobs.push(job),
            Some((strategy, runs_on)) => {
                let (legs, group) = expand_matrix(job, &strategy, &runs_on)?;
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

/// A matrix job's legs: the job once per combination, keyed
/// `<job> (<values>)`, its `runs-on` with `${{ matrix.<name> }}` put in.
fn expand_matrix(
    job: JobDefinition,
    strategy: &Strategy,
    runs_on: &[String],
) -> Result<(Vec<JobDefinition>, MatrixGroup), DefinitionError> {
    let at = Location::job(&job.key);
    let combinations = matrix::combinations(strategy);
    if combinations.is_empty() {
        return Err(at.field("strategy.matrix").error("it makes no combination: every one is excluded"));
    }
    if combinations.len() > MAX_JOBS {
        return Err(at
            .field("strategy.matrix")
            .error(format!("{} combinations, at most {MAX_JOBS} legs are accepted", combinations.len())));
    }
    let mut legs = Vec::with_capacity(combinations.len());
    for values in combinations {
        let key = matrix::leg_key(&job.key, &values);
        if legs.iter().any(|leg: &JobDefinition| leg.key == key) {
            return Err(at.field("strategy.matrix").error(format!("two combinations make the same leg `{key}`")));
        }
        let leg = MatrixLeg { job: job.key.clone(), values };
        let raw: Vec<String> = runs_on.iter().map(|label| substitute_matrix(label, &leg)).collect();
        let labels =
            labels::canonicalize(&raw).map_err(|err| at.field("runs-on").error(format!("in leg `{key}`: {err}")))?;
        legs.push(JobDefinition { key, labels, matrix: Some(leg), ..job.clone() });
    }
    let group = MatrixGroup {
        job: job.key.clone(),
        legs: legs.iter().map(|leg| leg.key.clone()).collect(),
        fail_fast: strategy.fail_fast,
        max_parallel: strategy.max_parallel,
    };
    Ok((legs, group))
}

/// `${{ matrix.<name> }}` in a label replaced by the leg's value (empty
/// when its combination has none); the only expression `runs-on` takes.
fn substitute_matrix(label: &str, leg: &MatrixLeg) -> String {
    let mut out = String::new();
    let mut rest = label;
    while let Some(start) = rest.find("${{") {
        out.push_str(&rest[..start]);
        let Some(end) = rest[start..].find("}}") else { break };
        let inner = rest[start + 3..start + end].trim();
        match inner.strip_prefix("matrix.") {
            Some(name) => out.push_str(leg.value(name.trim()).unwrap_or_default()),
            None => out.push_str(&rest[start..start + end + 2]),
        }
        rest = &rest[start + end + 2..];
    }
    out.push_str(rest);
    out
}

/// `strategy:` `{matrix: {<name>: [values], include: [...], exclude: [...]},
/// fail-fast, max-parallel}`. Values are scalars, taken as text.
fn read_strategy(node: &YamlNode, at: &Location) -> Result<Strategy, DefinitionError> {
    let fields = Fields::read(node, STRATEGY_FIELDS, at, "a mapping with `matrix`")?;
    let Some(matrix) = fields.get("matrix") else { return Err(at.field("matrix").error("required")) };
    let at_matrix = at.field("matrix");
    let YamlNode::Mapping(entries) = matrix else { return Err(at_matrix.expected("a mapping of dimensions", matrix)) };
    let mut strategy = Strategy { fail_fast: true, ..Strategy::default() };
    let scalar = |node: &YamlNode, at: &Location| match node {
        YamlNode::String(_) | YamlNode::Integer(_) | YamlNode::Float(_) | YamlNode::Bool(_) => {
            node.scalar_text().ok_or_else(|| at.expected("a scalar value", node))
        }
        other => Err(at.expected("a string, number or boolean", other)),
    };
    let combination = |node: &YamlNode, at: &Location| -> Result<Combination, DefinitionError> {
        let YamlNode::Mapping(pairs) = node else { return Err(at.expected("a mapping of names to values", node)) };
        let mut combo = Combination::new();
        for (name, value) in pairs {
            let Some(name) = name.scalar_text() else { return Err(at.expected("names as text", name)) };
            check_matrix_name(&name, at)?;
            combo.push((name.clone(), scalar(value, &at.field(&name))?));
        }
        Ok(combo)
    };
    let list = |node: &YamlNode, at: &Location| -> Result<Vec<Combination>, DefinitionError> {
        let YamlNode::Sequence(items) = node else { return Err(at.expected("a list of mappings", node)) };
        if items.len() > MAX_MATRIX_ENTRIES {
            return Err(at.error(format!("{} entries, at most {MAX_MATRIX_ENTRIES}", items.len())));
        }
        items.iter().map(|item| combination(item, at)).collect()
    };
    for (name, values) in entries {
        let Some(name) = name.scalar_text() else { return Err(at_matrix.expected("dimension names as text", name)) };
        let at = at_matrix.field(&name);
        match name.as_str() {
            "include" => strategy.include = list(values, &at)?,
            "exclude" => strategy.exclude = list(values, &at)?,
            _ => {
                check_matrix_name(&name, &at_matrix)?;
                let YamlNode::Sequence(items) = values else { return Err(at.expected("a list of values", values)) };
                if items.is_empty() || items.len() > MAX_MATRIX_ENTRIES {
                    return Err(at.error(format!("1 to {MAX_MATRIX_ENTRIES} values")));
                }
                let values = items.iter().map(|item| scalar(item, &at)).collect::<Result<Vec<_>, _>>()?;
                strategy.dimensions.push((name, values));
            }
        }
    }
    if strategy.dimensions.is_empty() && strategy.include.is_empty() {
        return Err(at_matrix.error("at least one dimension, or `include`"));
    }
    if let Some(node) = fields.get("fail-fast") {
        let YamlNode::Bool(fail_fast) = node else { return Err(at.field("fail-fast").expected("true or false", node)) };
        strategy.fail_fast = *fail_fast;
    }
    if let Some(node) = fields.get("max-parallel") {
        match node {
            YamlNode::Integer(n) if (1..=i128::from(MAX_JOBS as u32)).contains(n) => {
                strategy.max_parallel = Some(*n as u32)
            }
            _ => return Err(at.field("max-parallel").error(format!("must be a whole number from 1 to {MAX_JOBS}"))),
        }
    }
    Ok(strategy)
}

/// A matrix name is what `${{ matrix.<name> }}` can spell.
fn check_matrix_name(name: &str, at: &Location) -> Result<(), DefinitionError> {
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.len() <= MAX_JOB_ID_LEN
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if valid {
        Ok(())
    } else {
        Err(at.error(format!("invalid matrix name `{name}`: a letter or '_', then letters, digits, '_' and '-'")))
    }
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
type ReadJob = (JobDefinition, Option<(Strategy, Vec<String>)>);

fn read_job(key: &str, body: &YamlNode) -> Result<ReadJob, DefinitionError> {
    let at = Location::job(key);
    let fields = Fields::read(body, JOB_FIELDS, &at, "a mapping with `runs-on` and `steps`")?;
    let name = fields.get("name").map(|node| read_text(node, &at.field("name"))).transpose()?.flatten();
    if let Some(node) = fields.get("approval") {
        if let Some(field) = NOT_FOR_APPROVALS.iter().find(|field| fields.get(field).is_some()) {
            return Err(at.field(field).error(
                "an approval job runs on no runner: it has no `runs-on`, `steps`, `strategy`, `env`, `outputs`, \
                 `retry`, `priority` or `timeout-minutes` (its inputs are its outputs; `approval.timeout-minutes` \
                 bounds its wait)",
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
        };
        return Ok((job, None));
    }
    let strategy = fields.get("strategy").map(|node| read_strategy(node, &at.field("strategy"))).transpose()?;
    // `tools:` are labels of their own namespace (`runners::tools`), added
    // to `runs-on`'s: claims, demand and the unschedulable check match both.
    let tools = read_tools(fields.get("tools"), &at.field("tools"))?;
    let (labels, matrix) = match strategy {
        None => (read_runs_on(fields.get("runs-on"), &at.field("runs-on"), &tools)?, None),
        Some(strategy) => {
            let Some(node) = fields.get("runs-on") else {
                return Err(at.field("runs-on").error("required: the labels a runner must offer to run this job"));
            };
            let mut runs_on = read_text_list(node, &at.field("runs-on"), "a label or a list of labels")?;
            runs_on.extend(tools);
            (Vec::new(), Some((strategy, runs_on)))
        }
    };
    let needs = read_needs(fields.get("needs"), &at.field("needs"))?;
    let (condition, when) = read_condition(fields.get("if"), &at.field("if"))?;
    let timeout_minutes = read_timeout(fields.get("timeout-minutes"), &at.field("timeout-minutes"))?
        .unwrap_or(DEFAULT_JOB_TIMEOUT_MINUTES);
    let env = read_env(fields.get("env"), &at.field("env"))?;
    let steps = read_steps(fields.get("steps"), &at.field("steps"))?;
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
    };
    Ok((job, matrix))
}

/// `listen:` (behaviour.md §16): the event names it takes (1 to 20) and
/// how long it listens (`timeout-minutes`, default a day).
fn read_listen(node: &YamlNode, at: &Location) -> Result<ListenSpec, DefinitionError> {
    let fields = Fields::read(node, LISTEN_FIELDS, at, "a mapping with `events`")?;
    let Some(events) = fields.get("events") else {
        return Err(at.field("events").error("required: the names of the events it listens for"));
    };
    let mut events = read_text_list(events, &at.field("events"), "an event name or a list of them")?;
    events.sort();
    events.dedup();
    let valid = |name: &String| {
        !name.is_empty()
            && name.len() <= listening::MAX_EVENT_NAME_LEN
            && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    };
    if events.is_empty() || events.len() > listening::MAX_EVENT_NAMES || !events.iter().all(valid) {
        return Err(at.field("events").error(format!(
            "1 to {} names of 1 to {} letters, digits, '_', '-' and '.'",
            listening::MAX_EVENT_NAMES,
            listening::MAX_EVENT_NAME_LEN
        )));
    }
    let timeout_minutes = read_timeout(fields.get("timeout-minutes"), &at.field("timeout-minutes"))?
        .unwrap_or(listening::DEFAULT_LISTEN_TIMEOUT_MINUTES);
    let when = match fields.get("if") {
        None => None,
        Some(node) => {
            let text = read_text(node, &at.field("if"))?.unwrap_or_default();
            let text = text.trim();
            // As a job's `if:`: with or without `${{ }}` around it.
            let text = text.strip_prefix("${{").and_then(|t| t.strip_suffix("}}")).unwrap_or(text).trim();
            if text.is_empty() {
                return Err(at.field("if").error("must not be empty"));
            }
            expressions::parse(text).map_err(|e| at.field("if").error(e))?;
            Some(text.to_string())
        }
    };
    Ok(ListenSpec { events, timeout_minutes, when })
}

/// `approval:` (behaviour.md §16): `required` approvals (default 1) from
/// `from` (token names or groups; any operator when absent), typed
/// `inputs`, `timeout-minutes` (default a day) and `on-timeout`
/// (`fail`, the default, `approve` or `skip`).
fn read_approval(node: &YamlNode, at: &Location) -> Result<ApprovalSpec, DefinitionError> {
    let fields = Fields::read(node, APPROVAL_FIELDS, at, "a mapping with `required`, `from`, `inputs`, …")?;
    let required = match fields.get("required") {
        None => 1,
        Some(YamlNode::Integer(n)) if (1..=i128::from(approval::MAX_REQUIRED)).contains(n) => *n as u32,
        Some(_) => {
            return Err(at
                .field("required")
                .error(format!("must be a whole number from 1 to {}", approval::MAX_REQUIRED)))
        }
    };
    let mut from = match fields.get("from") {
        None => Vec::new(),
        Some(node) => read_text_list(node, &at.field("from"), "a token name or group, or a list of them")?,
    };
    from.sort();
    from.dedup();
    if from.len() > approval::MAX_APPROVERS || from.iter().any(|who| who.trim().is_empty()) {
        return Err(at
            .field("from")
            .error(format!("1 to {} non-empty token names or groups", approval::MAX_APPROVERS)));
    }
    let mut inputs = BTreeMap::new();
    if let Some(node) = fields.get("inputs") {
        let inputs_at = at.field("inputs");
        let YamlNode::Mapping(entries) = node else { return Err(inputs_at.expected("a mapping of input names", node)) };
        if entries.len() > approval::MAX_INPUTS {
            return Err(inputs_at.error(format!("at most {} inputs", approval::MAX_INPUTS)));
        }
        for (name, body) in entries {
            let Some(name) = name.scalar_text() else { return Err(inputs_at.expected("input names as text", name)) };
            check_output_name(&name, &inputs_at)?;
            let input = read_approval_input(body, &inputs_at.field(&name))?;
            if inputs.insert(name.clone(), input).is_some() {
                return Err(inputs_at.field(&name).error("given more than once"));
            }
        }
    }
    let timeout_minutes = read_timeout(fields.get("timeout-minutes"), &at.field("timeout-minutes"))?
        .unwrap_or(approval::DEFAULT_APPROVAL_TIMEOUT_MINUTES);
    let on_timeout = match fields.get("on-timeout") {
        None => OnTimeout::Fail,
        Some(YamlNode::String(text)) if text == "fail" => OnTimeout::Fail,
        Some(YamlNode::String(text)) if text == "approve" => OnTimeout::Approve,
        Some(YamlNode::String(text)) if text == "skip" => OnTimeout::Skip,
        Some(_) => return Err(at.field("on-timeout").error("must be `fail`, `approve` or `skip`")),
    };
    Ok(ApprovalSpec { required, from, inputs, timeout_minutes, on_timeout })
}

fn read_approval_input(node: &YamlNode, at: &Location) -> Result<ApprovalInput, DefinitionError> {
    let fields = Fields::read(node, APPROVAL_INPUT_FIELDS, at, "a mapping with `type`")?;
    let kind = match fields.get("type") {
        Some(YamlNode::String(text)) if text == "string" => ApprovalInputKind::String,
        Some(YamlNode::String(text)) if text == "boolean" => ApprovalInputKind::Boolean,
        Some(YamlNode::String(text)) if text == "choice" => ApprovalInputKind::Choice,
        _ => return Err(at.field("type").error("required: `string`, `boolean` or `choice`")),
    };
    let options = match fields.get("options") {
        None => Vec::new(),
        Some(node) => read_text_list(node, &at.field("options"), "a list of options")?,
    };
    match kind {
        ApprovalInputKind::Choice if options.is_empty() || options.len() > approval::MAX_INPUTS * 5 => {
            return Err(at.field("options").error("a choice needs 1 to 100 options"))
        }
        ApprovalInputKind::String | ApprovalInputKind::Boolean if !options.is_empty() => {
            return Err(at.field("options").error("only a `choice` has options"))
        }
        _ => {}
    }
    let required = match fields.get("required") {
        None => false,
        Some(YamlNode::Bool(b)) => *b,
        Some(_) => return Err(at.field("required").error("must be true or false")),
    };
    let default = match (kind, fields.get("default")) {
        (_, None | Some(YamlNode::Null)) => None,
        (ApprovalInputKind::Boolean, Some(YamlNode::Bool(b))) => Some(serde_json::Value::Bool(*b)),
        (ApprovalInputKind::String, Some(node)) if node.scalar_text().is_some() => {
            node.scalar_text().map(serde_json::Value::String)
        }
        (ApprovalInputKind::Choice, Some(YamlNode::String(text))) if options.contains(text) => {
            Some(serde_json::Value::String(text.clone()))
        }
        (_, Some(_)) => {
            return Err(at.field("default").error("must be a value of the input's type (a choice: one of its options)"))
        }
    };
    let description =
        fields.get("description").map(|node| read_text(node, &at.field("description"))).transpose()?.flatten();
    Ok(ApprovalInput { kind, options, required, default, description })
}

fn read_runs_on(node: Option<&YamlNode>, at: &Location, tools: &[String]) -> Result<Vec<String>, DefinitionError> {
    let Some(node) = node else { return Err(at.error("required: the labels a runner must offer to run this job")) };
    let mut raw = read_text_list(node, at, "a label or a list of labels")?;
    raw.extend(tools.iter().cloned());
    labels::canonicalize(&raw).map_err(|err| at.error(err.to_string()))
}

/// `tools:`: the tools a runner must have, `name` or `name@version`
/// (`[docker, node@20]`), as the labels they require.
fn read_tools(node: Option<&YamlNode>, at: &Location) -> Result<Vec<String>, DefinitionError> {
    let Some(node) = node else { return Ok(Vec::new()) };
    let tools = read_text_list(node, at, "a tool or a list of tools (`docker`, `node@20`)")?;
    crate::runners::tools::required_labels(&tools).map_err(|err| at.error(err.to_string()))
}

fn read_needs(node: Option<&YamlNode>, at: &Location) -> Result<Vec<String>, DefinitionError> {
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
fn read_condition(node: Option<&YamlNode>, at: &Location) -> Result<(JobCondition, Option<String>), DefinitionError> {
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
        Some(status) => JobCondition::parse(&format!("{status}()")).unwrap_or_default(),
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

/// `outputs:`: a list of names (each the key of that name a step wrote),
/// or a mapping of names to `${{ steps.<id>.outputs.<key> }}`.
/// An output's name (an approval's inputs are its outputs: the same rule).
fn check_output_name(name: &str, at: &Location) -> Result<(), DefinitionError> {
    let valid = !name.is_empty()
        && name.len() <= MAX_OUTPUT_NAME_LEN
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if valid {
        Ok(())
    } else {
        Err(at
            .error(format!("invalid output name `{name}`: 1 to {MAX_OUTPUT_NAME_LEN} of letters, digits, '_' and '-'")))
    }
}

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

fn read_steps(node: Option<&YamlNode>, at: &Location) -> Result<Vec<StepDefinition>, DefinitionError> {
    let Some(node) = node else { return Err(at.error("required: a list of steps")) };
    let YamlNode::Sequence(items) = node else { return Err(at.expected("a list of steps", node)) };
    if items.is_empty() {
        return Err(at.error("at least one step is required"));
    }
    if items.len() > MAX_STEPS_PER_JOB {
        return Err(at.error(format!("{} steps, at most {MAX_STEPS_PER_JOB} are accepted", items.len())));
    }
    items.iter().enumerate().map(|(position, item)| read_step(item, &at.step(position))).collect()
}

fn read_step(node: &YamlNode, at: &Location) -> Result<StepDefinition, DefinitionError> {
    let fields = Fields::read(node, STEP_FIELDS, at, "a mapping with `run`")?;
    let id = fields.get("id").map(|node| read_text(node, &at.field("id"))).transpose()?.flatten();
    if let Some(id) = &id {
        let valid = id.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && id.len() <= MAX_JOB_ID_LEN
            && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(at
                .field("id")
                .error("a step id starts with a letter or '_' and holds letters, digits, '_' and '-'"));
        }
    }
    let mut name = fields.get("name").map(|node| read_text(node, &at.field("name"))).transpose()?.flatten();
    let kinds = ["run", "upload", "download", "cache"].iter().filter(|k| fields.get(k).is_some()).count();
    if kinds > 1 {
        return Err(at.error("a step has one of `run`, `upload`, `download` and `cache`"));
    }
    let run = match (fields.get("run"), fields.get("upload"), fields.get("download")) {
        (Some(YamlNode::String(run)), None, None) if run.trim().is_empty() => {
            return Err(at.field("run").error("must not be empty"))
        }
        (Some(YamlNode::String(run)), None, None) => run.clone(),
        (Some(other), None, None) => return Err(at.field("run").expected("a string", other)),
        (None, Some(upload), None) => {
            let (run, label) = read_upload(upload, &at.field("upload"))?;
            name.get_or_insert(label);
            run
        }
        (None, None, Some(download)) => {
            let (run, label) = read_download(download, &at.field("download"))?;
            name.get_or_insert(label);
            run
        }
        (None, None, None) => match fields.get("cache") {
            Some(cache) => {
                let (run, label) = read_cache(cache, &at.field("cache"))?;
                name.get_or_insert(label);
                run
            }
            None => {
                return Err(at.field("run").error("required: the shell command to run (or `upload:` / `download:`)"))
            }
        },
        _ => return Err(at.error("a step has one of `run`, `upload`, `download` and `cache`")),
    };
    let env = read_env(fields.get("env"), &at.field("env"))?;
    let timeout_minutes = read_timeout(fields.get("timeout-minutes"), &at.field("timeout-minutes"))?;
    let continue_on_error = read_continue_on_error(fields.get("continue-on-error"), &at.field("continue-on-error"))?;
    Ok(StepDefinition { id, name, run, env, timeout_minutes, continue_on_error })
}

/// `upload: {name, path}` (behaviour.md §17): the step that archives
/// `path` (a path or glob, or a list of them, relative to the job's
/// directory) as artifact `name` of the run; it runs the runner's own
/// `baton-runner artifact upload`, so it is a `run` like any other.
fn read_upload(node: &YamlNode, at: &Location) -> Result<(String, String), DefinitionError> {
    let fields = Fields::read(node, UPLOAD_FIELDS, at, "a mapping with `name` and `path`")?;
    let name = read_artifact_name(fields.get("name"), &at.field("name"))?;
    let Some(path) = fields.get("path") else { return Err(at.field("path").error("required: what to upload")) };
    let paths = read_text_list(path, &at.field("path"), "paths")?;
    if paths.is_empty() || paths.iter().any(|p| p.trim().is_empty()) {
        return Err(at.field("path").error("name at least one path, none empty"));
    }
    let quoted: Vec<String> = paths.iter().map(|p| shell_quote(p)).collect();
    let run = format!("\"$BATON_RUNNER\" artifact upload --name {} -- {}", shell_quote(&name), quoted.join(" "));
    Ok((run, format!("upload {name}")))
}

/// `download: {name, path}`: the step that unpacks the run's artifact
/// `name` into `path` (default: the job's directory).
fn read_download(node: &YamlNode, at: &Location) -> Result<(String, String), DefinitionError> {
    let fields = Fields::read(node, DOWNLOAD_FIELDS, at, "a mapping with `name`")?;
    let name = read_artifact_name(fields.get("name"), &at.field("name"))?;
    let into = fields.get("path").map(|p| read_text(p, &at.field("path"))).transpose()?.flatten();
    let mut run = format!("\"$BATON_RUNNER\" artifact download --name {}", shell_quote(&name));
    if let Some(into) = into.filter(|p| !p.trim().is_empty()) {
        run.push_str(&format!(" --into {}", shell_quote(&into)));
    }
    Ok((run, format!("download {name}")))
}

/// `cache: {key, path, restore-keys, key-files, scope}` (behaviour.md §17):
/// the step that restores the exact key, else the newest entry under each
/// restore prefix, and has the runner save `path` under the key after the
/// job succeeded when the key itself was not found.
fn read_cache(node: &YamlNode, at: &Location) -> Result<(String, String), DefinitionError> {
    use baton_api::caches::{valid_cache_key, MAX_CACHE_KEY_LEN, MAX_RESTORE_KEYS};
    let fields = Fields::read(node, CACHE_FIELDS, at, "a mapping with `key` and `path`")?;
    let checked = |text: &str, at: &Location| {
        if text.contains("${{") || valid_cache_key(text, MAX_CACHE_KEY_LEN) {
            Ok(())
        } else {
            Err(at.error(format!("1 to {MAX_CACHE_KEY_LEN} printable ASCII characters, no spaces or commas")))
        }
    };
    let key = fields.get("key").map(|n| read_text(n, &at.field("key"))).transpose()?.flatten();
    let Some(key) = key.filter(|k| !k.trim().is_empty()) else {
        return Err(at.field("key").error("required: the cache's key"));
    };
    checked(&key, &at.field("key"))?;
    let Some(path) = fields.get("path") else { return Err(at.field("path").error("required: what to cache")) };
    let paths = read_text_list(path, &at.field("path"), "paths")?;
    if paths.is_empty() || paths.iter().any(|p| p.trim().is_empty()) {
        return Err(at.field("path").error("name at least one path, none empty"));
    }
    let restore_keys = match fields.get("restore-keys") {
        Some(node) => read_text_list(node, &at.field("restore-keys"), "prefixes")?,
        None => Vec::new(),
    };
    if restore_keys.len() > MAX_RESTORE_KEYS {
        return Err(at.field("restore-keys").error(format!("at most {MAX_RESTORE_KEYS} prefixes")));
    }
    for prefix in &restore_keys {
        checked(prefix, &at.field("restore-keys"))?;
    }
    let key_files = match fields.get("key-files") {
        Some(node) => read_text_list(node, &at.field("key-files"), "files")?,
        None => Vec::new(),
    };
    let scope = fields.get("scope").map(|n| read_text(n, &at.field("scope"))).transpose()?.flatten();
    let mut run = format!("\"$BATON_RUNNER\" cache restore --key {}", shell_quote(&key));
    for file in &key_files {
        run.push_str(&format!(" --key-file {}", shell_quote(file)));
    }
    for prefix in &restore_keys {
        run.push_str(&format!(" --restore-key {}", shell_quote(prefix)));
    }
    if let Some(scope) = scope.filter(|s| !s.trim().is_empty()) {
        checked(&scope, &at.field("scope"))?;
        run.push_str(&format!(" --scope {}", shell_quote(&scope)));
    }
    let quoted: Vec<String> = paths.iter().map(|p| shell_quote(p)).collect();
    run.push_str(&format!(" -- {}", quoted.join(" ")));
    Ok((run, format!("cache {key}")))
}

/// An artifact's name: checked now unless an expression makes it.
fn read_artifact_name(node: Option<&YamlNode>, at: &Location) -> Result<String, DefinitionError> {
    let name = node.map(|n| read_text(n, at)).transpose()?.flatten();
    let Some(name) = name.filter(|n| !n.trim().is_empty()) else {
        return Err(at.error("required: the artifact's name"));
    };
    if !name.contains("${{") && !baton_api::artifacts::valid_artifact_name(&name) {
        return Err(at.error(format!(
            "1 to {} of letters, digits, '.', '_' and '-', not starting with '.'",
            baton_api::artifacts::MAX_ARTIFACT_NAME_LEN
        )));
    }
    Ok(name)
}

/// `text` as one single-quoted shell word (an expression inside is still
/// substituted when the job is queued, before the shell sees it).
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// `priority`: a whole number from -100 to 100 (0, the default, is the
/// same as leaving it out), or one `${{ … }}` decided when the job is
/// queued; a value that is not a whole number there counts as 0, one out of
/// range as the nearest bound.
fn read_priority(node: Option<&YamlNode>, at: &Location) -> Result<Option<String>, DefinitionError> {
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
fn read_retry(node: Option<&YamlNode>, at: &Location) -> Result<Option<RetryPolicy>, DefinitionError> {
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

/// `continue-on-error`: `true` or `false`, or one `${{ … }}` decided when
/// the job is queued (it holds when it comes to `true`, so
/// `${{ inputs.experimental }}` given `'false'` does not). `false` is the
/// same as leaving it out.
fn read_continue_on_error(node: Option<&YamlNode>, at: &Location) -> Result<Option<String>, DefinitionError> {
    const EXPECTED: &str = "true, false or one expression `${{ … }}`";
    match node {
        None | Some(YamlNode::Bool(false)) => Ok(None),
        Some(YamlNode::Bool(true)) => Ok(Some("true".into())),
        Some(YamlNode::String(text)) => {
            let text = text.trim();
            let single = text.starts_with("${{") && text.ends_with("}}") && text.matches("${{").count() == 1;
            match text {
                "true" => Ok(Some("true".into())),
                "false" => Ok(None),
                _ if single => Ok(Some(text.to_string())),
                _ => Err(at.error(format!("expected {EXPECTED}, found `{text}`"))),
            }
        }
        Some(other) => Err(at.expected(EXPECTED, other)),
    }
}

/// Where a `concurrency:` stands: what its expressions may read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
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
            Level::Workflow => "inputs, baton.workspace_id and baton.run_id are",
            Level::Job => "inputs, matrix, baton.job, baton.workspace_id and baton.run_id are",
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
fn read_concurrency(
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

/// `env`: a mapping of names to scalars (numbers and booleans are turned
/// into their text, null into the empty string, as a shell would see them).
fn read_env(node: Option<&YamlNode>, at: &Location) -> Result<BTreeMap<String, String>, DefinitionError> {
    let Some(node) = node else { return Ok(BTreeMap::new()) };
    let YamlNode::Mapping(entries) = node else {
        return if *node == YamlNode::Null { Ok(BTreeMap::new()) } else { Err(at.expected("a mapping", node)) };
    };
    let mut env = BTreeMap::new();
    for (name, value) in entries {
        let Some(name) = name.scalar_text() else { return Err(at.expected("variable names as text", name)) };
        if name.is_empty() || name.contains(['=', '\0']) {
            return Err(at.error(format!("invalid variable name `{name}`: not empty, no '=' and no NUL")));
        }
        let value = match value {
            YamlNode::Null => String::new(),
            scalar => scalar.scalar_text().ok_or_else(|| at.field(&name).expected("a string", scalar))?,
        };
        if env.insert(name.clone(), value).is_some() {
            return Err(at.error(format!("variable `{name}` is given more than once")));
        }
    }
    Ok(env)
}

/// A list of variable names (`mask-env`).
fn read_names(node: Option<&YamlNode>, at: &Location) -> Result<Vec<String>, DefinitionError> {
    let Some(node) = node else { return Ok(Vec::new()) };
    let mut names = read_text_list(node, at, "a list of variable names")?;
    names.sort();
    names.dedup();
    Ok(names)
}

/// `timeout-minutes`: a whole number of minutes, 1 to 30 days.
fn read_timeout(node: Option<&YamlNode>, at: &Location) -> Result<Option<u32>, DefinitionError> {
    let Some(node) = node else { return Ok(None) };
    match node {
        YamlNode::Integer(minutes) if (1..=i128::from(MAX_TIMEOUT_MINUTES)).contains(minutes) => {
            Ok(u32::try_from(*minutes).ok())
        }
        _ => Err(at.error(format!("must be a whole number of minutes from 1 to {MAX_TIMEOUT_MINUTES}"))),
    }
}

/// A display name: any scalar as text; null means none.
fn read_text(node: &YamlNode, at: &Location) -> Result<Option<String>, DefinitionError> {
    match node {
        YamlNode::Null => Ok(None),
        scalar => scalar.scalar_text().map(Some).ok_or_else(|| at.expected("a string", scalar)),
    }
}

/// A string, or a list of strings.
fn read_text_list(node: &YamlNode, at: &Location, what: &str) -> Result<Vec<String>, DefinitionError> {
    match node {
        YamlNode::String(single) => Ok(vec![single.clone()]),
        YamlNode::Sequence(items) => items
            .iter()
            .map(|item| match item {
                YamlNode::String(text) => Ok(text.clone()),
                other => Err(at.expected(what, other)),
            })
            .collect(),
        other => Err(at.expected(what, other)),
    }
}
