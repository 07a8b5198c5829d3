//! A step's `if:`, decided just before the step would run, as GitHub's
//! runner decides it, and the step's fields that read what only the runner
//! knows, resolved then too. The queue resolved what the workflow knows (needs,
//! inputs, matrix, env, baton: the spec's `if_values`); what only the runner
//! knows is read here: the earlier steps' `steps.<id>.outcome|conclusion`
//! and `steps.<id>.outputs.<name>`, `github.*` and `runner.*` (as an
//! action's expressions read them), and the status functions.
//!
//! A step without `if:` is GitHub's `success()`: it runs only if no earlier
//! step failed (a failure `continue-on-error` forgave does not count). A
//! cancel stops every step, whatever its `if:` (the job is being ended
//! under the runner), so `cancelled()` is never true when a step is asked.

use std::borrow::Cow;
use std::collections::BTreeMap;

use baton_api::facts::StepSpec;
use baton_domain::workflows::expressions::{self, Dialect, Reference, Scope};

/// What the earlier steps of the job came to, as a step's `if:` reads it.
#[derive(Debug, Default, Clone)]
pub struct Earlier {
    /// By step `id:`.
    pub steps: BTreeMap<String, StepState>,
    /// An earlier step failed and `continue-on-error` did not forgive it.
    pub failed: bool,
    /// `github.*` values the runner knows (`workspace`).
    pub github: BTreeMap<String, String>,
    /// `runner.*` values (`os`, `arch`, `temp`).
    pub runner: BTreeMap<String, String>,
    /// What earlier steps put in `$GITHUB_ENV`: `env.NAME` of no env the
    /// queue knew reads it (setup-python's `env.pythonLocation`).
    pub env: BTreeMap<String, String>,
}

/// One earlier step with an `id:`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StepState {
    /// `success`, `failure` or `skipped`.
    pub outcome: &'static str,
    /// As `outcome`, except `success` for a failure `continue-on-error`
    /// forgave.
    pub conclusion: &'static str,
    /// What it wrote to `$GITHUB_OUTPUT` (`$BATON_OUTPUT`).
    pub outputs: BTreeMap<String, String>,
}

impl StepState {
    /// A step that ran: `succeeded`, else failed (`forgiven` by
    /// `continue-on-error` or not).
    pub fn ran(succeeded: bool, forgiven: bool, outputs: BTreeMap<String, String>) -> Self {
        let outcome = if succeeded { "success" } else { "failure" };
        Self { outcome, conclusion: if forgiven { "success" } else { outcome }, outputs }
    }

    pub fn skipped() -> Self {
        Self { outcome: "skipped", conclusion: "skipped", outputs: BTreeMap::new() }
    }
}

/// What to do with a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Run,
    /// Reported `skipped`; no process starts.
    Skip,
    /// The condition could not be decided (`fromJSON` of text that is not
    /// JSON, say): the step fails with this, no process started.
    Fail(String),
}

/// Whether `step` runs after `earlier`.
pub fn decide(step: &StepSpec, earlier: &Earlier) -> Decision {
    let Some(condition) = step.if_condition.as_deref() else {
        return if earlier.failed { Decision::Skip } else { Decision::Run };
    };
    let scope = StepScope { earlier, values: &step.if_values };
    match expressions::condition_holds(condition, Dialect::Step, &scope) {
        Ok(true) => Decision::Run,
        Ok(false) => Decision::Skip,
        Err(err) => Decision::Fail(format!("if: `{condition}`: {err}")),
    }
}

/// `step` with its deferred fields (`StepSpec::deferred`: a `run`,
/// `working_directory`, `env.<NAME>` or `with.<name>` that reads an
/// earlier step's outputs, `runner.*` or the machine's `github.*`)
/// resolved now, just before it runs, in the same scope as its `if:`. Each
/// of their expressions is evaluated here and only here (the queue left the
/// field as written), so a value never becomes an expression. An error
/// names the field; the step then fails without starting.
pub fn resolve_deferred<'a>(step: &'a StepSpec, earlier: &Earlier) -> Result<Cow<'a, StepSpec>, String> {
    if step.deferred.is_empty() {
        // Most steps: nothing to resolve, nothing copied.
        return Ok(Cow::Borrowed(step));
    }
    let evaluate = |field: &str, text: &str, values: &BTreeMap<String, String>| {
        let scope = StepScope { earlier, values };
        expressions::try_interpolate_in(text, Dialect::Step, &scope).map_err(|err| format!("{field}: `{text}`: {err}"))
    };
    let mut resolved = step.clone();
    // The step's env first: its other fields read `env.NAME` as resolved
    // (the queue only had the text of a deferred one).
    let mut values = step.if_values.clone();
    for field in &step.deferred {
        let Some(name) = field.strip_prefix("env.") else { continue };
        if let Some(value) = step.env.get(name) {
            let value = evaluate(field, value, &step.if_values)?;
            values.insert(field.clone(), value.clone());
            resolved.env.insert(name.to_string(), value);
        }
    }
    let resolve = |field: &str, text: &str| evaluate(field, text, &values);
    for field in &step.deferred {
        if field == "run" {
            resolved.run = resolve(field, &step.run)?;
        } else if field == "working_directory" {
            if let Some(dir) = &step.working_directory {
                resolved.working_directory = Some(resolve(field, dir)?);
            }
        } else if let Some(name) = field.strip_prefix("with.") {
            if let Some(value) = step.with.get(name) {
                resolved.with.insert(name.to_string(), resolve(field, value)?);
            }
        }
    }
    Ok(Cow::Owned(resolved))
}

/// A key of `map` read ignoring case, as GitHub's contexts are.
fn lookup<'a, V>(map: &'a BTreeMap<String, V>, key: &str) -> Option<&'a V> {
    map.get(key).or_else(|| map.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v))
}

/// A step's condition's view: the runner's own knowledge, and the values
/// the queue resolved for the rest.
struct StepScope<'a> {
    earlier: &'a Earlier,
    values: &'a BTreeMap<String, String>,
}

impl Scope for StepScope<'_> {
    fn resolve(&self, reference: &Reference) -> Option<String> {
        match reference {
            Reference::StepOutput { step, name } => lookup(&lookup(&self.earlier.steps, step)?.outputs, name).cloned(),
            Reference::Runner(path) => match path.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
                ["steps", step, "conclusion"] => Some(lookup(&self.earlier.steps, step)?.conclusion.to_string()),
                ["steps", step, _] => Some(lookup(&self.earlier.steps, step)?.outcome.to_string()),
                ["github", name] => lookup(&self.earlier.github, name).cloned(),
                ["runner", name] => lookup(&self.earlier.runner, name).cloned(),
                _ => None,
            },
            // The queue's env first (a step's own `env:` wins), then what
            // an earlier step exported.
            Reference::Env(name) => {
                self.values.get(&reference.to_string()).or_else(|| lookup(&self.earlier.env, name)).cloned()
            }
            // The queue's: keyed as the reference prints.
            other => self.values.get(&other.to_string()).cloned(),
        }
    }

    fn hash_files(&self, patterns: &[String]) -> Option<Result<String, String>> {
        let root = self.earlier.github.get("workspace")?;
        Some(crate::hash_files::hash_files(std::path::Path::new(root), patterns))
    }

    fn status(&self, function: &str) -> Option<bool> {
        Some(match function {
            "success" => !self.earlier.failed,
            "failure" => self.earlier.failed,
            "always" => true,
            // A cancel stops every step before any is asked (module doc).
            _ => false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(condition: Option<&str>, values: &[(&str, &str)]) -> StepSpec {
        StepSpec {
            run: "true".into(),
            if_condition: condition.map(String::from),
            if_values: values.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..StepSpec::default()
        }
    }

    fn earlier(failed: bool) -> Earlier {
        let mut earlier = Earlier { failed, ..Earlier::default() };
        let outputs = BTreeMap::from([("changed".to_string(), "true".to_string())]);
        earlier.steps.insert("lint".into(), StepState::ran(false, true, outputs));
        earlier.steps.insert("build".into(), StepState::ran(true, false, BTreeMap::new()));
        earlier.steps.insert("docs".into(), StepState::skipped());
        earlier.runner.insert("os".into(), "Linux".into());
        earlier
    }

    #[test]
    fn a_step_without_if_runs_unless_an_earlier_step_failed() {
        assert_eq!(decide(&step(None, &[]), &earlier(false)), Decision::Run);
        assert_eq!(decide(&step(None, &[]), &earlier(true)), Decision::Skip);
    }

    #[test]
    fn the_status_functions_answer_from_the_earlier_steps() {
        for (condition, fine, after_failure) in [
            ("success()", Decision::Run, Decision::Skip),
            ("failure()", Decision::Skip, Decision::Run),
            ("always()", Decision::Run, Decision::Run),
            ("cancelled()", Decision::Skip, Decision::Skip),
            ("${{ !cancelled() }}", Decision::Run, Decision::Run),
            ("!cancelled() && !failure()", Decision::Run, Decision::Skip),
            // No status function: `success() && (it)`.
            ("runner.os == 'linux'", Decision::Run, Decision::Skip),
        ] {
            assert_eq!(decide(&step(Some(condition), &[]), &earlier(false)), fine, "{condition}");
            assert_eq!(decide(&step(Some(condition), &[]), &earlier(true)), after_failure, "{condition}");
        }
    }

    #[test]
    fn earlier_steps_and_the_queues_values_are_read() {
        for (condition, decision) in [
            ("steps.lint.outcome == 'failure' && steps.lint.conclusion == 'success'", Decision::Run),
            ("steps.build.outcome == 'success' && steps.docs.outcome == 'skipped'", Decision::Run),
            ("steps.LINT.outputs.CHANGED == 'true'", Decision::Run),
            ("steps.build.outputs.changed == 'true'", Decision::Skip),
            ("steps.unknown.outcome", Decision::Skip),
            ("matrix.os == 'linux' && needs.a.outputs.v == '1'", Decision::Run),
            ("matrix.os == 'never'", Decision::Skip),
            ("inputs.absent", Decision::Skip),
            ("github.sha", Decision::Skip),
        ] {
            let with = step(Some(condition), &[("matrix.os", "linux"), ("needs.a.outputs.v", "1")]);
            assert_eq!(decide(&with, &earlier(false)), decision, "{condition}");
        }
        let bad = step(Some("fromJSON(needs.a.outputs.v).x"), &[("needs.a.outputs.v", "{")]);
        let Decision::Fail(why) = decide(&bad, &earlier(false)) else { panic!("fails") };
        assert!(why.starts_with("if: `fromJSON(needs.a.outputs.v).x`: "), "{why}");
    }

    #[test]
    fn deferred_fields_read_earlier_steps_the_runner_and_the_queues_values_once() {
        let mut step = StepSpec {
            run: "echo ${{ steps.lint.outputs.changed }}-${{ runner.os }}-${{ matrix.m }} ${{ env.TAG }}".into(),
            env: BTreeMap::from([
                ("TAG".to_string(), "${{ steps.lint.outputs.changed }}".to_string()),
                ("PLAIN".to_string(), "${{ not-deferred }}".to_string()),
            ]),
            with: BTreeMap::from([("key".to_string(), "${{ runner.os }}-cache".to_string())]),
            if_values: BTreeMap::from([
                ("matrix.m".to_string(), "${{ steps.lint.outputs.changed }}".to_string()),
                // What the queue had of the deferred env value: its text.
                ("env.TAG".to_string(), "${{ steps.lint.outputs.changed }}".to_string()),
            ]),
            deferred: vec!["run".into(), "env.TAG".into(), "with.key".into()],
            ..StepSpec::default()
        };
        let mut earlier = earlier(false);
        earlier.runner.insert("os".into(), "Linux".into());
        let resolved = resolve_deferred(&step, &earlier).unwrap();
        // The queue's value is text, never evaluated again.
        assert_eq!(resolved.run, "echo true-Linux-${{ steps.lint.outputs.changed }} true", "env.TAG as resolved");
        assert_eq!(resolved.env["TAG"], "true");
        assert_eq!(resolved.env["PLAIN"], "${{ not-deferred }}", "a field not listed is left alone");
        assert_eq!(resolved.with["key"], "Linux-cache");
        step.run = "echo ${{ fromJSON('not json') }}".into();
        assert!(resolve_deferred(&step, &earlier).unwrap_err().starts_with("run: "));
    }
}
