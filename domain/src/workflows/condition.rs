//! A job's `if:` condition (behaviour.md §8, §9).
//!
//! Baton supports the four status functions users know from GitHub Actions,
//! not a general expression language: they cover "run after success", "clean
//! up after a failure", "always report" and "react to a cancel", and each one
//! can be evaluated from the statuses of the job's needs alone.

use serde::{Deserialize, Serialize};

use super::expressions::{self, Reference, Scope, Value};

/// When a job runs once its needs are terminal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobCondition {
    /// `success()`: every need succeeded, no upstream job failed, and the
    /// attempt was not cancelled. The default.
    #[default]
    Success,
    /// `failure()`: some upstream job (a need, or a need's need…) failed and
    /// the attempt was not cancelled.
    Failure,
    /// `always()`: runs whatever happened, even after a cancel.
    Always,
    /// `cancelled()`: runs only when the attempt was cancelled.
    Cancelled,
    /// `!cancelled()`: runs whatever happened upstream, unless the attempt
    /// was cancelled (GitHub's "report, but not after a cancel"): like
    /// `always()`, except that a cancel cancels it.
    NotCancelled,
    /// `!cancelled() && !failure()`: runs when no upstream job failed and
    /// the attempt was not cancelled; unlike `success()`, a skipped need
    /// does not skip it (GitHub's "all passed, or none had to run").
    NoFailure,
}

/// The expressions accepted in `if:`, for error messages.
pub const SUPPORTED_CONDITIONS: &str =
    "success(), failure(), always(), cancelled(), !cancelled() or !cancelled() && !failure()";

impl JobCondition {
    /// Parses an `if:` value: one of the four functions, optionally wrapped
    /// in `${{ … }}`, with surrounding whitespace ignored. Function names are
    /// case-insensitive, as in GitHub Actions. `None` for anything else.
    pub fn parse(raw: &str) -> Option<Self> {
        let mut expression = raw.trim();
        if let Some(inner) = expression.strip_prefix("${{").and_then(|rest| rest.strip_suffix("}}")) {
            expression = inner.trim();
        }
        let (name, arguments) = expression.split_once('(')?;
        if arguments.trim() != ")" {
            return None;
        }
        Self::of_status(&name.trim().to_ascii_lowercase())
    }

    /// The condition a leading status names (`expressions::split_condition`).
    pub fn of_status(status: &str) -> Option<Self> {
        match status {
            "!cancelled" => Some(JobCondition::NotCancelled),
            "!cancelled && !failure" => Some(JobCondition::NoFailure),
            "success" => Some(JobCondition::Success),
            "failure" => Some(JobCondition::Failure),
            "always" => Some(JobCondition::Always),
            "cancelled" => Some(JobCondition::Cancelled),
            _ => None,
        }
    }

    /// The canonical expression, as a user would write it.
    pub fn as_expression(self) -> &'static str {
        match self {
            JobCondition::Success => "success()",
            JobCondition::Failure => "failure()",
            JobCondition::Always => "always()",
            JobCondition::Cancelled => "cancelled()",
            JobCondition::NotCancelled => "!cancelled()",
            JobCondition::NoFailure => "!cancelled() && !failure()",
        }
    }

    /// Whether the job still runs in a cancelled attempt (§10): such jobs
    /// are not cancelled by a run cancel and start once their needs are
    /// terminal.
    pub fn runs_after_cancel(self) -> bool {
        matches!(self, JobCondition::Always | JobCondition::Cancelled)
    }

    /// Whether a job's `when` (its `if:` as written, the status function
    /// included) holds in `scope`, once this condition held. The status
    /// function in it reads as true (it was decided apart), but for
    /// `!cancelled()` that would make the whole `if:` false: `cancelled()`
    /// reads as what the condition says the attempt is.
    pub fn when_holds(self, when: &str, scope: &dyn Scope) -> bool {
        struct Decided<'a> {
            scope: &'a dyn Scope,
            cancelled: bool,
        }
        impl Scope for Decided<'_> {
            fn resolve(&self, reference: &Reference) -> Option<String> {
                self.scope.resolve(reference)
            }
            fn resolve_value(&self, reference: &Reference) -> Option<Value> {
                self.scope.resolve_value(reference)
            }
            fn status(&self, function: &str) -> Option<bool> {
                (function == "cancelled").then_some(self.cancelled)
            }
        }
        let decided = Decided { scope, cancelled: self == JobCondition::Cancelled };
        expressions::parse(when).is_ok_and(|e| expressions::holds(&e, &decided))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_four_status_functions_parse() {
        assert_eq!(JobCondition::parse("success()"), Some(JobCondition::Success));
        assert_eq!(JobCondition::parse("failure()"), Some(JobCondition::Failure));
        assert_eq!(JobCondition::parse("always()"), Some(JobCondition::Always));
        assert_eq!(JobCondition::parse("cancelled()"), Some(JobCondition::Cancelled));
        assert_eq!(JobCondition::parse("${{ !cancelled() }}"), Some(JobCondition::NotCancelled));
        assert!(!JobCondition::NotCancelled.runs_after_cancel(), "a cancel cancels it");
    }

    #[test]
    fn the_rest_of_a_not_cancelled_if_decides_and_its_status_reads_as_it_held() {
        let scope = expressions::MapScope::default();
        assert!(JobCondition::NotCancelled.when_holds("!cancelled() && 1 == 1", &scope));
        assert!(!JobCondition::NotCancelled.when_holds("!cancelled() && 1 == 2", &scope));
        assert!(JobCondition::Cancelled.when_holds("cancelled() && 1 == 1", &scope));
        assert!(JobCondition::Success.when_holds("success() && 1 == 1", &scope));
        assert!(JobCondition::Success.when_holds("1 == 1", &scope));
    }

    #[test]
    fn expression_wrapping_and_whitespace_are_accepted() {
        assert_eq!(JobCondition::parse("${{ always() }}"), Some(JobCondition::Always));
        assert_eq!(JobCondition::parse("${{failure()}}"), Some(JobCondition::Failure));
        assert_eq!(JobCondition::parse("  always( )  "), Some(JobCondition::Always));
    }

    #[test]
    fn function_names_are_case_insensitive() {
        assert_eq!(JobCondition::parse("Always()"), Some(JobCondition::Always));
    }

    #[test]
    fn other_expressions_are_rejected() {
        for raw in
            ["", "always", "true", "!failure()", "! always()", "success() && failure()", "always(1)", "${{ }}", "foo()"]
        {
            assert_eq!(JobCondition::parse(raw), None, "{raw:?}");
        }
    }

    #[test]
    fn success_is_the_default_condition() {
        assert_eq!(JobCondition::default(), JobCondition::Success);
    }

    #[test]
    fn canonical_expression_parses_back_to_the_same_condition() {
        for condition in [JobCondition::Success, JobCondition::Failure, JobCondition::Always, JobCondition::Cancelled] {
            assert_eq!(JobCondition::parse(condition.as_expression()), Some(condition));
        }
    }

    #[test]
    fn only_always_and_cancelled_jobs_run_after_a_cancel() {
        assert!(JobCondition::Always.runs_after_cancel());
        assert!(JobCondition::Cancelled.runs_after_cancel());
        assert!(!JobCondition::Success.runs_after_cancel());
        assert!(!JobCondition::Failure.runs_after_cancel());
    }
}
