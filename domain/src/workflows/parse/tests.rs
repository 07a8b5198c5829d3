use std::collections::BTreeMap;

use super::*;
use crate::error::{ApiError, ErrorCode};
use crate::workflows::condition::JobCondition;
use crate::workflows::definition::{DEFAULT_JOB_TIMEOUT_MINUTES, DEFAULT_RUN_TIMEOUT_MINUTES};

const SPEC_EXAMPLE: &str = include_str!("../../../tests/fixtures/workflows/spec_example.yml");
/// The matrix the runner process tests run on real runners.
const MATRIX: &str = include_str!("../../../tests/fixtures/workflows/matrix.yml");

fn error_of(yaml: &str) -> DefinitionError {
    parse_definition(yaml).expect_err("the definition should be refused")
}

/// A one-job workflow with `job` spliced in as the body of job `a`.
fn with_job_body(body: &str) -> String {
    let indented: String = body.lines().map(|line| format!("    {line}\n")).collect();
    format!("jobs:\n  a:\n{indented}")
}

#[test]
fn the_spec_example_parses_into_typed_jobs_in_yaml_order() {
    let definition = parse_definition(SPEC_EXAMPLE).unwrap();
    assert_eq!(definition.name.as_deref(), Some("ci"));
    assert_eq!(definition.env.get("RUST_LOG").map(String::as_str), Some("info"));
    assert_eq!(definition.timeout_minutes, DEFAULT_RUN_TIMEOUT_MINUTES);
    let keys: Vec<&str> = definition.jobs.iter().map(|job| job.key.as_str()).collect();
    assert_eq!(keys, ["build", "test", "report"]);

    let build = definition.job("build").unwrap();
    assert_eq!(build.labels, ["linux", "x64"]);
    assert_eq!(build.timeout_minutes, 30);
    assert_eq!(build.timeout_seconds(), 1800);
    assert_eq!(build.condition, JobCondition::Success);
    assert_eq!(build.steps[0].name.as_deref(), Some("compile"));
    assert_eq!(build.steps[0].run, "cargo build --release");

    let test = definition.job("test").unwrap();
    assert_eq!(test.needs, ["build"]);
    assert_eq!(test.labels, ["linux"]);
    assert_eq!(test.timeout_minutes, DEFAULT_JOB_TIMEOUT_MINUTES);

    let report = definition.job("report").unwrap();
    assert_eq!(report.needs, ["build", "test"]);
    assert_eq!(report.condition, JobCondition::Always);
}

#[test]
fn job_order_follows_the_yaml_not_the_alphabet() {
    let yaml = "jobs:\n  zeta: {runs-on: l, steps: [{run: x}]}\n  alpha: {runs-on: l, steps: [{run: x}]}\n";
    let keys: Vec<String> = parse_definition(yaml).unwrap().jobs.into_iter().map(|job| job.key).collect();
    assert_eq!(keys, ["zeta", "alpha"]);
}

#[test]
fn a_definition_survives_a_json_snapshot_round_trip() {
    let definition = parse_definition(SPEC_EXAMPLE).unwrap();
    let json = serde_json::to_string(&definition).unwrap();
    let frozen: WorkflowDefinition = serde_json::from_str(&json).unwrap();
    assert_eq!(frozen, definition);
    assert!(json.contains(r#""condition":"always""#), "{json}");
}

#[test]
fn not_cancelled_is_a_condition_of_its_own_alone_or_before_more() {
    for body in [
        "runs-on: l\nif: ${{ !cancelled() }}\nsteps: [{run: x}]",
        "runs-on: l\nif: \"!cancelled() && github.event_name == 'push'\"\nsteps: [{run: x}]",
    ] {
        let job = parse_definition(&with_job_body(body)).unwrap_or_else(|e| panic!("{body}: {e}")).jobs.remove(0);
        assert_eq!(job.condition, JobCondition::NotCancelled, "{body}");
    }
}

#[test]
fn a_matrixs_two_guards_are_conditions_of_their_own() {
    for (body, condition) in [
        ("if: (!cancelled() && !failure())", JobCondition::NoFailure),
        ("if: ${{ !cancelled() && !failure() }}", JobCondition::NoFailure),
        ("if: (!cancelled() && failure())", JobCondition::Failure),
    ] {
        let yaml = with_job_body(&format!("runs-on: l\n{body}\nsteps: [{{run: x}}]"));
        let job = parse_definition(&yaml).unwrap_or_else(|e| panic!("{body}: {e}")).jobs.remove(0);
        assert_eq!(job.condition, condition, "{body}");
    }
}

#[test]
fn an_environment_is_kept_as_written_in_either_of_githubs_forms() {
    let job = parse_definition(&with_job_body("runs-on: l\nenvironment: production\nsteps: [{run: x}]"))
        .unwrap()
        .jobs
        .remove(0);
    let environment = job.environment.expect("an environment");
    assert_eq!((environment.name.as_str(), environment.url), ("production", None));
    let body = "runs-on: l\nenvironment:\n  name: ${{ inputs.target }}\n  url: ${{ steps.deploy.outputs.url }}\nsteps: [{run: x}]";
    let environment =
        parse_definition(&with_job_body(body)).unwrap().jobs.remove(0).environment.expect("an environment");
    assert_eq!(environment.name, "${{ inputs.target }}");
    assert_eq!(environment.url.as_deref(), Some("${{ steps.deploy.outputs.url }}"));
    for (body, field) in [
        ("runs-on: l\nenvironment: {url: x}\nsteps: [{run: x}]", "environment.name"),
        ("runs-on: l\nenvironment: {name: p, reviewers: [a]}\nsteps: [{run: x}]", "environment.reviewers"),
        ("runs-on: l\nenvironment: [p]\nsteps: [{run: x}]", "environment"),
    ] {
        let err = error_of(&with_job_body(body));
        assert_eq!(err.field.as_deref(), Some(field), "{body}: {err}");
    }
}

#[test]
fn labels_in_runs_on_are_canonicalised() {
    let definition = parse_definition(&with_job_body("runs-on: [' X64', Linux, linux]\nsteps: [{run: x}]")).unwrap();
    assert_eq!(definition.jobs[0].labels, ["linux", "x64"]);
}

#[test]
fn wrapped_conditions_and_step_settings_are_read() {
    let body = "runs-on: l\nif: ${{ failure() }}\nenv: {A: 1, B: true, C: ~}\nsteps:\n  - run: x\n    timeout-minutes: 5\n    env: {D: d}";
    let job = parse_definition(&with_job_body(body)).unwrap().jobs.remove(0);
    assert_eq!(job.condition, JobCondition::Failure);
    assert_eq!(
        job.env,
        BTreeMap::from([("A".into(), "1".into()), ("B".into(), "true".into()), ("C".into(), "".into())])
    );
    assert_eq!(job.steps[0].timeout_seconds(), Some(300));
    assert_eq!(job.steps[0].env.get("D").map(String::as_str), Some("d"));
}

#[test]
fn a_top_level_on_key_is_accepted_and_ignored() {
    let yaml = "on: [push]\njobs:\n  a: {runs-on: l, steps: [{run: x}]}\n";
    assert!(parse_definition(yaml).is_ok());
}

#[test]
fn repeated_needs_are_kept_once() {
    let yaml = "jobs:\n  a: {runs-on: l, steps: [{run: x}]}\n  b: {runs-on: l, needs: [a, a], steps: [{run: x}]}\n";
    assert_eq!(parse_definition(yaml).unwrap().jobs[1].needs, ["a"]);
}

#[test]
fn an_unknown_need_names_the_job_the_field_and_the_missing_job() {
    let yaml =
        "jobs:\n  build: {runs-on: l, steps: [{run: x}]}\n  test: {runs-on: l, needs: buidl, steps: [{run: x}]}\n";
    assert_eq!(error_of(yaml).to_string(), "job `test`, field `needs`: unknown job `buidl`");
}

#[test]
fn a_cycle_is_refused_and_named() {
    let yaml =
        "jobs:\n  a: {runs-on: l, needs: b, steps: [{run: x}]}\n  b: {runs-on: l, needs: a, steps: [{run: x}]}\n";
    let err = error_of(yaml);
    assert_eq!(err.to_string(), "job `a`, field `needs`: dependency cycle a → b → a");
}

#[test]
fn a_job_needing_itself_is_a_cycle() {
    let err = error_of(&with_job_body("runs-on: l\nneeds: a\nsteps: [{run: x}]"));
    assert_eq!(err.message, "dependency cycle a → a");
}

#[test]
fn a_duplicate_job_id_is_refused_and_named() {
    let yaml = "jobs:\n  build: {runs-on: l, steps: [{run: x}]}\n  build: {runs-on: m, steps: [{run: y}]}\n";
    assert_eq!(error_of(yaml).to_string(), "job `build`: duplicate job id");
}

#[test]
fn invalid_job_ids_are_refused() {
    for id in ["1st", "-a", "a.b", "a b", "é"] {
        let yaml = format!("jobs:\n  '{id}': {{runs-on: l, steps: [{{run: x}}]}}\n");
        let err = error_of(&yaml);
        assert!(err.message.starts_with("invalid job id"), "{id}: {err}");
    }
    let long = "a".repeat(101);
    let err = error_of(&format!("jobs:\n  {long}: {{runs-on: l, steps: [{{run: x}}]}}\n"));
    assert!(err.message.starts_with("invalid job id"));
    assert!(err.job.unwrap().chars().count() <= 41, "a long id is abbreviated in the error");
    assert!(parse_definition(&format!("jobs:\n  {}: {{runs-on: l, steps: [{{run: x}}]}}\n", "a".repeat(100))).is_ok());
    assert!(parse_definition("jobs:\n  _A-b_9: {runs-on: l, steps: [{run: x}]}\n").is_ok());
}

#[test]
fn a_matrix_jobs_timeout_may_be_worked_out_from_each_legs_values() {
    let body = "runs-on: l\nstrategy: {matrix: {language: [go, swift]}}\ntimeout-minutes: ${{ (matrix.language == 'swift' && 120) || 360 }}\nsteps: [{run: x}]";
    let definition = parse_definition(&with_job_body(body)).unwrap();
    let timeouts: Vec<(&str, u32)> = definition.jobs.iter().map(|j| (j.key.as_str(), j.timeout_minutes)).collect();
    assert_eq!(timeouts, [("a (go)", 360), ("a (swift)", 120)]);
    let constant =
        parse_definition(&with_job_body("runs-on: l\ntimeout-minutes: ${{ 30 }}\nsteps: [{run: x}]")).unwrap();
    assert_eq!(constant.jobs[0].timeout_minutes, 30);
    let zero = body.replace("|| 360", "|| 0");
    let err = error_of(&with_job_body(&zero));
    assert_eq!(err.field.as_deref(), Some("timeout-minutes"));
    assert!(err.message.contains("in leg `a (go)`") && err.message.contains("comes to `0`"), "{err}");
}

#[test]
fn what_needs_docker_or_a_missing_workflow_is_refused_saying_why() {
    for (body, field, says) in [
        ("runs-on: l\nservices: {db: {image: postgres}}\nsteps: [{run: x}]", "services", "Docker containers"),
        ("runs-on: l\ncontainer: node:20\nsteps: [{run: x}]", "container", "Docker containers"),
        ("uses: ./.github/workflows/lint.yml", "uses", "no pipeline `lint` to call"),
    ] {
        let err = error_of(&with_job_body(body));
        assert_eq!((err.job.as_deref(), err.field.as_deref()), (Some("a"), Some(field)), "{err}");
        assert!(err.message.contains(says) && !err.message.contains("unknown field"), "{err}");
    }
}

#[test]
fn a_job_without_runs_on_is_refused() {
    let err = error_of(&with_job_body("steps: [{run: x}]"));
    assert_eq!((err.job.as_deref(), err.field.as_deref()), (Some("a"), Some("runs-on")));
    assert!(err.message.starts_with("required"));
}

#[test]
fn an_invalid_label_is_refused_and_named() {
    let err = error_of(&with_job_body("runs-on: [linux, 'bad label']\nsteps: [{run: x}]"));
    assert_eq!(err.field.as_deref(), Some("runs-on"));
    assert!(err.message.contains("`bad label`"), "{err}");
    let err = error_of(&with_job_body("runs-on: []\nsteps: [{run: x}]"));
    assert!(err.message.contains("at least one label"), "{err}");
}

#[test]
fn runs_on_must_be_a_label_or_a_list_of_labels() {
    let err = error_of(&with_job_body("runs-on: {group: big}\nsteps: [{run: x}]"));
    assert_eq!(err.to_string(), "job `a`, field `runs-on`: expected a label or a list of labels, found a mapping");
}

#[test]
fn a_job_without_steps_is_refused() {
    let err = error_of(&with_job_body("runs-on: l"));
    assert_eq!(err.to_string(), "job `a`, field `steps`: required: a list of steps");
    let err = error_of(&with_job_body("runs-on: l\nsteps: []"));
    assert_eq!(err.to_string(), "job `a`, field `steps`: at least one step is required");
}

#[test]
fn a_step_without_run_is_refused_with_its_position() {
    let err = error_of(&with_job_body("runs-on: l\nsteps: [{run: x}, {name: second}]"));
    assert_eq!(
        err.to_string(),
        "job `a`, field `steps[1].run`: required: the shell command to run (or `uses:`, `upload:`, `download:`, `cache:`)"
    );
    let err = error_of(&with_job_body("runs-on: l\nsteps: [{run: '  '}]"));
    assert_eq!(err.field.as_deref(), Some("steps[0].run"));
}

#[test]
fn a_docker_action_is_refused_with_a_reason() {
    let err = error_of(&with_job_body("runs-on: l\nsteps: [{run: x}, {uses: 'docker://alpine:3'}]"));
    assert_eq!(err.field.as_deref(), Some("steps[1].uses"));
    assert!(err.message.contains("Docker actions need Docker"), "{err}");
}

#[test]
fn a_call_of_a_workflow_not_stored_is_refused_as_one_not_as_an_action() {
    let err = error_of(&with_job_body(
        "uses: ./.github/workflows/build.yml
with: {target: x}",
    ));
    assert_eq!((err.job.as_deref(), err.field.as_deref()), (Some("a"), Some("uses")), "{err}");
    assert!(err.message.contains("no pipeline `build` to call"), "{err}");
}

#[test]
fn an_unknown_if_expression_is_refused() {
    let err = error_of(&with_job_body("runs-on: l\nif: github.server_urls == 'main'\nsteps: [{run: x}]"));
    assert_eq!(err.field.as_deref(), Some("if"));
    assert!(err.message.contains("`github.server_urls == 'main'`: unknown reference github.server_urls"), "{err}");
    assert!(err.message.contains("always()"));
    assert!(error_of(&with_job_body("runs-on: l\nif: true\nsteps: [{run: x}]")).message.contains("found a boolean"));
}

#[test]
fn invalid_timeouts_are_refused() {
    for timeout in ["0", "-5", "1.5", "'30'", "43201", "99999999999999999999"] {
        let err = error_of(&with_job_body(&format!("runs-on: l\ntimeout-minutes: {timeout}\nsteps: [{{run: x}}]")));
        assert_eq!(err.field.as_deref(), Some("timeout-minutes"), "{timeout}: {err}");
    }
    let err = error_of("timeout-minutes: 0\njobs:\n  a: {runs-on: l, steps: [{run: x}]}\n");
    assert_eq!((err.job, err.field.as_deref()), (None, Some("timeout-minutes")));
    let err = error_of(&with_job_body("runs-on: l\nsteps: [{run: x, timeout-minutes: 0}]"));
    assert_eq!(err.field.as_deref(), Some("steps[0].timeout-minutes"));
}

#[test]
fn a_run_timeout_is_read_from_the_definition() {
    let yaml = "timeout-minutes: 90\njobs:\n  a: {runs-on: l, steps: [{run: x}]}\n";
    assert_eq!(parse_definition(yaml).unwrap().timeout_seconds(), 5400);
}

#[test]
fn unknown_fields_are_refused_not_ignored() {
    let err = error_of(&with_job_body("runs-on: l\nneed: b\nsteps: [{run: x}]"));
    assert_eq!(err.field.as_deref(), Some("need"));
    assert!(err.message.starts_with("unknown field"), "{err}");
    let err = error_of("run-as: root\njobs:\n  a: {runs-on: l, steps: [{run: x}]}\n");
    assert_eq!((err.job, err.field.as_deref()), (None, Some("run-as")));
    let err = error_of(&with_job_body("runs-on: l\nsteps: [{run: x, shel: bash}]"));
    assert_eq!(err.field.as_deref(), Some("steps[0].shel"));
}

#[test]
fn a_field_given_twice_in_a_job_is_refused() {
    let err = error_of(&with_job_body("runs-on: l\nruns-on: m\nsteps: [{run: x}]"));
    assert_eq!(err.to_string(), "job `a`, field `runs-on`: given more than once");
}

#[test]
fn an_env_variable_given_twice_is_refused() {
    let err = error_of(&with_job_body("runs-on: l\nenv: {A: 1, A: 2}\nsteps: [{run: x}]"));
    assert_eq!(err.to_string(), "job `a`, field `env`: variable `A` is given more than once");
}

#[test]
fn env_values_must_be_scalars() {
    let err = error_of("env: {A: [1]}\njobs:\n  a: {runs-on: l, steps: [{run: x}]}\n");
    assert_eq!(err.field.as_deref(), Some("env.A"));
}

#[test]
fn a_definition_needs_jobs() {
    assert_eq!(error_of("name: ci\n").to_string(), "field `jobs`: required: a mapping of job ids to jobs");
    assert_eq!(error_of("jobs: {}\n").to_string(), "field `jobs`: at least one job is required");
    assert_eq!(error_of("").message, "the definition is empty");
    assert!(error_of("- a\n- b\n").message.starts_with("expected a mapping"));
}

#[test]
fn malformed_yaml_is_refused_with_the_parser_message() {
    let err = error_of("jobs:\n  a: [unclosed\n");
    assert!(err.message.starts_with("invalid YAML"), "{err}");
}

#[test]
fn a_definition_over_256_kib_is_refused_before_parsing() {
    let mut yaml = String::from("jobs:\n  a: {runs-on: l, steps: [{run: x}]}\n");
    yaml.push_str(&format!("# {}\n", "x".repeat(MAX_DEFINITION_BYTES)));
    assert!(error_of(&yaml).message.contains("at most 262144"));
}

fn jobs_yaml(count: usize, steps: usize) -> String {
    let steps: Vec<&str> = vec!["{run: x}"; steps];
    let mut yaml = String::from("jobs:\n");
    for job in 0..count {
        yaml.push_str(&format!("  j{job}: {{runs-on: l, steps: [{}]}}\n", steps.join(", ")));
    }
    yaml
}

#[test]
fn up_to_256_jobs_are_accepted_and_257_refused() {
    assert_eq!(parse_definition(&jobs_yaml(256, 1)).unwrap().jobs.len(), 256);
    assert_eq!(error_of(&jobs_yaml(257, 1)).to_string(), "field `jobs`: 257 jobs, at most 256 are accepted");
}

#[test]
fn up_to_100_steps_a_job_are_accepted_and_101_refused() {
    assert_eq!(parse_definition(&jobs_yaml(1, 100)).unwrap().jobs[0].steps.len(), 100);
    assert_eq!(
        error_of(&jobs_yaml(1, 101)).to_string(),
        "job `j0`, field `steps`: 101 steps, at most 100 are accepted"
    );
}

#[test]
fn what_would_not_fit_its_item_or_key_is_refused() {
    let named = |name: &str| format!("name: {name}\njobs:\n  a:\n    runs-on: linux\n    steps: [{{run: 'true'}}]\n");
    assert!(parse_definition(&named(&"n".repeat(MAX_WORKFLOW_NAME_LEN))).is_ok());
    assert!(error_of(&named(&"n".repeat(MAX_WORKFLOW_NAME_LEN + 1))).to_string().contains("`name`"));
    // 180 jobs of 100 steps: inside the byte, job and step limits, over the snapshot's.
    let mut yaml = jobs_yaml(180, 100);
    assert!(yaml.len() <= MAX_DEFINITION_BYTES, "{} bytes", yaml.len());
    assert!(error_of(&yaml).to_string().contains("parsed definition"));
    // An env copied into one job past its spec's limit names that job.
    yaml = format!(
        "env:\n  BIG: {}\njobs:\n  a:\n    runs-on: linux\n    steps: [{{run: 'true'}}]\n",
        "v".repeat(MAX_JOB_SPEC_BYTES)
    );
    let err = error_of(&yaml);
    assert_eq!(err.job.as_deref(), Some("a"), "{err}");
}

#[test]
fn definition_error_display_covers_every_location() {
    let both = DefinitionError::in_job("test", Some("needs"), "unknown job `buidl`");
    assert_eq!(both.to_string(), "job `test`, field `needs`: unknown job `buidl`");
    assert_eq!(DefinitionError::in_job("test", None, "m").to_string(), "job `test`: m");
    assert_eq!(DefinitionError::document("m").to_string(), "m");
}

#[test]
fn definition_error_maps_to_a_400_invalid_definition() {
    let api: ApiError = DefinitionError::in_job("t", Some("needs"), "unknown job `x`").into();
    assert_eq!(api.code, ErrorCode::InvalidDefinition);
    assert_eq!(api.status(), http::StatusCode::BAD_REQUEST);
    assert_eq!(api.message, "job `t`, field `needs`: unknown job `x`");
}

#[test]
fn continue_on_error_is_a_boolean_or_one_expression_checked_like_the_others() {
    let job = |value: &str| {
        parse_definition(&format!(
            "jobs:\n  a:\n    runs-on: l\n    steps: [{{run: x}}]\n  b:\n    needs: a\n    runs-on: l\n    continue-on-error: {value}\n    steps: [{{run: x, continue-on-error: {value}}}]\n"
        ))
    };
    let accepted = job("true").unwrap();
    let b = accepted.job("b").unwrap();
    assert_eq!((b.continue_on_error.as_deref(), b.steps[0].continue_on_error.as_deref()), (Some("true"), Some("true")));
    let off = job("false").unwrap();
    assert_eq!(off.job("b").unwrap().continue_on_error, None, "false is the same as leaving it out");
    let expression = job("\"${{ needs.a.result == 'success' }}\"").unwrap();
    assert_eq!(expression.job("b").unwrap().continue_on_error.as_deref(), Some("${{ needs.a.result == 'success' }}"));
    let err = job("maybe").unwrap_err();
    assert_eq!(err.job.as_deref(), Some("b"), "{err}");
    assert!(err.field.as_deref().is_some_and(|f| f.ends_with("continue-on-error")), "{err}");
    let err = job("\"${{ needs.c.outcome }}\"").unwrap_err();
    assert!(err.to_string().contains("`c` is not among this job's needs"), "{err}");
    let err = job("3").unwrap_err();
    assert!(err.message.contains("true, false or one expression"), "{err}");
}

#[test]
fn retry_is_a_count_or_a_policy_and_is_refused_past_its_limits() {
    use crate::workflows::retry::{RetryPolicy, RetryWhen};
    let with = |retry: &str| {
        parse_definition(&format!("jobs:\n  a:\n    runs-on: l\n    retry: {retry}\n    steps: [{{run: x}}]\n"))
    };
    assert_eq!(
        with("2").unwrap().jobs[0].retry,
        Some(RetryPolicy { max: 2, when: RetryWhen::ALL.to_vec(), exit_codes: vec![], backoff_s: 0 })
    );
    assert_eq!(with("0").unwrap().jobs[0].retry, None, "0 is the same as leaving it out");
    assert_eq!(
        with("{max: 3, when: [step_failed, runner_lost], exit-codes: [75, 75, 1]}").unwrap().jobs[0].retry,
        Some(RetryPolicy {
            max: 3,
            when: vec![RetryWhen::RunnerLost, RetryWhen::StepFailed],
            exit_codes: vec![1, 75],
            backoff_s: 0
        })
    );
    assert_eq!(with("{max: 2, backoff: 30}").unwrap().jobs[0].retry.as_ref().map(|p| p.backoff_s), Some(30));
    for (retry, says) in [
        ("11", "from 0 to 10"),
        ("{max: 1, when: [flaky]}", "unknown failure class `flaky`"),
        ("{max: 1, when: [runner_lost], exit-codes: [75]}", "narrows step_failed"),
        ("{when: [runner_lost]}", "required"),
        ("{max: 1, exit-codes: [300]}", "exit codes from 0 to 255"),
        ("{max: 1, backoff: 0}", "seconds from 1 to 3600"),
        ("{max: 1, backoff: 3601}", "seconds from 1 to 3600"),
        ("{max: 1, backoff: 1m}", "seconds from 1 to 3600"),
        ("{max: 1, delay: 5}", "unknown field"),
        ("true", "a number of retries"),
    ] {
        let err = with(retry).unwrap_err();
        assert_eq!(err.job.as_deref(), Some("a"), "{retry}: {err}");
        assert!(err.field.as_deref().is_some_and(|f| f.starts_with("retry")), "{retry}: {err}");
        assert!(err.message.contains(says), "{retry}: {err}");
    }
}

#[test]
fn priority_is_a_bounded_whole_number_or_one_expression() {
    let with = |priority: &str| {
        parse_definition(&format!("jobs:\n  a:\n    runs-on: l\n    priority: {priority}\n    steps: [{{run: x}}]\n"))
    };
    assert_eq!(with("10").unwrap().jobs[0].priority.as_deref(), Some("10"));
    assert_eq!(with("-100").unwrap().jobs[0].priority.as_deref(), Some("-100"));
    assert_eq!(with("0").unwrap().jobs[0].priority, None, "0 is the default");
    assert_eq!(with("\"${{ inputs.urgency }}\"").unwrap().jobs[0].priority.as_deref(), Some("${{ inputs.urgency }}"));
    for refused in ["101", "1.5", "high", "\"${{ env.NOPE }}\""] {
        let err = with(refused).unwrap_err();
        assert_eq!((err.job.as_deref(), err.field.as_deref()), (Some("a"), Some("priority")), "{refused}: {err}");
    }
}

#[test]
fn a_matrix_job_becomes_its_legs_and_a_job_needing_it_needs_them_all() {
    let definition = parse_definition(MATRIX).unwrap();
    let keys: Vec<&str> = definition.jobs.iter().map(|j| j.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "test (x64, stable)",
            "test (x64, beta)",
            "test (x64, nightly)",
            "test (arm64, stable)",
            "test (arm64, beta)",
            "test (x64, 1.70)",
            "report"
        ]
    );
    let arm = definition.job("test (arm64, beta)").unwrap();
    assert_eq!(arm.labels, ["arm64", "linux"], "runs-on takes the leg's values");
    assert_eq!(arm.matrix.as_ref().and_then(|leg| leg.value("rust")), Some("beta"));
    let report = definition.job("report").unwrap();
    assert_eq!(report.needs.len(), 6, "needs every leg: {:?}", report.needs);
    let group = definition.matrix_group("test").unwrap();
    assert_eq!((group.fail_fast, group.max_parallel, group.legs.len()), (true, Some(2), 6));
}

#[test]
fn what_is_not_supported_yet_is_refused_as_such_not_as_a_type_or_a_place() {
    let err = error_of(&with_job_body("runs-on: l\nif: ${{ !failure() }}\nsteps: [{run: x}]"));
    assert!(err.message.contains("!failure() is not supported"), "{err}");
    let err = error_of(&with_job_body("runs-on: l\ntimeout-minutes: ${{ inputs.t }}\nsteps: [{run: x}]"));
    assert_eq!(err.field.as_deref(), Some("timeout-minutes"));
    assert!(err.message.contains("inputs.t is not known when the run is created"), "{err}");
}

/// A matrix decided when its job is due reads what is known then (its
/// needs, inputs, vars, github), and what is written around its
/// expressions is checked now, as any matrix's.
#[test]
fn a_matrix_from_earlier_outputs_reads_only_what_is_known_when_its_job_is_due() {
    let plan =
        "  plan:\n    runs-on: l\n    outputs: {m: \"${{ steps.s.outputs.m }}\"}\n    steps: [{id: s, run: x}]\n";
    let job = |body: &str| {
        let indented: String = body.lines().map(|line| format!("    {line}\n")).collect();
        format!("jobs:\n{plan}  a:\n{indented}")
    };
    let accepted = job("needs: plan\nruns-on: l\nstrategy:\n  matrix:\n    pkg: ${{ fromJSON(needs.plan.outputs.m) }}\n    os: [l]\nsteps: [{run: \"make ${{ matrix.pkg }} ${{ matrix.anything }}\"}]");
    let definition = parse_definition(&accepted).unwrap();
    assert!(definition.job("a").is_some_and(|a| a.runtime_matrix.is_some()));
    for (body, field, why) in [
        (
            "runs-on: l\nstrategy:\n  matrix: ${{ fromJSON(needs.plan.outputs.m) }}\nsteps: [{run: x}]",
            "strategy.matrix",
            "`plan` is not among this job's needs",
        ),
        (
            "needs: plan\nruns-on: l\nstrategy:\n  matrix: ${{ fromJSON(needs.plan.outputs.other) }}\nsteps: [{run: x}]",
            "strategy.matrix",
            "declares no output `other`",
        ),
        (
            "needs: plan\nruns-on: l\nstrategy:\n  matrix:\n    os: ${{ fromJSON(steps.s.outputs.m) }}\nsteps: [{run: x}]",
            "strategy.matrix",
            "steps.s.outputs.m is not known when the matrix is decided",
        ),
        (
            "needs: plan\nruns-on: l\nstrategy:\n  matrix: ${{ fromJSON(needs.plan.outputs.m) }}\n  max-parallel: 0\nsteps: [{run: x}]",
            "strategy.max-parallel",
            "whole number from 1",
        ),
        (
            "needs: plan\nruns-on: ${{ needs.plan.outputs.m }}\nstrategy:\n  matrix: ${{ fromJSON(needs.plan.outputs.m) }}\nsteps: [{run: x}]",
            "runs-on",
            "runs-on reads only matrix.<name>",
        ),
        (
            "needs: plan\nruns-on: l\ntimeout-minutes: ${{ inputs.t }}\nstrategy:\n  matrix: ${{ fromJSON(needs.plan.outputs.m) }}\nsteps: [{run: x}]",
            "timeout-minutes",
            "timeout-minutes reads only matrix.<name>",
        ),
        (
            "needs: plan\nruns-on: l\nstrategy:\n  matrix:\n    os: ${{ fromJSON(needs.plan.outputs.m) }}\n    exclude: {os: x}\nsteps: [{run: x}]",
            "strategy.matrix.exclude",
            "expected a list of mappings",
        ),
    ] {
        let err = error_of(&job(body));
        assert_eq!((err.job.as_deref(), err.field.as_deref()), (Some("a"), Some(field)), "{body}: {err}");
        assert!(err.message.contains(why), "{body}: {err}");
    }
}

#[test]
fn a_legs_runs_on_is_an_expression_over_its_matrix_values() {
    let yaml = "jobs:\n  t:\n    runs-on: ${{ matrix.os || 'linux' }}\n    strategy:\n      matrix:\n        rust: [stable]\n        include: [{rust: beta, os: macos}]\n    steps: [{run: x}]\n";
    let definition = parse_definition(yaml).unwrap();
    let labels: Vec<&[String]> = definition.jobs.iter().map(|job| job.labels.as_slice()).collect();
    assert_eq!(labels, vec![&["linux".to_string()][..], &["macos".to_string()][..]], "GitHub's default idiom");
    let err = error_of(&yaml.replace("matrix.os || 'linux'", "inputs.os"));
    assert_eq!((err.job.as_deref(), err.field.as_deref()), (Some("t"), Some("runs-on")), "{err}");
    assert!(err.message.contains("inputs.os is not known when the run is created"), "{err}");
}

#[test]
fn a_matrix_value_may_be_a_mapping_read_into_by_name() {
    let yaml = "jobs:\n  test:\n    runs-on: linux\n    strategy:\n      matrix:\n        include:\n          - pair: {elixir: '1.15', otp: '25'}\n          - pair: {elixir: '1.17', otp: '27'}\n            lint: lint\n    timeout-minutes: ${{ (matrix.pair.otp == '27' && 20) || 10 }}\n    steps:\n      - run: echo ${{ matrix.pair.elixir }}-${{ matrix.pair['otp'] }}\n";
    let definition = parse_definition(yaml).unwrap();
    let keys: Vec<&str> = definition.jobs.iter().map(|job| job.key.as_str()).collect();
    assert_eq!(keys, ["test (1.15, 25)", "test (1.17, 27, lint)"], "a mapping's values shown, not its JSON");
    let timeouts: Vec<u32> = definition.jobs.iter().map(|job| job.timeout_minutes).collect();
    assert_eq!(timeouts, [10, 20], "read into when the run is created");
    let leg = definition.jobs[1].matrix.as_ref().unwrap();
    assert_eq!(leg.typed_value("pair"), Some(serde_json::json!({"elixir": "1.17", "otp": "27"})));
    assert_eq!(leg.typed_value("lint"), Some(serde_json::json!("lint")), "a scalar stays text");
}

#[test]
fn matrix_mistakes_are_refused_naming_the_job_and_the_field() {
    let with = |strategy: &str, extra: &str| {
        parse_definition(&format!(
            "jobs:\n  t:\n    runs-on: linux\n    strategy: {strategy}\n    steps: [{{run: x}}]\n{extra}"
        ))
    };
    for (strategy, extra, says) in [
        ("{matrix: {}}", "", "at least one dimension"),
        ("{matrix: {os: []}}", "", "1 to 256 values"),
        ("{matrix: {os: [~]}}", "", "a string, number, boolean, mapping or list"),
        ("{matrix: {os: [a], exclude: [{os: a}]}}", "", "every one is excluded"),
        (
            "{matrix: {a: [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17], b: [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}}",
            "",
            "at most 256",
        ),
        ("{matrix: {os: [a]}, max-parallel: 0}", "", "from 1 to 256"),
        ("{matrix: {os: [a]}, fail-fast: maybe}", "", "true or false"),
        ("{matrix: {os: [a]}, parallel: 2}", "", "unknown field"),
        (
            "{matrix: {os: [a]}}",
            "  u:\n    needs: t\n    runs-on: l\n    steps: [{run: '${{ matrix.os }}'}]\n",
            "only a job with `strategy.matrix`",
        ),
    ] {
        let err = with(strategy, extra).unwrap_err();
        assert!(err.to_string().contains(says), "{strategy}: {err}");
    }
    let err = parse_definition("jobs:\n  t:\n    runs-on: linux\n    strategy: {matrix: {os: [a]}}\n    steps: [{run: '${{ matrix.arch }}'}]\n").unwrap_err();
    assert!(err.to_string().contains("no combination of `t` has `arch`"), "{err}");
}

#[test]
fn concurrency_is_a_group_name_or_a_mapping_and_reads_only_what_a_create_knows() {
    use crate::workflows::concurrency::{ConcurrencySpec, MAX_QUEUE};
    let with = |concurrency: &str| {
        parse_definition(&format!("concurrency: {concurrency}\njobs:\n  a:\n    runs-on: l\n    steps: [{{run: x}}]\n"))
    };
    let spec = |group: &str, cancel: Option<&str>, queue: u32| ConcurrencySpec {
        group: group.into(),
        cancel_in_progress: cancel.map(String::from),
        queue,
        limit: 1,
    };
    assert_eq!(with("deploy-prod").unwrap().concurrency, Some(spec("deploy-prod", None, 1)));
    assert_eq!(
        with("{group: 'deploy-${{ inputs.env }}', cancel-in-progress: true, queue: max}").unwrap().concurrency,
        Some(spec("deploy-${{ inputs.env }}", Some("true"), MAX_QUEUE))
    );
    assert_eq!(
        with("{group: g, cancel-in-progress: '${{ inputs.urgent }}', queue: 5}").unwrap().concurrency,
        Some(spec("g", Some("${{ inputs.urgent }}"), 5))
    );
    assert_eq!(with("{group: g, cancel-in-progress: false}").unwrap().concurrency, Some(spec("g", None, 1)));
    let two = with("{group: g, limit: 2}").unwrap().concurrency;
    assert_eq!(two, Some(ConcurrencySpec { limit: 2, ..spec("g", None, 1) }));
    for (bad, field) in [
        ("{cancel-in-progress: true}", "concurrency.group"),
        ("''", "concurrency.group"),
        ("'${{ needs.a.result }}'", "concurrency.group"),
        ("'${{ matrix.os }}'", "concurrency.group"),
        ("{group: g, queue: 0}", "concurrency.queue"),
        ("{group: g, queue: 101}", "concurrency.queue"),
        ("{group: g, cancel-in-progress: sometimes}", "concurrency.cancel-in-progress"),
        ("{group: g, limit: 0}", "concurrency.limit"),
        ("{group: g, limit: 101}", "concurrency.limit"),
    ] {
        let error = with(bad).unwrap_err();
        assert_eq!(error.field.as_deref(), Some(field), "{bad}: {error}");
    }
    let definition = with("'deploy-${{ inputs.env }}'").unwrap();
    assert!(crate::workflows::references::inputs_used(&definition).contains("env"), "a run must give `env`");
}

#[test]
fn a_jobs_tools_are_labels_it_requires_beside_its_runs_on_in_every_leg() {
    let definition = parse_definition(
        "jobs:\n  web:\n    runs-on: linux\n    tools: [docker, Node@20]\n    steps: [{run: x}]\n  e2e:\n    runs-on: ['${{ matrix.os }}']\n    strategy: {matrix: {os: [linux, macos]}}\n    tools: node@20.11\n    steps: [{run: x}]\n",
    )
    .unwrap();
    assert_eq!(definition.job("web").unwrap().labels, ["linux", "tool:docker", "tool:node@20"]);
    for (leg, os) in [("e2e (linux)", "linux"), ("e2e (macos)", "macos")] {
        assert_eq!(definition.job(leg).unwrap().labels, [os, "tool:node@20.11"], "{leg}");
    }
    for (body, field) in [
        ("runs-on: linux\ntools: ['node@>=18']\nsteps: [{run: x}]", "tools"),
        ("runs-on: linux\ntools: {docker: 1}\nsteps: [{run: x}]", "tools"),
        ("approval: {}\ntools: [docker]", "tools"),
    ] {
        let error = parse_definition(&with_job_body(body)).unwrap_err();
        assert_eq!(error.field.as_deref(), Some(field), "{body}: {error}");
    }
}

#[test]
fn a_jobs_concurrency_reads_its_matrix_values_and_key_but_nothing_only_known_later() {
    let with = |concurrency: &str, strategy: &str| {
        parse_definition(&format!(
            "jobs:\n  deploy:\n    runs-on: l\n{strategy}    concurrency: {concurrency}\n    steps: [{{run: x}}]\n"
        ))
    };
    let matrix = "    strategy: {matrix: {env: [staging, prod]}}\n";
    let definition = with("{group: 'deploy-${{ matrix.env }}', queue: max}", matrix).unwrap();
    assert_eq!(definition.jobs.len(), 2, "one group spec a leg");
    assert!(definition.jobs.iter().all(|leg| leg
        .concurrency
        .as_ref()
        .is_some_and(|spec| spec.group == "deploy-${{ matrix.env }}" && spec.queue == 100)));
    let by_input = with("'deploy-${{ inputs.env }}-${{ baton.job }}'", "").unwrap();
    assert!(crate::workflows::references::inputs_used(&by_input).contains("env"), "a run must give `env`");
    for (bad, strategy, field) in [
        ("'${{ matrix.env }}'", "", "concurrency.group"),
        ("'${{ needs.a.result }}'", "", "concurrency.group"),
        ("'${{ secrets.TOKEN }}'", "", "concurrency.group"),
        ("'${{ matrix.region }}'", matrix, "concurrency.group"),
        ("{group: g, cancel-in-progress: '${{ env.X }}'}", "", "concurrency.cancel-in-progress"),
        ("{group: g, queue: 0}", "", "concurrency.queue"),
    ] {
        let error = with(bad, strategy).unwrap_err();
        assert_eq!(error.field.as_deref(), Some(field), "{bad}: {error}");
    }
}

#[test]
fn an_approval_job_is_read_with_its_defaults_and_refused_with_runner_fields_or_bad_settings() {
    let definition = parse_definition(&with_job_body(
        "approval:\n  from: ops\n  inputs:\n    notes: {type: string}\n    go: {type: boolean, default: true, required: true}",
    ))
    .unwrap();
    let approval = definition.jobs[0].approval.as_ref().unwrap();
    assert_eq!((approval.required, approval.from.as_slice()), (1, &["ops".to_string()][..]));
    assert_eq!(approval.timeout_minutes, super::super::approval::DEFAULT_APPROVAL_TIMEOUT_MINUTES);
    assert_eq!(approval.on_timeout, super::super::approval::OnTimeout::Fail);
    assert!(definition.jobs[0].steps.is_empty() && definition.jobs[0].labels.is_empty());
    for (body, field, says) in [
        ("runs-on: linux\napproval: {}", "runs-on", "runs on no runner"),
        ("approval: {}\nsteps: [{run: x}]", "steps", "runs on no runner"),
        ("approval: {required: 0}", "approval.required", "1 to 10"),
        ("approval: {required: 11}", "approval.required", "1 to 10"),
        ("approval: {on-timeout: later}", "approval.on-timeout", "`fail`, `approve` or `skip`"),
        ("approval: {inputs: {c: {type: choice}}}", "approval.inputs.c.options", "1 to 100 options"),
        (
            "approval: {inputs: {c: {type: choice, options: [a], default: b}}}",
            "approval.inputs.c.default",
            "one of its options",
        ),
        ("approval: {inputs: {b: {type: boolean, default: maybe}}}", "approval.inputs.b.default", "the input's type"),
        ("approval: {inputs: {x: {type: date}}}", "approval.inputs.x.type", "`string`, `boolean` or `choice`"),
        ("approval: {inputs: {'bad name': {type: string}}}", "approval.inputs", "invalid output name"),
        ("approval: {timeout-minutes: 0}", "approval.timeout-minutes", "1 to 43200"),
        ("approval: {who: me}", "approval.who", "unknown field"),
    ] {
        let err = error_of(&with_job_body(body));
        assert_eq!(err.field.as_deref(), Some(field), "{body}: {err}");
        assert!(err.message.contains(says), "{body}: {err}");
    }
}

#[test]
fn a_listening_job_is_read_and_event_references_belong_to_its_env_and_run() {
    let definition = parse_definition(&with_job_body(
        "runs-on: linux\nlisten: {events: [review, deploy.done]}\nenv: {S: '${{ event.payload.state }}'}\nsteps: [{run: 'echo ${{ event.ref }}'}]",
    ))
    .unwrap();
    let listen = definition.jobs[0].listen.as_ref().unwrap();
    assert_eq!(listen.events, ["deploy.done", "review"]);
    assert_eq!(listen.timeout_minutes, super::super::listening::DEFAULT_LISTEN_TIMEOUT_MINUTES);
    for (body, field, says) in [
        ("runs-on: linux\nsteps: [{run: 'echo ${{ event.ref }}'}]", "steps[0].run", "only a listening job"),
        (
            "runs-on: linux\nlisten: {events: [r]}\nif: event.name == 'r'\nsteps: [{run: x}]",
            "if",
            "the job's `if:` decides once",
        ),
        ("runs-on: linux\nlisten: {events: [r]}\nretry: 2\nsteps: [{run: x}]", "retry", "no `strategy` or `retry`"),
        ("runs-on: linux\nlisten: {events: []}\nsteps: [{run: x}]", "listen.events", "1 to 20 names"),
        ("runs-on: linux\nlisten: {events: ['a b']}\nsteps: [{run: x}]", "listen.events", "1 to 20 names"),
        ("runs-on: linux\nlisten: {}\nsteps: [{run: x}]", "listen.events", "required"),
        ("runs-on: linux\nlisten: {events: [r], until: never}\nsteps: [{run: x}]", "listen.until", "unknown field"),
    ] {
        let err = error_of(&with_job_body(body));
        assert_eq!(err.field.as_deref(), Some(field), "{body}: {err}");
        assert!(err.message.contains(says), "{body}: {err}");
    }
}

#[test]
fn upload_and_download_steps_run_the_runners_artifact_command_with_quoted_words() {
    let yaml = with_job_body(
        "runs-on: linux\nsteps:\n  - upload: {name: dist, path: [\"target/*.bin\", \"it's here\"]}\n  - download: {name: dist, path: out}\n  - name: mine\n    download: {name: dist}",
    );
    let definition = parse_definition(&yaml).unwrap();
    let steps = &definition.jobs[0].steps;
    assert_eq!(steps[0].run, r#""$BATON_RUNNER" artifact upload --name 'dist' -- 'target/*.bin' 'it'\''s here'"#);
    assert_eq!(steps[0].name.as_deref(), Some("upload dist"));
    assert_eq!(steps[1].run, r#""$BATON_RUNNER" artifact download --name 'dist' --into 'out'"#);
    assert_eq!(steps[2].name.as_deref(), Some("mine"), "a step's own name stays");
    assert!(!steps[2].run.contains("--into"));
}

#[test]
fn an_artifact_step_is_refused_with_a_bad_name_no_path_or_a_run_beside_it() {
    let refused = |steps: &str| error_of(&with_job_body(&format!("runs-on: linux\nsteps:\n{steps}"))).to_string();
    assert!(
        refused("  - upload: {name: ../x, path: a}").contains("letters, digits"),
        "{}",
        refused("  - upload: {name: ../x, path: a}")
    );
    assert!(refused("  - upload: {name: dist}").contains("required: what to upload"));
    assert!(refused("  - run: make\n    upload: {name: d, path: a}")
        .contains("one of `run`, `upload`, `download` and `cache`"));
    assert!(refused("  - download: {path: a}").contains("artifact's name"));
    // A name an expression makes is checked when the step runs.
    let yaml = with_job_body("runs-on: linux\nsteps:\n  - upload: {name: \"dist-${{ inputs.os }}\", path: a}");
    assert!(parse_definition(&yaml).is_ok());
}

#[test]
fn a_cache_step_restores_with_its_prefixes_and_names_what_to_save() {
    let yaml = with_job_body(
        "runs-on: linux\nsteps:\n  - cache: {key: cargo-linux, key-files: [Cargo.lock], restore-keys: [cargo-linux-, cargo-], path: [target, .cargo], scope: main}\n  - run: cargo build",
    );
    let definition = parse_definition(&yaml).unwrap();
    let step = &definition.jobs[0].steps[0];
    assert_eq!(
        step.run,
        r#""$BATON_RUNNER" cache restore --key 'cargo-linux' --key-file 'Cargo.lock' --restore-key 'cargo-linux-' --restore-key 'cargo-' --scope 'main' -- 'target' '.cargo'"#
    );
    assert_eq!(step.name.as_deref(), Some("cache cargo-linux"));
    let refused = |steps: &str| error_of(&with_job_body(&format!("runs-on: linux\nsteps:\n{steps}"))).to_string();
    assert!(refused("  - cache: {key: \"a b\", path: t}").contains("no spaces or commas"));
    assert!(refused("  - cache: {key: k}").contains("required: what to cache"));
    assert!(refused("  - run: make\n    cache: {key: k, path: t}").contains("one of `run`"));
}
