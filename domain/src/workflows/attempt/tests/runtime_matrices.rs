//! Matrices decided when their jobs are due, from earlier jobs' outputs.

use super::*;

const MATRIX_FROM_OUTPUTS: &str = include_str!("../../../../tests/fixtures/workflows/matrix_from_outputs.yml");

/// The run of the fixture with `plan` succeeded, and what `plan` output:
/// `test`'s matrix and `package`'s targets.
fn planned(matrix: &str, targets: &str) -> (WorkflowDefinition, AttemptState, ExpressionData) {
    let definition = parse_definition(MATRIX_FROM_OUTPUTS).unwrap();
    let mut state = attempt(&definition);
    advance(&mut state, &definition, Utc::now());
    finish(&mut state, "plan", JobOutcome::Succeeded);
    let mut data = ExpressionData::default();
    let plan = job(&state, "plan").execution.as_ref().unwrap().id;
    data.outputs.insert(
        plan,
        BTreeMap::from([("matrix".to_string(), matrix.to_string()), ("targets".to_string(), targets.to_string())]),
    );
    (definition, state, data)
}

/// The orchestrator's loop: advance over the definition the attempt runs
/// (its decided matrices as legs) until nothing changes.
fn settle(state: &mut AttemptState, frozen: &WorkflowDefinition, data: &ExpressionData) -> Vec<JobSpec> {
    let mut queued = Vec::new();
    for _ in 0..10 {
        let runs = state.definition(frozen).into_owned();
        let change = state.advance(&runs, Utc::now(), MINUTE, 40, &RunnerEndings::new(), data);
        queued.extend(queued_specs(&change));
        if !change.changed {
            break;
        }
    }
    queued
}

fn keys(state: &AttemptState) -> Vec<&str> {
    state.jobs.iter().map(|j| j.key.as_str()).collect()
}

#[test]
fn a_matrix_from_an_earlier_jobs_output_is_one_job_until_due_then_its_legs() {
    let definition = parse_definition(MATRIX_FROM_OUTPUTS).unwrap();
    // Read: one job each, the jobs after them needing them by name.
    let test = definition.job("test").unwrap();
    assert!(test.runtime_matrix.is_some() && test.matrix.is_none());
    assert_eq!(definition.job("report").unwrap().needs, ["test", "package"]);

    let (definition, mut state, data) =
        planned(r#"{"os":["x64","arm64"],"include":[{"os":"x64","extra":"lint"}]}"#, r#"["wasm","musl"]"#);
    let queued = settle(&mut state, &definition, &data);
    assert_eq!(
        keys(&state),
        ["plan", "test (x64, lint)", "test (arm64)", "package", "report"],
        "test's legs in its place, in combination order (an include extends the leg it matches); package, which \
         needs them, is not due yet"
    );
    // The legs run with their values: `runs-on` and steps put them in.
    let x64 = queued.iter().find(|s| s.work.key == "test (x64, lint)").expect("x64 leg queued");
    assert_eq!(x64.work.labels, ["linux", "x64"]);
    assert!(x64.work.steps[0].run.contains("built=x64+lint"), "{}", x64.work.steps[0].run);
    let arm = queued.iter().find(|s| s.work.key == "test (arm64)").expect("arm64 leg queued");
    assert!(arm.work.steps[0].run.contains("built=arm64\""), "{}", arm.work.steps[0].run);
    // `package` waits for every leg of `test`, and so does `report`.
    let runs = state.definition(&definition);
    assert_eq!(runs.job("package").unwrap().needs, ["plan", "test (x64, lint)", "test (arm64)"]);
    assert_eq!(runs.job("report").unwrap().needs, ["test (x64, lint)", "test (arm64)", "package"]);
    assert!(!runs.matrix_group("test").unwrap().fail_fast, "`fail-fast: false` as written");

    // The decision is kept: read again (and stored), the same legs.
    let again = stored(&state);
    assert_eq!(again.definition(&definition).jobs, runs.jobs);

    let mut data = data;
    for (leg, built) in [("test (x64, lint)", "x64+lint"), ("test (arm64)", "arm64")] {
        finish(&mut state, leg, JobOutcome::Succeeded);
        let execution = job(&state, leg).execution.as_ref().unwrap().id;
        data.outputs.insert(execution, BTreeMap::from([("built".to_string(), built.to_string())]));
    }
    let queued = settle(&mut state, &definition, &data);
    assert_eq!(
        keys(&state),
        ["plan", "test (x64, lint)", "test (arm64)", "package (wasm, stable)", "package (musl, stable)", "report"]
    );
    assert_eq!(queued.len(), 2, "both package legs queued");
    assert!(queued.iter().any(|s| s.work.steps[0].run.contains("packaging musl for stable")));
    for leg in ["package (wasm, stable)", "package (musl, stable)"] {
        finish(&mut state, leg, JobOutcome::Succeeded);
        data.outputs.insert(job(&state, leg).execution.as_ref().unwrap().id, BTreeMap::new());
    }
    let queued = settle(&mut state, &definition, &data);
    let report = queued.iter().find(|s| s.work.key == "report").expect("report queued");
    let all: serde_json::Value = serde_json::from_str(&report.work.env["ALL"]).unwrap();
    assert_eq!(all, json!({"test (x64, lint)": "x64+lint", "test (arm64)": "arm64"}));
}

#[test]
fn a_matrix_that_comes_out_wrong_fails_its_job_saying_why_and_its_dependants_skip() {
    for (matrix, why) in [
        (r#"{"os":[]}"#, "strategy.matrix.os: 1 to 256 values"),
        ("not json", "fromJSON"),
        (r#"{"os":["x64"],"exclude":[{"os":"x64"}]}"#, "every one is excluded"),
        (r#"["x64"]"#, "expected a mapping of dimensions"),
    ] {
        let (definition, mut state, data) = planned(matrix, r#"["wasm"]"#);
        settle(&mut state, &definition, &data);
        let test = job(&state, "test");
        assert_eq!((test.status, test.reason), (JobStatus::Failed, Some(StatusReason::InvalidMatrix)), "{matrix}");
        let message = test.message.as_deref().unwrap_or_default();
        assert!(message.starts_with("strategy.matrix") && message.contains(why), "{matrix}: {message}");
        assert!(state.matrices.is_empty());
        assert_eq!(status_of(&state, "package"), JobStatus::Skipped, "its needs failed");
        assert_eq!(state.status, AttemptStatus::Failed);
    }
}

#[test]
fn a_matrix_job_skipped_by_its_needs_is_never_decided() {
    let definition = parse_definition(MATRIX_FROM_OUTPUTS).unwrap();
    let mut state = attempt(&definition);
    advance(&mut state, &definition, Utc::now());
    finish(&mut state, "plan", JobOutcome::Failed);
    settle(&mut state, &definition, &ExpressionData::default());
    assert_eq!(keys(&state), ["plan", "test", "package", "report"]);
    assert_eq!(status_of(&state, "test"), JobStatus::Skipped);
}

#[test]
fn a_rerun_keeps_a_decided_matrix_whose_legs_it_carries_and_decides_again_one_it_runs_again() {
    let (definition, mut state, data) = planned(r#"{"os":["x64","arm64"]}"#, r#"["wasm"]"#);
    settle(&mut state, &definition, &data);
    let carried: BTreeMap<String, JobState> =
        ["plan", "test (x64)"].iter().map(|key| (key.to_string(), job(&state, key).clone())).collect();
    let rerun = AttemptState::new(NewAttempt {
        attempt: 2,
        carried: &carried,
        decided: &state.matrices,
        rerun_mode: Some(crate::workflows::rerun::RerunMode::Failed),
        ..NewAttempt::first(state.run_id, "ws", &definition, Utc::now())
    });
    assert_eq!(keys(&rerun), ["plan", "test (x64)", "test (arm64)", "package", "report"]);
    assert!(job(&rerun, "test (x64)").carried_over && !job(&rerun, "test (arm64)").carried_over);

    let fresh =
        AttemptState::new(NewAttempt { attempt: 2, ..NewAttempt::first(state.run_id, "ws", &definition, Utc::now()) });
    assert_eq!(keys(&fresh), ["plan", "test", "package", "report"], "nothing decided: decided again when due");
}
