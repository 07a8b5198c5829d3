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
//! An execution can die while its attempt is live: `Step`'s own service
//! call (`sqs:sendMessage`) can fail, and once the state machine's `Retry`
//! gives up the execution fails, with nothing parked anywhere to notice.
//! Such an attempt gets a new execution, one generation later: the
//! generations of an attempt are named `<run_id>-<attempt>`, then
//! `<run_id>-<attempt>-g<n>`. A start walks them from the one it is told
//! and stops at the first that runs or succeeded, or starts the first free
//! one; the lease reaper's tick looks for dead executions
//! ([`revive_dead_executions`]: Step Functions' list of failed, timed-out
//! and aborted executions, never the table) and starts the next generation
//! of those whose attempt is live.
//!
//! What here is idempotent and why:
//! - the execution names are deterministic and the input is serialised
//!   from a struct (fixed field order), so a duplicate start is a no-op
//!   (`ExecutionAlreadyExists` of a running or succeeded execution counts
//!   as started);
//! - completing a token that was used, timed out or belongs to a finished
//!   execution is "nothing to resume", never an error.

pub mod step;

use aws_sdk_sfn::error::SdkError;
use aws_sdk_sfn::types::ExecutionStatus;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use chrono::{DateTime, Utc};

use crate::context::Context;
use baton_domain::workflows::concurrency::Member;
use baton_domain::workflows::StatusReason;
use baton_store::attempts::{AttemptItem, AttemptStep, AttemptWrite};
use baton_store::StoreError;
use baton_store::{display_sdk_error, Store};

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
    /// The deterministic name of the attempt's first execution.
    pub fn execution_name(&self) -> String {
        self.generation_name(0)
    }

    /// The deterministic name of generation `generation` of the attempt's
    /// execution (0 is the first; a later one replaces a dead one).
    pub fn generation_name(&self, generation: u32) -> String {
        match generation {
            0 => format!("{}-{}", self.run_id, self.attempt),
            n => format!("{}-{}-g{n}", self.run_id, self.attempt),
        }
    }
}

/// The run, attempt and generation an execution's name stands for
/// ([`AttemptRef::generation_name`]); `None` for another name.
pub fn parse_execution_name(name: &str) -> Option<(Uuid, u32, u32)> {
    let run_id = Uuid::parse_str(name.get(..36)?).ok()?;
    let rest = name.get(36..)?.strip_prefix('-')?;
    let (attempt, generation) = match rest.split_once("-g") {
        Some((attempt, generation)) => (attempt, generation.parse().ok().filter(|g| *g > 0)?),
        None => (rest, 0),
    };
    Some((run_id, attempt.parse().ok()?, generation))
}

/// The error of a `Step` whose `sqs:sendMessage` failed on SQS's side
/// (throttled, unavailable): what Step Functions names an SQS service
/// error, and what the state machine's `Retry` on `Step` retries (with
/// `SQS.SdkClientException`, the same call failing on the client side).
pub const INTEGRATION_ERROR: &str = "SQS.AmazonSQSException";

/// The most generations one attempt's execution is given: an attempt whose
/// executions keep dying needs a human, not an endless loop of starts.
pub const MAX_GENERATIONS: u32 = 100;

/// How far back [`revive_dead_executions`] looks for executions that died.
pub const REVIVE_HORIZON: chrono::Duration = chrono::Duration::hours(1);

/// Pages of 100 executions [`revive_dead_executions`] reads per status.
const REVIVE_PAGES: usize = 10;

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

/// Starts attempt `attempt`'s execution; a duplicate start is a no-op. An
/// execution of the attempt that died (failed, timed out, aborted) is
/// replaced by the next generation: returns the name of the execution that
/// runs (or succeeded).
pub async fn start_attempt_execution(
    sfn: &aws_sdk_sfn::Client,
    state_machine_arn: &str,
    attempt: &AttemptRef,
    max_wait: std::time::Duration,
) -> Result<String, StoreError> {
    start_attempt_execution_from(sfn, state_machine_arn, attempt, max_wait, 0).await
}

/// As [`start_attempt_execution`], from generation `first` (the ones before
/// it are known to be dead).
pub async fn start_attempt_execution_from(
    sfn: &aws_sdk_sfn::Client,
    state_machine_arn: &str,
    attempt: &AttemptRef,
    max_wait: std::time::Duration,
    first: u32,
) -> Result<String, StoreError> {
    let input = ExecutionInput::new(attempt.clone(), max_wait);
    let input = serde_json::to_string(&input).map_err(|e| StoreError::Other(e.to_string()))?;
    for generation in first..MAX_GENERATIONS {
        let name = attempt.generation_name(generation);
        let result = sfn.start_execution().state_machine_arn(state_machine_arn).name(&name).input(&input).send().await;
        match result {
            Ok(_) => {
                if generation > 0 {
                    tracing::warn!(run_id = %attempt.run_id, attempt = attempt.attempt, execution = %name, "a dead orchestration was replaced");
                }
                return Ok(name);
            }
            Err(SdkError::ServiceError(err)) if err.err().is_execution_already_exists() => {
                let arn = execution_arn(state_machine_arn, &name);
                let described = sfn
                    .describe_execution()
                    .execution_arn(&arn)
                    .send()
                    .await
                    .map_err(|err| StoreError::Other(format!("DescribeExecution: {}", display_sdk_error(&err))))?;
                if execution_lives(described.status()) {
                    return Ok(name);
                }
            }
            Err(err) => return Err(StoreError::Other(format!("StartExecution: {}", display_sdk_error(&err)))),
        }
    }
    Err(StoreError::Other(format!(
        "attempt {}/{}: {MAX_GENERATIONS} executions died, none is started again",
        attempt.run_id, attempt.attempt
    )))
}

/// Whether an execution in `status` still orchestrates (or did to the end):
/// not one to replace.
fn execution_lives(status: &ExecutionStatus) -> bool {
    matches!(status, ExecutionStatus::Running | ExecutionStatus::Succeeded | ExecutionStatus::PendingRedrive)
}

/// The ARN of execution `name` of the state machine `state_machine_arn`.
pub fn execution_arn(state_machine_arn: &str, name: &str) -> String {
    format!("{}:{name}", state_machine_arn.replacen(":stateMachine:", ":execution:", 1))
}

/// The watchdog of the orchestrations (the lease reaper's tick): reads Step
/// Functions' lists of the executions that failed, timed out or were
/// aborted (at most [`REVIVE_PAGES`] pages of each, newest first) and, for
/// each that stopped within [`REVIVE_HORIZON`] of `now` and has no next
/// generation yet, starts the next one if its attempt is live. The table is
/// read only for those: nothing at all while no execution dies. Returns how
/// many executions it started.
pub async fn revive_dead_executions(
    sfn: &aws_sdk_sfn::Client,
    store: &Store,
    state_machine_arn: &str,
    now: DateTime<Utc>,
    max_wait: std::time::Duration,
) -> Result<usize, StoreError> {
    let since = now - REVIVE_HORIZON;
    let mut started = 0;
    for status in [ExecutionStatus::Failed, ExecutionStatus::TimedOut, ExecutionStatus::Aborted] {
        let mut next_token = None;
        for _ in 0..REVIVE_PAGES {
            let page = sfn
                .list_executions()
                .state_machine_arn(state_machine_arn)
                .status_filter(status.clone())
                .max_results(100)
                .set_next_token(next_token.take())
                .send()
                .await
                .map_err(|err| StoreError::Other(format!("ListExecutions: {}", display_sdk_error(&err))))?;
            for execution in page.executions() {
                let stopped = execution.stop_date().map(|d| d.secs()).unwrap_or(i64::MAX);
                if stopped < since.timestamp() {
                    continue;
                }
                let Some((run_id, attempt, generation)) = parse_execution_name(execution.name()) else { continue };
                if revive(sfn, store, state_machine_arn, run_id, attempt, generation + 1, max_wait).await? {
                    started += 1;
                }
            }
            next_token = page.next_token().map(str::to_string);
            if next_token.is_none() {
                break;
            }
        }
    }
    Ok(started)
}

/// Starts generation `next` of the execution of attempt `run_id`/`attempt`
/// unless it exists already or the attempt is done or gone.
async fn revive(
    sfn: &aws_sdk_sfn::Client,
    store: &Store,
    state_machine_arn: &str,
    run_id: Uuid,
    attempt: u32,
    next: u32,
    max_wait: std::time::Duration,
) -> Result<bool, StoreError> {
    if next >= MAX_GENERATIONS {
        return Ok(false);
    }
    let probe = AttemptRef { workspace_id: String::new(), run_id, attempt };
    let arn = execution_arn(state_machine_arn, &probe.generation_name(next));
    match sfn.describe_execution().execution_arn(&arn).send().await {
        Ok(_) => return Ok(false),
        Err(SdkError::ServiceError(err)) if err.err().is_execution_does_not_exist() => {}
        Err(err) => return Err(StoreError::Other(format!("DescribeExecution: {}", display_sdk_error(&err)))),
    }
    let Some(item) = store.get_attempt(run_id, attempt).await? else { return Ok(false) };
    if item.state.is_done() {
        return Ok(false);
    }
    let attempt = AttemptRef { workspace_id: item.state.workspace_id.clone(), run_id, attempt };
    start_attempt_execution_from(sfn, state_machine_arn, &attempt, max_wait, next).await?;
    Ok(true)
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
            tracing::info!(error = %err.err(), "task token had nothing to resume");
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
            tracing::info!(error = %err.err(), "task token had nothing to resume");
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
    let token_tail = &token[token.len().saturating_sub(12)..];
    tracing::info!(run_id = %item.state.run_id, attempt = item.state.attempt, progress = item.progress, waited = ?item.wait_progress, token_tail, "waking the parked orchestration");
    let progress = AdvanceOutput::of(item, chrono::Utc::now(), max_wait);
    if item.wait_until.is_some() {
        report(sfn, token, &progress).await
    } else {
        complete_task(sfn, token, &progress).await
    }
}

/// Cancels `other`, replaced in `group` by a newer attempt (a no-op once it
/// has ended): the attempt ends `cancelled` with reason
/// `concurrency_replaced`, its runners are told as on any cancel, and its
/// orchestration is woken to end what one transaction could not hold (or,
/// when the cancel ended it, it leaves the group first). A replaced job
/// (`other.job`) ends `cancelled` alone, and its orchestration, woken,
/// leaves the group for it and goes on.
pub async fn replace_in_group(context: &Context, other: Member, group: &str) -> Result<(), StoreError> {
    let updated = context
        .store
        .update_attempt(other.run_id, other.attempt, context.config.outbox_ttl_days, |next, definition| {
            let now = chrono::Utc::now();
            let reason = StatusReason::ConcurrencyReplaced;
            let emitted = match other.job {
                Some(job) => next.state.replace_job(job, now),
                None => {
                    next.state.cancel_because(definition, now, JOBS_PER_TRANSACTION, reason).ok().map(|c| c.emitted)
                }
            };
            Ok::<_, StoreError>(match emitted {
                Some(emitted) => {
                    AttemptStep::Write(AttemptWrite { emitted, progressed: true, ..AttemptWrite::default() })
                }
                None => AttemptStep::Done,
            })
        })
        .await?;
    let Some(updated) = updated.filter(|u| u.writes > 0) else { return Ok(()) };
    tracing::info!(run_id = %other.run_id, attempt = other.attempt, job = ?other.job, group, "replaced in its concurrency group");
    wake_after_cancel(context, &updated.item).await
}

/// What follows a cancel's write: a cancel that ended the attempt (it was
/// waiting for its concurrency group) leaves the group, then the
/// orchestration is woken to end what one transaction could not hold. A
/// lost wake is logged (the orchestration looks again at its next
/// deadline); a failed leave is the caller's error, with no wake, so the
/// orchestration's next step leaves instead of ending first.
pub async fn wake_after_cancel(context: &Context, item: &AttemptItem) -> Result<(), StoreError> {
    leave_group_if_done(context, item).await?;
    if let Err(err) = wake(context.clients.sfn(), item, context.config.orchestration.max_wait).await {
        tracing::warn!(run_id = %item.state.run_id, error = %err, "could not wake the orchestration");
    }
    Ok(())
}

/// What every writer that may have ended an attempt does before it wakes
/// the attempt's orchestration (which, told the attempt is done, ends
/// without another step): a done attempt leaves its concurrency group, and
/// the attempt that holds it now, if one waited, is marked holding and
/// woken to start its jobs. One that ended while it waited passes the
/// group on at once. Idempotent (leaving twice is a no-op); if the wake is
/// lost, the promoted attempt's parked step looks again within `max_wait`;
/// if this fails, the writer does not wake, and the done attempt's next
/// step leaves instead.
pub async fn leave_group_if_done(context: &Context, item: &AttemptItem) -> Result<(), StoreError> {
    if !item.state.is_done() {
        return Ok(());
    }
    let workspace_id = &item.state.workspace_id;
    if let Some(hold) = item.state.concurrency.as_ref() {
        leave_group(context, workspace_id, &hold.group, item.state.member()).await?;
    }
    // Jobs whose leave the orchestrator did not get to (a cancel ended the
    // attempt, and the woken orchestration ends without another step).
    for (group, member) in item.state.job_groups() {
        leave_group(context, workspace_id, &group, member).await?;
    }
    Ok(())
}

/// `me` leaves `group`, and each attempt or job that holds it in its place
/// is woken: an attempt marked holding first, a job by its attempt's
/// progress (its orchestration joins again and is told it holds). One that
/// ended while it waited passes the group on at once. Idempotent.
pub async fn leave_group(context: &Context, workspace_id: &str, group: &str, me: Member) -> Result<(), StoreError> {
    let store = &context.store;
    let mut leaving = vec![me];
    // Bounded: each leave takes one member off the group.
    while let Some(me) = leaving.pop() {
        for next in store.leave_concurrency_group(workspace_id, group, me).await? {
            tracing::info!(run_id = %me.run_id, job = ?me.job, next_run_id = %next.run_id, next_attempt = next.attempt, next_job = ?next.job, group, "concurrency group handed on");
            let updated = store
                .update_attempt(next.run_id, next.attempt, context.config.outbox_ttl_days, |waiting, _| {
                    let turn = match next.job {
                        None => waiting.state.hold_group(),
                        // A job that has not ended (an `always()` job of a
                        // cancelled attempt too) is still going to start.
                        Some(job) => waiting.state.jobs.iter().any(|j| j.id == job && !j.status.is_terminal()),
                    };
                    Ok::<_, StoreError>(if turn {
                        AttemptStep::Write(AttemptWrite { progressed: true, ..AttemptWrite::default() })
                    } else {
                        AttemptStep::Done
                    })
                })
                .await?;
            match updated {
                Some(updated) if updated.writes > 0 || (next.job.is_none() && !updated.item.state.is_done()) => {
                    let max_wait = context.config.orchestration.max_wait;
                    if let Err(err) = wake(context.clients.sfn(), &updated.item, max_wait).await {
                        tracing::warn!(run_id = %next.run_id, error = %err, "could not wake the attempt next in its group");
                    }
                }
                // It ended while it waited (or is gone): nobody would leave for it.
                _ => leaving.push(next),
            }
        }
    }
    Ok(())
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
    fn an_executions_name_says_its_run_attempt_and_generation() {
        let attempt = AttemptRef { workspace_id: "ws".into(), run_id: Uuid::now_v7(), attempt: 12 };
        assert_eq!(attempt.execution_name(), format!("{}-12", attempt.run_id), "the first keeps its name");
        for generation in [0, 1, 37] {
            let name = attempt.generation_name(generation);
            assert!(name.len() <= 80, "Step Functions' limit");
            assert_eq!(parse_execution_name(&name), Some((attempt.run_id, 12, generation)));
        }
        for other in [
            "",
            "x",
            &format!("{}-", attempt.run_id),
            &format!("{}-1-g0", attempt.run_id),
            &format!("{}-1-gx", attempt.run_id),
        ] {
            assert_eq!(parse_execution_name(other), None, "{other}");
        }
    }

    #[test]
    fn step_retries_its_integrations_service_errors_and_nothing_that_would_swallow_continue() {
        let asl: serde_json::Value =
            serde_json::from_str(include_str!("../../../infra/statemachines/run-attempt.asl.json")).expect("json");
        let retry = asl["States"]["Step"]["Retry"].as_array().expect("Step has a Retry");
        let retried: Vec<&str> =
            retry.iter().flat_map(|r| r["ErrorEquals"].as_array().unwrap()).filter_map(|e| e.as_str()).collect();
        assert!(retried.contains(&INTEGRATION_ERROR), "{retried:?}");
        for swallowing in ["States.ALL", "States.TaskFailed", CONTINUE_ERROR, "States.Timeout"] {
            assert!(!retried.contains(&swallowing), "{swallowing} is not retried");
        }
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
