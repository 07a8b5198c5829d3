use super::*;
use crate::workflows::{parse_definition_with, JobCondition, WorkflowDefinition};

/// A called workflow in the shape shared CI workflows have: typed inputs
/// with defaults, a secret, two jobs, an output from the second.
const LINT: &str = r#"
on:
  workflow_call:
    inputs:
      toolchain: {type: string, default: stable}
      strict: {type: boolean, required: true}
      jobs: {type: number}
    secrets:
      token: {required: false}
    outputs:
      report:
        value: ${{ jobs.check.outputs.report }}
defaults:
  run:
    shell: bash
env:
  LINT_LEVEL: ${{ inputs.strict && 'deny' || 'warn' }}
jobs:
  fmt:
    name: Formatting
    runs-on: linux
    steps:
      - run: cargo +${{ inputs.toolchain }} fmt --check
  check:
    needs: fmt
    runs-on: linux
    outputs:
      report: ${{ steps.clippy.outputs.report }}
    steps:
      - id: clippy
        run: cargo clippy -j ${{ inputs.jobs }} && echo "report=ok" >> "$BATON_OUTPUT"
        env:
          TOKEN: ${{ secrets.token }}
"#;

fn called(pairs: &[(&str, &str)]) -> CalledWorkflows {
    let mut called = CalledWorkflows::none();
    for (name, text) in pairs {
        called.insert(*name, *text);
    }
    called
}

fn read(yaml: &str, pairs: &[(&str, &str)]) -> WorkflowDefinition {
    parse_definition_with(yaml, &called(pairs)).unwrap_or_else(|err| panic!("refused: {err}"))
}

fn refused(yaml: &str, pairs: &[(&str, &str)]) -> DefinitionError {
    parse_definition_with(yaml, &called(pairs)).expect_err("a refusal")
}

const CALLER: &str = r#"
defaults:
  run:
    working-directory: app
jobs:
  build:
    runs-on: linux
    outputs: [version]
    steps: [{run: echo version=1 >> "$BATON_OUTPUT"}]
  lint:
    name: Lint
    needs: build
    uses: ./.github/workflows/lint.yml
    with:
      strict: true
      jobs: 4
    secrets:
      token: ${{ secrets.LINT_TOKEN }}
  publish:
    needs: [build, lint]
    runs-on: linux
    if: needs.lint.result == 'success'
    steps:
      - run: echo ${{ needs.lint.outputs.report }} ${{ needs.build.outputs.version }}
"#;

#[test]
fn a_called_workflows_jobs_take_the_calling_jobs_place() {
    let definition = read(CALLER, &[("lint", LINT)]);
    let keys: Vec<&str> = definition.jobs.iter().map(|job| job.key.as_str()).collect();
    assert_eq!(keys, ["build", "lint--fmt", "lint--check", "publish"]);
    let fmt = definition.job("lint--fmt").unwrap();
    assert_eq!(fmt.name.as_deref(), Some("Lint / Formatting"));
    // The first called job waits for what the caller waits for; the next
    // for its own needs, renamed.
    assert_eq!(fmt.needs, ["build"]);
    let check = definition.job("lint--check").unwrap();
    assert_eq!(check.name.as_deref(), Some("Lint / check"));
    assert_eq!(check.needs, ["lint--fmt"]);
    // Who needs the caller needs the whole called workflow.
    let publish = definition.job("publish").unwrap();
    assert_eq!(publish.needs, ["build", "lint--fmt", "lint--check"]);
}

#[test]
fn the_called_jobs_read_the_callers_inputs_and_secrets() {
    let definition = read(CALLER, &[("lint", LINT)]);
    let fmt = definition.job("lint--fmt").unwrap();
    // An input not given is its default; a given one its value, typed.
    assert_eq!(fmt.steps[0].run, "cargo +${{ 'stable' }} fmt --check");
    let check = definition.job("lint--check").unwrap();
    assert_eq!(check.steps[0].run, "cargo clippy -j ${{ 4 }} && echo \"report=ok\" >> \"$BATON_OUTPUT\"");
    assert_eq!(check.steps[0].env["TOKEN"], "${{ secrets.LINT_TOKEN }}");
    // The called workflow's env and defaults are its jobs', not the
    // caller's defaults (GitHub passes a called workflow none of them).
    assert_eq!(check.env["LINT_LEVEL"], "${{ true && 'deny' || 'warn' }}");
    assert_eq!(check.steps[0].shell.as_deref(), Some("bash"));
    assert_eq!(check.steps[0].working_directory, None);
    assert_eq!(definition.job("build").unwrap().steps[0].working_directory.as_deref(), Some("app"));
}

#[test]
fn the_jobs_after_a_call_read_its_outputs_and_result() {
    let definition = read(CALLER, &[("lint", LINT)]);
    let publish = definition.job("publish").unwrap();
    assert_eq!(
        publish.steps[0].run,
        "echo ${{ ((needs.lint--check.outputs.report)) }} ${{ needs.build.outputs.version }}"
    );
    let when = publish.when.as_deref().unwrap();
    assert!(when.contains("needs.lint--fmt.result == 'failure' || needs.lint--check.result == 'failure'"), "{when}");
    assert!(when.ends_with("|| 'success') == 'success'"), "{when}");
}

#[test]
fn a_called_results_expression_gives_githubs_result_of_a_called_workflow() {
    use crate::workflows::expressions::{evaluate, parse, MapScope};
    let keys = ["c--a".to_string(), "c--b".to_string()];
    let cases = [
        (["success", "failure"], "failure"),
        (["cancelled", "success"], "cancelled"),
        (["skipped", "skipped"], "skipped"),
        (["success", "skipped"], "success"),
        (["failure", "cancelled"], "failure"),
    ];
    for (results, expected) in cases {
        let scope = MapScope(
            keys.iter().zip(results).map(|(key, result)| (format!("needs.{key}.result"), result.to_string())).collect(),
        );
        let expr = parse(&called_result(&keys, "result")).unwrap();
        assert_eq!(evaluate(&expr, &scope).unwrap().render(), expected, "{results:?}");
    }
}

#[test]
fn the_callers_if_holds_for_every_called_job() {
    let caller = "jobs:\n  lint:\n    if: github.event_name == 'push'\n    uses: ./.github/workflows/lint.yml\n    with: {strict: false}\n";
    let definition = read(caller, &[("lint", LINT)]);
    for job in &definition.jobs {
        assert_eq!(job.when.as_deref(), Some("github.event_name == 'push'"), "{}", job.key);
    }
    // With one of its own, both must hold; its status function stays first.
    let own_if = LINT.replace("    needs: fmt\n", "    needs: fmt\n    if: always() && inputs.strict\n");
    let definition = read(caller, &[("lint", &own_if)]);
    let check = definition.job("lint--check").unwrap();
    assert_eq!(check.condition, JobCondition::Always);
    assert_eq!(check.when.as_deref(), Some("(always() && false) && (github.event_name == 'push')"));
    // A status function on the caller starts the called workflow's first
    // jobs whatever its needs did.
    let always = "jobs:\n  a: {runs-on: l, steps: [{run: x}]}\n  lint:\n    needs: a\n    if: always()\n    uses: ./.github/workflows/lint.yml\n    with: {strict: true}\n";
    let definition = read(always, &[("lint", LINT)]);
    assert_eq!(definition.job("lint--fmt").unwrap().condition, JobCondition::Always);
    assert_eq!(definition.job("lint--check").unwrap().condition, JobCondition::default());
}

#[test]
fn what_a_call_says_wrongly_is_refused_naming_the_calling_jobs_field() {
    let call = |with: &str| format!("jobs:\n  lint:\n    uses: ./.github/workflows/lint.yml\n{with}");
    let cases = [
        (call("    with: {strict: true, colour: red}\n"), "with.colour", "declares no input `colour`"),
        (call(""), "with", "requires the input `strict`"),
        (call("    with: {strict: maybe}\n"), "with.strict", "expected a boolean"),
        (call("    with: {strict: true, jobs: many}\n"), "with.jobs", "expected a number"),
        (call("    with: {strict: true}\n    secrets: {other: x}\n"), "secrets.other", "declares no secret"),
        (call("    with: {strict: true}\n    secrets: {token: plain}\n"), "secrets.token", "${{ secrets.<NAME> }}"),
        (
            call("    with: {strict: true}\n    strategy: {matrix: {a: [1]}, max-parallel: 1}\n"),
            "strategy.max-parallel",
            "not applied",
        ),
        (
            call("    with: {strict: true}\n    strategy: {matrix: {a: [1]}, fail-fast: true}\n"),
            "strategy.fail-fast",
            "not applied",
        ),
        (call("    with: {strict: true}\n    runs-on: linux\n"), "runs-on", "takes only"),
    ];
    for (yaml, field, message) in cases {
        let err = refused(&yaml, &[("lint", LINT)]);
        assert_eq!((err.job.as_deref(), err.field.as_deref()), (Some("lint"), Some(field)), "{err}");
        assert!(err.message.contains(message), "{err}");
    }
}

#[test]
fn a_call_names_a_pipeline_of_the_workspace_that_can_be_called() {
    let call = |uses: &str| format!("jobs:\n  lint:\n    uses: {uses}\n");
    let err = refused(&call("./.github/workflows/lint.yml"), &[]);
    assert!(err.message.contains("no pipeline `lint` to call"), "{err}");
    let err = refused(&call("octo-org/shared/.github/workflows/lint.yml@v2"), &[("lint", LINT)]);
    assert!(err.message.contains("does not fetch workflows from other repositories"), "{err}");
    let err = refused(&call("actions/checkout@v4"), &[]);
    assert!(err.message.contains("an action is a step's `uses:`"), "{err}");
    let not_callable = "on: push\njobs:\n  a: {runs-on: l, steps: [{run: x}]}\n";
    let err = refused(&call("./.github/workflows/lint.yaml"), &[("lint", not_callable)]);
    assert!(err.message.contains("its `on:` has no `workflow_call`"), "{err}");
    // An error inside the called workflow names it.
    let broken = "on: workflow_call\njobs:\n  a: {runs-on: l, steps: [{run: x}], colour: red}\n";
    let err = refused(&call("./.github/workflows/lint.yml"), &[("lint", broken)]);
    assert_eq!((err.job.as_deref(), err.field.as_deref()), (Some("lint--a"), Some("colour")), "{err}");
}

#[test]
fn calls_nest_four_levels_deep_and_never_in_a_circle() {
    let calling = |name: &str| format!("on: workflow_call\njobs:\n  go:\n    uses: ./.github/workflows/{name}.yml\n");
    let leaf = "on: workflow_call\njobs:\n  leaf: {runs-on: l, steps: [{run: x}]}\n";
    let (two, three) = (calling("three"), calling("leaf"));
    let top = "jobs:\n  start:\n    uses: ./.github/workflows/two.yml\n";
    let definition = read(top, &[("two", &two), ("three", &three), ("leaf", leaf)]);
    assert_eq!(definition.jobs[0].key, "start--go--go--leaf");
    assert_eq!(definition.jobs[0].name.as_deref(), Some("start / go / go / leaf"));
    // One level more is refused.
    let (two, three, four) = (calling("three"), calling("four"), calling("leaf"));
    let err = refused(top, &[("two", &two), ("three", &three), ("four", &four), ("leaf", leaf)]);
    assert!(err.message.contains("nest at most 4 levels"), "{err}");
    let (a, b) = (calling("b"), calling("a"));
    let err = refused("jobs:\n  x:\n    uses: ./.github/workflows/a.yml\n", &[("a", &a), ("b", &b)]);
    assert!(err.message.contains("calls itself: a → b → a"), "{err}");
}

#[test]
fn missing_calls_lists_what_to_fetch_through_the_calls_already_fetched() {
    let caller = "jobs:\n  x:\n    uses: ./.github/workflows/a.yml\n  y:\n    uses: ./.github/workflows/b.yml\n";
    assert_eq!(missing_calls(caller, &CalledWorkflows::none()), ["a", "b"]);
    let a = "on: workflow_call\njobs:\n  z:\n    uses: ./.github/workflows/c.yml\n";
    assert_eq!(missing_calls(caller, &called(&[("a", a)])), ["b", "c"]);
    assert!(missing_calls("jobs:\n  a: {runs-on: l, steps: [{run: x}]}\n", &CalledWorkflows::none()).is_empty());
}

#[test]
fn a_secret_not_passed_reads_empty_and_inherit_passes_them_all() {
    let caller = |secrets: &str| {
        format!("jobs:\n  lint:\n    uses: ./.github/workflows/lint.yml\n    with: {{strict: true}}\n{secrets}")
    };
    let definition = read(&caller(""), &[("lint", LINT)]);
    assert_eq!(definition.job("lint--check").unwrap().steps[0].env["TOKEN"], "${{ '' }}");
    let definition = read(&caller("    secrets: inherit\n"), &[("lint", LINT)]);
    assert_eq!(definition.job("lint--check").unwrap().steps[0].env["TOKEN"], "${{ secrets.token }}");
}

#[test]
fn a_called_workflows_matrix_may_come_from_a_list_its_caller_gives() {
    let test = "on:\n  workflow_call:\n    inputs:\n      versions: {type: string, required: true}\njobs:\n  \
                pytest:\n    strategy:\n      matrix:\n        python: ${{ fromJSON(inputs.versions) }}\n    \
                runs-on: linux\n    steps: [{run: 'pytest --python ${{ matrix.python }}'}]\n";
    let caller =
        "jobs:\n  test:\n    uses: ./.github/workflows/test.yml\n    with:\n      versions: '[\"3.11\", \"3.12\"]'\n";
    let definition = read(caller, &[("test", test)]);
    let legs: Vec<&str> = definition.jobs.iter().map(|job| job.key.as_str()).collect();
    assert_eq!(legs.len(), 2, "{legs:?}");
    let values: Vec<&str> = definition.jobs.iter().filter_map(|job| job.matrix.as_ref()?.value("python")).collect();
    assert_eq!(values, ["3.11", "3.12"]);
    // A list known only when the run goes (an earlier job's output): the
    // called job's matrix is decided when it is due, from that output.
    let later = "jobs:\n  plan: {runs-on: l, outputs: [list], steps: [{run: x}]}\n  test:\n    needs: plan\n    \
                 uses: ./.github/workflows/test.yml\n    with:\n      versions: ${{ needs.plan.outputs.list }}\n";
    let definition = read(later, &[("test", test)]);
    let pytest = definition.job("test--pytest").expect("the called job");
    assert_eq!(pytest.needs, ["plan"]);
    let runtime = pytest.runtime_matrix.as_ref().expect("a matrix decided when the job is due");
    assert_eq!(runtime.expressions(), ["${{ fromJSON((needs.plan.outputs.list)) }}"]);
}

/// A called workflow that tests one Python version and reports it.
const PYTEST: &str =
    "on:\n  workflow_call:\n    inputs:\n      python: {type: string, required: true}\n    outputs:\n      \
                      report: {value: '${{ jobs.pytest.outputs.report }}'}\njobs:\n  pytest:\n    runs-on: linux\n    \
                      outputs: [report]\n    steps: [{run: 'pytest --python ${{ inputs.python }}'}]\n";

#[test]
fn a_matrix_of_calls_is_one_call_a_combination_each_reading_its_values() {
    let caller = "jobs:\n  test:\n    strategy:\n      fail-fast: false\n      matrix:\n        python: ['3.11', '3.12']\n    \
                  uses: ./.github/workflows/pytest.yml\n    with:\n      python: ${{ matrix.python }}\n  report:\n    \
                  needs: test\n    runs-on: linux\n    env: {R: '${{ needs.test.result }}', O: '${{ needs.test.outputs.report }}'}\n    \
                  steps: [{run: x}]\n";
    let definition = read(caller, &[("pytest", PYTEST)]);
    let keys: Vec<&str> = definition.jobs.iter().map(|job| job.key.as_str()).collect();
    assert_eq!(keys, ["test-1--pytest", "test-2--pytest", "report"]);
    for (key, python) in [("test-1--pytest", "3.11"), ("test-2--pytest", "3.12")] {
        let job = definition.job(key).unwrap();
        assert_eq!(job.name.as_deref(), Some(format!("test ({python}) / pytest").as_str()));
        assert!(job.steps[0].run.contains(&format!("'{python}'")), "{}", job.steps[0].run);
    }
    // Who needs the matrix needs every call's jobs; its result is theirs
    // together, an output the last call's that set it.
    let report = definition.job("report").unwrap();
    assert_eq!(report.needs, ["test-1--pytest", "test-2--pytest"]);
    assert!(report.env["R"].contains("needs.test-1--pytest.result == 'failure' || needs.test-2--pytest.result"));
    let output = &report.env["O"];
    let (last, first) = (output.find("test-2--pytest"), output.find("test-1--pytest"));
    assert!(last.is_some() && first.is_some() && last < first, "{output}");
}

#[test]
fn a_matrix_of_calls_is_known_when_the_run_is_created() {
    let caller = "jobs:\n  plan: {runs-on: l, outputs: [list], steps: [{run: x}]}\n  test:\n    needs: plan\n    strategy:\n      \
                  matrix:\n        python: ${{ fromJSON(needs.plan.outputs.list) }}\n    uses: ./.github/workflows/pytest.yml\n    \
                  with:\n      python: ${{ matrix.python }}\n";
    let err = refused(caller, &[("pytest", PYTEST)]);
    assert_eq!((err.job.as_deref(), err.field.as_deref()), (Some("test"), Some("strategy.matrix")), "{err}");
    assert!(err.message.contains("expanded when the run is created"), "{err}");
    // Values from include, read into (`matrix.target.os`), and the leg's place.
    let caller = "jobs:\n  build:\n    name: Build ${{ matrix.target.os }}\n    strategy:\n      matrix:\n        include:\n          \
                  - target: {os: linux}\n          - target: {os: macos}\n    uses: ./.github/workflows/pytest.yml\n    \
                  with:\n      python: ${{ matrix.target.os }}-${{ strategy.job-index }}\n";
    let definition = read(caller, &[("pytest", PYTEST)]);
    let second = definition.job("build-2--pytest").unwrap();
    assert_eq!(second.name.as_deref(), Some("Build macos / pytest"), "a name that reads the matrix is its own");
    assert!(second.steps[0].run.contains("macos") && second.steps[0].run.contains('1'), "{}", second.steps[0].run);
}
