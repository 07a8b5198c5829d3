//! The spec a runner gets to execute a job: its steps, env and outputs,
//! built from the frozen definition with the job's expressions resolved
//! (and measured, unresolved, when a definition is parsed).

use std::collections::BTreeMap;
use std::time::Duration;

use uuid::Uuid;

use super::definition::{JobDefinition, WorkflowDefinition};
use super::expressions::{self, Reference};
use super::references::{self, JobScope};
use crate::ids::step_id;
use baton_api::facts::{JobSpec, JobWork, OutputFrom, StepSpec};

/// What a runner needs to execute `job`: its steps and env with every
/// `${{ … }}` resolved in `scope` (left as written without one, to measure
/// the spec), and where its outputs come from.
pub fn job_spec(
    definition: &WorkflowDefinition,
    job: &JobDefinition,
    execution_id: Uuid,
    minute: Duration,
    scope: Option<&JobScope<'_>>,
) -> JobSpec {
    let minutes = |m: u32| u64::from(m) * minute.as_secs();
    // Shared by the texts and the step conditions' values.
    let budget = std::cell::Cell::new(EXPANSION_BUDGET);
    let resolve = |text: &str, scope: Option<&JobScope<'_>>| match scope {
        Some(scope) => {
            let mut left = budget.get();
            let expanded = expand(text, scope, &mut left);
            budget.set(left);
            expanded
        }
        None => text.to_string(),
    };
    let mut env = BTreeMap::new();
    for (name, value) in definition.env.iter().chain(&job.env) {
        env.insert(name.clone(), resolve(value, scope));
    }
    // `env.X` in the steps reads the job's env as resolved above.
    let job_scope = scope.map(|scope| JobScope { env: env.clone(), needs: scope.needs.clone(), ..*scope });
    let scope = job_scope.as_ref();
    let step_ids: Vec<Uuid> = (0..job.steps.len()).map(|index| step_id(execution_id, index)).collect();
    let steps = job
        .steps
        .iter()
        .enumerate()
        .map(|(index, step)| {
            // A step's expressions also see the step's own env.
            let step_scope = scope.map(|scope| {
                let mut env = scope.env.clone();
                env.extend(step.env.iter().map(|(k, v)| (k.clone(), expressions::interpolate(v, scope))));
                JobScope { env, needs: scope.needs.clone(), ..*scope }
            });
            // The fields the runner resolves: left as written (never
            // expanded here too, so nothing is evaluated twice), the
            // workflow's references they read put in `if_values`.
            let mut deferred: Vec<(String, &str)> = Vec::new();
            if step.uses.is_none() {
                deferred.push(("run".into(), step.run.as_str()));
            }
            if let Some(dir) = &step.working_directory {
                deferred.push(("working_directory".into(), dir.as_str()));
            }
            deferred.extend(step.env.iter().map(|(k, v)| (format!("env.{k}"), v.as_str())));
            deferred.extend(step.with.iter().map(|(k, v)| (format!("with.{k}"), v.as_str())));
            // `env.NAME` of no env the queue knows is an earlier step's
            // `$GITHUB_ENV` (setup-python's `pythonLocation`): the runner's.
            let queue_env = |name: &str| env.contains_key(name) || step.env.contains_key(name);
            deferred.retain(|(_, text)| {
                expressions::reads_runner_side(text, |reference| references::set_on_the_runner(reference, queue_env))
            });
            let is_deferred = |field: &str| deferred.iter().any(|(f, _)| f == field);
            let field = |name: String, text: &str| {
                if is_deferred(&name) {
                    text.to_string()
                } else {
                    resolve(text, step_scope.as_ref())
                }
            };
            let mut read_by_runner: Vec<Reference> = Vec::new();
            if let Some(condition) = &step.condition {
                read_by_runner.extend(
                    expressions::condition_references(condition, expressions::Dialect::Step).unwrap_or_default(),
                );
            }
            for (_, text) in &deferred {
                read_by_runner
                    .extend(expressions::text_references_in(text, expressions::Dialect::Step).unwrap_or_default());
            }
            StepSpec {
                id: step_ids[index],
                name: step.name.clone(),
                key: step.id.clone(),
                run: match &step.uses {
                    Some(uses) => too_old_for_actions(uses),
                    None => field("run".into(), &step.run),
                },
                uses: step.uses.clone(),
                with: step.with.iter().map(|(k, v)| (k.clone(), field(format!("with.{k}"), v))).collect(),
                env: step.env.iter().map(|(k, v)| (k.clone(), field(format!("env.{k}"), v))).collect(),
                timeout_s: step.timeout_minutes.map(minutes),
                continue_on_error: decided(step.continue_on_error.as_deref(), step_scope.as_ref()),
                // Defaults were applied when the definition was read: the
                // runner gets the step's own values.
                shell: step.shell.clone(),
                working_directory: step.working_directory.as_deref().map(|dir| field("working_directory".into(), dir)),
                if_condition: step.condition.clone(),
                if_values: match &step_scope {
                    Some(scope) => {
                        let mut left = budget.get();
                        let values = queue_values(read_by_runner, scope, &mut left);
                        budget.set(left);
                        values
                    }
                    None => BTreeMap::new(),
                },
                deferred: deferred.into_iter().map(|(name, _)| name).collect(),
            }
        })
        .collect();
    let outputs = job
        .outputs
        .iter()
        .map(|(name, source)| {
            let step = source
                .step
                .as_ref()
                .and_then(|id| job.steps.iter().position(|s| s.id.as_ref() == Some(id)))
                .map(|index| step_ids[index]);
            (name.clone(), OutputFrom { step, key: source.key.clone() })
        })
        .collect();
    let mut mask_env: Vec<String> = definition.mask_env.iter().chain(&job.mask_env).cloned().collect();
    mask_env.sort();
    mask_env.dedup();
    JobSpec {
        work: JobWork {
            key: job.key.clone(),
            labels: job.labels.clone(),
            timeout_s: minutes(job.timeout_minutes),
            env,
            steps,
            outputs,
            mask_env,
        },
        continue_on_error: decided(job.continue_on_error.as_deref(), scope),
        priority: priority_of(job.priority.as_deref(), scope),
        secrets: references::secrets_used(definition, job),
    }
}

/// The `run` of an action step: a runner that reads `uses` runs the action
/// and never this; one from before actions runs only `run`, and this fails
/// the step saying why instead of passing it having done nothing.
fn too_old_for_actions(uses: &str) -> String {
    let said = format!("this step runs the action {uses}: this runner is too old to run actions; upgrade it");
    format!("echo '{}' >&2; exit 1", said.replace('\'', r"'\''"))
}

/// A `priority` as decided in `scope`: a whole number (clamped to
/// `PRIORITY_RANGE`), 0 when it is not one or there is no scope to decide it.
fn priority_of(priority: Option<&str>, scope: Option<&JobScope<'_>>) -> i32 {
    let text = match (priority, scope) {
        (None, _) => return 0,
        (Some(text), Some(scope)) => expressions::interpolate(text, scope),
        (Some(text), None) => text.to_string(),
    };
    let range = baton_api::facts::PRIORITY_RANGE;
    text.trim().parse::<i64>().map_or(0, |p| p.clamp(i64::from(*range.start()), i64::from(*range.end())) as i32)
}

/// A `continue-on-error` as decided in `scope`: it holds when it comes to
/// `true` (a literal `true`, or an expression whose value is `true`).
/// Without a scope (measuring a spec) only a literal `true` holds.
fn decided(continue_on_error: Option<&str>, scope: Option<&JobScope<'_>>) -> bool {
    match (continue_on_error, scope) {
        (None, _) => false,
        (Some(text), Some(scope)) => expressions::interpolate(text, scope).trim() == "true",
        (Some(text), None) => text == "true",
    }
}

/// The values of the references the runner's expressions read (a step's
/// `if:` and its deferred fields) that the queue knows (the runner reads
/// the earlier steps, the statuses, `github.*` and `runner.*` itself),
/// keyed as the reference prints. A reference with no value is left out
/// (it reads as null, as in the job's other expressions); a secret never
/// goes in (the definition reader refuses one in a condition or a deferred
/// field). Values are charged to the job's expansion `budget`: past it a
/// value is a note saying so, as in `expand`.
fn queue_values(references: Vec<Reference>, scope: &JobScope<'_>, budget: &mut usize) -> BTreeMap<String, String> {
    let mut values = BTreeMap::new();
    for reference in references {
        if reference.is_runner_side() || matches!(reference, Reference::Secret(_)) {
            continue;
        }
        let key = reference.to_string();
        if values.contains_key(&key) {
            continue;
        }
        let Some(value) = expressions::Scope::resolve(scope, &reference) else { continue };
        let value = if value.len() <= *budget {
            *budget -= value.len();
            value
        } else {
            format!("[not expanded: the job's expressions expand past {EXPANSION_BUDGET} bytes]")
        };
        values.insert(key, value);
    }
    values
}

/// How many bytes the expressions of one job may expand to: outputs are
/// bounded, but a job may refer to them many times, and its spec must stay
/// storable (64 KiB, `MAX_JOB_SPEC_BYTES`, less what it was written with).
pub const EXPANSION_BUDGET: usize = 32 * 1024;

/// `text` interpolated, its expansions charged to `budget`; past the budget
/// a value is replaced by a note saying so (the job runs, visibly short of
/// it, rather than a spec too large to store stalling the orchestration).
fn expand(text: &str, scope: &JobScope<'_>, budget: &mut usize) -> String {
    let expanded = expressions::interpolate(text, scope);
    let grown = expanded.len().saturating_sub(text.len());
    if grown <= *budget {
        *budget -= grown;
        expanded
    } else {
        format!("{text} [not expanded: the job's expressions expand past {EXPANSION_BUDGET} bytes]")
    }
}

#[cfg(test)]
mod tests;
