//! What a definition's expressions refer to: checked at create time (an
//! unknown reference is a 400 naming the job and the field, never an empty
//! string at run time), and resolved when a job is queued ([`JobScope`]).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use uuid::Uuid;

use super::definition::{DefinitionError, JobDefinition, WorkflowDefinition};
use super::expressions::{self, BatonField, Dialect, Reference, Scope};
use super::github::{self, GithubData};
use super::matrix::MatrixLeg;
use super::status::JobStatus;

/// A field of a job that may hold expressions: its location, its text, the
/// env names visible there, and, for a step's `run`, `working-directory`,
/// `env` and `with` values, the step's index (the runner may resolve those
/// just before the step runs: what earlier steps wrote, `runner.*`).
type ExpressionField<'a> = (String, &'a str, Vec<&'a str>, Option<usize>);

/// Every field of `job` that may hold expressions.
fn expression_fields(job: &JobDefinition) -> Vec<ExpressionField<'_>> {
    let job_env: Vec<&str> = job.env.keys().map(String::as_str).collect();
    let mut fields = Vec::new();
    for (name, value) in &job.env {
        fields.push((format!("env.{name}"), value.as_str(), Vec::new(), None));
    }
    if let Some(text) = &job.continue_on_error {
        fields.push(("continue-on-error".into(), text.as_str(), job_env.clone(), None));
    }
    if let Some(text) = &job.priority {
        fields.push(("priority".into(), text.as_str(), job_env.clone(), None));
    }
    if let Some(spec) = &job.concurrency {
        fields.push(("concurrency.group".into(), spec.group.as_str(), Vec::new(), None));
        if let Some(text) = &spec.cancel_in_progress {
            fields.push(("concurrency.cancel-in-progress".into(), text.as_str(), Vec::new(), None));
        }
    }
    for (index, step) in job.steps.iter().enumerate() {
        let mut visible = job_env.clone();
        visible.extend(step.env.keys().map(String::as_str));
        fields.push((format!("steps[{index}].run"), step.run.as_str(), visible.clone(), Some(index)));
        if let Some(text) = &step.continue_on_error {
            fields.push((format!("steps[{index}].continue-on-error"), text.as_str(), visible.clone(), None));
        }
        if let Some(text) = &step.working_directory {
            fields.push((format!("steps[{index}].working-directory"), text.as_str(), visible.clone(), Some(index)));
        }
        for (name, value) in &step.env {
            fields.push((format!("steps[{index}].env.{name}"), value.as_str(), job_env.clone(), Some(index)));
        }
        // An action's inputs read what its `env` values may, and see the
        // step's env as `run` does.
        for (name, value) in &step.with {
            fields.push((format!("steps[{index}].with.{name}"), value.as_str(), visible.clone(), Some(index)));
        }
    }
    fields
}

/// Whether `reference`, read by step `index` of `job`, is the runner's to
/// resolve; refused when it names a step that does not run before that
/// one (GitHub reads a later or unknown one as empty, silently).
fn runner_side(job: &JobDefinition, index: usize, reference: &Reference) -> Result<bool, String> {
    let read = match reference {
        Reference::StepOutput { step, .. } => step.as_str(),
        Reference::Runner(path) if path.first().is_some_and(|c| c == "steps") => path.get(1).map_or("", String::as_str),
        // `github.*`, `runner.*`: the runner's, as an action reads them;
        // only what it knows (anything else would read as empty, silently).
        Reference::Runner(path) => {
            return match path.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
                ["github", "workspace"] | ["runner", "os" | "arch" | "temp"] => Ok(true),
                ["github", other] => Err(github::refusal(other)),
                _ => Err(format!(
                    "unknown reference {reference}: the runner knows runner.os|arch|temp and github.workspace"
                )),
            }
        }
        _ => return Ok(false),
    };
    let is = |s: &super::definition::StepDefinition| s.id.as_deref() == Some(read);
    if job.steps[..index].iter().any(is) {
        return Ok(true);
    }
    let why = if job.steps[index..].iter().any(is) {
        format!("step `{read}` does not run before this one: a step reads only the steps before it")
    } else {
        format!("no step before this one has id `{read}`")
    };
    Err(format!("{reference}: {why}"))
}

/// Whether `reference` is `env.NAME` of no env the queue knows
/// (`queue_env`): a step reads it as an earlier step's `$GITHUB_ENV` left
/// it (setup-python's `env.pythonLocation`), on the runner, and as empty
/// when none did, as GitHub does. Only a step's `if:` and fields read it so;
/// elsewhere an unknown env name is refused.
pub(crate) fn set_on_the_runner(reference: &Reference, queue_env: impl Fn(&str) -> bool) -> bool {
    matches!(reference, Reference::Env(name) if !queue_env(name))
}

/// Checks every expression of `definition`: each reference names something
/// that will exist when the job is queued.
pub fn check_references(definition: &WorkflowDefinition) -> Result<(), DefinitionError> {
    let workflow_env: BTreeSet<&str> = definition.env.keys().map(String::as_str).collect();
    for (name, value) in &definition.env {
        check_secret_expressions(&format!("env.{name}"), value).map_err(|e| document(&format!("env.{name}"), &e))?;
        for reference in expressions::text_references(value).map_err(|e| document(&format!("env.{name}"), &e))? {
            if !matches!(
                reference,
                Reference::Input(_)
                    | Reference::Var(_)
                    | Reference::Baton(_)
                    | Reference::Secret(_)
                    | Reference::Github(_)
            ) {
                return Err(document(
                    &format!("env.{name}"),
                    &format!(
                        "{reference} cannot be used in the workflow's env: only inputs, vars, github, baton and secrets"
                    ),
                ));
            }
        }
    }
    for name in &definition.mask_env {
        let set = workflow_env.contains(name.as_str())
            || definition
                .jobs
                .iter()
                .any(|j| j.env.contains_key(name) || j.steps.iter().any(|s| s.env.contains_key(name)));
        if !set {
            return Err(document("mask-env", &format!("`{name}` is not a variable of any env")));
        }
    }
    for job in &definition.jobs {
        for name in &job.mask_env {
            let set = workflow_env.contains(name.as_str())
                || job.env.contains_key(name)
                || job.steps.iter().any(|s| s.env.contains_key(name));
            if !set {
                return Err(DefinitionError::in_job(
                    &job.key,
                    Some("mask-env"),
                    format!("`{name}` is not a variable of the workflow's, the job's or a step's env"),
                ));
            }
        }
        let mut checked: Vec<(String, Reference, Vec<&str>)> = Vec::new();
        for (field, text, visible, step) in expression_fields(job) {
            let refuse = |e: String| DefinitionError::in_job(&job.key, Some(&field), e);
            check_secret_expressions(&field, text).map_err(refuse)?;
            let Some(index) = step else {
                let found = expressions::text_references(text).map_err(refuse)?;
                checked.extend(found.into_iter().map(|r| (field.clone(), r, visible.clone())));
                continue;
            };
            // A step's field may read what the runner knows; then the
            // runner resolves all of it (`StepSpec::deferred`).
            let found = expressions::text_references_in(text, Dialect::Step).map_err(refuse)?;
            let mut deferred = false;
            for reference in found {
                if set_on_the_runner(&reference, |name| {
                    workflow_env.contains(name) || job.env.contains_key(name) || visible.contains(&name)
                }) || runner_side(job, index, &reference).map_err(refuse)?
                {
                    deferred = true;
                } else {
                    checked.push((field.clone(), reference, visible.clone()));
                }
            }
            // The claim puts a secret's value in where it stands; the runner
            // would then read that value as text to evaluate.
            if deferred && checked.iter().any(|(f, r, _)| f == &field && matches!(r, Reference::Secret(_))) {
                return Err(refuse(
                    "a field that reads steps.* or runner.* (resolved on the runner) reads no secret: \
                     pass the secret in through the step's env"
                        .into(),
                ));
            }
        }
        checked.extend(step_condition_references(job, &workflow_env)?);
        if let Some(when) = job.listen.as_ref().and_then(|l| l.when.as_ref()) {
            let mut found = Vec::new();
            let expr = expressions::parse(when).map_err(|e| DefinitionError::in_job(&job.key, Some("listen.if"), e))?;
            expressions::references(&expr, &mut found);
            checked.extend(found.into_iter().map(|r| ("listen.if".to_string(), r, Vec::new())));
        }
        // A matrix decided when the job is due reads its needs as its `if:`
        // does (`decided_when_due` let only such references through).
        for text in job.runtime_matrix.iter().flat_map(|m| m.expressions()) {
            let found = expressions::text_references(&text)
                .map_err(|e| DefinitionError::in_job(&job.key, Some("strategy.matrix"), e))?;
            checked.extend(found.into_iter().map(|r| ("strategy.matrix".to_string(), r, Vec::new())));
        }
        if let Some(when) = &job.when {
            let mut found = Vec::new();
            let expr = expressions::parse(when).map_err(|e| DefinitionError::in_job(&job.key, Some("if"), e))?;
            expressions::references(&expr, &mut found);
            checked.extend(found.into_iter().map(|r| ("if".to_string(), r, Vec::new())));
        }
        for (field, reference, visible) in checked {
            let refuse =
                |why: String| Err(DefinitionError::in_job(&job.key, Some(&field), format!("{reference}: {why}")));
            if let Reference::Event(_) = &reference {
                if job.listen.is_none() {
                    return refuse("only a listening job (`listen:`) handles events".into());
                }
                if field == "if" {
                    return refuse(
                        "the job's `if:` decides once, before any event: `listen.if` decides each event".into(),
                    );
                }
                continue;
            }
            match &reference {
                Reference::NeedsOutput { job: need, .. }
                | Reference::NeedsResult { job: need }
                | Reference::NeedsOutcome { job: need }
                    if !definition.reads_need(job, need) =>
                {
                    return refuse(format!("`{need}` is not among this job's needs"));
                }
                Reference::Secret(_)
                    if !(field.starts_with("env.")
                        || field.ends_with(".run")
                        || field.contains("].env.")
                        || field.contains("].with.")) =>
                {
                    return refuse("secrets are read only in `env`, `run` and `with`, never decided on".into());
                }
                Reference::Secret(name) if !baton_api::secrets::valid_secret_name(name) => {
                    return refuse("a secret name is a letter or '_', then letters, digits and '_'".into());
                }
                // Its values are known when the job is due: a name no
                // combination has then reads empty, as on GitHub.
                Reference::Matrix(_) if job.runtime_matrix.is_some() => {}
                Reference::Matrix(name) => {
                    let Some(leg) = &job.matrix else {
                        return refuse("only a job with `strategy.matrix` has matrix values".into());
                    };
                    // Any leg's key: an `include` may add one to some legs
                    // only (the others read it empty, as on GitHub).
                    let known = definition
                        .jobs
                        .iter()
                        .filter_map(|j| j.matrix.as_ref())
                        .any(|other| other.job == leg.job && other.value(name).is_some());
                    if !known {
                        return refuse(format!("no combination of `{}` has `{name}`", leg.job));
                    }
                }
                Reference::NeedsOutput { job: need, name } => {
                    // A matrix job's outputs are its legs' (each declares them).
                    let need_job = definition.matrix_group(need).and_then(|g| g.legs.first()).unwrap_or(need);
                    // An approval's outputs are its inputs.
                    let declared = definition.job(need_job).is_some_and(|j| {
                        j.outputs.contains_key(name) || j.approval.as_ref().is_some_and(|a| a.inputs.contains_key(name))
                    });
                    if !declared {
                        return refuse(format!("job `{need}` declares no output `{name}` (see its `outputs:`)"));
                    }
                }
                Reference::Env(name)
                    if !workflow_env.contains(name.as_str())
                        && !job.env.contains_key(name)
                        && !visible.contains(&name.as_str()) =>
                {
                    return refuse("no such variable in the workflow's, the job's or the step's env".into());
                }
                Reference::StepOutput { .. } => {
                    return refuse(
                        "step outputs are read in a step's `if:`, `run`, `env`, `with` or the job's `outputs:`".into(),
                    )
                }
                _ => {}
            }
        }
        let step_ids: Vec<&str> = job.steps.iter().filter_map(|s| s.id.as_deref()).collect();
        if let Some(duplicate) = step_ids.iter().enumerate().find(|(i, id)| step_ids[..*i].contains(id)) {
            return Err(DefinitionError::in_job(
                &job.key,
                Some("steps"),
                format!("step id `{}` is used twice", duplicate.1),
            ));
        }
        for (name, source) in &job.outputs {
            if let Some(step) = &source.step {
                if !step_ids.contains(&step.as_str()) {
                    return Err(DefinitionError::in_job(
                        &job.key,
                        Some(&format!("outputs.{name}")),
                        format!("no step has id `{step}`"),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// A reference, the field it is in, and the env names visible there.
type Located<'a> = (String, Reference, Vec<&'a str>);

/// The references of `job`'s step conditions that the queue resolves,
/// with their field (`steps[2].if`) and the env names visible there, for
/// the checks every reference of the job goes through. What the runner
/// resolves is checked here: a step's `steps.<id>` must be an earlier
/// step's (GitHub reads a later or unknown one as empty, silently).
fn step_condition_references<'a>(
    job: &'a JobDefinition,
    workflow_env: &BTreeSet<&str>,
) -> Result<Vec<Located<'a>>, DefinitionError> {
    let mut checked = Vec::new();
    for (index, step) in job.steps.iter().enumerate() {
        let Some(condition) = &step.condition else { continue };
        let field = format!("steps[{index}].if");
        let refuse = |message: String| DefinitionError::in_job(&job.key, Some(&field), message);
        let found = expressions::condition_references(condition, Dialect::Step).map_err(refuse)?;
        let mut visible: Vec<&str> = job.env.keys().map(String::as_str).collect();
        visible.extend(step.env.keys().map(String::as_str));
        for reference in found {
            let queue_env = |name: &str| workflow_env.contains(name) || visible.contains(&name);
            if !set_on_the_runner(&reference, queue_env) && !runner_side(job, index, &reference).map_err(refuse)? {
                checked.push((field.clone(), reference, visible.clone()));
            }
        }
    }
    Ok(checked)
}

/// The references of `job`'s step conditions that the queue resolves
/// (what the runner reads itself left out).
fn step_condition_queue_references(job: &JobDefinition) -> Vec<Reference> {
    job.steps
        .iter()
        .filter_map(|step| step.condition.as_deref())
        .flat_map(|condition| expressions::condition_references(condition, Dialect::Step).unwrap_or_default())
        .filter(|reference| !matches!(reference, Reference::Runner(_) | Reference::StepOutput { .. }))
        .collect()
}

fn document(field: &str, message: &str) -> DefinitionError {
    DefinitionError { job: None, field: Some(field.to_string()), message: message.to_string() }
}

/// The secrets `job`'s env and steps (and the workflow's env) name, sorted:
/// what its claim reads.
pub fn secrets_used(definition: &WorkflowDefinition, job: &JobDefinition) -> Vec<String> {
    let mut names = BTreeSet::new();
    let texts =
        definition.env.values().map(String::as_str).chain(expression_fields(job).into_iter().map(|(_, t, _, _)| t));
    for text in texts {
        // (The step dialect reads every field, runner-resolved ones too.)
        for reference in expressions::text_references_in(text, Dialect::Step).unwrap_or_default() {
            if let Reference::Secret(name) = reference {
                names.insert(name);
            }
        }
    }
    names.into_iter().collect()
}

/// An expression that reads a secret is that reference alone
/// (`${{ secrets.NAME }}`): the claim puts the value in where it stands,
/// and nothing compares or combines it before that.
fn check_secret_expressions(field: &str, text: &str) -> Result<(), String> {
    if !text.contains("secrets") {
        return Ok(());
    }
    // (The step dialect reads every field, runner-resolved ones too.)
    for segment in expressions::segments_in(text, Dialect::Step)? {
        if let expressions::Segment::Expr(expr) = segment {
            let mut found = Vec::new();
            expressions::references(&expr, &mut found);
            let alone = matches!(expr, expressions::Expr::Ref(Reference::Secret(_)));
            if !alone && found.iter().any(|r| matches!(r, Reference::Secret(_))) {
                return Err(format!("{field}: a secret is read alone, as `${{{{ secrets.NAME }}}}`"));
            }
        }
    }
    Ok(())
}

/// The run inputs the definition's expressions read, to check against the
/// inputs a run is created with.
pub fn inputs_used(definition: &WorkflowDefinition) -> BTreeSet<String> {
    used_of(definition, |reference| match reference {
        Reference::Input(name) => Some(name),
        _ => None,
    })
}

/// The workspace variables the definition's expressions read (upper-cased):
/// what a run is created with a copy of.
pub fn vars_used(definition: &WorkflowDefinition) -> BTreeSet<String> {
    used_of(definition, |reference| match reference {
        Reference::Var(name) => Some(name),
        _ => None,
    })
}

/// The names `pick` takes from every reference of every expression of the
/// definition that is resolved when its run is created or a job queued.
fn used_of(definition: &WorkflowDefinition, pick: impl Fn(Reference) -> Option<String>) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    let mut add = |text: &str| {
        // (The step dialect reads every field, runner-resolved ones too.)
        for reference in expressions::text_references_in(text, Dialect::Step).unwrap_or_default() {
            used.extend(pick(reference));
        }
    };
    definition.env.values().for_each(|v| add(v));
    definition.run_name.iter().for_each(|text| add(text));
    if let Some(spec) = &definition.concurrency {
        add(&spec.group);
        spec.cancel_in_progress.iter().for_each(|text| add(text));
    }
    for job in &definition.jobs {
        for (_, text, _, _) in expression_fields(job) {
            add(text);
        }
        if let Some(when) = &job.when {
            add(&format!("${{{{ {when} }}}}"));
        }
        job.runtime_matrix.iter().flat_map(|m| m.expressions()).for_each(|text| add(&text));
    }
    for reference in definition.jobs.iter().flat_map(step_condition_queue_references) {
        used.extend(pick(reference));
    }
    used
}

/// What queueing `job` needs to know beyond the attempt: whether its
/// expressions read the run's own data (its inputs or its `github`
/// context), and the needs whose outputs they read.
pub fn data_needed(definition: &WorkflowDefinition, job: &JobDefinition) -> (bool, BTreeSet<String>) {
    let mut inputs = false;
    let mut needs = BTreeSet::new();
    let mut texts: Vec<String> = definition.env.values().cloned().collect();
    texts.extend(expression_fields(job).into_iter().map(|(_, text, _, _)| text.to_string()));
    if let Some(when) = &job.when {
        texts.push(format!("${{{{ {when} }}}}"));
    }
    texts.extend(job.runtime_matrix.iter().flat_map(|m| m.expressions()));
    let conditions = step_condition_queue_references(job);
    for references in
        // (The step dialect reads every field, runner-resolved ones too: their
        // workflow references are resolved at the queue all the same.)
        texts
            .iter()
            .map(|text| expressions::text_references_in(text, Dialect::Step).unwrap_or_default())
            .chain([conditions])
    {
        for reference in references {
            match reference {
                Reference::Input(_)
                | Reference::Var(_)
                | Reference::Github(_)
                | Reference::Baton(BatonField::Trigger) => inputs = true,
                Reference::NeedsOutput { job, .. } => {
                    needs.insert(job);
                }
                // The whole context shows every need's outputs.
                Reference::Needs => needs.extend(job.needs.iter().cloned()),
                _ => {}
            }
        }
    }
    (inputs, needs)
}

/// What the orchestrator read for the expressions of the jobs it queues
/// (the run's inputs and finished executions' outputs, values as text), and
/// what their concurrency groups answered.
#[derive(Debug, Clone, Default)]
pub struct ExpressionData {
    /// `None` until read.
    pub inputs: Option<serde_json::Map<String, serde_json::Value>>,
    /// The workspace variables the run was created with: read with its inputs.
    pub vars: Option<serde_json::Map<String, serde_json::Value>>,
    /// The run's `github` context: read with its inputs.
    pub github: Option<GithubData>,
    /// By execution id; an execution that reported none maps to nothing.
    pub outputs: HashMap<Uuid, BTreeMap<String, String>>,
    /// By job id: whether the job holds the group it joined.
    pub joined: HashMap<Uuid, bool>,
    /// Jobs that have left their groups, by id.
    pub left: std::collections::HashSet<Uuid>,
}

/// The values a job's expressions see when it is queued.
pub struct JobScope<'a> {
    pub run_id: Uuid,
    pub attempt: u32,
    pub workspace_id: &'a str,
    pub job: &'a str,
    /// A matrix leg's values.
    pub matrix: Option<&'a MatrixLeg>,
    /// The job's env, workflow's merged in (before interpolation).
    pub env: BTreeMap<String, String>,
    pub inputs: Option<&'a serde_json::Map<String, serde_json::Value>>,
    /// The workspace variables the run was created with.
    pub vars: Option<&'a serde_json::Map<String, serde_json::Value>>,
    /// By need: its status and outputs.
    pub needs: HashMap<String, NeedState<'a>>,
    /// A listening job's execution: the event it handles.
    pub event: Option<&'a super::listening::JobEvent>,
    /// The `github` context (`None` while unread, or where no job reads it).
    pub github: Option<&'a GithubData>,
}

/// A need as its dependant's expressions see it: a job, or a matrix job
/// (its legs together).
#[derive(Debug, Clone)]
pub struct NeedState<'a> {
    pub status: JobStatus,
    /// It failed, and its `continue-on-error` made it succeed (for a
    /// matrix job: one of its legs did).
    pub soft_failed: bool,
    /// `None` when no expression of the job reads them. A matrix job's
    /// are made here: each name's value is a JSON object of leg → value.
    pub outputs: Option<Cow<'a, BTreeMap<String, String>>>,
}

fn result_word(status: JobStatus) -> &'static str {
    match status {
        JobStatus::Succeeded => "success",
        JobStatus::Failed => "failure",
        JobStatus::Cancelled => "cancelled",
        JobStatus::Skipped => "skipped",
        other => other.as_str(),
    }
}

impl Scope for JobScope<'_> {
    fn resolve(&self, reference: &Reference) -> Option<String> {
        match reference {
            Reference::NeedsOutput { job, name } => self.needs.get(job)?.outputs.as_ref()?.get(name).cloned(),
            Reference::Matrix(name) => Some(self.matrix?.value(name).unwrap_or_default().to_string()),
            Reference::Strategy(field) => crate::workflows::matrix::strategy_value(self.matrix, field),
            // Left for the claim to put in (`secrets::put_in`): never in
            // the job's stored spec, a fact or the view.
            Reference::Secret(name) => Some(secret_placeholder(name)),
            // GitHub's words for a need's result: a soft failure's result
            // is `success` (it does not fail its dependants), its outcome
            // `failure` (as a GitHub step's conclusion and outcome).
            Reference::NeedsResult { job } => Some(result_word(self.needs.get(job)?.status).to_string()),
            Reference::NeedsOutcome { job } => {
                let need = self.needs.get(job)?;
                Some(if need.soft_failed { "failure" } else { result_word(need.status) }.to_string())
            }
            Reference::Input(name) => self.inputs?.get(name).map(|value| match value {
                serde_json::Value::String(text) => text.clone(),
                other => other.to_string(),
            }),
            Reference::Var(name) => Some(super::vars::value(self.vars, name)),
            Reference::Env(name) => self.env.get(name).cloned(),
            Reference::Baton(field) => Some(match field {
                BatonField::RunId => self.run_id.to_string(),
                BatonField::Attempt => self.attempt.to_string(),
                BatonField::WorkspaceId => self.workspace_id.to_string(),
                BatonField::Job => self.job.to_string(),
                BatonField::Trigger => self.github?.trigger.clone(),
            }),
            Reference::StepOutput { .. } => None,
            Reference::Event(path) => super::listening::value_of(self.event?, path),
            Reference::Github(path) => self.github_value(path).map(|value| github::as_text(&value)),
            // JSON text: the runner reads it back as an object (a step's `if:`).
            Reference::Needs => Some(self.needs_value().to_string()),
            // Only an action's own expressions name these, on the runner.
            Reference::Runner(_) => None,
        }
    }

    fn resolve_value(&self, reference: &Reference) -> Option<expressions::Value> {
        match reference {
            Reference::Github(path) => self.github_value(path).map(|value| expressions::Value::from_serde(&value)),
            Reference::Needs => Some(expressions::Value::from_serde(&self.needs_value())),
            Reference::Matrix(name) => self
                .matrix?
                .typed_value(name)
                .map(|value| expressions::Value::from_serde(&value))
                .or(Some(expressions::Value::String(String::new()))),
            other => self.resolve(other).map(expressions::Value::String),
        }
    }
}

impl JobScope<'_> {
    /// The `needs` context: each need's `result` (GitHub's word) and the
    /// `outputs` the job reads (empty when it reads none by name).
    fn needs_value(&self) -> serde_json::Value {
        let needs: serde_json::Map<String, serde_json::Value> = self
            .needs
            .iter()
            .map(|(job, need)| {
                let outputs: serde_json::Map<String, serde_json::Value> = need
                    .outputs
                    .iter()
                    .flat_map(|outputs| outputs.iter())
                    .map(|(name, value)| (name.clone(), serde_json::Value::String(value.clone())))
                    .collect();
                let result = serde_json::Value::String(result_word(need.status).to_string());
                (job.clone(), serde_json::json!({ "result": result, "outputs": outputs }))
            })
            .collect();
        serde_json::Value::Object(needs)
    }

    fn github_value(&self, path: &[String]) -> Option<serde_json::Value> {
        let place = github::RunPlace { run_id: self.run_id, attempt: self.attempt, job: Some(self.job) };
        self.github?.value(path, place)
    }
}

/// What a job's spec holds where a secret goes: the claim puts the value in
/// (`secrets::put_in` on the server side) and nothing stored ever holds it.
pub fn secret_placeholder(name: &str) -> String {
    format!("${{{{ secrets.{name} }}}}")
}

#[cfg(test)]
mod tests {
    use crate::workflows::parse_definition;

    fn refused(yaml: &str) -> String {
        parse_definition(yaml).expect_err("refused").to_string()
    }

    #[test]
    fn workspace_variables_are_read_by_name_case_insensitively_and_an_unset_one_is_empty() {
        let yaml = "name: deploy\nrun-name: to ${{ vars.Target }}\nenv: {REGION: '${{ vars.region }}'}\njobs:\n  go:\n    runs-on: linux\n    if: vars.ENABLED != 'false'\n    steps: [{run: 'echo ${{ vars.TARGET }} ${{ vars.MISSING }}'}]\n";
        let definition = parse_definition(yaml).unwrap();
        let used: Vec<String> = super::vars_used(&definition).into_iter().collect();
        assert_eq!(used, ["ENABLED", "MISSING", "REGION", "TARGET"]);
        let job = definition.job("go").unwrap();
        assert!(super::data_needed(&definition, job).0, "the run's data is read for its vars");
        let vars = serde_json::json!({"TARGET": "production", "REGION": "eu-west-1"});
        let vars = vars.as_object();
        assert_eq!(crate::workflows::vars::value(vars, "TARGET"), "production");
        assert_eq!(crate::workflows::vars::value(vars, "MISSING"), "", "unset: empty, as on GitHub");
        assert_eq!(crate::workflows::vars::value(None, "TARGET"), "");
    }

    #[test]
    fn references_must_name_declared_outputs_of_needs_and_known_env() {
        let ok = "jobs:\n  build:\n    runs-on: linux\n    outputs: [version]\n    steps: [{run: 'echo version=1 >> $BATON_OUTPUT'}]\n  test:\n    runs-on: linux\n    needs: build\n    if: needs.build.outputs.version != ''\n    env: {V: '${{ needs.build.outputs.version }}'}\n    steps: [{run: 'echo ${{ env.V }} ${{ inputs.x }} ${{ baton.run_id }}'}]\n";
        let definition = parse_definition(ok).unwrap();
        assert_eq!(super::inputs_used(&definition).into_iter().collect::<Vec<_>>(), vec!["x".to_string()]);
        let test = definition.job("test").unwrap();
        assert_eq!(super::data_needed(&definition, test), (true, ["build".to_string()].into()));

        let not_a_need = ok.replace("    needs: build\n", "");
        let message = refused(&not_a_need);
        assert!(message.contains("`build` is not among this job's needs"), "{message}");
        let undeclared = ok.replace("outputs: [version]", "outputs: [other]");
        assert!(refused(&undeclared).contains("declares no output `version`"));
        // A step may read what an earlier step exported (`$GITHUB_ENV`): the
        // runner resolves it. A job's own fields have no earlier step.
        let exported = ok.replace("${{ env.V }}", "${{ env.W }}");
        let reads_exported = parse_definition(&exported).unwrap();
        let spec = crate::workflows::spec::job_spec(
            &reads_exported,
            reads_exported.job("test").unwrap(),
            uuid::Uuid::nil(),
            std::time::Duration::from_secs(60),
            None,
        );
        assert_eq!(spec.work.steps[0].deferred, ["run"], "the runner resolves env.W");
        let unknown_env = ok.replace("if: needs.build.outputs.version != ''", "if: env.W != ''");
        assert!(refused(&unknown_env).contains("field `if`: env.W"), "{}", refused(&unknown_env));
        let unknown_context = ok.replace("${{ baton.run_id }}", "${{ github.retention_days }}");
        assert!(refused(&unknown_context).contains("unknown reference github.retention_days"));
    }

    #[test]
    fn a_jobs_expressions_filter_the_needs_and_the_triggers_event_as_values() {
        use crate::workflows::expressions::{self, Scope};
        use crate::workflows::status::JobStatus;
        let github = crate::workflows::github::GithubData {
            fields:
                serde_json::json!({"event": {"pull_request": {"labels": [{"name": "bug"}, {"name": "benchmark"}]}}})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ..Default::default()
        };
        let outputs = std::collections::BTreeMap::from([("v".to_string(), "1".to_string())]);
        fn need(
            status: JobStatus,
            outputs: Option<&std::collections::BTreeMap<String, String>>,
        ) -> super::NeedState<'_> {
            super::NeedState { status, soft_failed: false, outputs: outputs.map(std::borrow::Cow::Borrowed) }
        }
        let scope = super::JobScope {
            run_id: uuid::Uuid::nil(),
            attempt: 1,
            workspace_id: "ws",
            job: "bench",
            matrix: None,
            env: Default::default(),
            inputs: None,
            vars: None,
            needs: [
                ("build".to_string(), need(JobStatus::Succeeded, Some(&outputs))),
                ("lint".to_string(), need(JobStatus::Failed, None)),
            ]
            .into_iter()
            .collect(),
            event: None,
            github: Some(&github),
        };
        let holds = |text: &str| expressions::evaluate(&expressions::parse(text).unwrap(), &scope).unwrap().truthy();
        assert!(holds("contains(github.event.pull_request.labels.*.name, 'benchmark')"));
        assert!(!holds("contains(github.event.pull_request.labels.*.name, 'docs')"));
        assert!(holds("contains(needs.*.result, 'failure')"));
        assert!(
            holds("join(needs.*.outputs.v) == '1'"),
            "a filter's elements read on; a need without it gives nothing"
        );
        let text = scope.resolve(&expressions::Reference::Needs).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(json["lint"]["result"], "failure", "the queue's values carry needs as JSON: {text}");
        assert_eq!(json["build"]["outputs"]["v"], "1");
    }

    #[test]
    fn the_strategy_context_tells_a_leg_where_it_stands_and_a_plain_job_it_is_one_of_one() {
        use crate::workflows::expressions::{self, Scope};
        let yaml = "jobs:\n  build:\n    runs-on: linux\n    strategy: {fail-fast: false, max-parallel: 2, matrix: {os: [a, b, c]}}\n    steps: [{run: 'echo ${{ strategy.job-index }}'}]\n  plain:\n    runs-on: linux\n    steps: [{run: 'echo ${{ strategy.job-total }}'}]\n";
        let definition = parse_definition(yaml).unwrap();
        let scope_of = |key: &str| {
            let job = definition.jobs.iter().find(|j| j.key.starts_with(key)).unwrap();
            super::JobScope {
                run_id: uuid::Uuid::nil(),
                attempt: 1,
                workspace_id: "ws",
                job: &job.key,
                matrix: job.matrix.as_ref(),
                env: Default::default(),
                inputs: None,
                vars: None,
                needs: Default::default(),
                event: None,
                github: None,
            }
        };
        let read = |scope: &super::JobScope<'_>, text: &str| expressions::interpolate(text, scope);
        let legs: Vec<_> = definition.jobs.iter().filter_map(|j| j.matrix.as_ref()).collect();
        assert_eq!(legs.iter().map(|leg| leg.index).collect::<Vec<_>>(), [0, 1, 2]);
        let last = scope_of("build (c)");
        assert_eq!(
            read(&last, "${{ strategy.job-index }}/${{ strategy.job-total }} ${{ strategy.fail-fast }} ${{ strategy.max-parallel }}"),
            "2/3 false 2"
        );
        let plain = scope_of("plain");
        assert_eq!(
            read(&plain, "${{ strategy.job-index }}/${{ strategy.job-total }} ${{ strategy.fail-fast }}"),
            "0/1 true"
        );
        assert_eq!(plain.resolve(&expressions::Reference::Strategy("max-parallel".into())).as_deref(), Some("1"));
        assert!(refused(&yaml.replace("strategy.job-total", "strategy.job-count"))
            .contains("unknown reference strategy.job-count"));
    }

    #[test]
    fn outputs_name_steps_by_id() {
        let yaml = "jobs:\n  a:\n    runs-on: linux\n    outputs:\n      v: ${{ steps.make.outputs.version }}\n    steps: [{id: make, run: 'true'}]\n";
        let definition = parse_definition(yaml).unwrap();
        let source = &definition.job("a").unwrap().outputs["v"];
        assert_eq!((source.step.as_deref(), source.key.as_str()), (Some("make"), "version"));
        assert!(refused(&yaml.replace("{id: make,", "{id: other,")).contains("no step has id `make`"));
        assert!(refused(&yaml.replace("${{ steps.make.outputs.version }}", "literal")).contains("expected `${{ steps"));
    }

    #[test]
    fn a_steps_fields_read_earlier_steps_and_what_the_runner_knows_and_nothing_else() {
        let job = |steps: &str| format!("jobs:\n  a:\n    runs-on: linux\n    steps:\n{steps}");
        // `github.token` is the workspace's `GITHUB_TOKEN` secret, as GitHub documents it.
        let token = parse_definition(&job("      - {run: x, env: {GH_TOKEN: '${{ github.token }}'}}\n")).unwrap();
        let secrets = super::secrets_used(&token, token.job("a").unwrap());
        assert_eq!(secrets, ["GITHUB_TOKEN"]);
        let ok = job("      - {id: meta, run: x}\n      - run: echo ${{ steps.meta.outputs.tag }} ${{ runner.os }} ${{ github.workspace }}\n        env: {T: '${{ steps.meta.outputs.tag }}'}\n        working-directory: '${{ runner.temp }}'\n      - uses: acme/remember@v4\n        with: {key: '${{ runner.arch }}-${{ steps.meta.outputs.tag }}'}\n");
        parse_definition(&ok).unwrap();
        for (steps, says) in [
            (
                "      - run: echo ${{ steps.later.outputs.x }}\n      - {id: later, run: x}\n",
                "step `later` does not run before this one",
            ),
            ("      - run: echo ${{ steps.nope.outputs.x }}\n", "no step before this one has id `nope`"),
            ("      - run: echo ${{ runner.name }}\n", "the runner knows runner.os|arch|temp"),
            (
                "      - {id: m, run: x}\n      - run: echo ${{ secrets.S }} ${{ steps.m.outputs.x }}\n",
                "reads no secret",
            ),
        ] {
            let message = refused(&job(steps));
            assert!(message.contains(says), "{steps}: {message}");
        }
    }
}
