use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use uuid::Uuid;

use super::*;
use crate::workflows::definition::MAX_JOB_SPEC_BYTES;
use crate::workflows::parse_definition;
use crate::workflows::references::NeedState;
use crate::workflows::status::JobStatus;

const MINUTE: Duration = Duration::from_secs(60);

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
    let scope = JobScope {
        run_id: Uuid::now_v7(),
        attempt: 1,
        workspace_id: "ws",
        job: "b",
        matrix: None,
        env: BTreeMap::new(),
        inputs: None,
        event: None,
        needs: HashMap::from([(
            "a".to_string(),
            NeedState {
                status: JobStatus::Succeeded,
                soft_failed: false,
                outputs: Some(std::borrow::Cow::Borrowed(&outputs)),
            },
        )]),
    };
    let job = definition.job("b").unwrap();
    let spec = job_spec(&definition, job, Uuid::now_v7(), MINUTE, Some(&scope));
    assert_eq!(spec.env["ONE"], big);
    assert_eq!(spec.env["TWO"], big);
    assert!(spec.steps[0].run.contains("not expanded"), "{}", &spec.steps[0].run[..80]);
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
    let scope = JobScope {
        run_id: Uuid::now_v7(),
        attempt: 1,
        workspace_id: "ws",
        job: "b",
        matrix: None,
        env: BTreeMap::new(),
        inputs: None,
        event: None,
        needs: HashMap::from([(
            "a".to_string(),
            NeedState {
                status: JobStatus::Succeeded,
                soft_failed: false,
                outputs: Some(std::borrow::Cow::Borrowed(&outputs)),
            },
        )]),
    };
    let job = definition.job("b").unwrap();
    let spec = job_spec(&definition, job, Uuid::now_v7(), MINUTE, Some(&scope));
    let step = &spec.steps[0];
    assert_eq!(step.uses.as_deref(), Some("acme/setup@v2"));
    assert!(step.run.contains("too old to run actions") && step.run.ends_with("exit 1"), "{}", step.run);
    let with: Vec<(&str, &str)> = step.with.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(with, [("fast", "true"), ("flavour", "sweet"), ("retries", "3"), ("version", "1.2.3")]);
    // A shell step's spec carries no action fields: older runners read it as before.
    let shell = serde_json::to_value(job_spec(&definition, definition.job("a").unwrap(), Uuid::now_v7(), MINUTE, None))
        .unwrap();
    assert!(shell["steps"][0].get("uses").is_none() && shell["steps"][0].get("with").is_none(), "{shell}");
}
