//! `run-name:`: the title a run is shown under (in the runs list, the run
//! page, the CLI), as GitHub's `run-name` is: `deploy ${{ inputs.version }}
//! to ${{ inputs.environment }}`. Expanded once, when the run is created,
//! from what is known then (the inputs, the trigger's `github` fields, the
//! run's ids); a title that comes out empty leaves the run under its
//! workflow's name, as GitHub falls back to its default title.

use super::concurrency::{self, CreateScope};
use super::expressions::{self, Reference};

/// The longest title kept, in characters; a longer one is cut (a title is
/// for people, and a list row has room for no more).
pub const MAX_TITLE_CHARS: usize = 256;

/// Why `run_name` cannot be expanded when a run is created: an expression
/// that does not parse, or one reading what is not known then (a job's
/// outputs, steps, matrix, secrets, the run's number).
pub fn check(run_name: &str) -> Result<(), String> {
    for reference in expressions::text_references(run_name)? {
        if !readable(&reference) {
            return Err(format!(
                "{reference} is not known when the run is created: inputs, vars, github (but \
                 github.run_number), baton.workspace_id, baton.run_id and baton.trigger are"
            ));
        }
    }
    Ok(())
}

/// What a `run-name` may read: what a workflow's `concurrency:` may (both
/// are expanded before the run is written and takes its number).
fn readable(reference: &Reference) -> bool {
    concurrency::readable(reference)
}

/// The run's title: `run_name` expanded by `scope`, on one line, cut to
/// [`MAX_TITLE_CHARS`]; `None` when it comes out empty.
pub fn title(run_name: &str, scope: &CreateScope) -> Option<String> {
    let expanded = expressions::interpolate(run_name, scope);
    let one_line = expanded.split_whitespace().collect::<Vec<_>>().join(" ");
    (!one_line.is_empty()).then(|| one_line.chars().take(MAX_TITLE_CHARS).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn scope(inputs: &serde_json::Map<String, serde_json::Value>) -> CreateScope<'_> {
        CreateScope {
            inputs: Some(inputs),
            vars: None,
            workspace_id: "acme",
            run_id: Uuid::nil(),
            job: None,
            github: None,
        }
    }

    #[test]
    fn a_title_is_expanded_from_the_inputs_on_one_line() {
        let inputs = serde_json::json!({"version": "1.4.2", "environment": "production", "dry_run": true});
        let inputs = inputs.as_object().unwrap();
        let text =
            "deploy ${{ inputs.version }} to ${{ inputs.environment }}${{ inputs.dry_run && ' (dry run)' || '' }}";
        assert_eq!(title(text, &scope(inputs)).as_deref(), Some("deploy 1.4.2 to production (dry run)"));
        assert_eq!(title("  line one\n  line two ", &scope(inputs)).as_deref(), Some("line one line two"));
    }

    #[test]
    fn an_empty_title_is_none_and_a_long_one_is_cut() {
        let inputs = serde_json::json!({"note": ""});
        let inputs = inputs.as_object().unwrap();
        assert_eq!(title("${{ inputs.note }}", &scope(inputs)), None);
        let long = "é".repeat(MAX_TITLE_CHARS + 10);
        assert_eq!(title(&long, &scope(inputs)).map(|t| t.chars().count()), Some(MAX_TITLE_CHARS));
    }

    #[test]
    fn only_what_is_known_when_the_run_is_created_may_be_read() {
        assert_eq!(check("deploy ${{ inputs.v }} by ${{ github.actor }} (${{ baton.run_id }})"), Ok(()));
        for (text, why) in [
            ("${{ needs.build.outputs.v }}", "a job's outputs"),
            ("${{ matrix.os }}", "a matrix"),
            ("${{ secrets.TOKEN }}", "a secret"),
            ("#${{ github.run_number }}", "the number, taken as the run is written"),
        ] {
            assert!(check(text).is_err(), "{why}: {text}");
        }
        assert!(check("${{ inputs.v").is_err(), "an expression left open");
    }
}
