//! The Step Functions side of the orchestration (behaviour.md §9,
//! design-notes "Orchestration with few transitions"): one execution of the
//! `run-attempt` state machine per attempt. `Step` is an
//! `sqs:sendMessage.waitForTaskToken` task handled by the `orchestrator`
//! function: it advances the attempt and parks its token on the attempt
//! item until there is something only it can do.
//!
//! A token is completed with success only when the attempt is done, and
//! that ends the execution with `Step` (`report`). While the attempt is not
//! done, the token is failed with [`CONTINUE_ERROR`] and the progress report
//! as its cause; the state machine catches it, reads the next task's
//! timeout from the cause (`Continue`, a `Pass` state) and enters `Step`
//! again. A Choice after a successful `Step` would cost two transitions
//! (the Choice and a terminal state) on every run for the sake of the few
//! that loop.
//!
//! Where progress happens, the attempt advances there: the adoption of a
//! job outcome (`outcomes::adopt`) starts the jobs it made ready and ends
//! the attempt when it was the last, in its own compare-and-set, and wakes
//! the parked `Step` only when the attempt is done, when advancing needs
//! reads it does not make (the runners' records of overdue executions,
//! expression data), or when a deadline now comes before the parked task
//! would time out (`parked_past_deadline`). A run whose jobs finish before
//! the first `Step` would time out is then one transition, whatever its
//! number of jobs.
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

use chrono::{DateTime, Utc};

use crate::error::StoreError;
use crate::store::attempts::AttemptItem;
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

/// How long the first `Step` of an execution may take before the state
/// machine sends it again (later ones wait for the attempt's next deadline,
/// at most `BATON_ORCHESTRATOR_MAX_WAIT_S`): a first task message lost to
/// the dead-letter queue costs five minutes, not an hour.
pub const FIRST_STEP_WAIT_S: u64 = 300;

/// A parked `Step` is woken early when a deadline comes more than this
/// before its task would time out (its own timeout then looks late).
pub const DEADLINE_SLACK: chrono::Duration = chrono::Duration::seconds(5);

/// The attempt an execution orchestrates (and every message its tasks send).
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

/// The input of a `run-attempt` execution: the attempt, the progress report
/// the first `Step` reads its timeout from, and how long a `Step` entered
/// after a timeout may park (the state machine's `Again` puts it into the
/// report). A Step that timed out found nothing to do for that long, so the
/// next one waits the longest (it reports at once for an earlier deadline):
/// with the first Step's 300 s again, a one-hour job would pay two
/// transitions every five minutes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutionInput {
    #[serde(flatten)]
    pub attempt: AttemptRef,
    pub progress: AdvanceOutput,
    pub timeout_wait_s: u64,
}

impl ExecutionInput {
    /// The input of `attempt`'s execution; `max_wait` is the orchestrator's
    /// longest park (`BATON_ORCHESTRATOR_MAX_WAIT_S`).
    pub fn new(attempt: AttemptRef, max_wait: std::time::Duration) -> Self {
        let first = AdvanceOutput { done: false, wait_s: FIRST_STEP_WAIT_S, progress: 0 };
        Self { attempt, progress: first, timeout_wait_s: max_wait.as_secs().max(1) }
    }
}

/// The error of a `Step` whose `sqs:sendMessage` failed on SQS's side
/// (throttled, unavailable): what Step Functions names an SQS service
/// error.
pub const INTEGRATION_ERROR: &str = "SQS.AmazonSQSException";

/// What a task message of the state machine asks the orchestrator to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "task", rename_all = "snake_case")]
pub enum TaskMessage {
    /// Advance the attempt, then park `token` on it, or report
    /// `{done, wait_s, progress}` at once when it is done or its next
    /// deadline comes before this task (sent with timeout `wait_s`) would
    /// time out.
    Step {
        workspace_id: String,
        run_id: Uuid,
        attempt: u32,
        token: String,
        wait_s: u64,
    },
    /// The previous definition's tasks, for executions started before a
    /// deploy (they keep the definition they started with): advance and
    /// report; park `token` until progress moves past `progress`.
    Advance {
        workspace_id: String,
        run_id: Uuid,
        attempt: u32,
        token: String,
    },
    Wait {
        workspace_id: String,
        run_id: Uuid,
        attempt: u32,
        token: String,
        progress: u64,
    },
}

/// The error a `Step` task is failed with to have the state machine enter
/// `Step` again; its cause is the [`AdvanceOutput`] as JSON.
pub const CONTINUE_ERROR: &str = "Baton.Continue";

/// What a `Step` (or a wake-up of one) reports; the state machine reads it
/// at `$.progress` (from the cause of a [`CONTINUE_ERROR`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdvanceOutput {
    pub done: bool,
    /// How long the next `Step` may stay parked before it looks again (≥ 1 s).
    pub wait_s: u64,
    /// The attempt's progress counter as last seen.
    pub progress: u64,
}

impl AdvanceOutput {
    /// The report of `item` at `now`: done once the attempt and every job
    /// are terminal; the next `Step` waits until the next deadline (and a
    /// second), at most `max_wait`.
    pub fn of(item: &AttemptItem, now: DateTime<Utc>, max_wait: std::time::Duration) -> Self {
        let max_wait = max_wait.as_secs().max(1);
        let wait_s = item
            .state
            .next_deadline()
            .map(|deadline| (deadline - now).num_seconds().max(0) as u64 + 1)
            .unwrap_or(max_wait)
            .clamp(1, max_wait);
        Self { done: item.state.is_done(), wait_s, progress: item.progress }
    }
}

/// Whether a task parked until `parked_until` (ms since the epoch) would
/// look at the attempt too late for `deadline`: a timeout must not wait for
/// a `Step` timed out with the old, later deadline.
pub fn parked_past_deadline(deadline: Option<DateTime<Utc>>, parked_until: Option<i64>) -> bool {
    match (deadline, parked_until) {
        (Some(deadline), Some(until)) => (deadline + DEADLINE_SLACK).timestamp_millis() < until,
        _ => false,
    }
}

/// Starts attempt `attempt`'s execution; a duplicate start is a no-op.
pub async fn start_attempt_execution(
    sfn: &aws_sdk_sfn::Client,
    state_machine_arn: &str,
    attempt: &AttemptRef,
    max_wait: std::time::Duration,
) -> Result<(), StoreError> {
    let input = ExecutionInput::new(attempt.clone(), max_wait);
    let input = serde_json::to_string(&input).map_err(|e| StoreError::Other(e.to_string()))?;
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

/// Ends a `Step` task with `report`: with success (the execution ends) once
/// the attempt is done, otherwise with [`CONTINUE_ERROR`] (the state machine
/// enters `Step` again, timing it out after `report.wait_s`).
pub async fn report(sfn: &aws_sdk_sfn::Client, token: &str, report: &AdvanceOutput) -> Result<(), StoreError> {
    if report.done {
        return complete_task(sfn, token, report).await;
    }
    let cause = serde_json::to_string(report).map_err(|e| StoreError::Other(e.to_string()))?;
    fail_task(sfn, token, CONTINUE_ERROR, &cause).await
}

/// Wakes the orchestration parked on `item`, if it waits for progress that
/// has happened, with the report of `item` as the waker wrote it (`max_wait`
/// bounds its next park): a `Step` token gets the report; a token parked by
/// the previous definition's `Wait` task (it set no `wait_until`) is
/// completed with success, whatever the report (that definition loops on
/// its own).
pub async fn wake(
    sfn: &aws_sdk_sfn::Client,
    item: &AttemptItem,
    max_wait: std::time::Duration,
) -> Result<(), StoreError> {
    let Some(token) = item.token_to_wake() else { return Ok(()) };
    let progress = AdvanceOutput::of(item, chrono::Utc::now(), max_wait);
    if item.wait_until.is_some() {
        report(sfn, token, &progress).await
    } else {
        complete_task(sfn, token, &progress).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn a_parked_step_is_woken_only_for_a_deadline_it_would_miss_by_more_than_the_slack() {
        let now = Utc.with_ymd_and_hms(2026, 12, 3, 12, 0, 0).unwrap();
        let until = (now + chrono::Duration::seconds(300)).timestamp_millis();
        let soon = now + chrono::Duration::seconds(60);
        assert!(parked_past_deadline(Some(soon), Some(until)), "a one-minute timeout under a five-minute park");
        let later = now + chrono::Duration::seconds(298);
        assert!(!parked_past_deadline(Some(later), Some(until)), "within the slack: no extra transitions");
        assert!(!parked_past_deadline(Some(now + chrono::Duration::hours(6)), Some(until)));
        assert!(!parked_past_deadline(None, Some(until)), "no deadline");
        assert!(!parked_past_deadline(Some(soon), None), "nothing parked");
    }

    #[test]
    fn an_execution_input_carries_the_attempt_the_first_steps_timeout_and_the_longest_park() {
        let attempt = AttemptRef { workspace_id: "ws".into(), run_id: Uuid::nil(), attempt: 2 };
        let input = ExecutionInput::new(attempt, std::time::Duration::from_secs(3_600));
        let json = serde_json::to_value(&input).unwrap();
        assert_eq!(json["attempt"], 2);
        assert_eq!(json["run_id"], Uuid::nil().to_string());
        assert_eq!(json["progress"]["wait_s"], FIRST_STEP_WAIT_S);
        assert_eq!(json["timeout_wait_s"], 3_600, "a Step after a timeout parks the longest");
    }
}
