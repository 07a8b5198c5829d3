//! Reusable workflows: a job whose `uses:` calls another workflow
//! (`jobs.<id>.uses: ./.github/workflows/<name>.yml`, GitHub's same-repository
//! form), the called workflow a pipeline of the workspace named `<name>`
//! whose `on:` has `workflow_call`.
//!
//! A call is expanded before the definition is read, on the YAML tree: the
//! called workflow's jobs take the calling job's place as jobs of the run,
//! `<caller>--<job>`, shown as "caller / job" (GitHub's names). So a called
//! job is scheduled, retried, shown and rerun as every other job, and
//! everything the reader checks holds for it too. What the called jobs read
//! of their caller is written into their expressions:
//!
//! - `inputs.<name>` becomes the caller's `with:` value (an expression, a
//!   literal of the input's declared type, its `default`, or the type's
//!   empty value, as on GitHub);
//! - `secrets.<name>` becomes the caller's secret it was passed as
//!   (`secrets: {name: ${{ secrets.X }}}`), stays as written with
//!   `secrets: inherit`, and is empty when not passed;
//! - `needs.<job>` names the called job's new id;
//! - the caller's `needs` are the called workflow's first jobs' needs, and
//!   its `if:` holds for every called job (`(job's if) && (caller's if)`).
//!
//! The jobs that need the caller need every called job, and read
//! `needs.<caller>.outputs.<name>` as the value `on.workflow_call.outputs`
//! gives it (`jobs.<job>` read as `needs.<caller>--<job>`), and
//! `needs.<caller>.result` as GitHub derives a called workflow's result
//! from its jobs'.
//!
//! A call with `strategy.matrix` is one call a combination, `<caller>-<n>`,
//! each reading its `matrix.*` as literals; the jobs that need the caller
//! need them all.
//!
//! Calls nest (a called workflow may call), four levels at most as on
//! GitHub, twenty distinct workflows a run, no cycles. A caller's
//! workflow-level `defaults` stay with its own jobs (GitHub does not pass
//! them); its workflow `env` reaches the called jobs (documented
//! difference: Baton gives every job of a run the workflow env).

use std::collections::{BTreeMap, BTreeSet};

use super::definition::{DefinitionError, MAX_JOB_ID_LEN};
use super::expressions::{as_expression, quote, replace_in_condition, replace_in_text, Replace};
use super::yaml::YamlNode;

/// How deep calls nest, the calling workflow included (GitHub's limit).
pub const MAX_CALL_DEPTH: usize = 4;
/// The most distinct workflows one run may call (GitHub's limit).
pub const MAX_CALLED_WORKFLOWS: usize = 20;
/// Between a calling job's id and a called job's in the run's job ids.
pub const CALLED_JOB_SEPARATOR: &str = "--";

/// What a job that calls a workflow may say; the rest is the called
/// workflow's.
const CALL_FIELDS: &[&str] = &["name", "uses", "with", "secrets", "needs", "if", "permissions", "strategy"];
/// What a called workflow may say at its top; the rest is its jobs'.
const CALLED_WORKFLOW_FIELDS: &[&str] =
    &["name", "run-name", "on", "env", "mask-env", "permissions", "defaults", "jobs"];

/// The definitions of the pipelines a run calls, by name: what
/// [`parse_definition_with`](super::parse::parse_definition_with) expands
/// calls from. [`missing_calls`] says which a definition still needs.
#[derive(Debug, Clone, Default)]
pub struct CalledWorkflows {
    texts: BTreeMap<String, String>,
}

impl CalledWorkflows {
    /// No called workflows: a call is refused, naming the pipeline missing.
    pub fn none() -> Self {
        Self::default()
    }

    pub fn insert(&mut self, name: impl Into<String>, definition: impl Into<String>) {
        self.texts.insert(name.into(), definition.into());
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.texts.get(name).map(String::as_str)
    }
}

/// The pipeline a job's `uses:` calls: `./.github/workflows/<name>.yml`
/// (or `.yaml`) is the pipeline `<name>`.
pub fn called_pipeline(uses: &str) -> Result<String, String> {
    let uses = uses.trim();
    if let Some(file) = uses.strip_prefix("./.github/workflows/") {
        let name = file.strip_suffix(".yml").or_else(|| file.strip_suffix(".yaml")).unwrap_or_default();
        if crate::limits::workspace_id(name).is_ok() {
            return Ok(name.to_string());
        }
        return Err(format!(
            "`{uses}`: a called workflow is `./.github/workflows/<pipeline>.yml`, the name of a pipeline of this \
             workspace (letters, digits, '-', '_' and '.') before `.yml`"
        ));
    }
    if uses.contains('@') && uses.contains("/.github/workflows/") {
        return Err(format!(
            "`{uses}`: Baton does not fetch workflows from other repositories: store it as a pipeline of this \
             workspace and call it as `./.github/workflows/<pipeline>.yml`"
        ));
    }
    Err(format!(
        "`{uses}`: a job's `uses:` calls a reusable workflow, `./.github/workflows/<pipeline>.yml` (an action is a \
         step's `uses:`)"
    ))
}

/// The pipelines `yaml` calls, directly or through the definitions
/// `called` holds, that `called` does not hold yet: what to fetch before
/// parsing. Nothing when the text is no workflow (parsing says why).
pub fn missing_calls(yaml: &str, called: &CalledWorkflows) -> Vec<String> {
    let mut missing = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let mut frontier = YamlNode::parse(yaml).map(|root| calls_in(&root)).unwrap_or_default();
    while let Some(name) = frontier.pop() {
        // Past the limit parsing refuses the run; no need to look further.
        if !seen.insert(name.clone()) || seen.len() > MAX_CALLED_WORKFLOWS + 1 {
            continue;
        }
        match called.get(&name) {
            Some(text) => frontier.extend(YamlNode::parse(text).map(|root| calls_in(&root)).unwrap_or_default()),
            None => {
                missing.insert(name);
            }
        }
    }
    missing.into_iter().collect()
}

/// The pipelines the jobs of `root` call, where `uses:` names one.
fn calls_in(root: &YamlNode) -> Vec<String> {
    let Some(YamlNode::Mapping(jobs)) = field(root, "jobs") else { return Vec::new() };
    jobs.iter()
        .filter_map(|(_, body)| field(body, "uses")?.scalar_text())
        .filter_map(|uses| called_pipeline(&uses).ok())
        .collect()
}

/// `root` with every call expanded (see the module doc).
pub(crate) fn expand_calls(root: YamlNode, called: &CalledWorkflows) -> Result<YamlNode, DefinitionError> {
    let mut distinct = BTreeSet::new();
    expand(root, called, &mut Vec::new(), &mut distinct)
}

/// What a call became: the called jobs' ids, its outputs as expressions
/// over them, and the pipeline called (for messages).
struct Expanded {
    pipeline: String,
    keys: Vec<String>,
    outputs: BTreeMap<String, String>,
}

fn expand(
    mut root: YamlNode,
    called: &CalledWorkflows,
    stack: &mut Vec<String>,
    distinct: &mut BTreeSet<String>,
) -> Result<YamlNode, DefinitionError> {
    let Some(YamlNode::Mapping(entries)) = field(&root, "jobs") else { return Ok(root) };
    if !entries.iter().any(|(_, body)| is_call(body)) {
        return Ok(root);
    }
    let entries = entries.clone();
    // GitHub gives a called workflow none of its caller's `defaults`: they
    // become its own jobs'. (A malformed one stays for the reader to refuse.)
    let defaults = match field(&root, "defaults") {
        Some(defaults) if run_defaults(defaults).is_some() => remove(&mut root, "defaults"),
        _ => None,
    };
    let mut calls: BTreeMap<String, Expanded> = BTreeMap::new();
    let mut jobs: Vec<(YamlNode, YamlNode)> = Vec::with_capacity(entries.len());
    for (key, body) in entries {
        let Some(id) = key.scalar_text() else {
            jobs.push((key, body));
            continue;
        };
        if !is_call(&body) {
            jobs.push((key, with_defaults(body, defaults.as_ref())));
            continue;
        }
        if calls.contains_key(&id) {
            return Err(DefinitionError::in_job(id, None, "duplicate job id"));
        }
        let expanded = match field(&body, "strategy") {
            None => {
                let (called_jobs, expanded) = expand_call(&id, &body, called, stack, distinct)?;
                jobs.extend(called_jobs);
                expanded
            }
            Some(strategy) => {
                let mut legs = Vec::new();
                for (leg, leg_body) in matrix_calls(&id, &body, strategy)? {
                    let (called_jobs, expanded) = expand_call(&leg, &leg_body, called, stack, distinct)?;
                    jobs.extend(called_jobs);
                    legs.push(expanded);
                }
                Expanded::of_legs(legs)
            }
        };
        calls.insert(id, expanded);
    }
    let mut pointed = Vec::with_capacity(jobs.len());
    for (key, body) in jobs {
        let id = key.scalar_text().unwrap_or_default();
        let body = point_at_calls(body, &calls).map_err(|why| DefinitionError::in_job(&id, None, why))?;
        pointed.push((key, body));
    }
    set(&mut root, "jobs", YamlNode::Mapping(pointed));
    Ok(root)
}

impl Expanded {
    /// A matrix of calls as the jobs after it read it: every leg's called
    /// jobs, and each output as the last leg that set it gives it (GitHub
    /// gives whichever call finished last; Baton's is the last in matrix
    /// order, so the same run reads the same value).
    fn of_legs(legs: Vec<Expanded>) -> Self {
        let pipeline = legs.first().map(|leg| leg.pipeline.clone()).unwrap_or_default();
        let keys = legs.iter().flat_map(|leg| leg.keys.iter().cloned()).collect();
        let mut outputs = BTreeMap::new();
        for name in legs.iter().flat_map(|leg| leg.outputs.keys()).collect::<BTreeSet<_>>() {
            let values: Vec<String> =
                legs.iter().rev().filter_map(|leg| leg.outputs.get(name)).map(|v| format!("({v})")).collect();
            outputs.insert(name.clone(), values.join(" || "));
        }
        Expanded { pipeline, keys, outputs }
    }
}

/// A call with `strategy.matrix`: one call a combination, `<caller>-<n>`
/// (from 1), its `matrix.*` and `strategy.*` put in as literals wherever
/// the call reads them (`with`, `secrets`, `if`, `name`), named as GitHub
/// shows it, `<name> (<values>)`.
fn matrix_calls(
    caller: &str,
    body: &YamlNode,
    strategy: &YamlNode,
) -> Result<Vec<(String, YamlNode)>, DefinitionError> {
    let YamlNode::Mapping(fields) = body else {
        return Err(DefinitionError::in_job(caller, None, "expected a mapping"));
    };
    let (combinations, structured) = super::definition_reader::call_legs(caller, strategy)?;
    let total = combinations.len();
    let mut legs = Vec::with_capacity(total);
    for (index, values) in combinations.into_iter().enumerate() {
        let leg = format!("{caller}-{}", index + 1);
        let replace = |context: &str, names: &[String]| -> Result<Option<(usize, String)>, String> {
            let Some(name) = names.first() else {
                return match context {
                    "matrix" | "strategy" => {
                        Err(format!("a matrix of calls reads `{context}.<name>`, not `{context}` whole"))
                    }
                    _ => Ok(None),
                };
            };
            Ok(match context {
                "matrix" => Some((
                    1,
                    match values.iter().find(|(key, _)| key == name) {
                        Some((key, value)) if super::matrix::structured_value(&structured, key, value).is_some() => {
                            format!("fromJSON({})", quote(value))
                        }
                        Some((_, value)) => quote(value),
                        None => "null".to_string(),
                    },
                )),
                "strategy" => match name.as_str() {
                    "job-index" => Some((1, index.to_string())),
                    "job-total" => Some((1, total.to_string())),
                    "fail-fast" => Some((1, "false".into())),
                    "max-parallel" => Some((1, total.to_string())),
                    _ => None,
                },
                _ => None,
            })
        };
        let mut leg_body = Vec::with_capacity(fields.len());
        for (key, value) in fields {
            let name = key.scalar_text().unwrap_or_default();
            let value = match name.as_str() {
                "strategy" => continue,
                "uses" | "needs" => value.clone(),
                "if" => match value {
                    YamlNode::String(text) => YamlNode::String(
                        replace_in_condition(text, &replace)
                            .map_err(|why| DefinitionError::in_job(caller, Some("if"), why))?
                            .unwrap_or_else(|| text.clone()),
                    ),
                    other => other.clone(),
                },
                _ => rewrite_node(value.clone(), &replace)
                    .map_err(|why| DefinitionError::in_job(caller, Some(&name), why))?,
            };
            leg_body.push((key.clone(), value));
        }
        let shown = super::matrix::leg_key_of(
            field(body, "name").and_then(YamlNode::scalar_text).as_deref().unwrap_or(caller),
            &values,
            &structured,
        );
        let mut leg_body = YamlNode::Mapping(leg_body);
        // A name that reads the matrix is the leg's own, worked out now when
        // it reads nothing else; another gets the values appended.
        let named = field(body, "name").and_then(YamlNode::scalar_text).is_some_and(|name| name.contains("matrix."));
        let name = match field(&leg_body, "name").and_then(YamlNode::scalar_text) {
            Some(text) if named => super::expressions::text_references(&text)
                .ok()
                .filter(Vec::is_empty)
                .and_then(|_| super::expressions::try_interpolate(&text, &super::expressions::MapScope::default()).ok())
                .unwrap_or(text),
            _ => shown,
        };
        set(&mut leg_body, "name", YamlNode::String(name));
        legs.push((leg, leg_body));
    }
    Ok(legs)
}

fn is_call(body: &YamlNode) -> bool {
    field(body, "uses").is_some()
}

/// One call: the called workflow's jobs as jobs of the caller's run.
fn expand_call(
    caller: &str,
    body: &YamlNode,
    called: &CalledWorkflows,
    stack: &mut Vec<String>,
    distinct: &mut BTreeSet<String>,
) -> Result<(Vec<(YamlNode, YamlNode)>, Expanded), DefinitionError> {
    let at = |field: &str, why: String| DefinitionError::in_job(caller, Some(field), why);
    let YamlNode::Mapping(fields) = body else {
        return Err(DefinitionError::in_job(caller, None, "expected a mapping"));
    };
    for (key, _) in fields {
        let key = key.scalar_text().unwrap_or_default();
        let why = match key.as_str() {
            _ if CALL_FIELDS.contains(&key.as_str()) => continue,
            "concurrency" => "`concurrency:` on a job that calls a reusable workflow is not supported: set it on the \
                              called workflow's jobs"
                .to_string(),
            _ => format!(
                "a job that calls a reusable workflow takes only {}: its other fields are the called workflow's jobs'",
                CALL_FIELDS.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ")
            ),
        };
        return Err(at(&key, why));
    }
    let uses = field(body, "uses").and_then(YamlNode::scalar_text).unwrap_or_default();
    let pipeline = called_pipeline(&uses).map_err(|why| at("uses", why))?;
    if let Some(first) = stack.iter().position(|name| *name == pipeline) {
        let cycle = stack[first..].iter().chain([&pipeline]).cloned().collect::<Vec<_>>().join(" → ");
        return Err(at("uses", format!("the pipeline `{pipeline}` calls itself: {cycle}")));
    }
    if stack.len() + 2 > MAX_CALL_DEPTH {
        return Err(at("uses", format!("reusable workflows nest at most {MAX_CALL_DEPTH} levels deep")));
    }
    distinct.insert(pipeline.clone());
    if distinct.len() > MAX_CALLED_WORKFLOWS {
        return Err(at("uses", format!("a run calls at most {MAX_CALLED_WORKFLOWS} distinct workflows")));
    }
    let Some(text) = called.get(&pipeline) else {
        return Err(at(
            "uses",
            format!(
                "the workspace has no pipeline `{pipeline}` to call (`{uses}` calls the pipeline named `{pipeline}`: \
                 store it first)"
            ),
        ));
    };
    let inside = |err: String| at("uses", format!("the called pipeline `{pipeline}`: {err}"));
    let root = YamlNode::parse(text).map_err(|err| inside(format!("invalid YAML: {err}")))?;
    let declared = read_workflow_call(&root).map_err(inside)?;
    stack.push(pipeline.clone());
    let root = expand(root, called, stack, distinct).map_err(|err| inside(err.to_string()))?;
    stack.pop();
    if let YamlNode::Mapping(top) = &root {
        for (key, _) in top {
            let key = key.scalar_text().unwrap_or_default();
            if !CALLED_WORKFLOW_FIELDS.contains(&key.as_str()) {
                return Err(inside(format!(
                    "its `{key}:` is not supported in a called workflow (it has {})",
                    CALLED_WORKFLOW_FIELDS.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ")
                )));
            }
        }
    }
    let inputs = call_inputs(&declared, field(body, "with")).map_err(|(field, why)| at(&field, why))?;
    let secrets = call_secrets(&declared, field(body, "secrets")).map_err(|(field, why)| at(&field, why))?;
    let caller_if = match field(body, "if") {
        None => None,
        Some(YamlNode::String(text)) => Some(strip_braces(text).to_string()),
        Some(YamlNode::Bool(value)) => Some(value.to_string()),
        Some(other) => return Err(at("if", format!("expected an expression, found {}", other.kind()))),
    };
    let caller_needs = match field(body, "needs") {
        None => Vec::new(),
        Some(YamlNode::String(need)) => vec![need.clone()],
        Some(YamlNode::Sequence(items)) => items.iter().filter_map(YamlNode::scalar_text).collect(),
        Some(other) => {
            return Err(at("needs", format!("expected a job id or a list of job ids, found {}", other.kind())))
        }
    };
    let caller_status =
        caller_if.as_deref().is_some_and(|text| matches!(super::expressions::split_condition(text), Ok((Some(_), _))));
    // What the caller writes into the called jobs may read its needs: then
    // every called job needs them (not only the first ones), to read them.
    let reads_needs = field(body, "with").is_some_and(mentions_needs) || field(body, "if").is_some_and(mentions_needs);
    let caller_name = field(body, "name").and_then(YamlNode::scalar_text).unwrap_or_else(|| caller.to_string());

    let Some(YamlNode::Mapping(called_jobs)) = field(&root, "jobs") else {
        return Err(inside("expected `jobs:`, a mapping of job ids to jobs".into()));
    };
    let ids: Vec<String> = called_jobs.iter().filter_map(|(key, _)| key.scalar_text()).collect();
    let new_id = |id: &str| format!("{caller}{CALLED_JOB_SEPARATOR}{id}");
    let frame = |context: &str, names: &[String]| -> Result<Option<(usize, String)>, String> {
        let Some(name) = names.first() else {
            return match context {
                "inputs" | "secrets" => {
                    Err(format!("a called workflow reads `{context}.<name>`, not `{context}` whole"))
                }
                _ => Ok(None),
            };
        };
        Ok(match context {
            "inputs" => match inputs.get(&name.to_ascii_lowercase()) {
                Some(value) => Some((1, value.clone())),
                None => {
                    return Err(format!(
                        "it reads `inputs.{name}`, which its `on.workflow_call.inputs` does not declare"
                    ))
                }
            },
            "secrets" => secrets.replacement(name).map(|text| (1, text)),
            "needs" => ids.iter().any(|id| id == name).then(|| (1, format!("needs.{}", new_id(name)))),
            _ => None,
        })
    };
    let workflow_env = field(&root, "env").cloned();
    let workflow_mask = field(&root, "mask-env").cloned();
    let workflow_defaults = field(&root, "defaults").cloned();
    let mut jobs = Vec::with_capacity(called_jobs.len());
    for (key, job) in called_jobs {
        let Some(id) = key.scalar_text() else { return Err(inside("expected job ids as text".into())) };
        let renamed = new_id(&id);
        if renamed.len() > MAX_JOB_ID_LEN {
            return Err(at(
                "uses",
                format!("the called job `{id}` would be `{renamed}`, over {MAX_JOB_ID_LEN} characters: a shorter id"),
            ));
        }
        let in_job = |why: String| inside(format!("job `{id}`: {why}"));
        let mut job = rewrite_job(job.clone(), &frame).map_err(in_job)?;
        let own_needs: Vec<String> = match field(&job, "needs") {
            None => Vec::new(),
            Some(YamlNode::String(need)) => vec![need.clone()],
            Some(YamlNode::Sequence(items)) => items.iter().filter_map(YamlNode::scalar_text).collect(),
            Some(_) => Vec::new(),
        };
        let first = own_needs.is_empty();
        let mut needs: Vec<YamlNode> = own_needs
            .iter()
            .map(|need| YamlNode::String(if ids.contains(need) { new_id(need) } else { need.clone() }))
            .collect();
        if first || reads_needs {
            needs.extend(caller_needs.iter().cloned().map(YamlNode::String));
        }
        if !needs.is_empty() {
            set(&mut job, "needs", YamlNode::Sequence(needs));
        }
        if let Some(condition) = &caller_if {
            let own = match field(&job, "if") {
                None => None,
                Some(YamlNode::String(own)) => Some(strip_braces(own).to_string()),
                Some(YamlNode::Bool(own)) => Some(own.to_string()),
                Some(_) => return Err(in_job("`if:` is an expression".into())),
            };
            // A caller's `if:` with a status function (`always()`) decides
            // whether the called workflow starts: its first jobs take it;
            // the later ones follow them as their own `if:` says.
            let combined = match (own, caller_status) {
                (None, _) if first || !caller_status => Some(condition.clone()),
                (None, _) => None,
                (Some(own), false) => Some(format!("({own}) && ({condition})")),
                (Some(_), true) if first => {
                    return Err(at(
                        "if",
                        format!(
                            "an `if:` with a status function on a job that calls a reusable workflow needs the                              called workflow's first jobs to have no `if:` of their own (job `{id}` has one)"
                        ),
                    ))
                }
                (Some(_), true) => None,
            };
            if let Some(combined) = combined {
                set(&mut job, "if", YamlNode::String(combined));
            }
        }
        let own_name = field(&job, "name").and_then(YamlNode::scalar_text).unwrap_or_else(|| id.clone());
        set(&mut job, "name", YamlNode::String(format!("{caller_name} / {own_name}")));
        if let Some(env) = &workflow_env {
            let env = rewrite_node(env.clone(), &frame).map_err(&in_job)?;
            job = under(job, "env", env);
        }
        if let Some(mask) = &workflow_mask {
            job = appended(job, "mask-env", mask);
        }
        job = with_defaults(job, workflow_defaults.as_ref());
        jobs.push((YamlNode::String(renamed), job));
    }
    let jobs_context = |context: &str, names: &[String]| -> Result<Option<(usize, String)>, String> {
        Ok(match (context, names.first()) {
            ("jobs", Some(id)) if ids.contains(id) => Some((1, format!("needs.{}", new_id(id)))),
            ("jobs", _) => return Err("an output's value reads `jobs.<job>.outputs.<name>` of its own jobs".into()),
            _ => None,
        })
    };
    let mut outputs = BTreeMap::new();
    for (name, value) in &declared.outputs {
        let pointed = replace_in_text(value, &jobs_context)
            .map_err(|why| inside(format!("on.workflow_call.outputs.{name}: {why}")))?
            .unwrap_or_else(|| value.clone());
        let expression =
            as_expression(&pointed).map_err(|why| inside(format!("on.workflow_call.outputs.{name}: {why}")))?;
        outputs.insert(name.clone(), expression);
    }
    let keys = jobs.iter().filter_map(|(key, _)| key.scalar_text()).collect();
    Ok((jobs, Expanded { pipeline, keys, outputs }))
}

/// A job that reads a caller's values, pointed at what the call became:
/// its `needs` of a caller are the called jobs, `needs.<caller>.outputs.x`
/// and `needs.<caller>.result` their values.
fn point_at_calls(job: YamlNode, calls: &BTreeMap<String, Expanded>) -> Result<YamlNode, String> {
    let replace = |context: &str, names: &[String]| -> Result<Option<(usize, String)>, String> {
        let (Some(call), Some(expanded)) = (names.first(), names.first().and_then(|n| calls.get(n))) else {
            return Ok(None);
        };
        if context != "needs" {
            return Ok(None);
        }
        Ok(match names.get(1).map(String::as_str) {
            Some("outputs") => {
                let Some(output) = names.get(2) else {
                    return Err(format!("it reads `needs.{call}.outputs` whole: read `needs.{call}.outputs.<name>`"));
                };
                let Some(value) = expanded.outputs.get(output) else {
                    return Err(format!(
                        "it reads `needs.{call}.outputs.{output}`, which the called pipeline `{}` does not declare in \
                         `on.workflow_call.outputs`",
                        expanded.pipeline
                    ));
                };
                Some((3, format!("({value})")))
            }
            Some(which @ ("result" | "outcome")) => Some((2, called_result(&expanded.keys, which))),
            _ => {
                return Err(format!(
                    "it reads `needs.{call}` of a reusable workflow's call: read its `outputs.<name>` or `result`"
                ))
            }
        })
    };
    let mut job = rewrite_job(job, &replace)?;
    let needs = match field(&job, "needs") {
        Some(YamlNode::String(need)) => Some(vec![need.clone()]),
        Some(YamlNode::Sequence(items)) => Some(items.iter().filter_map(YamlNode::scalar_text).collect::<Vec<_>>()),
        _ => None,
    };
    if let Some(needs) = needs.filter(|needs| needs.iter().any(|need| calls.contains_key(need))) {
        let mut pointed: Vec<String> = Vec::new();
        for need in needs {
            let expanded: Vec<String> = match calls.get(&need) {
                Some(call) => call.keys.clone(),
                None => vec![need],
            };
            for need in expanded {
                if !pointed.contains(&need) {
                    pointed.push(need);
                }
            }
        }
        set(&mut job, "needs", YamlNode::Sequence(pointed.into_iter().map(YamlNode::String).collect()));
    }
    Ok(job)
}

/// A called workflow's result as GitHub derives it from its jobs':
/// `failure` if one failed, else `cancelled` if one was, else `skipped` if
/// all were, else `success`.
fn called_result(keys: &[String], which: &str) -> String {
    let each = |value: &str, join: &str| {
        keys.iter().map(|key| format!("needs.{key}.{which} == '{value}'")).collect::<Vec<_>>().join(join)
    };
    format!(
        "(({}) && 'failure' || ({}) && 'cancelled' || ({}) && 'skipped' || 'success')",
        each("failure", " || "),
        each("cancelled", " || "),
        each("skipped", " && ")
    )
}

/// A job's expressions rewritten: its `if:` and its steps' as conditions
/// (their `${{ }}` optional), every other string's `${{ … }}`.
fn rewrite_job(job: YamlNode, replace: &Replace) -> Result<YamlNode, String> {
    let YamlNode::Mapping(fields) = job else { return Ok(job) };
    let mut out = Vec::with_capacity(fields.len());
    for (key, value) in fields {
        let name = key.scalar_text().unwrap_or_default();
        let value = match (name.as_str(), value) {
            ("if", YamlNode::String(text)) => {
                YamlNode::String(replace_in_condition(&text, replace).map_err(|e| format!("if: {e}"))?.unwrap_or(text))
            }
            ("steps", YamlNode::Sequence(steps)) => YamlNode::Sequence(
                steps.into_iter().map(|step| rewrite_job(step, replace)).collect::<Result<Vec<_>, _>>()?,
            ),
            (_, value) => rewrite_node(value, replace).map_err(|e| format!("{name}: {e}"))?,
        };
        out.push((key, value));
    }
    Ok(YamlNode::Mapping(out))
}

/// Every string under `node` with its `${{ … }}` rewritten.
fn rewrite_node(node: YamlNode, replace: &Replace) -> Result<YamlNode, String> {
    Ok(match node {
        YamlNode::String(text) => YamlNode::String(replace_in_text(&text, replace)?.unwrap_or(text)),
        YamlNode::Sequence(items) => {
            YamlNode::Sequence(items.into_iter().map(|item| rewrite_node(item, replace)).collect::<Result<_, _>>()?)
        }
        YamlNode::Mapping(entries) => YamlNode::Mapping(
            entries
                .into_iter()
                .map(|(key, value)| Ok((key, rewrite_node(value, replace)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other,
    })
}

fn mentions_needs(node: &YamlNode) -> bool {
    match node {
        YamlNode::String(text) => text.to_ascii_lowercase().contains("needs"),
        YamlNode::Sequence(items) => items.iter().any(mentions_needs),
        YamlNode::Mapping(entries) => entries.iter().any(|(_, value)| mentions_needs(value)),
        _ => false,
    }
}

fn strip_braces(text: &str) -> &str {
    let trimmed = text.trim();
    match trimmed.strip_prefix("${{").and_then(|rest| rest.strip_suffix("}}")) {
        // `${{ a }} && ${{ b }}` is no single expression: kept whole.
        Some(inner) if !inner.contains("${{") => inner.trim(),
        _ => trimmed,
    }
}

/// An input a called workflow declares (`on.workflow_call.inputs`).
struct DeclaredInput {
    name: String,
    kind: String,
    required: bool,
    default: Option<YamlNode>,
}

/// What `on.workflow_call` declares.
#[derive(Default)]
struct Declared {
    inputs: Vec<DeclaredInput>,
    /// Output name → its `value` as written.
    outputs: Vec<(String, String)>,
    /// Secret name → whether it is required.
    secrets: Vec<(String, bool)>,
}

/// `on.workflow_call`: `Err` when the workflow has none (it cannot be
/// called, as on GitHub) or declares it wrongly.
fn read_workflow_call(root: &YamlNode) -> Result<Declared, String> {
    let on = field(root, "on");
    let call = match on {
        Some(YamlNode::String(event)) if event == "workflow_call" => Some(&YamlNode::Null),
        Some(YamlNode::Sequence(events)) => {
            events.iter().any(|e| e.scalar_text().as_deref() == Some("workflow_call")).then_some(&YamlNode::Null)
        }
        Some(on @ YamlNode::Mapping(_)) => field(on, "workflow_call"),
        _ => None,
    };
    let Some(call) = call else { return Err("it cannot be called: its `on:` has no `workflow_call`".into()) };
    let mut declared = Declared::default();
    if *call == YamlNode::Null {
        return Ok(declared);
    }
    let entries = |node: Option<&YamlNode>, what: &str| -> Result<Vec<(String, YamlNode)>, String> {
        match node {
            None | Some(YamlNode::Null) => Ok(Vec::new()),
            Some(YamlNode::Mapping(entries)) => entries
                .iter()
                .map(|(key, value)| {
                    key.scalar_text()
                        .map(|key| (key, value.clone()))
                        .ok_or_else(|| format!("on.workflow_call.{what}: names as text"))
                })
                .collect(),
            Some(other) => Err(format!("on.workflow_call.{what}: expected a mapping, found {}", other.kind())),
        }
    };
    let flag = |node: &YamlNode, at: &str| -> Result<bool, String> {
        match field(node, "required") {
            None => Ok(false),
            Some(YamlNode::Bool(value)) => Ok(*value),
            Some(other) => Err(format!("{at}.required: expected a boolean, found {}", other.kind())),
        }
    };
    for (name, input) in entries(field(call, "inputs"), "inputs")? {
        let at = format!("on.workflow_call.inputs.{name}");
        let kind = field(&input, "type").and_then(YamlNode::scalar_text).unwrap_or_default();
        if !matches!(kind.as_str(), "string" | "number" | "boolean") {
            return Err(format!("{at}.type: expected string, number or boolean"));
        }
        let required = flag(&input, &at)?;
        let default = field(&input, "default").filter(|d| **d != YamlNode::Null).cloned();
        declared.inputs.push(DeclaredInput { name, kind, required, default });
    }
    for (name, output) in entries(field(call, "outputs"), "outputs")? {
        let Some(value) = field(&output, "value").and_then(YamlNode::scalar_text) else {
            return Err(format!(
                "on.workflow_call.outputs.{name}.value: required, `${{{{ jobs.<job>.outputs.<name> }}}}`"
            ));
        };
        declared.outputs.push((name, value));
    }
    for (name, secret) in entries(field(call, "secrets"), "secrets")? {
        let required =
            if secret == YamlNode::Null { false } else { flag(&secret, &format!("on.workflow_call.secrets.{name}"))? };
        declared.secrets.push((name, required));
    }
    Ok(declared)
}

/// Each declared input (lower-cased, as GitHub reads `inputs`) and the
/// expression the called jobs read for it; `Err` names the caller's field.
fn call_inputs(declared: &Declared, with: Option<&YamlNode>) -> Result<BTreeMap<String, String>, (String, String)> {
    let given: Vec<(String, YamlNode)> = match with {
        None | Some(YamlNode::Null) => Vec::new(),
        Some(YamlNode::Mapping(entries)) => {
            entries.iter().filter_map(|(key, value)| Some((key.scalar_text()?, value.clone()))).collect()
        }
        Some(other) => return Err(("with".into(), format!("expected a mapping of inputs, found {}", other.kind()))),
    };
    for (name, _) in &given {
        if !declared.inputs.iter().any(|input| input.name.eq_ignore_ascii_case(name)) {
            let known = declared.inputs.iter().map(|i| i.name.as_str()).collect::<Vec<_>>().join(", ");
            return Err((
                format!("with.{name}"),
                format!("the called workflow declares no input `{name}` (it declares: {known})"),
            ));
        }
    }
    let mut out = BTreeMap::new();
    for input in &declared.inputs {
        let value = given.iter().find(|(name, _)| name.eq_ignore_ascii_case(&input.name)).map(|(_, v)| v);
        let value = value.filter(|v| **v != YamlNode::Null);
        let at = format!("with.{}", input.name);
        let expression = match (value, &input.default) {
            (Some(value), _) => literal(value, &input.kind).map_err(|why| (at, why))?,
            (None, _) if input.required => {
                return Err(("with".into(), format!("the called workflow requires the input `{}`", input.name)))
            }
            (None, Some(default)) => {
                literal(default, &input.kind).map_err(|why| (at, format!("its default: {why}")))?
            }
            (None, None) => match input.kind.as_str() {
                "boolean" => "false".into(),
                "number" => "0".into(),
                _ => "''".into(),
            },
        };
        out.insert(input.name.to_ascii_lowercase(), expression);
    }
    Ok(out)
}

/// A `with:` value as an expression of the input's type.
fn literal(value: &YamlNode, kind: &str) -> Result<String, String> {
    if let YamlNode::String(text) = value {
        if text.contains("${{") {
            return as_expression(text);
        }
    }
    let text = value.scalar_text().ok_or_else(|| format!("expected a {kind}, found {}", value.kind()))?;
    match kind {
        "boolean" => match text.as_str() {
            "true" | "false" => Ok(text),
            _ => Err(format!("expected a boolean, found `{text}`")),
        },
        "number" => {
            let number = super::expressions::Value::String(text.clone()).number();
            if number.is_nan() {
                return Err(format!("expected a number, found `{text}`"));
            }
            Ok(super::expressions::Value::Number(number).render())
        }
        _ => Ok(quote(&text)),
    }
}

/// What the called jobs' `secrets.<name>` read.
enum CallSecrets {
    /// `secrets: inherit`: the workspace's secrets, by their own names.
    Inherit,
    /// Declared name (lower-cased) → the caller's secret passed as it.
    Passed(BTreeMap<String, String>),
}

impl CallSecrets {
    fn replacement(&self, name: &str) -> Option<String> {
        match self {
            CallSecrets::Inherit => None,
            // Always there on GitHub; Baton's reader says what it is.
            CallSecrets::Passed(_) if name.eq_ignore_ascii_case("GITHUB_TOKEN") => None,
            CallSecrets::Passed(passed) => Some(
                passed.get(&name.to_ascii_lowercase()).map_or_else(|| "''".to_string(), |s| format!("secrets.{s}")),
            ),
        }
    }
}

fn call_secrets(declared: &Declared, node: Option<&YamlNode>) -> Result<CallSecrets, (String, String)> {
    let passed: BTreeMap<String, String> = match node {
        Some(YamlNode::String(text)) if text == "inherit" => return Ok(CallSecrets::Inherit),
        None | Some(YamlNode::Null) => BTreeMap::new(),
        Some(YamlNode::Mapping(entries)) => {
            let mut passed = BTreeMap::new();
            for (key, value) in entries {
                let name = key.scalar_text().unwrap_or_default();
                let at = format!("secrets.{name}");
                if !declared.secrets.iter().any(|(declared, _)| declared.eq_ignore_ascii_case(&name)) {
                    return Err((at, format!("the called workflow declares no secret `{name}`")));
                }
                let source = value
                    .scalar_text()
                    .as_deref()
                    .map(strip_braces)
                    .and_then(|inner| {
                        let (context, secret) = inner.split_once('.')?;
                        (context.eq_ignore_ascii_case("secrets") && !secret.is_empty()).then(|| secret.to_string())
                    })
                    .ok_or_else(|| (at.clone(), "a secret is passed as `${{ secrets.<NAME> }}`".to_string()))?;
                passed.insert(name.to_ascii_lowercase(), source);
            }
            passed
        }
        Some(other) => {
            return Err((
                "secrets".into(),
                format!("expected `inherit` or a mapping of secrets, found {}", other.kind()),
            ))
        }
    };
    if let Some((name, _)) =
        declared.secrets.iter().find(|(name, required)| *required && !passed.contains_key(&name.to_ascii_lowercase()))
    {
        return Err(("secrets".into(), format!("the called workflow requires the secret `{name}`")));
    }
    Ok(CallSecrets::Passed(passed))
}

/// `defaults.run`'s mapping, if `node` is a `defaults:` of that shape.
fn run_defaults(node: &YamlNode) -> Option<&Vec<(YamlNode, YamlNode)>> {
    match field(node, "run") {
        Some(YamlNode::Mapping(run)) => Some(run),
        _ => None,
    }
}

/// `job` with the workflow's `defaults.run` under its own, field by field.
fn with_defaults(job: YamlNode, defaults: Option<&YamlNode>) -> YamlNode {
    let Some(workflow) = defaults.and_then(run_defaults) else { return job };
    let own = field(&job, "defaults").cloned();
    let own_run = match &own {
        None | Some(YamlNode::Null) => Vec::new(),
        Some(own) => match run_defaults(own) {
            Some(run) => run.clone(),
            // Malformed: left for the reader to refuse.
            None => return job,
        },
    };
    let mut merged = own_run.clone();
    for (key, value) in workflow {
        if !own_run.iter().any(|(own_key, _)| own_key == key) {
            merged.push((key.clone(), value.clone()));
        }
    }
    let mut job = job;
    set(&mut job, "defaults", YamlNode::Mapping(vec![(YamlNode::String("run".into()), YamlNode::Mapping(merged))]));
    job
}

/// `job` with `entries` (a mapping) under its own mapping `name`: its own
/// keys win. A malformed one is left for the reader.
fn under(job: YamlNode, name: &str, entries: YamlNode) -> YamlNode {
    let YamlNode::Mapping(outer) = entries else { return job };
    let own = match field(&job, name) {
        None | Some(YamlNode::Null) => Vec::new(),
        Some(YamlNode::Mapping(own)) => own.clone(),
        Some(_) => return job,
    };
    let mut merged = own.clone();
    for (key, value) in outer {
        if !own.iter().any(|(own_key, _)| *own_key == key) {
            merged.push((key, value));
        }
    }
    let mut job = job;
    set(&mut job, name, YamlNode::Mapping(merged));
    job
}

/// `job` with `list`'s items after its own list `name`.
fn appended(job: YamlNode, name: &str, list: &YamlNode) -> YamlNode {
    let extra = match list {
        YamlNode::Sequence(items) => items.clone(),
        YamlNode::Null => return job,
        single => vec![single.clone()],
    };
    let mut items = match field(&job, name) {
        None | Some(YamlNode::Null) => Vec::new(),
        Some(YamlNode::Sequence(items)) => items.clone(),
        Some(single @ YamlNode::String(_)) => vec![single.clone()],
        Some(_) => return job,
    };
    items.extend(extra);
    let mut job = job;
    set(&mut job, name, YamlNode::Sequence(items));
    job
}

fn field<'a>(node: &'a YamlNode, name: &str) -> Option<&'a YamlNode> {
    let YamlNode::Mapping(entries) = node else { return None };
    entries.iter().find(|(key, _)| key.scalar_text().as_deref() == Some(name)).map(|(_, value)| value)
}

fn set(node: &mut YamlNode, name: &str, value: YamlNode) {
    let YamlNode::Mapping(entries) = node else { return };
    match entries.iter_mut().find(|(key, _)| key.scalar_text().as_deref() == Some(name)) {
        Some((_, slot)) => *slot = value,
        None => entries.push((YamlNode::String(name.to_string()), value)),
    }
}

fn remove(node: &mut YamlNode, name: &str) -> Option<YamlNode> {
    let YamlNode::Mapping(entries) = node else { return None };
    let position = entries.iter().position(|(key, _)| key.scalar_text().as_deref() == Some(name))?;
    Some(entries.remove(position).1)
}

#[cfg(test)]
mod tests;
