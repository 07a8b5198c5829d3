//! `baton run approve` / `reject` / `event`: a decision on an approval job,
//! an event for a listening job, each named by its key or its id.

use std::process::ExitCode;

use baton_api::runs::{ApprovalInputKind, ApprovalRequest, Decision, EventDelivery, RunView};
use baton_client::operators::Operator;
use uuid::Uuid;

use super::answer::{print_json, CliError};

/// The id of job `job` (its key, or its id) in the run's current attempt.
fn job_of(view: &RunView, job: &str) -> Result<Uuid, CliError> {
    view.attempts
        .iter()
        .find(|a| a.attempt == view.header.current_attempt)
        .and_then(|a| a.jobs.iter().find(|j| j.key == job || j.id.to_string() == job))
        .map(|j| j.id)
        .ok_or_else(|| CliError::Usage(format!("run {} has no job {job} in its current attempt", view.header.id)))
}

/// Approves or rejects approval job `job` (a key of the current attempt, or
/// an id): its inputs typed as the job declares them (a boolean input's
/// `true`/`false` is sent as a boolean).
#[allow(clippy::too_many_arguments)]
pub(super) async fn decide(
    operator: &Operator,
    workspace: &str,
    run: Uuid,
    job: &str,
    decision: Decision,
    inputs: Vec<(String, String)>,
    comment: Option<String>,
    json: bool,
) -> Result<ExitCode, CliError> {
    let view = operator.get_run(workspace, run).await?;
    let id = job_of(&view, job)?;
    let found = view
        .attempts
        .iter()
        .flat_map(|a| a.jobs.iter())
        .find(|j| j.id == id)
        .ok_or_else(|| CliError::Usage(format!("run {run} has no job {job} in its current attempt")))?;
    let declared = found.approval.as_ref().map(|a| a.inputs.clone()).unwrap_or_default();
    let inputs = inputs
        .into_iter()
        .map(|(name, value)| {
            let typed = match declared.get(&name).map(|input| input.kind) {
                Some(ApprovalInputKind::Boolean) => match value.as_str() {
                    "true" => serde_json::Value::Bool(true),
                    "false" => serde_json::Value::Bool(false),
                    _ => return Err(CliError::Usage(format!("--input {name}: true or false"))),
                },
                _ => serde_json::Value::String(value),
            };
            Ok((name, typed))
        })
        .collect::<Result<_, CliError>>()?;
    let request = ApprovalRequest { decision, comment, inputs };
    let answer = operator.decide_approval(workspace, run, found.id, &request).await?;
    if json {
        print_json(&answer);
    } else {
        let approvals = answer
            .approval
            .as_ref()
            .map_or(0, |a| a.decisions.iter().filter(|d| d.decision == Decision::Approve).count());
        let required = answer.approval.as_ref().map_or(0, |a| a.required);
        println!("job {}: {} ({approvals} of {required} approvals)", answer.key, answer.status);
    }
    Ok(ExitCode::SUCCESS)
}

/// Delivers `delivery` to listening job `job` (a key of the current
/// attempt, or an id).
pub(super) async fn deliver(
    operator: &Operator,
    workspace: &str,
    run: Uuid,
    job: &str,
    delivery: &EventDelivery,
    json: bool,
) -> Result<ExitCode, CliError> {
    let view = operator.get_run(workspace, run).await?;
    let job = job_of(&view, job)?;
    let answer = operator.deliver_event(workspace, run, job, delivery).await?;
    if json {
        print_json(&answer);
    } else if answer.delivered {
        println!("delivered");
    } else {
        println!("not delivered (its ref was delivered before, or the job ended)");
    }
    Ok(ExitCode::SUCCESS)
}
