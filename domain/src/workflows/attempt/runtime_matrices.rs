//! A matrix decided when its job is due (`strategy.matrix` over the job's
//! needs' outputs, GitHub's `fromJSON(needs.setup.outputs.matrix)`): the job
//! is one job of the attempt until then; then its legs take its place.
//!
//! What the strategy came to is kept on the attempt (`matrices`), and every
//! read of the attempt's definition expands the job from it again
//! ([`AttemptState::definition`]), so the frozen snapshot never
//! changes and the legs are the same on every read: their keys, their
//! `runs-on`, the needs of the jobs after them. Deciding is a change of the
//! attempt like any other, in its compare-and-set: a replay after a lost
//! race decides again from the same data, and an attempt that decided
//! already has no such job left to decide.

use std::borrow::Cow;

use chrono::{DateTime, Utc};

use super::changes::Change;
use super::state::{AttemptState, JobState};
use crate::workflows::definition::{JobDefinition, WorkflowDefinition, MAX_JOBS};
use crate::workflows::definition_reader::{runtime_legs, with_decided};
use crate::workflows::status::{ExecutionStatus, JobStatus, StatusReason};

impl AttemptState {
    /// Job `index`, `template`, is due and its strategy came to `decided`
    /// (or could not be worked out): its legs take its place, pending, and
    /// `true`; or it fails `invalid_matrix`, saying why, and `false`.
    pub(super) fn decide_matrix(
        &mut self,
        index: usize,
        template: &JobDefinition,
        decided: Result<String, String>,
        now: DateTime<Utc>,
        change: &mut Change,
    ) -> bool {
        let others = self.jobs.len().saturating_sub(1);
        let legs = decided.map_err(|why| format!("strategy.matrix: {why}")).and_then(|text| {
            // The message names the field the decided value was wrong in.
            let (legs, _) = runtime_legs(template, &text).map_err(|err| match err.field {
                Some(field) => format!("{field}: {}", err.message),
                None => err.message,
            })?;
            if others + legs.len() > MAX_JOBS {
                return Err(format!(
                    "strategy.matrix: its {} legs would make the run {} jobs, at most {MAX_JOBS} are accepted",
                    legs.len(),
                    others + legs.len()
                ));
            }
            Ok((text, legs))
        });
        change.changed = true;
        match legs {
            Ok((text, legs)) => {
                let states: Vec<JobState> = legs.iter().map(|leg| JobState::pending(&leg.key)).collect();
                self.jobs.splice(index..=index, states);
                self.matrices.insert(template.key.clone(), text);
                true
            }
            Err(why) => {
                self.jobs[index].message = Some(why);
                change.emitted.extend(self.end_job(
                    index,
                    JobStatus::Failed,
                    ExecutionStatus::Failed,
                    Some(StatusReason::InvalidMatrix),
                    now,
                ));
                false
            }
        }
    }

    /// The definition this attempt runs: its frozen snapshot `frozen` with
    /// the matrices it decided as their legs. Every reader of an attempt
    /// with its definition reads it so.
    pub fn definition<'a>(&self, frozen: &'a WorkflowDefinition) -> Cow<'a, WorkflowDefinition> {
        with_decided(frozen, &self.matrices)
    }
}
