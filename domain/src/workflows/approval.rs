//! Approvals (behaviour.md §16): a job that waits for people instead of a
//! runner. Pure decisions over plain types: who may decide, what an
//! approval's inputs are worth, when the job is approved, rejected or timed
//! out. The attempt applies them (`AttemptState::decide_approval`), the
//! approval route and the orchestrator's timeouts call it.
//!
//! Better than the anchors: N of M (GitHub counts one reviewer), named
//! tokens and groups, the run's creator never counts (GitHub lets a
//! reviewer who pushed approve unless told not to), typed inputs that
//! become outputs (Buildkite's block fields, without their lack of a
//! timeout), and an explicit `on-timeout`.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use baton_api::runs::{ApprovalDecision, ApprovalInput, ApprovalInputKind, Decision, OnTimeout};

/// The most approvals a job may require.
pub const MAX_REQUIRED: u32 = 10;
/// The most names and groups `from` may list.
pub const MAX_APPROVERS: usize = 20;
/// The most inputs an approval may declare.
pub const MAX_INPUTS: usize = 20;
/// The longest string input, and the longest comment, in bytes.
pub const MAX_INPUT_BYTES: usize = 4096;
pub const MAX_COMMENT_BYTES: usize = 1024;
/// How long an approval waits when it sets no `timeout-minutes`: a day.
pub const DEFAULT_APPROVAL_TIMEOUT_MINUTES: u32 = 24 * 60;

/// A job's `approval:` as validated at create time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalSpec {
    /// How many distinct approvers it takes.
    pub required: u32,
    /// Token names or groups whose approvals count; empty: any operator
    /// token of the workspace (the run's creator excepted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<String>,
    /// Typed fields an approver fills; they become the job's outputs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<String, ApprovalInput>,
    pub timeout_minutes: u32,
    pub on_timeout: OnTimeout,
}

/// Who is deciding: an operator token's name and groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approver {
    pub name: String,
    pub groups: Vec<String>,
}

/// Why a decision is refused; nothing is recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The run's creator (403 `self-approval`).
    SelfApproval,
    /// Neither the token's name nor one of its groups is in `from` (403).
    NotAnApprover,
    /// An input is unknown, of the wrong type or not one of its options,
    /// or a required one is missing when the job would be approved (400).
    InvalidInputs(String),
}

/// Where a job's approval stands after a decision.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Recorded; more approvals are needed.
    Waiting { approvals: u32 },
    /// Enough approvals: the job succeeds with these outputs.
    Approved { outputs: BTreeMap<String, serde_json::Value> },
    /// A rejection: the job fails (`rejected`).
    Rejected,
}

/// Whether `approver` may decide on a job of `spec` in a run `creator`
/// created (the creator's token name; `None` when unknown).
pub fn may_decide(spec: &ApprovalSpec, approver: &Approver, creator: Option<&str>) -> Result<(), Refusal> {
    if creator == Some(approver.name.as_str()) {
        return Err(Refusal::SelfApproval);
    }
    let listed = spec.from.is_empty()
        || spec.from.iter().any(|who| *who == approver.name || approver.groups.iter().any(|group| group == who));
    if listed {
        Ok(())
    } else {
        Err(Refusal::NotAnApprover)
    }
}

/// Checks the inputs one decision gives against the declared ones: each
/// known, of its type, a choice among its options.
pub fn check_inputs(
    declared: &BTreeMap<String, ApprovalInput>,
    given: &BTreeMap<String, serde_json::Value>,
) -> Result<(), Refusal> {
    for (name, value) in given {
        let Some(input) = declared.get(name) else {
            let known: Vec<&str> = declared.keys().map(String::as_str).collect();
            return Err(Refusal::InvalidInputs(format!(
                "inputs.{name}: not an input of this approval ({})",
                known.join(", ")
            )));
        };
        let fits = match (input.kind, value) {
            (ApprovalInputKind::Boolean, serde_json::Value::Bool(_)) => true,
            (ApprovalInputKind::String, serde_json::Value::String(text)) => text.len() <= MAX_INPUT_BYTES,
            (ApprovalInputKind::Choice, serde_json::Value::String(text)) => input.options.contains(text),
            _ => false,
        };
        if !fits {
            let expected = match input.kind {
                ApprovalInputKind::Boolean => "true or false".to_string(),
                ApprovalInputKind::String => format!("a string of at most {MAX_INPUT_BYTES} bytes"),
                ApprovalInputKind::Choice => format!("one of {}", input.options.join(", ")),
            };
            return Err(Refusal::InvalidInputs(format!("inputs.{name}: expected {expected}")));
        }
    }
    Ok(())
}

/// The outputs an approval hands on: each input as the latest approval
/// that gave it set it, else its default. `Err` names a required input
/// nobody gave.
pub fn outputs_of(
    declared: &BTreeMap<String, ApprovalInput>,
    approvals: &[&ApprovalDecision],
) -> Result<BTreeMap<String, serde_json::Value>, String> {
    let mut outputs = BTreeMap::new();
    for (name, input) in declared {
        let given = approvals.iter().rev().find_map(|decision| decision.inputs.get(name));
        match given.or(input.default.as_ref()) {
            Some(value) => {
                outputs.insert(name.clone(), value.clone());
            }
            None if input.required => return Err(format!("inputs.{name} is required")),
            None => {}
        }
    }
    Ok(outputs)
}

/// Applies `decision` to the decisions so far. An approver counts once: a
/// repeat of their decision changes nothing (`None`: nothing to record),
/// whatever it says. `Err` refuses it (inputs).
pub fn decide(
    spec: &ApprovalSpec,
    so_far: &[ApprovalDecision],
    decision: &ApprovalDecision,
) -> Result<Option<Verdict>, Refusal> {
    if so_far.iter().any(|earlier| earlier.by == decision.by) {
        return Ok(None);
    }
    check_inputs(&spec.inputs, &decision.inputs)?;
    if decision.decision == Decision::Reject {
        return Ok(Some(Verdict::Rejected));
    }
    let approvals: Vec<&ApprovalDecision> =
        so_far.iter().chain(std::iter::once(decision)).filter(|d| d.decision == Decision::Approve).collect();
    let count = approvals.len() as u32;
    if count < spec.required {
        return Ok(Some(Verdict::Waiting { approvals: count }));
    }
    let outputs = outputs_of(&spec.inputs, &approvals).map_err(Refusal::InvalidInputs)?;
    Ok(Some(Verdict::Approved { outputs }))
}

/// What the approval's timeout does, by its `on-timeout`.
#[derive(Debug, Clone, PartialEq)]
pub enum TimedOut {
    /// `fail`: the job fails `timed_out`.
    Fail,
    /// `approve`: the job succeeds with the inputs' defaults and what the
    /// approvals so far gave (a required input nobody gave fails it).
    Approve { outputs: BTreeMap<String, serde_json::Value> },
    /// `skip`: the job is skipped, as a false `if:` would (its dependants
    /// are skipped unless they run `always()`).
    Skip,
}

pub fn on_timeout(spec: &ApprovalSpec, so_far: &[ApprovalDecision]) -> TimedOut {
    match spec.on_timeout {
        OnTimeout::Fail => TimedOut::Fail,
        OnTimeout::Skip => TimedOut::Skip,
        OnTimeout::Approve => {
            let approvals: Vec<&ApprovalDecision> = so_far.iter().filter(|d| d.decision == Decision::Approve).collect();
            match outputs_of(&spec.inputs, &approvals) {
                Ok(outputs) => TimedOut::Approve { outputs },
                Err(_) => TimedOut::Fail,
            }
        }
    }
}

/// A decision as recorded: who, what, when, with what.
pub fn recorded(
    approver: &Approver,
    decision: Decision,
    comment: Option<String>,
    inputs: BTreeMap<String, serde_json::Value>,
    at: DateTime<Utc>,
) -> ApprovalDecision {
    ApprovalDecision { by: approver.name.clone(), decision, comment, inputs, at }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(required: u32, from: &[&str]) -> ApprovalSpec {
        let mut inputs = BTreeMap::new();
        inputs.insert(
            "channel".to_string(),
            ApprovalInput {
                kind: ApprovalInputKind::Choice,
                options: vec!["stable".into(), "beta".into()],
                required: false,
                default: Some(json!("beta")),
                description: None,
            },
        );
        inputs.insert(
            "dry_run".to_string(),
            ApprovalInput {
                kind: ApprovalInputKind::Boolean,
                options: vec![],
                required: true,
                default: None,
                description: None,
            },
        );
        ApprovalSpec {
            required,
            from: from.iter().map(|s| s.to_string()).collect(),
            inputs,
            timeout_minutes: 60,
            on_timeout: OnTimeout::Fail,
        }
    }

    fn approver(name: &str, groups: &[&str]) -> Approver {
        Approver { name: name.into(), groups: groups.iter().map(|s| s.to_string()).collect() }
    }

    fn by(name: &str, decision: Decision, inputs: serde_json::Value) -> ApprovalDecision {
        let inputs = serde_json::from_value(inputs).unwrap();
        recorded(&approver(name, &[]), decision, None, inputs, Utc::now())
    }

    #[test]
    fn the_creator_never_counts_and_only_listed_names_or_groups_do() {
        let spec = spec(2, &["alice", "release-managers"]);
        assert_eq!(may_decide(&spec, &approver("alice", &[]), Some("alice")), Err(Refusal::SelfApproval));
        assert_eq!(may_decide(&spec, &approver("alice", &[]), Some("bob")), Ok(()));
        assert_eq!(may_decide(&spec, &approver("carol", &["release-managers"]), None), Ok(()));
        assert_eq!(may_decide(&spec, &approver("mallory", &["ops"]), None), Err(Refusal::NotAnApprover));
        let anyone = ApprovalSpec { from: vec![], ..spec };
        assert_eq!(may_decide(&anyone, &approver("mallory", &[]), Some("bob")), Ok(()));
        assert_eq!(may_decide(&anyone, &approver("bob", &[]), Some("bob")), Err(Refusal::SelfApproval));
    }

    #[test]
    fn two_of_three_approve_once_each_with_inputs_becoming_outputs() {
        let spec = spec(2, &[]);
        let first = by("alice", Decision::Approve, json!({"dry_run": true}));
        assert_eq!(decide(&spec, &[], &first), Ok(Some(Verdict::Waiting { approvals: 1 })));
        // Alice again, even rejecting: she counted already.
        let again = by("alice", Decision::Reject, json!({}));
        assert_eq!(decide(&spec, std::slice::from_ref(&first), &again), Ok(None));
        let second = by("bob", Decision::Approve, json!({"channel": "stable", "dry_run": false}));
        let verdict = decide(&spec, std::slice::from_ref(&first), &second).unwrap().unwrap();
        assert_eq!(
            verdict,
            Verdict::Approved {
                outputs: serde_json::from_value(json!({"channel": "stable", "dry_run": false})).unwrap()
            }
        );
    }

    #[test]
    fn a_rejection_ends_it_and_bad_inputs_are_refused_naming_the_input() {
        let spec = spec(2, &[]);
        assert_eq!(decide(&spec, &[], &by("bob", Decision::Reject, json!({}))), Ok(Some(Verdict::Rejected)));
        for (inputs, named) in [
            (json!({"channel": "nightly"}), "inputs.channel"),
            (json!({"dry_run": "yes"}), "inputs.dry_run"),
            (json!({"colour": "red"}), "inputs.colour"),
        ] {
            match decide(&spec, &[], &by("bob", Decision::Approve, inputs)) {
                Err(Refusal::InvalidInputs(message)) => assert!(message.contains(named), "{message}"),
                other => panic!("{other:?}"),
            }
        }
        // The approval that would complete it lacks a required input.
        let one = spec_with_required(1);
        match decide(&one, &[], &by("bob", Decision::Approve, json!({}))) {
            Err(Refusal::InvalidInputs(message)) => assert!(message.contains("inputs.dry_run is required")),
            other => panic!("{other:?}"),
        }
    }

    fn spec_with_required(required: u32) -> ApprovalSpec {
        spec(required, &[])
    }

    #[test]
    fn a_timeout_fails_approves_with_defaults_or_skips() {
        let mut spec = spec(2, &[]);
        assert_eq!(on_timeout(&spec, &[]), TimedOut::Fail);
        spec.on_timeout = OnTimeout::Skip;
        assert_eq!(on_timeout(&spec, &[]), TimedOut::Skip);
        spec.on_timeout = OnTimeout::Approve;
        // A required input nobody gave cannot be made up: it fails.
        assert_eq!(on_timeout(&spec, &[]), TimedOut::Fail);
        let so_far = [by("alice", Decision::Approve, json!({"dry_run": true}))];
        let expected = serde_json::from_value(json!({"channel": "beta", "dry_run": true})).unwrap();
        assert_eq!(on_timeout(&spec, &so_far), TimedOut::Approve { outputs: expected });
    }
}
