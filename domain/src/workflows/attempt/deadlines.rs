//! The attempt's deadlines: when the orchestration must come back, which
//! executions are overdue, and what the run timeout and the job timeouts
//! end.

use std::ops::ControlFlow;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::changes::{Change, Emitted};
use super::runner_events::RunnerEndings;
use super::state::AttemptState;
use crate::workflows::definition::WorkflowDefinition;
use crate::workflows::execution::{apply_execution_event, ExecutionEvent, ExecutionState, ExecutionUpdate};
use crate::workflows::status::{AttemptStatus, ExecutionStatus, JobStatus, StatusReason};

impl AttemptState {
    /// The earliest deadline still ahead of the orchestration: a running
    /// execution's job timeout or the run timeout.
    pub fn next_deadline(&self) -> Option<DateTime<Utc>> {
        let executions = self
            .jobs
            .iter()
            .filter_map(|job| job.execution.as_ref())
            .filter(|e| !e.status.is_terminal())
            .filter_map(|e| e.deadline);
        let run = if self.status.is_terminal() { None } else { self.deadline };
        // A retry waiting for its backoff is queued then.
        let retries = self
            .jobs
            .iter()
            .filter(|job| job.status == JobStatus::Pending)
            .filter_map(|job| job.execution.as_ref()?.not_before);
        // A listening job's timeout.
        let listening = self
            .jobs
            .iter()
            .filter(|job| !job.status.is_terminal())
            .filter_map(|job| job.listen.as_ref().map(|listen| listen.until));
        // An unschedulable execution's failure.
        let unschedulable = self.unschedulable_deadlines();
        executions.chain(run).chain(retries).chain(listening).chain(unschedulable).min()
    }

    /// When each queued execution flagged unschedulable fails.
    fn unschedulable_deadlines(&self) -> impl Iterator<Item = DateTime<Utc>> + '_ {
        self.jobs
            .iter()
            .filter_map(|job| job.execution.as_ref())
            .filter(|e| e.status == ExecutionStatus::Queued)
            .filter_map(|e| e.unschedulable.as_ref().map(|u| u.fails_at))
    }

    /// The executions a timeout would end at `now`: every unfinished one once
    /// the run timeout passed, else those past their job timeout. Their
    /// runners' records are what [`AttemptState::advance`] needs to know.
    pub fn overdue_executions(&self, now: DateTime<Utc>) -> Vec<Uuid> {
        let run_timed_out = self.run_timed_out(now);
        self.jobs
            .iter()
            .filter_map(|job| job.execution.as_ref())
            .filter(|e| !e.status.is_terminal() && e.status != ExecutionStatus::Pending)
            .filter(|e| {
                run_timed_out
                    || e.deadline.is_some_and(|d| d <= now)
                    || (e.status == ExecutionStatus::Queued
                        && e.unschedulable.as_ref().is_some_and(|u| u.fails_at <= now))
            })
            .map(|e| e.id)
            .collect()
    }

    /// Whether the run timeout has passed on an attempt still going.
    pub(super) fn run_timed_out(&self, now: DateTime<Utc>) -> bool {
        !self.status.is_terminal() && self.deadline.is_some_and(|d| d <= now)
    }

    /// The run timeout: everything still going ends as timed out (or as its
    /// runner ended it, if `ended` says so), `budget` jobs a change counting
    /// the `touched` already; the attempt fails once every job has ended.
    pub(super) fn time_out_run(
        &mut self,
        ended: &RunnerEndings,
        now: DateTime<Utc>,
        budget: usize,
        mut touched: usize,
        change: &mut Change,
    ) {
        for index in 0..self.jobs.len() {
            if touched >= budget {
                break;
            }
            if self.jobs[index].status.is_terminal() {
                continue;
            }
            if let Some(emitted) = self.end_as_the_runner_did(index, ended, false, now) {
                change.emitted.extend(emitted);
            } else {
                let job = &self.jobs[index];
                let pending = job.status == JobStatus::Pending;
                let job_status = if pending { JobStatus::Skipped } else { JobStatus::Failed };
                let execution_status = if pending { ExecutionStatus::Cancelled } else { ExecutionStatus::Failed };
                if let Some(execution) = job.execution.as_ref().filter(|_| !pending) {
                    change.timed_out.push(execution.id);
                }
                change.emitted.extend(self.end_job(
                    index,
                    job_status,
                    execution_status,
                    Some(StatusReason::TimedOut),
                    now,
                ));
            }
            change.changed = true;
            touched += 1;
        }
        if self.all_jobs_terminal() {
            change.emitted.extend(self.finish(AttemptStatus::Failed, Some(StatusReason::TimedOut), now));
            change.changed = true;
        }
    }

    /// Job timeouts, counted from queueing, and unschedulable executions
    /// whose time is up. `Break` when the advance must stop here: its
    /// `budget` is spent, or an approval its timeout approved wrote its
    /// outputs in this change (what needs them starts on the next advance,
    /// which reads them).
    pub(super) fn time_out_jobs(
        &mut self,
        definition: &WorkflowDefinition,
        ended: &RunnerEndings,
        now: DateTime<Utc>,
        budget: usize,
        touched: &mut usize,
        change: &mut Change,
    ) -> ControlFlow<()> {
        let mut outputs_written = false;
        for index in 0..self.jobs.len() {
            if *touched >= budget {
                return ControlFlow::Break(());
            }
            let Some(execution) = self.jobs[index].execution.as_ref() else { continue };
            // Flagged unschedulable and still nobody's: it fails now, unless
            // its record shows a claim (then it runs, whatever the flag).
            let unschedulable_due = execution.status == ExecutionStatus::Queued
                && execution.unschedulable.as_ref().is_some_and(|u| u.fails_at <= now);
            if unschedulable_due && !ended.contains_key(&execution.id) {
                let id = execution.id;
                let reason = Some(StatusReason::Unschedulable);
                change.emitted.extend(self.end_job(index, JobStatus::Failed, ExecutionStatus::Failed, reason, now));
                change.unschedulable.push(id);
                change.changed = true;
                *touched += 1;
                continue;
            }
            if execution.status.is_terminal() || execution.deadline.is_none_or(|d| d > now) {
                continue;
            }
            if let Some(spec) = definition.job(&self.jobs[index].key).and_then(|d| d.approval.as_ref()) {
                // Nobody decided in time: its `on-timeout` says how it ends.
                let emitted = self.time_out_approval(index, spec, now);
                outputs_written |= emitted.iter().any(|e| matches!(e, Emitted::Results { .. }));
                change.emitted.extend(emitted);
                change.changed = true;
                *touched += 1;
                continue;
            }
            let (id, state) = (
                execution.id,
                ExecutionState { status: execution.status, reason: execution.reason, started_at: execution.started_at },
            );
            if let Some(emitted) = self.end_as_the_runner_did(index, ended, true, now) {
                change.emitted.extend(emitted);
                change.changed = true;
                *touched += 1;
                continue;
            }
            if let ExecutionUpdate::Apply(next) = apply_execution_event(&state, &ExecutionEvent::TimedOut) {
                let emitted = self.conclude(index, &next, None, true, now);
                change.emitted.extend(emitted);
                change.timed_out.push(id);
                change.changed = true;
                *touched += 1;
            }
        }
        if outputs_written {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }
}
