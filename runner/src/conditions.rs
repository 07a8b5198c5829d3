//! A step's `if:`, decided just before the step would run, as GitHub's
//! runner decides it. The queue resolved what the workflow knows (needs,
//! inputs, matrix, env, baton: the spec's `if_values`); what only the runner
//! knows is read here: the earlier steps' `steps.<id>.outcome|conclusion`
//! and `steps.<id>.outputs.<name>`, `github.*` and `runner.*` (as an
//! action's expressions read them), and the status functions.
//!
//! A step without `if:` is GitHub's `success()`: it runs only if no earlier
//! step failed (a failure `continue-on-error` forgave does not count). A
//! cancel stops every step, whatever its `if:` (the job is being ended
//! under the runner), so `cancelled()` is never true when a step is asked.

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
            // The queue's: keyed as the reference prints.
            other => self.values.get(&other.to_string()).cloned(),
        }
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
}
