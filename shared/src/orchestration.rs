//! The Step Functions side of the orchestration (behaviour.md §9,
//! design-notes "Orchestration with few transitions"): one execution of the
//! `run-attempt` state machine per attempt, looping
//! `Advance → Done? → WaitForProgress`. Both tasks are
//! `sqs:sendMessage.waitForTaskToken` tasks handled by the `orchestrator`
//! function; job outcomes complete the parked `WaitForProgress` token.
//!
//! What here is idempotent and why:
//! - the execution name is `<run_id>-<attempt>` and the input is serialised
//!   from a struct (fixed field order), so a duplicate start is a no-op
//!   (`ExecutionAlreadyExists` counts as started);
//! - completing a token that was used, timed out or belongs to a finished
//!   execution is "nothing to resume", never an error.

use aws_sdk_sfn::error::SdkError;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::StoreError;
use crate::store::display_sdk_error;

/// The most jobs one transaction changes. A job costs at most five items:
/// a start writes its fact, its spec, its runners' record, its pending item
/// and (once a label set) the set's registration, so the job is claimable
/// the moment it is queued; an end writes two facts (execution and job
/// terminated), and a timeout also checks the runners' record. 15 jobs
/// stay under the 100 items of a `TransactWriteItems` with the attempt, the
/// run and the attempt's facts, and 15 specs of at most
/// `MAX_JOB_SPEC_BYTES` (64 KB) stay far under its 4 MB.
pub const JOBS_PER_TRANSACTION: usize = 15;

/// The input of a `run-attempt` execution (and of every message its tasks send).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptRef {
    pub workspace_id: String,
    pub run_id: Uuid,
    pub attempt: u32,
}

impl AttemptRef {
    /// The execution's deterministic name.
    pub fn execution_name(&self) -> String {
        format!("{}-{}", self.run_id, self.attempt)
    }
}

/// What a task message of the state machine asks the orchestrator to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "task", rename_all = "snake_case")]
pub enum TaskMessage {
    /// Advance the attempt and report `{done, wait_s, progress}`.
    Advance { workspace_id: String, run_id: Uuid, attempt: u32, token: String },
    /// Park `token` until progress moves past `progress`.
    Wait { workspace_id: String, run_id: Uuid, attempt: u32, token: String, progress: u64 },
}

/// The output of `Advance` (the state machine reads it at `$.progress`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdvanceOutput {
    pub done: bool,
    /// How long `WaitForProgress` may wait before looking again (≥ 1 s).
    pub wait_s: u64,
    /// The attempt's progress counter `Advance` saw last.
    pub progress: u64,
}

/// Starts attempt `attempt`'s execution; a duplicate start is a no-op.
pub async fn start_attempt_execution(
    sfn: &aws_sdk_sfn::Client,
    state_machine_arn: &str,
    attempt: &AttemptRef,
) -> Result<(), StoreError> {
    let input = serde_json::to_string(attempt).map_err(|e| StoreError::Other(e.to_string()))?;
    let result = sfn
        .start_execution()
        .state_machine_arn(state_machine_arn)
        .name(attempt.execution_name())
        .input(input)
        .send()
        .await;
    match result {
        Ok(_) => Ok(()),
        Err(SdkError::ServiceError(err)) if err.err().is_execution_already_exists() => Ok(()),
        Err(err) => Err(StoreError::Other(format!("StartExecution: {}", display_sdk_error(&err)))),
    }
}

/// Completes a task with `output`. A token with nothing left to resume
/// (used, timed out, execution finished) is not an error.
pub async fn complete_task(sfn: &aws_sdk_sfn::Client, token: &str, output: &impl Serialize) -> Result<(), StoreError> {
    let output = serde_json::to_string(output).map_err(|e| StoreError::Other(e.to_string()))?;
    match sfn.send_task_success().task_token(token).output(output).send().await {
        Ok(_) => Ok(()),
        Err(SdkError::ServiceError(err))
            if err.err().is_invalid_token() || err.err().is_task_timed_out() || err.err().is_task_does_not_exist() =>
        {
            tracing::debug!(error = %err.err(), "task token had nothing to resume");
            Ok(())
        }
        Err(err) => Err(StoreError::Other(format!("SendTaskSuccess: {}", display_sdk_error(&err)))),
    }
}

/// Fails a task (the execution fails): for an attempt that cannot exist.
pub async fn fail_task(sfn: &aws_sdk_sfn::Client, token: &str, error: &str, cause: &str) -> Result<(), StoreError> {
    match sfn.send_task_failure().task_token(token).error(error).cause(cause).send().await {
        Ok(_) => Ok(()),
        Err(SdkError::ServiceError(err))
            if err.err().is_invalid_token() || err.err().is_task_timed_out() || err.err().is_task_does_not_exist() =>
        {
            Ok(())
        }
        Err(err) => Err(StoreError::Other(format!("SendTaskFailure: {}", display_sdk_error(&err)))),
    }
}

/// Wakes a parked orchestration: completes its `WaitForProgress` token.
pub async fn wake(sfn: &aws_sdk_sfn::Client, token: &str) -> Result<(), StoreError> {
    complete_task(sfn, token, &serde_json::json!({"woke": true})).await
}
