use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use uuid::Uuid;

use super::*;
use crate::workflows::definition::MAX_JOB_SPEC_BYTES;
use crate::workflows::parse_definition;
use crate::workflows::references::NeedState;
use crate::workflows::status::JobStatus;

const MINUTE: Duration = Duration::from_secs(60);

/// The scope of job `b` of attempt 1 once its need `a` succeeded with
/// `outputs`.
fn b_after_a(outputs: &BTreeMap<String, String>) -> JobScope<'_> {
    JobScope {
        run_id: Uuid::now_v7(),
        attempt: 1,
        workspace_id: "ws",
        job: "b",
        matrix: None,
        env: BTreeMap::new(),
        inputs: None,
        vars: None,
        event: None,
        github: None,
        needs: HashMap::from([(
            "a".to_string(),
            NeedState {
                status: JobStatus::Succeeded,
                soft_failed: false,
                outputs: Some(std::borrow::Cow::Borrowed(outputs)),
            },
        )]),
    }
}

#[test]
fn step_ids_are_stable_and_distinct() {
    let execution = Uuid::now_v7();
    assert_eq!(step_id(execution, 0), step_id(execution, 0));
    assert_ne!(step_id(execution, 0), step_id(execution, 1));
}

/// A job may refer to a large output many times: its expansions stop at
/// the budget (the spec stays storable) and say so, instead of a spec too
/// large to write stalling the orchestration.
#[test]
fn expressions_expand_up_to_the_budget_and_then_say_they_did_not() {
    let definition = parse_definition(
        "jobs:\n  a:\n    runs-on: l\n    outputs: [big]\n    steps: [{run: x}]\n  b:\n    needs: a\n    runs-on: l\n    env:\n      ONE: ${{ needs.a.outputs.big }}\n      TWO: ${{ needs.a.outputs.big }}\n    steps: [{run: 'echo ${{ needs.a.outputs.big }}'}]\n",
    )
    .unwrap();
    let big = "v".repeat(EXPANSION_BUDGET * 2 / 5);
    let outputs = BTreeMap::from([("big".to_string(), big.clone())]);
    let scope = b_after_a(&outputs);
    let job = definition.job("b").unwrap();
    let spec = job_spec(&definition, job, Uuid::now_v7(), MINUTE, Some(&scope));
    assert_eq!(spec.work.env["ONE"], big);
    assert_eq!(spec.work.env["TWO"], big);
    assert!(spec.work.steps[0].run.contains("not expanded"), "{}", &spec.work.steps[0].run[..80]);
    assert!(serde_json::to_string(&spec).unwrap().len() < MAX_JOB_SPEC_BYTES);
}

/// An action step's `with:` values are resolved when the job is queued,
/// as its `env` is; the action itself travels as written.
#[test]
fn an_action_steps_inputs_are_resolved_at_queue_time_and_its_action_kept_as_written() {
    let definition = parse_definition(
        "jobs:\n  a:\n    runs-on: l\n    outputs: [v]\n    steps: [{run: x}]\n  b:\n    needs: a\n    runs-on: l\n    steps:\n      - uses: acme/setup@v2\n        env: {FLAVOUR: sweet}\n        with:\n          version: ${{ needs.a.outputs.v }}\n          flavour: ${{ env.FLAVOUR }}\n          retries: 3\n          fast: true\n",
    )
    .unwrap();
    let outputs = BTreeMap::from([("v".to_string(), "1.2.3".to_string())]);
    let scope = b_after_a(&outputs);
    let job = definition.job("b").unwrap();
    let spec = job_spec(&definition, job, Uuid::now_v7(), MINUTE, Some(&scope));
    let step = &spec.work.steps[0];
    assert_eq!(step.uses.as_deref(), Some("acme/setup@v2"));
    assert!(step.run.contains("too old to run actions") && step.run.ends_with("exit 1"), "{}", step.run);
    let with: Vec<(&str, &str)> = step.with.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(with, [("fast", "true"), ("flavour", "sweet"), ("retries", "3"), ("version", "1.2.3")]);
    // A shell step's spec carries no action fields: older runners read it as before.
    let shell = serde_json::to_value(job_spec(&definition, definition.job("a").unwrap(), Uuid::now_v7(), MINUTE, None))
        .unwrap();
    assert!(shell["steps"][0].get("uses").is_none() && shell["steps"][0].get("with").is_none(), "{shell}");
}

/// A step's shell and working directory travel in its spec, the
/// definition's defaults applied and the directory's expressions resolved
/// when the job is queued; a step without them has neither field, so a
/// runner from before shells reads the spec as it always did.
#[test]
fn a_steps_shell_and_working_directory_reach_the_spec_resolved() {
    let definition = parse_definition(
        "defaults:\n  run: {working-directory: app}\njobs:\n  a:\n    runs-on: l\n    outputs: [dir]\n    steps: [{run: x}]\n  b:\n    needs: a\n    runs-on: l\n    defaults:\n      run: {shell: bash}\n    steps:\n      - run: make\n        working-directory: ${{ needs.a.outputs.dir }}/${{ env.SUB }}\n        env: {SUB: src}\n      - run: print(1)\n        shell: python\n      - uses: acme/x@v1\n",
    )
    .unwrap();
    let outputs = BTreeMap::from([("dir".to_string(), "pkg".to_string())]);
    let scope = b_after_a(&outputs);
    let spec = job_spec(&definition, definition.job("b").unwrap(), Uuid::now_v7(), MINUTE, Some(&scope));
    let fields: Vec<(Option<&str>, Option<&str>)> =
        spec.work.steps.iter().map(|s| (s.shell.as_deref(), s.working_directory.as_deref())).collect();
    assert_eq!(fields, [(Some("bash"), Some("pkg/src")), (Some("python"), Some("app")), (None, None)]);
    let plain = definition.job("a").unwrap();
    let plain = serde_json::to_value(job_spec(&definition, plain, Uuid::now_v7(), MINUTE, None)).unwrap();
    assert_eq!(plain["steps"][0]["working_directory"], "app");
    assert!(plain["steps"][0].get("shell").is_none(), "{plain}");
    let action = serde_json::to_value(&spec.work.steps[2]).unwrap();
    assert!(action.get("shell").is_none() && action.get("working_directory").is_none(), "{action}");
}

/// A step's `if:` travels as written with the values the queue knows of
/// what it reads; what only the runner knows (earlier steps, `github.*`)
/// is left to it, and a step without `if:` or `id:` has neither field.
#[test]
fn a_steps_condition_reaches_the_spec_with_the_values_the_queue_knows() {
    let definition = parse_definition(
        "jobs:\n  a:\n    runs-on: l\n    outputs: [v]\n    steps: [{run: x}]\n  b:\n    needs: a\n    runs-on: l\n    env: {MODE: fast}\n    steps:\n      - {id: first, run: x}\n      - if: \"${{ needs.a.outputs.v == '1' && needs.a.result == 'success' && inputs.go && inputs.missing == '' }}\"\n        run: y\n      - if: steps.first.outputs.x == env.MODE && github.workspace != '' || baton.job == 'b' && env.STEP\n        env: {STEP: on}\n        run: z\n      - run: w\n",
    )
    .unwrap();
    let outputs = BTreeMap::from([("v".to_string(), "1".to_string())]);
    let inputs = serde_json::json!({"go": true}).as_object().cloned().unwrap();
    let scope = JobScope { inputs: Some(&inputs), ..b_after_a(&outputs) };
    let spec = job_spec(&definition, definition.job("b").unwrap(), Uuid::now_v7(), MINUTE, Some(&scope));
    let keys: Vec<Option<&str>> = spec.work.steps.iter().map(|s| s.key.as_deref()).collect();
    assert_eq!(keys, [Some("first"), None, None, None]);
    let second = &spec.work.steps[1];
    assert_eq!(
        second.if_condition.as_deref(),
        Some("${{ needs.a.outputs.v == '1' && needs.a.result == 'success' && inputs.go && inputs.missing == '' }}")
    );
    let values: Vec<(&str, &str)> = second.if_values.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    // `inputs.missing` has no value: absent, it reads as null.
    assert_eq!(values, [("inputs.go", "true"), ("needs.a.outputs.v", "1"), ("needs.a.result", "success")]);
    let third = &spec.work.steps[2];
    let values: Vec<(&str, &str)> = third.if_values.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(values, [("baton.job", "b"), ("env.MODE", "fast"), ("env.STEP", "on")]);
    // The runner reads the condition with these values as the action
    // dialect's scope would, plus the earlier steps it knows.
    let mut known = expressions::MapScope(third.if_values.clone());
    known.0.insert("steps.first.outputs.x".into(), "fast".into());
    let condition = third.if_condition.as_deref().unwrap();
    assert!(expressions::condition_holds(condition, expressions::Dialect::Step, &known).unwrap());
    let last = serde_json::to_value(&spec.work.steps[3]).unwrap();
    assert!(last.get("if_condition").is_none() && last.get("if_values").is_none() && last.get("key").is_none());
    // Measured without a scope: the condition, no values.
    let measured = job_spec(&definition, definition.job("b").unwrap(), Uuid::now_v7(), MINUTE, None);
    assert!(measured.work.steps[1].if_condition.is_some() && measured.work.steps[1].if_values.is_empty());
}

/// A field that reads what only the runner knows travels as written, for
/// the runner to resolve once, with the queue's values of the rest; a
/// field that does not is resolved here as before.
#[test]
fn fields_reading_earlier_steps_or_the_runner_are_left_to_it_with_the_queues_values() {
    let definition = parse_definition(
        "jobs:\n  b:\n    runs-on: l\n    strategy: {matrix: {m: [one]}}\n    steps:\n      - {id: meta, run: x}\n      - uses: docker/build-push-action@v6\n        with: {labels: '${{ steps.meta.outputs.labels }}', push: '${{ matrix.m }}'}\n      - run: echo ${{ runner.os }}-${{ matrix.m }} ${{ github.workspace }}\n        env: {TAG: '${{ steps.meta.outputs.tag }}', PLAIN: '${{ matrix.m }}'}\n",
    )
    .unwrap();
    let job = &definition.jobs[0];
    let scope = JobScope {
        run_id: Uuid::now_v7(),
        attempt: 1,
        workspace_id: "ws",
        job: &job.key,
        matrix: job.matrix.as_ref(),
        env: BTreeMap::new(),
        inputs: None,
        vars: None,
        event: None,
        github: None,
        needs: HashMap::new(),
    };
    let spec = job_spec(&definition, job, Uuid::now_v7(), MINUTE, Some(&scope));
    let action = &spec.work.steps[1];
    assert_eq!(action.deferred, ["with.labels"]);
    assert_eq!(action.with["labels"], "${{ steps.meta.outputs.labels }}");
    assert_eq!(action.with["push"], "one", "a field the queue knows whole is resolved here");
    let run = &spec.work.steps[2];
    assert_eq!(run.deferred, ["run", "env.TAG"]);
    assert_eq!(run.run, "echo ${{ runner.os }}-${{ matrix.m }} ${{ github.workspace }}");
    assert_eq!(run.env["PLAIN"], "one");
    assert_eq!(run.if_values, BTreeMap::from([("matrix.m".to_string(), "one".to_string())]));
    assert!(spec.work.steps[0].deferred.is_empty() && spec.work.steps[0].if_values.is_empty());
}

/// `hashFiles()` reads the job's files: a field calling it is the runner's.
#[test]
fn a_field_hashing_files_is_left_to_the_runner() {
    let definition = parse_definition(
        "jobs:\n  b:\n    runs-on: l\n    steps:\n      - uses: acme/remember@v4\n        with: {key: \"deps-${{ hashFiles('**/Cargo.lock', '!vendor/**') }}\", path: target}\n",
    )
    .unwrap();
    let spec = job_spec(&definition, &definition.jobs[0], Uuid::now_v7(), MINUTE, None);
    assert_eq!(spec.work.steps[0].deferred, ["with.key"]);
    assert!(parse_definition(
        "jobs:\n  b:\n    runs-on: l\n    env: {K: \"${{ hashFiles('x') }}\"}\n    steps: [{run: x}]\n"
    )
    .unwrap_err()
    .to_string()
    .contains("hashFiles() reads the job's files"));
}
