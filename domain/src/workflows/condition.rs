//! A job's `if:` condition (behaviour.md §8, §9).
//!
//! Baton supports the four status functions users know from GitHub Actions,
//! not a general expression language: they cover "run after success", "clean
//! up after a failure", "always report" and "react to a cancel", and each one
//! can be evaluated from the statuses of the job's needs alone.

use serde::{Deserialize, Serialize};

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
}

/// The expressions accepted in `if:`, for error messages.
pub const SUPPORTED_CONDITIONS: &str = "success(), failure(), always() or cancelled()";

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
        match name.trim().to_ascii_lowercase().as_str() {
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
        }
    }

    /// Whether the job still runs in a cancelled attempt (§10): such jobs
    /// are not cancelled by a run cancel and start once their needs are
    /// terminal.
    pub fn runs_after_cancel(self) -> bool {
        matches!(self, JobCondition::Always | JobCondition::Cancelled)
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
        for raw in ["", "always", "true", "!cancelled()", "success() && failure()", "always(1)", "${{ }}", "foo()"] {
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
