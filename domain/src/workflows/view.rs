//! Builds the run view and run summaries of the operator API (api.md "Run
//! view") from the stored states. The view types are the contract and live
//! in `baton_api::runs`.

use baton_api::pipelines::{RunTrigger, TriggerKind};
use std::collections::{BTreeMap, HashMap};

use baton_api::runs::{
    duration_ms, ApprovalView, AttemptView, ConcurrencyView, EventRef, ExecutionView, JobView, ListeningView,
    RunHeader, RunSummary, RunView, StepView,
};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::attempt::{AttemptState, RunState};
use super::concurrency::HoldStatus;
use super::definition::WorkflowDefinition;
use super::status::{ExecutionStatus, StepStatus};
use crate::ids::step_id;
use baton_api::facts::StepResult;

/// The summary of a run in a listing.
pub fn run_summary(run: &RunState) -> RunSummary {
    RunSummary {
        header: run_header(run),
        trigger: run.trigger.as_ref().map_or(TriggerKind::Api, |t| t.kind),
        pipeline: run.pipeline.as_ref().map(|p| p.name.clone()),
    }
}

/// What the view and the listing both say of a run first.
fn run_header(run: &RunState) -> RunHeader {
    RunHeader {
        id: run.id,
        workspace_id: run.workspace_id.clone(),
        name: run.name.clone(),
        title: run.title.clone(),
        number: run.number,
        status: run.status,
        current_attempt: run.current_attempt,
        created_at: run.created_at,
        started_at: run.started_at,
        finished_at: run.finished_at,
    }
}

/// What a runner reported for a finished execution.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExecutionResult {
    pub steps: Vec<StepResult>,
    pub outputs: BTreeMap<String, serde_json::Value>,
}

/// Everything stored about one run: what its view is built from.
#[derive(Debug, Clone)]
pub struct RunRecords {
    pub run: RunState,
    pub attempts: Vec<AttemptState>,
    /// Snapshot attempt → definition.
    pub definitions: BTreeMap<u32, WorkflowDefinition>,
    /// Execution id → reported steps and outputs: for a finished execution
    /// what its runner reported in the end, for a running one its lease's
    /// step reports so far.
    pub results: HashMap<Uuid, ExecutionResult>,
    /// The run's artifacts (the same `Query` reads them).
    pub artifacts: Vec<baton_api::artifacts::Artifact>,
}

impl RunRecords {
    /// The run view (api.md "Run view"), durations of what still runs
    /// counted to now.
    pub fn view(&self) -> RunView {
        let view = build_run_view(&self.run, &self.attempts, &self.definitions, &self.results, Utc::now());
        RunView { artifacts: self.artifacts.clone(), ..view }
    }
}

/// Builds the run view. `definitions` holds the snapshot of every attempt
/// (by the attempt that froze it), `results` what runners reported for
/// finished executions (by execution id).
pub fn build_run_view(
    run: &RunState,
    attempts: &[AttemptState],
    definitions: &BTreeMap<u32, WorkflowDefinition>,
    results: &HashMap<Uuid, ExecutionResult>,
    now: DateTime<Utc>,
) -> RunView {
    let mut attempts: Vec<&AttemptState> = attempts.iter().collect();
    attempts.sort_by_key(|a| a.attempt);
    RunView {
        header: run_header(run),
        inputs: run.inputs.as_deref().and_then(|raw| serde_json::from_str(raw).ok()),
        created_by: run.created_by.clone(),
        trigger: run.trigger.clone().unwrap_or_else(|| RunTrigger {
            kind: TriggerKind::Api,
            git_ref: None,
            sha: None,
            actor: run.created_by.clone(),
            delivery: None,
        }),
        pipeline: run.pipeline.clone(),
        artifacts: Vec::new(),
        attempts: attempts
            .into_iter()
            .map(|attempt| {
                // The definition it runs: its decided matrices as their legs.
                let definition = definitions.get(&attempt.snapshot_attempt).map(|frozen| attempt.definition(frozen));
                attempt_view(attempt, definition.as_deref(), results, now)
            })
            .collect(),
    }
}

fn attempt_view(
    attempt: &AttemptState,
    definition: Option<&WorkflowDefinition>,
    results: &HashMap<Uuid, ExecutionResult>,
    now: DateTime<Utc>,
) -> AttemptView {
    AttemptView {
        attempt: attempt.attempt,
        status: attempt.status,
        status_reason: attempt.reason,
        rerun_mode: attempt.rerun_mode,
        started_at: attempt.started_at,
        finished_at: attempt.finished_at,
        concurrency: attempt.concurrency.as_ref().map(|hold| ConcurrencyView {
            group: hold.group.clone(),
            waiting: attempt.waits_for_group() && !attempt.status.is_terminal(),
        }),
        jobs: attempt
            .jobs
            .iter()
            .map(|job| {
                let defined = definition.and_then(|d| d.job(&job.key));
                JobView {
                    id: job.id,
                    key: job.key.clone(),
                    name: defined.and_then(|d| d.name.clone()).filter(|name| !name.contains("${{")),
                    status: job.status,
                    status_reason: job.reason,
                    status_message: job.message.clone(),
                    soft_failed: job.soft_failed,
                    max_retries: defined.and_then(|d| d.retry.as_ref()).map_or(0, |retry| retry.max),
                    labels: defined.map(|d| d.labels.clone()).unwrap_or_default(),
                    needs: defined.map(|d| d.needs.clone()).unwrap_or_default(),
                    carried_over: job.carried_over,
                    environment: defined.and_then(|d| d.environment.clone()),
                    concurrency: job.concurrency.as_ref().map(|hold| ConcurrencyView {
                        group: hold.group.clone(),
                        waiting: hold.status == HoldStatus::Waiting && !job.status.is_terminal(),
                    }),
                    outputs: job
                        .carried_from
                        .or(job.execution.as_ref().map(|e| e.id))
                        .and_then(|id| results.get(&id))
                        .map(|result| result.outputs.clone())
                        .unwrap_or_default(),
                    duration_ms: job.execution.as_ref().and_then(|e| duration_ms(e.started_at, e.finished_at, now)),
                    executions: job
                        .executions()
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
                                event: execution.event.clone(),
                                // A claim (applied from its runner's record)
                                // makes it running: the flag is history then.
                                unschedulable: execution
                                    .unschedulable
                                    .clone()
                                    .filter(|_| execution.status == ExecutionStatus::Queued),
                                not_before: execution.not_before.filter(|_| execution.queued_at.is_none()),
                                duration_ms: duration_ms(execution.started_at, execution.finished_at, now),
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
                                                    soft_failed: result.is_some_and(|r| r.soft_failed),
                                                    exit_code: result.and_then(|r| r.exit_code),
                                                    started_at: result.and_then(|r| r.started_at),
                                                    finished_at: result.and_then(|r| r.finished_at),
                                                    duration_ms: result.and_then(|r| {
                                                        // A step that ended never counts on.
                                                        let end = r.finished_at.or(r
                                                            .status
                                                            .is_terminal()
                                                            .then_some(r.started_at)
                                                            .flatten());
                                                        duration_ms(r.started_at, end, now)
                                                    }),
                                                }
                                            })
                                            .collect()
                                    })
                                    .unwrap_or_default(),
                            }
                        })
                        .collect(),
                    approval: defined.and_then(|d| d.approval.as_ref()).map(|spec| ApprovalView {
                        required: spec.required,
                        from: spec.from.clone(),
                        inputs: spec.inputs.clone(),
                        on_timeout: spec.on_timeout,
                        deadline: job
                            .execution
                            .as_ref()
                            .filter(|e| e.status == crate::workflows::ExecutionStatus::Waiting)
                            .and_then(|e| e.deadline),
                        decisions: job.decisions.clone(),
                    }),
                    listening: defined.and_then(|d| d.listen.as_ref()).map(|spec| ListeningView {
                        events: spec.events.clone(),
                        until: job.listen.as_ref().filter(|_| !job.status.is_terminal()).map(|l| l.until),
                        pending: job
                            .listen
                            .as_ref()
                            .map(|l| {
                                l.pending
                                    .iter()
                                    .map(|e| EventRef { name: e.name.clone(), reference: e.reference.clone() })
                                    .collect()
                            })
                            .unwrap_or_default(),
                    }),
                }
            })
            .collect(),
    }
}
