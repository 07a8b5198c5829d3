//! The `${{ … }}` expressions inside an action's own `action.yml` (input
//! defaults, a composite action's steps and outputs), evaluated on the
//! runner when the action runs: the workflow's own expressions were
//! resolved when the job was queued, but an action is only read here.
//!
//! The language is the domain's, in its action dialect
//! (`expressions::Dialect::Action`): what a workflow's expressions can do,
//! reading `inputs.<name>`, `steps.<id>.outputs.<name>`,
//! `steps.<id>.outcome|conclusion`, `env.<NAME>`, `github.<name>` and
//! `runner.<name>` (a `github.*` or `runner.*` the runner does not know
//! reads as empty) and `hashFiles()` of the job's directory, with the
//! status functions answered from the action's steps so far. Anything the language refuses fails the step, naming it.

use std::collections::BTreeMap;

use baton_domain::workflows::expressions::{self, Dialect, Reference, Scope};

/// What an action's expressions can read.
#[derive(Debug, Default, Clone)]
pub struct Context {
    pub inputs: BTreeMap<String, String>,
    /// Each step id's outputs, and its outcome (`success`, `failure`).
    pub steps: BTreeMap<String, StepState>,
    pub env: BTreeMap<String, String>,
    /// `github.*` values the runner knows (`action_path`, `workspace`).
    pub github: BTreeMap<String, String>,
    /// `runner.*` values (`os`, `arch`, `temp`).
    pub runner: BTreeMap<String, String>,
    /// Whether an earlier step of the action failed (for `success()`).
    pub failed: bool,
}

/// A step of a composite action, as later expressions see it.
#[derive(Debug, Default, Clone)]
pub struct StepState {
    pub outputs: BTreeMap<String, String>,
    pub outcome: String,
}

/// A key of `map` read ignoring case, as GitHub's contexts are.
fn lookup<'a, V>(map: &'a BTreeMap<String, V>, key: &str) -> Option<&'a V> {
    map.get(key).or_else(|| map.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v))
}

impl Scope for Context {
    fn resolve(&self, reference: &Reference) -> Option<String> {
        match reference {
            Reference::Input(name) => lookup(&self.inputs, name).cloned(),
            Reference::Env(name) => self.env.get(name).cloned(),
            Reference::StepOutput { step, name } => lookup(&lookup(&self.steps, step)?.outputs, name).cloned(),
            Reference::Runner(path) => match path.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
                ["github", name] => lookup(&self.github, name).cloned(),
                ["runner", name] => lookup(&self.runner, name).cloned(),
                // A composite action's steps never run under
                // continue-on-error: the conclusion is the outcome.
                ["steps", step, _] => Some(lookup(&self.steps, step)?.outcome.clone()),
                _ => None,
            },
            _ => None,
        }
    }

    fn hash_files(&self, patterns: &[String]) -> Option<Result<String, String>> {
        let root = lookup(&self.github, "workspace")?;
        Some(crate::hash_files::hash_files(std::path::Path::new(root), patterns))
    }

    fn status(&self, function: &str) -> Option<bool> {
        Some(match function {
            "success" => !self.failed,
            "failure" => self.failed,
            "always" => true,
            // A cancel stops the job's processes: no step is left to ask.
            _ => false,
        })
    }
}

/// `text` with each `${{ … }}` replaced by its value as text.
pub fn interpolate(text: &str, context: &Context) -> Result<String, String> {
    expressions::try_interpolate_in(text, Dialect::Action, context).map_err(|err| format!("`{text}`: {err}"))
}

/// Whether an `if:` holds: GitHub's rule, a condition without a status
/// function means `success() && (it)`. `${{ }}` around it is optional.
pub fn condition(text: &str, context: &Context) -> Result<bool, String> {
    expressions::condition_holds(text, Dialect::Action, context).map_err(|err| format!("`{text}`: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context() -> Context {
        let mut context = Context::default();
        context.inputs.insert("Who".into(), "world".into());
        context.inputs.insert("empty".into(), String::new());
        context.steps.insert(
            "greet".into(),
            StepState { outputs: BTreeMap::from([("said".into(), "hello".into())]), outcome: "success".into() },
        );
        context.github.insert("action_path".into(), "/actions/x".into());
        context
    }

    #[test]
    fn references_literals_and_defaults_interpolate() {
        let c = context();
        assert_eq!(interpolate("hi ${{ inputs.who }}!", &c).unwrap(), "hi world!");
        assert_eq!(
            interpolate("${{ steps.greet.outputs.said }} ${{ github.action_path }}", &c).unwrap(),
            "hello /actions/x"
        );
        assert_eq!(interpolate("${{ inputs.empty || 'fallback' }}", &c).unwrap(), "fallback");
        assert_eq!(interpolate("${{ github.token }}|${{ steps.none.outputs.x }}", &c).unwrap(), "|");
        assert_eq!(interpolate("${{ inputs['who'] == 'WORLD' }} ${{ 3 }}", &c).unwrap(), "true 3");
        assert_eq!(interpolate("${{ steps.greet.outcome }}", &c).unwrap(), "success");
        assert_eq!(
            interpolate("${{ format('{0}-{1}', inputs.who, 2) }}", &c).unwrap(),
            "world-2",
            "the whole language"
        );
        assert!(interpolate("${{ hashFiles('x') }}", &c).unwrap_err().contains("hashFiles"));
        assert!(interpolate("${{ matrix.os }}", &c).unwrap_err().contains("matrix.os"));
        assert!(interpolate("${{ inputs.who", &c).is_err());
    }

    #[test]
    fn conditions_mean_success_and_unless_they_name_a_status() {
        let mut c = context();
        assert!(condition("inputs.who == 'world'", &c).unwrap());
        assert!(condition("${{ inputs.who != 'x' && !cancelled() }}", &c).unwrap());
        c.failed = true;
        assert!(!condition("inputs.who == 'world'", &c).unwrap());
        assert!(condition("failure()", &c).unwrap());
        assert!(condition("always()", &c).unwrap());
        assert!(!condition("success()", &c).unwrap());
    }
}
