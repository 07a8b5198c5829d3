//! `strategy:` (a matrix, `fail-fast`, `max-parallel`) and a matrix job
//! expanded into its legs.

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::fields::{Fields, Location};
use super::values::is_expression;
use crate::runners::labels;
use crate::workflows::definition::{
    DefinitionError, JobDefinition, WorkflowDefinition, MAX_JOBS, MAX_JOB_ID_LEN, MAX_TIMEOUT_MINUTES,
};
use crate::workflows::expressions::{self, Reference, Scope};
use crate::workflows::matrix::{self, Combination, MatrixGroup, MatrixLeg, Strategy};
use crate::workflows::yaml::YamlNode;

const STRATEGY_FIELDS: &[&str] = &["matrix", "fail-fast", "max-parallel"];
/// The most values a matrix dimension may list, and the most `include` or
/// `exclude` entries (the legs are bounded by the job limit anyway).
const MAX_MATRIX_ENTRIES: usize = 256;

/// A matrix job's legs: the job once per combination, keyed
/// `<job> (<values>)`, its `runs-on` with `${{ matrix.<name> }}` put in.
pub(super) fn expand_matrix(
    job: JobDefinition,
    strategy: &Strategy,
    runs_on: &[String],
    timeout: Option<&str>,
) -> Result<(Vec<JobDefinition>, MatrixGroup), DefinitionError> {
    let at = Location::job(&job.key);
    let combinations = bounded_combinations(strategy, &at.field("strategy.matrix"), "legs")?;
    let mut legs = Vec::with_capacity(combinations.len());
    let total = combinations.len() as u32;
    for (index, values) in combinations.into_iter().enumerate() {
        let key = matrix::leg_key_of(&job.key, &values, &strategy.structured);
        if legs.iter().any(|leg: &JobDefinition| leg.key == key) {
            return Err(at.field("strategy.matrix").error(format!("two combinations make the same leg `{key}`")));
        }
        let structured = values
            .iter()
            .filter(|(name, value)| matrix::structured_value(&strategy.structured, name, value).is_some())
            .map(|(name, _)| name.clone())
            .collect();
        let leg = MatrixLeg {
            job: job.key.clone(),
            values,
            structured,
            index: index as u32,
            total,
            fail_fast: strategy.fail_fast,
            max_parallel: strategy.max_parallel,
        };
        let raw =
            runs_on.iter().map(|label| leg_label(label, &leg, &at.field("runs-on"))).collect::<Result<Vec<_>, _>>()?;
        let labels =
            labels::canonicalize(&raw).map_err(|err| at.field("runs-on").error(format!("in leg `{key}`: {err}")))?;
        let timeout_minutes = match timeout {
            Some(text) => leg_timeout(text, Some(&leg), &at.field("timeout-minutes"))
                .map_err(|err| at.field("timeout-minutes").error(format!("in leg `{key}`: {}", err.message)))?,
            None => job.timeout_minutes,
        };
        legs.push(JobDefinition { key, labels, timeout_minutes, matrix: Some(leg), ..job.clone() });
    }
    let group = MatrixGroup {
        job: job.key.clone(),
        legs: legs.iter().map(|leg| leg.key.clone()).collect(),
        fail_fast: strategy.fail_fast,
        max_parallel: strategy.max_parallel,
    };
    Ok((legs, group))
}

/// A `runs-on` label of one leg, its expressions evaluated over the leg's
/// matrix values (`${{ matrix.os }}`, `${{ matrix.os || 'linux' }}`): the
/// only data known when the run is created, so any other reference is
/// refused here, naming it, rather than read as nothing.
fn leg_label(label: &str, leg: &MatrixLeg, at: &Location) -> Result<String, DefinitionError> {
    for reference in expressions::text_references(label).map_err(|err| at.error(err))? {
        if !matches!(reference, Reference::Matrix(_)) {
            return Err(
                at.error(format!("{reference} is not known when the run is created: runs-on reads only matrix.<name>"))
            );
        }
    }
    expressions::try_interpolate(label, &LegScope(leg)).map_err(|err| at.error(err))
}

/// A job's `timeout-minutes` written as an expression, worked out over the
/// leg's matrix values (`${{ (matrix.language == 'swift' && 120) || 360 }}`):
/// as for `runs-on`, the only data known when the run is created.
pub(super) fn leg_timeout(text: &str, leg: Option<&MatrixLeg>, at: &Location) -> Result<u32, DefinitionError> {
    for reference in expressions::text_references(text).map_err(|err| at.error(err))? {
        let known = matches!(reference, Reference::Matrix(_)) && leg.is_some();
        if !known {
            return Err(at.error(format!(
                "{reference} is not known when the run is created: timeout-minutes reads only a matrix job's \
                 matrix.<name>"
            )));
        }
    }
    let value = match leg {
        Some(leg) => expressions::try_interpolate(text, &LegScope(leg)),
        None => expressions::try_interpolate(text, &expressions::MapScope::default()),
    }
    .map_err(|err| at.error(err))?;
    value.trim().parse::<u32>().ok().filter(|minutes| (1..=MAX_TIMEOUT_MINUTES).contains(minutes)).ok_or_else(|| {
        at.error(format!("`{text}` comes to `{value}`: a whole number of minutes from 1 to {MAX_TIMEOUT_MINUTES}"))
    })
}

/// A leg's matrix values, as `runs-on` reads them.
struct LegScope<'a>(&'a MatrixLeg);

impl Scope for LegScope<'_> {
    fn resolve(&self, reference: &Reference) -> Option<String> {
        match reference {
            Reference::Matrix(name) => self.0.value(name).map(str::to_string),
            _ => None,
        }
    }

    fn resolve_value(&self, reference: &Reference) -> Option<expressions::Value> {
        match reference {
            Reference::Matrix(name) => self.0.typed_value(name).map(|v| expressions::Value::from_serde(&v)),
            _ => None,
        }
    }
}

/// Whether `strategy:` reads what is known only when its job is due: an
/// expression in its `matrix` over the job's needs, the run's inputs, the
/// workspace's vars or the trigger (`${{ fromJSON(needs.setup.outputs.matrix) }}`).
/// An expression of literals only is worked out now (`read_strategy`); one
/// that reads anything else is refused, naming it.
pub(super) fn decided_when_due(node: &YamlNode, at: &Location) -> Result<bool, DefinitionError> {
    fn texts<'a>(node: &'a YamlNode, out: &mut Vec<&'a str>) {
        match node {
            YamlNode::String(text) if text.contains("${{") => out.push(text),
            YamlNode::Sequence(items) => items.iter().for_each(|item| texts(item, out)),
            YamlNode::Mapping(entries) => entries.iter().for_each(|(_, item)| texts(item, out)),
            _ => {}
        }
    }
    let YamlNode::Mapping(entries) = node else { return Ok(false) };
    let Some((_, matrix)) = entries.iter().find(|(key, _)| key.scalar_text().as_deref() == Some("matrix")) else {
        return Ok(false);
    };
    let at = at.field("matrix");
    let mut found = Vec::new();
    texts(matrix, &mut found);
    let mut due = false;
    for text in found {
        for reference in expressions::text_references(text).map_err(|err| at.error(err))? {
            match reference {
                Reference::NeedsOutput { .. }
                | Reference::NeedsResult { .. }
                | Reference::NeedsOutcome { .. }
                | Reference::Needs
                | Reference::Input(_)
                | Reference::Var(_)
                | Reference::Github(_) => due = true,
                other => {
                    return Err(at.error(format!(
                        "`{text}`: {other} is not known when the matrix is decided: a matrix reads the job's needs, \
                         inputs, vars and github"
                    )))
                }
            }
        }
    }
    Ok(due)
}

/// What a matrix decided when its job is due is checked against now: the
/// strategy with each expression put in as a value of the shape its place
/// wants (a whole matrix, a dimension's list, `include`'s entries), so
/// everything written around them is checked as for any matrix.
pub(super) fn check_decided_when_due(node: &YamlNode, at: &Location) -> Result<(), DefinitionError> {
    let stand_in = |text: &str| YamlNode::String(text.replace("${{", "").replace("}}", ""));
    let one = |name: &str| {
        YamlNode::Sequence(vec![YamlNode::Mapping(vec![(YamlNode::String(name.into()), YamlNode::String("x".into()))])])
    };
    let replaced = match node {
        YamlNode::Mapping(entries) => YamlNode::Mapping(
            entries
                .iter()
                .map(|(key, value)| {
                    let value = match (key.scalar_text().as_deref(), value) {
                        (Some("matrix"), YamlNode::String(text)) if text.contains("${{") => YamlNode::Mapping(vec![(
                            YamlNode::String("decided".into()),
                            YamlNode::Sequence(vec![stand_in(text)]),
                        )]),
                        (Some("matrix"), YamlNode::Mapping(dimensions)) => YamlNode::Mapping(
                            dimensions
                                .iter()
                                .map(|(name, values)| {
                                    let values = match (name.scalar_text().as_deref(), values) {
                                        (Some("include"), YamlNode::String(t)) if t.contains("${{") => one("decided"),
                                        (Some("exclude"), YamlNode::String(t)) if t.contains("${{") => {
                                            YamlNode::Sequence(Vec::new())
                                        }
                                        (_, YamlNode::String(t)) if t.contains("${{") => {
                                            YamlNode::Sequence(vec![stand_in(t)])
                                        }
                                        _ => values.clone(),
                                    };
                                    (name.clone(), values)
                                })
                                .collect(),
                        ),
                        _ => value.clone(),
                    };
                    (key.clone(), value)
                })
                .collect(),
        ),
        other => other.clone(),
    };
    read_strategy(&replaced, at).map(|_| ())
}

/// The legs of `template`, a job whose matrix was decided when it was due,
/// from `decided`, what its strategy came to (JSON text): read and expanded
/// as a matrix written out is. An error says what was wrong with it.
pub(crate) fn runtime_legs(
    template: &JobDefinition,
    decided: &str,
) -> Result<(Vec<JobDefinition>, MatrixGroup), DefinitionError> {
    let at = Location::job(&template.key).field("strategy");
    let Some(runtime) = &template.runtime_matrix else {
        return Err(at.error("the job's matrix is not decided when it is due"));
    };
    let node: YamlNode = serde_json::from_str(decided).map_err(|err| at.error(format!("not a strategy: {err}")))?;
    let strategy = read_strategy(&node, &at)?;
    let job = JobDefinition { runtime_matrix: None, ..template.clone() };
    expand_matrix(job, &strategy, &runtime.runs_on, runtime.timeout.as_deref())
}

/// `frozen` with each job whose matrix was decided when it was due
/// (`decided`: job key → what its strategy came to, as
/// `AttemptState::matrices` keeps it) replaced by its legs, and the jobs
/// that need it needing every leg, as for a matrix written out. The legs
/// come out the same for the same strategy every time, so they keep their
/// keys across reads.
pub(crate) fn with_decided<'a>(
    frozen: &'a WorkflowDefinition,
    decided: &BTreeMap<String, String>,
) -> Cow<'a, WorkflowDefinition> {
    if decided.is_empty() {
        return Cow::Borrowed(frozen);
    }
    let mut definition = frozen.clone();
    for (key, strategy) in decided {
        let Some(index) = definition.jobs.iter().position(|job| &job.key == key) else { continue };
        // Checked when it was decided; the same text reads the same now.
        let Ok((legs, group)) = runtime_legs(&definition.jobs[index], strategy) else { continue };
        for job in &mut definition.jobs {
            if let Some(at) = job.needs.iter().position(|need| need == key) {
                job.needs.splice(at..=at, group.legs.iter().cloned());
            }
        }
        definition.jobs.splice(index..=index, legs);
        definition.matrices.push(group);
    }
    Cow::Owned(definition)
}

/// The legs of a matrix on a job that calls a reusable workflow: one call
/// each, expanded on the YAML tree before the definition is read (so the
/// matrix must be known when the run is created), each leg's combination,
/// the names whose values are mappings or lists, and where it stands among
/// them (`strategy.job-index`, `strategy.job-total`).
pub(crate) fn call_legs(
    caller: &str,
    node: &YamlNode,
) -> Result<(Vec<Combination>, std::collections::BTreeSet<String>), DefinitionError> {
    let at = Location::job(caller).field("strategy");
    if decided_when_due(node, &at)? {
        return Err(at.field("matrix").error(
            "a matrix of calls is expanded when the run is created: its values are written out or come from \
             inputs (a matrix from an earlier job's output goes on the called workflow's jobs)",
        ));
    }
    let strategy = read_strategy(node, &at)?;
    // Each call runs to its end, as with `fail-fast: false`; what would
    // say otherwise is refused rather than ignored.
    let written = |name: &str| match node {
        YamlNode::Mapping(entries) => entries.iter().any(|(key, _)| key.scalar_text().as_deref() == Some(name)),
        _ => false,
    };
    for (field, refused) in
        [("fail-fast", written("fail-fast") && strategy.fail_fast), ("max-parallel", written("max-parallel"))]
    {
        if refused {
            return Err(at.field(field).error(format!(
                "`{field}` is not applied to a matrix of calls (each call runs to its end, as with `fail-fast: \
                 false`): remove it, or put the matrix on the called workflow's jobs"
            )));
        }
    }
    let combinations = bounded_combinations(&strategy, &at.field("matrix"), "calls")?;
    Ok((combinations, strategy.structured))
}

/// A matrix's combinations, at least one and at most [`MAX_JOBS`] of them
/// (each one of `what`: a job's legs, a workflow's calls).
fn bounded_combinations(strategy: &Strategy, at: &Location, what: &str) -> Result<Vec<Combination>, DefinitionError> {
    let combinations = matrix::combinations(strategy);
    if combinations.is_empty() {
        return Err(at.error("it makes no combination: every one is excluded"));
    }
    if combinations.len() > MAX_JOBS {
        return Err(at.error(format!("{} combinations, at most {MAX_JOBS} {what} are accepted", combinations.len())));
    }
    Ok(combinations)
}

/// `strategy:` `{matrix: {<name>: [values], include: [...], exclude: [...]},
/// fail-fast, max-parallel}`. Values are scalars, taken as text.
pub(super) fn read_strategy(node: &YamlNode, at: &Location) -> Result<Strategy, DefinitionError> {
    let fields = Fields::read(node, STRATEGY_FIELDS, at, "a mapping with `matrix`")?;
    let Some(matrix) = fields.get("matrix") else { return Err(at.field("matrix").error("required")) };
    let at_matrix = at.field("matrix");
    let YamlNode::Mapping(entries) = matrix else { return Err(at_matrix.expected("a mapping of dimensions", matrix)) };
    let mut strategy = Strategy { fail_fast: true, ..Strategy::default() };
    // The names given a mapping or a list somewhere: such a value is kept as
    // JSON text and read into as a value (`matrix.pair.otp`, GitHub's
    // `include: [{pair: {elixir: "1.17", otp: "27"}}]`).
    let structured = std::cell::RefCell::new(std::collections::BTreeSet::new());
    let scalar = |name: &str, node: &YamlNode, at: &Location| match node {
        YamlNode::String(_) | YamlNode::Integer(_) | YamlNode::Float(_) | YamlNode::Bool(_) => {
            node.scalar_text().ok_or_else(|| at.expected("a scalar value", node))
        }
        YamlNode::Mapping(_) | YamlNode::Sequence(_) => {
            structured.borrow_mut().insert(name.to_string());
            Ok(node.to_json().to_string())
        }
        other => Err(at.expected("a string, number, boolean, mapping or list", other)),
    };
    let combination = |node: &YamlNode, at: &Location| -> Result<Combination, DefinitionError> {
        let YamlNode::Mapping(pairs) = node else { return Err(at.expected("a mapping of names to values", node)) };
        let mut combo = Combination::new();
        for (name, value) in pairs {
            let Some(name) = name.scalar_text() else { return Err(at.expected("names as text", name)) };
            check_matrix_name(&name, at)?;
            combo.push((name.clone(), scalar(&name, value, &at.field(&name))?));
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
                let YamlNode::Sequence(items) = values else {
                    let Some(text) = values.scalar_text().filter(|_| is_expression(values)) else {
                        return Err(at.expected("a list of values", values));
                    };
                    let items = literal_values(&text).map_err(|why| at.error(why))?;
                    if items.is_empty() || items.len() > MAX_MATRIX_ENTRIES {
                        return Err(
                            at.error(format!("`{text}` gives {} values, 1 to {MAX_MATRIX_ENTRIES}", items.len()))
                        );
                    }
                    let mut values = Vec::with_capacity(items.len());
                    for item in items {
                        values.push(match item {
                            expressions::Value::String(text) => text,
                            expressions::Value::Array(_) | expressions::Value::Object(_) => {
                                structured.borrow_mut().insert(name.clone());
                                serde_json::to_string(&item).unwrap_or_default()
                            }
                            scalar => scalar.render(),
                        });
                    }
                    strategy.dimensions.push((name, values));
                    continue;
                };
                if items.is_empty() || items.len() > MAX_MATRIX_ENTRIES {
                    return Err(at.error(format!("1 to {MAX_MATRIX_ENTRIES} values")));
                }
                let values = items.iter().map(|item| scalar(&name, item, &at)).collect::<Result<Vec<_>, _>>()?;
                strategy.dimensions.push((name, values));
            }
        }
    }
    strategy.structured = structured.take();
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

/// A dimension written as one expression that reads nothing but literals
/// (`${{ fromJSON('["3.11", "3.12"]') }}`, what a called workflow's
/// `fromJSON(inputs.versions)` becomes when its caller gives the list):
/// its values, worked out when the run is created.
fn literal_values(text: &str) -> Result<Vec<expressions::Value>, String> {
    let inner = text.trim().trim_start_matches("${{").trim_end_matches("}}");
    let expr = expressions::parse(inner).map_err(|err| format!("`{}`: {err}", text.trim()))?;
    let mut read = Vec::new();
    expressions::references(&expr, &mut read);
    if !read.is_empty() {
        return Err(format!(
            "`{}` reads `{}`: a value the matrix came to holds no expression of its own",
            text.trim(),
            read[0]
        ));
    }
    match expressions::evaluate(&expr, &expressions::MapScope::default()) {
        Ok(expressions::Value::Array(items)) => Ok(items),
        Ok(other) => Err(format!("`{}` gives {}, not a list of values", text.trim(), other.render())),
        Err(err) => Err(format!("`{}`: {err}", text.trim())),
    }
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
