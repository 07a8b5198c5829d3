use proptest::prelude::*;

use super::*;
use JobCondition::{Always, Cancelled as IfCancelled, Failure, NoFailure, NotCancelled, Success};
use JobStatus::{Cancelled, Failed, Pending, Queued, Running, Skipped, Succeeded};

fn job(key: &str, needs: &[&str], condition: JobCondition, status: JobStatus) -> JobSnapshot {
    JobSnapshot { key: key.into(), needs: needs.iter().map(|n| n.to_string()).collect(), condition, status }
}

fn keys(list: &[&str]) -> Vec<String> {
    list.iter().map(|k| k.to_string()).collect()
}

/// build → test → deploy, and report (always) after test.
fn pipeline(build: JobStatus, test: JobStatus) -> Vec<JobSnapshot> {
    vec![
        job("build", &[], Success, build),
        job("test", &["build"], Success, test),
        job("deploy", &["test"], Success, Pending),
        job("report", &["test"], Always, Pending),
    ]
}

#[test]
fn jobs_without_needs_start_first() {
    let plan = plan_advance(&pipeline(Pending, Pending), false);
    assert_eq!(plan, AdvancePlan { start: keys(&["build"]), ..AdvancePlan::default() });
}

#[test]
fn a_job_starts_only_once_all_its_needs_are_terminal() {
    let jobs = vec![
        job("a", &[], Success, Succeeded),
        job("b", &[], Success, Running),
        job("c", &["a", "b"], Success, Pending),
    ];
    assert!(plan_advance(&jobs, false).is_idle());
}

#[test]
fn a_job_whose_needs_succeeded_starts() {
    let plan = plan_advance(&pipeline(Succeeded, Pending), false);
    assert_eq!(plan.start, keys(&["test"]));
}

#[test]
fn a_failed_dependency_skips_its_dependents_runs_always_jobs_and_fails_the_attempt() {
    let plan = plan_advance(&pipeline(Succeeded, Failed), false);
    assert_eq!(plan.skip, keys(&["deploy"]));
    assert_eq!(plan.start, keys(&["report"]));
    assert_eq!(plan.outcome, None, "report still has to run");

    let mut after = pipeline(Succeeded, Failed);
    after[2].status = Skipped;
    after[3].status = Succeeded;
    assert_eq!(plan_advance(&after, false).outcome, Some(AttemptStatus::Failed));
}

#[test]
fn skipping_cascades_within_one_call() {
    let plan = plan_advance(&pipeline(Failed, Pending), false);
    assert_eq!(plan.skip, keys(&["test", "deploy"]));
    assert_eq!(plan.start, keys(&["report"]), "report runs once test is known to be skipped");
}

#[test]
fn diamond_with_a_partial_failure_skips_the_join_and_fails() {
    let jobs = vec![
        job("root", &[], Success, Succeeded),
        job("left", &["root"], Success, Succeeded),
        job("right", &["root"], Success, Failed),
        job("join", &["left", "right"], Success, Pending),
    ];
    let plan = plan_advance(&jobs, false);
    assert_eq!(plan.skip, keys(&["join"]));
    assert_eq!(plan.outcome, Some(AttemptStatus::Failed));
}

#[test]
fn an_all_skipped_attempt_succeeds() {
    let jobs =
        vec![job("only-on-failure", &[], Failure, Pending), job("after", &["only-on-failure"], Success, Pending)];
    let plan = plan_advance(&jobs, false);
    assert_eq!(plan.skip, keys(&["only-on-failure", "after"]));
    assert_eq!(plan.outcome, Some(AttemptStatus::Succeeded));
}

#[test]
fn failure_jobs_run_when_any_upstream_job_failed_even_transitively() {
    let jobs = vec![
        job("build", &[], Success, Failed),
        job("test", &["build"], Success, Skipped),
        job("notify", &["test"], Failure, Pending),
    ];
    assert_eq!(plan_advance(&jobs, false).start, keys(&["notify"]));
}

#[test]
fn failure_jobs_are_skipped_when_nothing_failed() {
    let jobs = vec![job("build", &[], Success, Succeeded), job("notify", &["build"], Failure, Pending)];
    let plan = plan_advance(&jobs, false);
    assert_eq!(plan.skip, keys(&["notify"]));
    assert_eq!(plan.outcome, Some(AttemptStatus::Succeeded));
}

#[test]
fn a_success_job_behind_an_always_job_is_skipped_after_an_upstream_failure() {
    let jobs = vec![
        job("build", &[], Success, Failed),
        job("report", &["build"], Always, Succeeded),
        job("publish", &["report"], Success, Pending),
    ];
    assert_eq!(plan_advance(&jobs, false).skip, keys(&["publish"]));
}

#[test]
fn a_not_cancelled_job_runs_after_a_failure_but_a_cancel_cancels_it() {
    // GitHub's `if: ${{ !cancelled() }}`: report whatever failed, unless cancelled.
    let jobs = vec![job("test", &[], Success, Failed), job("report", &["test"], NotCancelled, Pending)];
    assert_eq!(plan_advance(&jobs, false).start, keys(&["report"]));
    let cancelled = vec![job("test", &[], Success, Cancelled), job("report", &["test"], NotCancelled, Pending)];
    let plan = plan_advance(&cancelled, true);
    assert_eq!(plan.cancel, keys(&["report"]));
    assert!(plan.start.is_empty());
}

#[test]
fn a_no_failure_job_runs_after_skipped_needs_but_not_after_a_failure_or_a_cancel() {
    // GitHub's `if: !cancelled() && !failure()`: "every leg passed, or none had to run".
    let gate = |test| vec![job("test", &[], Success, test), job("passed", &["test"], NoFailure, Pending)];
    assert_eq!(plan_advance(&gate(Skipped), false).start, keys(&["passed"]), "success() would skip it");
    assert_eq!(plan_advance(&gate(Succeeded), false).start, keys(&["passed"]));
    assert_eq!(plan_advance(&gate(Failed), false).skip, keys(&["passed"]));
    assert_eq!(plan_advance(&gate(Cancelled), true).cancel, keys(&["passed"]));
}

#[test]
fn cancelled_jobs_are_skipped_in_an_attempt_that_was_not_cancelled() {
    let jobs = vec![job("build", &[], Success, Succeeded), job("on-cancel", &["build"], IfCancelled, Pending)];
    assert_eq!(plan_advance(&jobs, false).skip, keys(&["on-cancel"]));
}

#[test]
fn a_cancel_cancels_non_terminal_jobs_and_lets_always_and_cancelled_jobs_run() {
    let jobs = vec![
        job("build", &[], Success, Succeeded),
        job("test", &["build"], Success, Running),
        job("lint", &["build"], Failure, Queued),
        job("deploy", &["test"], Success, Pending),
        job("report", &["test"], Always, Pending),
        job("cleanup", &["test"], IfCancelled, Pending),
    ];
    let plan = plan_advance(&jobs, true);
    assert_eq!(plan.cancel, keys(&["test", "lint", "deploy"]));
    assert_eq!(plan.start, keys(&["report", "cleanup"]));
    assert!(plan.skip.is_empty());
    assert_eq!(plan.outcome, None);
}

#[test]
fn a_running_always_job_keeps_running_after_a_cancel() {
    let jobs = vec![job("build", &[], Success, Succeeded), job("report", &["build"], Always, Running)];
    let plan = plan_advance(&jobs, true);
    assert!(plan.is_idle(), "{plan:?}");
}

#[test]
fn a_cancelled_attempt_ends_cancelled_even_with_a_failed_job() {
    let jobs = vec![job("build", &[], Success, Failed), job("test", &["build"], Success, Pending)];
    let plan = plan_advance(&jobs, true);
    assert_eq!(plan.cancel, keys(&["test"]));
    assert_eq!(plan.outcome, Some(AttemptStatus::Cancelled));
}

#[test]
fn a_plan_applied_and_asked_again_is_empty() {
    let mut jobs = pipeline(Failed, Pending);
    let plan = plan_advance(&jobs, false);
    for snapshot in &mut jobs {
        if plan.skip.contains(&snapshot.key) {
            snapshot.status = Skipped;
        } else if plan.start.contains(&snapshot.key) {
            snapshot.status = Queued;
        }
    }
    assert!(plan_advance(&jobs, false).is_idle());
}

#[test]
fn a_need_naming_no_job_does_not_stall_the_attempt() {
    let jobs = vec![job("a", &["ghost"], Success, Pending), job("b", &["ghost"], Always, Pending)];
    let plan = plan_advance(&jobs, false);
    assert_eq!(plan.skip, keys(&["a"]));
    assert_eq!(plan.start, keys(&["b"]));
}

#[test]
fn a_cycle_that_slipped_through_is_skipped_instead_of_waiting_forever() {
    let jobs = vec![job("x", &["y"], Success, Pending), job("y", &["x"], Always, Pending)];
    let plan = plan_advance(&jobs, false);
    assert_eq!(plan.skip, keys(&["x", "y"]));
    assert_eq!(plan.outcome, Some(AttemptStatus::Succeeded));
}

fn position(jobs: &[JobSnapshot], key: &str) -> usize {
    jobs.iter().position(|j| j.key == key).unwrap()
}

/// A random DAG: job `i` may only need jobs before it, so it is acyclic.
#[derive(Debug, Clone)]
struct Scenario {
    jobs: Vec<JobSnapshot>,
    /// The outcome each job has if it runs.
    fails: Vec<bool>,
    /// Per round, which running jobs finish (bit per job, cycled).
    finish_masks: Vec<u16>,
    /// Cancel the attempt at this round, if any.
    cancel_at: Option<usize>,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (1usize..12).prop_flat_map(|count| {
        let condition = prop_oneof![4 => Just(Success), 2 => Just(Failure), 2 => Just(Always), 1 => Just(IfCancelled)];
        let needs = (0..count).map(|job| proptest::collection::vec(0..job.max(1), 0..=job.min(3))).collect::<Vec<_>>();
        (
            proptest::collection::vec(condition, count),
            needs,
            proptest::collection::vec(any::<bool>(), count),
            proptest::collection::vec(1u16.., 1..8),
            proptest::option::weighted(0.3, 0usize..8),
        )
            .prop_map(move |(conditions, needs, fails, finish_masks, cancel_at)| Scenario {
                jobs: (0..count)
                    .map(|job| JobSnapshot {
                        key: format!("j{job}"),
                        needs: if job == 0 { vec![] } else { needs[job].iter().map(|n| format!("j{n}")).collect() },
                        condition: conditions[job],
                        status: Pending,
                    })
                    .collect(),
                fails,
                finish_masks,
                cancel_at,
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    /// Driving an attempt with the scheduler, finishing started jobs with
    /// random outcomes (and sometimes cancelling), always ends with every job
    /// terminal; no job starts before its needs are terminal; the outcome is
    /// failed iff a job failed (cancelled if the attempt was cancelled).
    #[test]
    fn driving_an_attempt_always_terminates_with_a_consistent_outcome(s in scenario()) {
        let mut jobs = s.jobs.clone();
        let mut cancelled = false;
        let mut outcome = None;
        for round in 0..(4 * jobs.len() + 16) {
            if s.cancel_at == Some(round) {
                cancelled = true;
            }
            let plan = plan_advance(&jobs, cancelled);
            for key in &plan.skip {
                let job = position(&jobs, key);
                prop_assert_eq!(jobs[job].status, Pending);
                jobs[job].status = Skipped;
            }
            for key in &plan.cancel {
                let job = position(&jobs, key);
                prop_assert!(cancelled && !jobs[job].status.is_terminal());
                prop_assert!(!jobs[job].condition.runs_after_cancel());
                jobs[job].status = Cancelled;
            }
            for key in &plan.start {
                let job = position(&jobs, key);
                prop_assert_eq!(jobs[job].status, Pending);
                for need in &jobs[job].needs {
                    prop_assert!(jobs[position(&jobs, need)].status.is_terminal(), "{} started before {}", key, need);
                }
                if jobs[job].condition == Success {
                    prop_assert!(jobs[job].needs.iter().all(|n| jobs[position(&jobs, n)].status == Succeeded));
                }
                jobs[job].status = Queued;
            }
            if let Some(done) = plan.outcome {
                outcome = Some(done);
                break;
            }
            let running: Vec<usize> = (0..jobs.len()).filter(|&j| matches!(jobs[j].status, Queued | Running)).collect();
            prop_assert!(!running.is_empty(), "not done, yet nothing runs: {:?}", jobs);
            let mask = s.finish_masks[round % s.finish_masks.len()];
            let mut finished_any = false;
            for &job in &running {
                if mask & (1 << (job % 16)) != 0 {
                    jobs[job].status = if s.fails[job] { Failed } else { Succeeded };
                    finished_any = true;
                }
            }
            if !finished_any {
                jobs[running[0]].status = Running;
            }
            if !finished_any && round % 2 == 1 {
                jobs[running[0]].status = if s.fails[running[0]] { Failed } else { Succeeded };
            }
        }
        let outcome = outcome.expect("the attempt ended within the round budget");
        prop_assert!(jobs.iter().all(|j| j.status.is_terminal()), "{:?}", jobs);
        let any_failed = jobs.iter().any(|j| j.status == Failed);
        let expected = if cancelled {
            AttemptStatus::Cancelled
        } else if any_failed {
            AttemptStatus::Failed
        } else {
            AttemptStatus::Succeeded
        };
        prop_assert_eq!(outcome, expected);
        prop_assert!(plan_advance(&jobs, cancelled).start.is_empty(), "a finished attempt starts nothing");
    }

    /// Without failures, a cancel or conditions other than success(), every
    /// job runs and the attempt succeeds.
    #[test]
    fn an_all_success_dag_runs_every_job(s in scenario()) {
        let mut jobs: Vec<JobSnapshot> = s.jobs.into_iter().map(|j| JobSnapshot { condition: Success, ..j }).collect();
        let mut outcome = None;
        for _ in 0..=jobs.len() {
            let plan = plan_advance(&jobs, false);
            prop_assert!(plan.skip.is_empty() && plan.cancel.is_empty());
            outcome = plan.outcome;
            if outcome.is_some() {
                break;
            }
            for job in jobs.iter_mut().filter(|j| plan.start.contains(&j.key)) {
                job.status = Succeeded;
            }
        }
        prop_assert_eq!(outcome, Some(AttemptStatus::Succeeded));
    }
}
