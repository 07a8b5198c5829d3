//! The run view and run summaries of the operator API (api.md "Run view"),
//! built from the stored states. Defined once here so the functions and
//! clients share the very types; fields may be added, never removed.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::attempt::{step_id, AttemptState, RunState};
use super::definition::WorkflowDefinition;
use super::rerun::RerunMode;
use super::status::{AttemptStatus, ExecutionStatus, JobStatus, RunStatus, StatusReason};
use crate::facts::{StepResult, StepStatus};

/// `POST /v1/workspaces/{ws}/runs`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CreateRunRequest {
    pub definition: String,
    #[serde(default)]
    pub inputs: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// `POST …/runs/{run_id}/rerun`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RerunRequest {
    pub mode: RerunMode,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunView {
    pub id: Uuid,
    pub workspace_id: String,
    pub name: String,
    pub number: u64,
    pub status: RunStatus,
    pub current_attempt: u32,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// The `inputs` the run was created with.
    #[serde(default)]
    pub inputs: Option<serde_json::Value>,
    pub attempts: Vec<AttemptView>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AttemptView {
    pub attempt: u32,
    pub status: AttemptStatus,
    pub status_reason: Option<StatusReason>,
    pub rerun_mode: Option<RerunMode>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub jobs: Vec<JobView>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobView {
    pub id: Uuid,
    pub key: String,
    pub status: JobStatus,
    pub status_reason: Option<StatusReason>,
    pub labels: Vec<String>,
    pub needs: Vec<String>,
    pub carried_over: bool,
    #[serde(default)]
    pub outputs: BTreeMap<String, serde_json::Value>,
    pub executions: Vec<ExecutionView>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ExecutionView {
    pub id: Uuid,
    pub status: ExecutionStatus,
    pub status_reason: Option<StatusReason>,
    pub queued_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub runner_session_id: Option<Uuid>,
    pub steps: Vec<StepView>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepView {
    pub id: Uuid,
    pub name: Option<String>,
    pub status: StepStatus,
    pub exit_code: Option<i32>,
}

/// One item of `GET …/runs`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunSummary {
    pub id: Uuid,
    pub workspace_id: String,
    pub name: String,
    pub number: u64,
    pub status: RunStatus,
    pub current_attempt: u32,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// `GET …/runs`: newest first.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunList {
    pub items: Vec<RunSummary>,
    pub next_cursor: Option<String>,
}

impl From<&RunState> for RunSummary {
    fn from(run: &RunState) -> Self {
        Self {
            id: run.id,
            workspace_id: run.workspace_id.clone(),
            name: run.name.clone(),
            number: run.number,
            status: run.status,
            current_attempt: run.current_attempt,
            created_at: run.created_at,
            started_at: run.started_at,
            finished_at: run.finished_at,
        }
    }
}

/// What a runner reported for a finished execution.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExecutionResult {
    pub steps: Vec<StepResult>,
    pub outputs: BTreeMap<String, serde_json::Value>,
}

/// Builds the run view. `definitions` holds the snapshot of every attempt
/// (by the attempt that froze it), `results` what runners reported for
/// finished executions (by execution id).
pub fn build_run_view(
    run: &RunState,
    attempts: &[AttemptState],
    definitions: &BTreeMap<u32, WorkflowDefinition>,
    results: &HashMap<Uuid, ExecutionResult>,
) -> RunView {
    let mut attempts: Vec<&AttemptState> = attempts.iter().collect();
    attempts.sort_by_key(|a| a.attempt);
    RunView {
        id: run.id,
        workspace_id: run.workspace_id.clone(),
        name: run.name.clone(),
        number: run.number,
        status: run.status,
        current_attempt: run.current_attempt,
        created_at: run.created_at,
        started_at: run.started_at,
        finished_at: run.finished_at,
        inputs: run.inputs.as_deref().and_then(|raw| serde_json::from_str(raw).ok()),
        attempts: attempts
            .into_iter()
            .map(|attempt| attempt_view(attempt, definitions.get(&attempt.snapshot_attempt), results))
            .collect(),
    }
}

fn attempt_view(
    attempt: &AttemptState,
    definition: Option<&WorkflowDefinition>,
    results: &HashMap<Uuid, ExecutionResult>,
) -> AttemptView {
    AttemptView {
        attempt: attempt.attempt,
        status: attempt.status,
        status_reason: attempt.reason,
        rerun_mode: attempt.rerun_mode,
        started_at: attempt.started_at,
        finished_at: attempt.finished_at,
        jobs: attempt
            .jobs
            .iter()
            .map(|job| {
                let defined = definition.and_then(|d| d.job(&job.key));
                JobView {
                    id: job.id,
                    key: job.key.clone(),
                    status: job.status,
                    status_reason: job.reason,
                    labels: defined.map(|d| d.labels.clone()).unwrap_or_default(),
                    needs: defined.map(|d| d.needs.clone()).unwrap_or_default(),
                    carried_over: job.carried_over,
                    outputs: job
                        .carried_from
                        .or(job.execution.as_ref().map(|e| e.id))
                        .and_then(|id| results.get(&id))
                        .map(|result| result.outputs.clone())
                        .unwrap_or_default(),
                    executions: job
                        .execution
                        .iter()
                        .map(|execution| {
                            let reported = results.get(&execution.id).map(|result| &result.steps);
                            ExecutionView {
                                id: execution.id,
                                status: execution.status,
                                status_reason: execution.reason,
                                queued_at: execution.queued_at,
                                started_at: execution.started_at,
                                finished_at: execution.finished_at,
                                runner_session_id: execution.runner_session_id,
                                steps: defined
                                    .map(|d| {
                                        d.steps
                                            .iter()
                                            .enumerate()
                                            .map(|(index, step)| {
                                                let id = step_id(execution.id, index);
                                                let result =
                                                    reported.and_then(|r| r.iter().find(|result| result.id == id));
                                                StepView {
                                                    id,
                                                    name: step.name.clone(),
                                                    status: result.map_or(StepStatus::Pending, |r| r.status),
                                                    exit_code: result.and_then(|r| r.exit_code),
                                                }
                                            })
                                            .collect()
                                    })
                                    .unwrap_or_default(),
                            }
                        })
                        .collect(),
                }
            })
            .collect(),
    }
}
