//! Steps settle a job (behaviour.md §16, the seed's `onJobStepsSettled`):
//! the step report that makes the last step of a job terminal, with every
//! earlier one terminal already, finishes the job in the same write, so
//! the runner needs no complete call and the run moves on one round trip
//! sooner.
//!
//! A job's steps run one after another and the runner reports each, the
//! ones it skips after a failure included; so "every step terminal" is
//! reached exactly at the last step's terminal report. If an earlier report
//! never landed (the runner gave up on it), the outcome is not certain from
//! the reports: the job is not settled, and the runner's complete, which
//! carries every step, decides as before.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::ids::step_id;
use baton_api::facts::{JobOutcome, StepResult};

/// Whether `step` is the terminal report of the last of a job's
/// `step_count` steps: the only report that may settle it.
pub fn is_last_step_report(execution_id: Uuid, step_count: u32, step: &StepResult) -> bool {
    step_count > 0 && step.status.is_terminal() && step.id == step_id(execution_id, step_count as usize - 1)
}

/// The job's steps in order, `last` in place of what was recorded for it,
/// when every one is terminal: what the settled outcome is made of. `None`
/// when one is missing or still running (the job does not settle).
pub fn settled_steps(
    execution_id: Uuid,
    step_count: u32,
    recorded: &BTreeMap<String, StepResult>,
    last: &StepResult,
) -> Option<Vec<StepResult>> {
    (0..step_count as usize)
        .map(|index| {
            let id = step_id(execution_id, index);
            if id == last.id {
                return Some(last.clone());
            }
            recorded.get(&id.to_string()).filter(|step| step.status.is_terminal()).cloned()
        })
        .collect()
}

/// The outcome of a job whose steps all ended: failed when a step failed
/// and `continue-on-error` did not forgive it, succeeded otherwise — the
/// runner's own rule for the status it would have completed with. A
/// skipped step fails nothing by itself: its `if:` was false, or a step
/// before it failed (which says so), as on GitHub. (A job stopped from
/// outside, whose rest is skipped, is completed with its reason, never
/// settled by its steps.)
pub fn settled_outcome(steps: &[StepResult]) -> JobOutcome {
    let failed = steps.iter().any(|step| step.status == baton_api::facts::StepStatus::Failed && !step.soft_failed);
    if !failed {
        JobOutcome::Succeeded
    } else {
        JobOutcome::Failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_api::facts::StepStatus;

    fn result(execution: Uuid, index: usize, status: StepStatus) -> StepResult {
        StepResult {
            id: step_id(execution, index),
            status,
            soft_failed: false,
            exit_code: None,
            started_at: None,
            finished_at: None,
        }
    }

    fn recorded(steps: &[StepResult]) -> BTreeMap<String, StepResult> {
        steps.iter().map(|s| (s.id.to_string(), s.clone())).collect()
    }

    #[test]
    fn only_the_last_steps_terminal_report_may_settle() {
        let execution = Uuid::now_v7();
        assert!(is_last_step_report(execution, 3, &result(execution, 2, StepStatus::Succeeded)));
        assert!(is_last_step_report(execution, 3, &result(execution, 2, StepStatus::Skipped)));
        assert!(!is_last_step_report(execution, 3, &result(execution, 2, StepStatus::Running)));
        assert!(!is_last_step_report(execution, 3, &result(execution, 1, StepStatus::Succeeded)));
        // Another execution's ids, and a job queued before counts existed.
        assert!(!is_last_step_report(execution, 3, &result(Uuid::now_v7(), 2, StepStatus::Succeeded)));
        assert!(!is_last_step_report(execution, 0, &result(execution, 0, StepStatus::Succeeded)));
    }

    #[test]
    fn every_step_must_be_terminal_for_the_job_to_settle() {
        let execution = Uuid::now_v7();
        let last = result(execution, 2, StepStatus::Succeeded);
        let done = [result(execution, 0, StepStatus::Succeeded), result(execution, 1, StepStatus::Succeeded)];
        let steps = settled_steps(execution, 3, &recorded(&done), &last).unwrap();
        assert_eq!(
            steps.iter().map(|s| s.id).collect::<Vec<_>>(),
            (0..3).map(|i| step_id(execution, i)).collect::<Vec<_>>()
        );
        // A lost report, or one still running: not settled.
        assert_eq!(settled_steps(execution, 3, &recorded(&done[..1]), &last), None);
        let running = [done[0].clone(), result(execution, 1, StepStatus::Running)];
        assert_eq!(settled_steps(execution, 3, &recorded(&running), &last), None);
        // An earlier report of the last step itself is replaced by this one.
        let mut with_last = done.to_vec();
        with_last.push(result(execution, 2, StepStatus::Running));
        assert_eq!(settled_steps(execution, 3, &recorded(&with_last), &last).unwrap()[2], last);
    }

    #[test]
    fn a_failed_step_fails_the_job_unless_forgiven() {
        let execution = Uuid::now_v7();
        let ok = result(execution, 0, StepStatus::Succeeded);
        let failed = result(execution, 1, StepStatus::Failed);
        let forgiven = StepResult { soft_failed: true, ..failed.clone() };
        let skipped = result(execution, 2, StepStatus::Skipped);
        assert_eq!(settled_outcome(&[ok.clone(), forgiven.clone()]), JobOutcome::Succeeded);
        assert_eq!(settled_outcome(&[ok.clone(), failed.clone()]), JobOutcome::Failed);
        assert_eq!(settled_outcome(&[ok.clone(), failed.clone(), skipped.clone()]), JobOutcome::Failed);
        // A step whose `if:` was false; and an `if: failure()` step that
        // ran after a failure does not make the job succeed.
        assert_eq!(settled_outcome(&[ok.clone(), forgiven, skipped]), JobOutcome::Succeeded);
        assert_eq!(settled_outcome(&[failed, ok]), JobOutcome::Failed);
    }
}
