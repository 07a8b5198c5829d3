//! Reruns (behaviour.md §11): which jobs of the previous attempt are
//! carried over into the new one and which run again.
//!
//! A `failed` rerun runs again every job that did not succeed, and every job
//! downstream of one that runs again even if it succeeded, because its
//! inputs may change. Everything else that succeeded is carried over. An
//! `all` rerun runs everything again.

use serde::{Deserialize, Serialize};

use super::graph::NeedsGraph;
use super::status::JobStatus;
use crate::error::{ApiError, ErrorCode};

pub use baton_api::runs::RerunMode;

/// A job of the previous attempt, as the rerun plan needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviousJob {
    pub key: String,
    pub needs: Vec<String>,
    pub status: JobStatus,
}

/// What happens to one job in the new attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RerunAction {
    /// Copy its status and outputs from the previous attempt
    /// (`carried_over: true`); it is not executed again.
    Carry,
    /// Start it afresh as `pending`.
    Rerun,
}

/// The decision for one job, in the previous attempt's job order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedJob {
    pub key: String,
    pub action: RerunAction,
}

/// Why a rerun was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RerunError {
    /// Mode `failed`, and no job of the previous attempt failed or was
    /// cancelled: there is nothing to rerun.
    #[error("no job failed or was cancelled in the previous attempt: nothing to rerun with mode `failed`")]
    NoFailedJobs,
}

impl From<RerunError> for ApiError {
    fn from(err: RerunError) -> Self {
        match err {
            RerunError::NoFailedJobs => ApiError::new(ErrorCode::NoFailedJobs, err.to_string()),
        }
    }
}

/// Decides, for every job of the previous attempt, whether the new attempt
/// carries it over or runs it again.
///
/// Mode `failed` is refused when no job failed or was cancelled: an attempt
/// whose only unsuccessful jobs were skipped (say, a `failure()` handler
/// after a green build) did not fail, and rerunning it would only run the
/// handler.
pub fn plan_rerun(previous: &[PreviousJob], mode: RerunMode) -> Result<Vec<PlannedJob>, RerunError> {
    let reruns: Vec<bool> = match mode {
        RerunMode::All => vec![true; previous.len()],
        RerunMode::Failed => {
            if !previous.iter().any(|job| matches!(job.status, JobStatus::Failed | JobStatus::Cancelled)) {
                return Err(RerunError::NoFailedJobs);
            }
            let did_not_succeed: Vec<bool> = previous.iter().map(|job| job.status != JobStatus::Succeeded).collect();
            let graph = NeedsGraph::new(previous.iter().map(|job| (job.key.as_str(), &job.needs)));
            graph.downstream_of(&did_not_succeed)
        }
    };
    Ok(previous
        .iter()
        .zip(reruns)
        .map(|(job, rerun)| PlannedJob {
            key: job.key.clone(),
            action: if rerun { RerunAction::Rerun } else { RerunAction::Carry },
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use JobStatus::{Cancelled, Failed, Skipped, Succeeded};
    use RerunAction::{Carry, Rerun};

    fn job(key: &str, needs: &[&str], status: JobStatus) -> PreviousJob {
        PreviousJob { key: key.into(), needs: needs.iter().map(|n| n.to_string()).collect(), status }
    }

    fn actions(plan: &[PlannedJob]) -> Vec<(&str, RerunAction)> {
        plan.iter().map(|job| (job.key.as_str(), job.action)).collect()
    }

    /// §11: build ✓ → test-a ✓, test-b ✗ → report ✓ (`if: always()`).
    fn spec_example() -> Vec<PreviousJob> {
        vec![
            job("build", &[], Succeeded),
            job("test-a", &["build"], Succeeded),
            job("test-b", &["build"], Failed),
            job("report", &["test-a", "test-b"], Succeeded),
        ]
    }

    #[test]
    fn failed_rerun_carries_build_and_test_a_and_reruns_test_b_and_report() {
        let plan = plan_rerun(&spec_example(), RerunMode::Failed).unwrap();
        assert_eq!(actions(&plan), [("build", Carry), ("test-a", Carry), ("test-b", Rerun), ("report", Rerun)]);
    }

    #[test]
    fn all_rerun_runs_every_job_again() {
        let plan = plan_rerun(&spec_example(), RerunMode::All).unwrap();
        assert!(plan.iter().all(|job| job.action == Rerun));
        assert_eq!(plan.len(), 4);
    }

    #[test]
    fn failed_rerun_reruns_skipped_and_succeeded_dependents() {
        let previous = vec![
            job("build", &[], Failed),
            job("test", &["build"], Skipped),
            job("report", &["test"], Succeeded),
            job("lint", &[], Succeeded),
        ];
        let plan = plan_rerun(&previous, RerunMode::Failed).unwrap();
        assert_eq!(actions(&plan), [("build", Rerun), ("test", Rerun), ("report", Rerun), ("lint", Carry)]);
    }

    #[test]
    fn failed_rerun_reruns_cancelled_jobs() {
        let previous = vec![job("build", &[], Succeeded), job("deploy", &["build"], Cancelled)];
        let plan = plan_rerun(&previous, RerunMode::Failed).unwrap();
        assert_eq!(actions(&plan), [("build", Carry), ("deploy", Rerun)]);
    }

    #[test]
    fn failed_rerun_with_nothing_failed_is_refused() {
        let previous = vec![job("build", &[], Succeeded), job("on-failure", &["build"], Skipped)];
        assert_eq!(plan_rerun(&previous, RerunMode::Failed), Err(RerunError::NoFailedJobs));
    }

    #[test]
    fn all_rerun_of_a_green_attempt_is_allowed() {
        let previous = vec![job("build", &[], Succeeded)];
        assert_eq!(actions(&plan_rerun(&previous, RerunMode::All).unwrap()), [("build", Rerun)]);
    }

    #[test]
    fn no_failed_jobs_maps_to_a_409() {
        let api: ApiError = RerunError::NoFailedJobs.into();
        assert_eq!(api.code, ErrorCode::NoFailedJobs);
        assert_eq!(api.status(), http::StatusCode::CONFLICT);
    }

    fn any_attempt() -> impl proptest::strategy::Strategy<Value = Vec<PreviousJob>> {
        use proptest::prelude::*;
        let status = prop_oneof![4 => Just(Succeeded), 1 => Just(Failed), 1 => Just(Cancelled), 1 => Just(Skipped)];
        proptest::collection::vec((status, proptest::collection::vec(any::<prop::sample::Index>(), 0..3)), 1..12)
            .prop_map(|jobs| {
                jobs.into_iter()
                    .enumerate()
                    .map(|(position, (status, needs))| PreviousJob {
                        key: format!("j{position}"),
                        needs: if position == 0 {
                            vec![]
                        } else {
                            needs.iter().map(|need| format!("j{}", need.index(position))).collect()
                        },
                        status,
                    })
                    .collect()
            })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Only succeeded jobs are carried, and a carried job's needs are all
        /// carried: nothing carried is downstream of a job that runs again.
        #[test]
        fn carried_jobs_succeeded_and_depend_only_on_carried_jobs(previous in any_attempt()) {
            let Ok(plan) = plan_rerun(&previous, RerunMode::Failed) else {
                proptest::prop_assert!(previous.iter().all(|job| !matches!(job.status, Failed | Cancelled)));
                return Ok(());
            };
            let action = |key: &str| plan.iter().find(|job| job.key == key).map(|job| job.action);
            for job in &previous {
                if action(&job.key) == Some(Carry) {
                    proptest::prop_assert_eq!(job.status, Succeeded);
                    proptest::prop_assert!(job.needs.iter().all(|need| action(need) == Some(Carry)));
                } else {
                    let upstream_rerun = job.needs.iter().any(|need| action(need) == Some(Rerun));
                    proptest::prop_assert!(job.status != Succeeded || upstream_rerun, "{} reran for no reason", job.key);
                }
            }
        }
    }

    #[test]
    fn rerun_mode_reads_the_request_spelling() {
        assert_eq!(serde_json::from_str::<RerunMode>("\"failed\"").unwrap(), RerunMode::Failed);
        assert_eq!(serde_json::from_str::<RerunMode>("\"all\"").unwrap(), RerunMode::All);
        assert!(serde_json::from_str::<RerunMode>("\"some\"").is_err());
    }
}
