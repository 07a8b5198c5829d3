//! Listening jobs in an attempt: listening, taking the events delivered to
//! them one at a time, and their listening timeout (`workflows::listening`
//! decides the rules).

use std::time::Duration;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::changes::{Change, Emitted};
use super::state::{AttemptState, ExecutionRecord};
use super::transitions::scaled;
use crate::workflows::definition::WorkflowDefinition;
use crate::workflows::execution::ExecutionState;
use crate::workflows::expressions;
use crate::workflows::listening::{self, DeliveryError, JobEvent, ListenSpec, ListenState};
use crate::workflows::references::ExpressionData;
use crate::workflows::spec::job_spec;
use crate::workflows::status::{ExecutionStatus, JobStatus, StatusReason};
use baton_api::facts::WaitingFor;
use baton_api::runs::EventRef;

impl AttemptState {
    /// Job `index`, listening, starts listening: no runner until an event
    /// fires; its listening timeout counts from now.
    pub(super) fn start_listening(
        &mut self,
        index: usize,
        spec: &ListenSpec,
        now: DateTime<Utc>,
        minute: Duration,
    ) -> Option<Emitted> {
        let until = now + scaled(spec.timeout_minutes, minute);
        let emitted = self.start_waiting(index, WaitingFor::Events, until)?;
        self.jobs[index].listen = Some(ListenState { until, pending: Vec::new(), refs: Vec::new() });
        Some(emitted)
    }

    /// The execution of listening job `index` ended (`next`): it is kept
    /// with the job's earlier ones, and a fresh one waits for the next
    /// event. The job listens on, whatever the execution's outcome.
    pub(super) fn listen_again(&mut self, index: usize, next: &ExecutionState, now: DateTime<Utc>) -> Vec<Emitted> {
        let listening = ExecutionRecord { status: ExecutionStatus::Waiting, ..ExecutionRecord::pending() };
        self.replace_execution(index, next, listening, JobStatus::Waiting, now).into_iter().collect()
    }

    /// Idle listening job `index` takes its next waiting `event`: off the
    /// waiting ones, onto its execution.
    fn take_event(&mut self, index: usize, event: &JobEvent) {
        let job = &mut self.jobs[index];
        if let Some(listen) = job.listen.as_mut() {
            listen.pending.remove(0);
        }
        if let Some(execution) = job.execution.as_mut() {
            execution.event = Some(EventRef { name: event.name.clone(), reference: event.reference.clone() });
        }
    }

    /// Listening job `index` stops listening: its last execution's outcome
    /// and outputs become the job's (`succeeded` if it never fired).
    fn stop_listening(
        &mut self,
        index: usize,
        reason: Option<StatusReason>,
        now: DateTime<Utc>,
    ) -> (Vec<Emitted>, Option<Uuid>) {
        let job = &mut self.jobs[index];
        if let Some(listen) = job.listen.as_mut() {
            listen.pending.clear();
        }
        let idle = job.execution.as_ref().is_some_and(|e| e.status == ExecutionStatus::Waiting);
        if idle {
            if let Some(last) = job.earlier_executions.pop() {
                job.execution = Some(last);
            }
        }
        let current = job.execution.as_ref();
        // A running execution the timeout stops: its runner is told.
        let stopped = current.filter(|e| !e.status.is_terminal() && e.status != ExecutionStatus::Waiting).map(|e| e.id);
        let emitted = match (reason, current.map(|e| (e.status, e.reason))) {
            (Some(reason), _) => self.end_job(index, JobStatus::Failed, ExecutionStatus::Failed, Some(reason), now),
            (None, Some((ExecutionStatus::Failed, failed))) => {
                self.end_job(index, JobStatus::Failed, ExecutionStatus::Failed, failed, now)
            }
            (None, Some((ExecutionStatus::Cancelled, why))) => {
                self.end_job(index, JobStatus::Failed, ExecutionStatus::Cancelled, why, now)
            }
            _ => self.end_job(index, JobStatus::Succeeded, ExecutionStatus::Succeeded, None, now),
        };
        (emitted, stopped)
    }

    /// Delivers `event` to listening job `job_id` (behaviour.md §16): it
    /// waits its turn (the orchestration starts it), `Ok(true)`; `Ok(false)`
    /// when it changes nothing (a repeated `ref`, a job that ended or
    /// resolves already).
    pub fn deliver_event(
        &mut self,
        definition: &WorkflowDefinition,
        job_id: Uuid,
        event: JobEvent,
    ) -> Result<bool, EventError> {
        let index = self.job_index(job_id).ok_or(EventError::NoSuchJob)?;
        let job = &mut self.jobs[index];
        let spec = definition.job(&job.key).and_then(|d| d.listen.as_ref()).ok_or(EventError::NotListening)?;
        listening::check_event(spec, &event.name, &event.reference, &event.payload).map_err(EventError::Refused)?;
        if job.status.is_terminal() {
            return Ok(false);
        }
        let Some(listen) = job.listen.as_mut() else { return Err(EventError::NotListening) };
        // It resolves already: what comes after changes nothing.
        if listen.pending.iter().any(|e| e.disposition == listening::Disposition::Resolve) {
            return Ok(false);
        }
        listening::take(listen, event).map_err(EventError::Refused)
    }

    /// Listening jobs, one bounded step: the listening timeout ends one; an
    /// idle one takes its next event (a fire queues an execution with the
    /// event in its expressions, a resolve ends the job).
    pub(super) fn advance_listening(
        &mut self,
        definition: &WorkflowDefinition,
        now: DateTime<Utc>,
        minute: Duration,
        data: &ExpressionData,
        change: &mut Change,
        budget: usize,
    ) -> usize {
        let mut touched = 0;
        for index in 0..self.jobs.len() {
            if touched >= budget {
                break;
            }
            let job = &self.jobs[index];
            let Some(listen) = job.listen.as_ref() else { continue };
            if job.status.is_terminal() {
                continue;
            }
            if listen.until <= now {
                let (emitted, stopped) = self.stop_listening(index, Some(StatusReason::TimedOut), now);
                change.emitted.extend(emitted);
                change.timed_out.extend(stopped);
                change.changed = true;
                touched += 1;
                continue;
            }
            let idle = job.execution.as_ref().is_some_and(|e| e.status == ExecutionStatus::Waiting);
            let Some(next) = listen.pending.first().cloned().filter(|_| idle) else { continue };
            let Some(defined) = definition.job(&job.key) else { continue };
            match next.disposition {
                listening::Disposition::Resolve => {
                    let (emitted, _) = self.stop_listening(index, None, now);
                    change.emitted.extend(emitted);
                }
                listening::Disposition::Fire => {
                    let Some(mut scope) = self.scope_for(definition, defined, data, &mut change.missing) else {
                        continue;
                    };
                    scope.event = Some(&next);
                    let admitted = defined
                        .listen
                        .as_ref()
                        .and_then(|l| l.when.as_deref())
                        .is_none_or(|when| expressions::parse(when).is_ok_and(|e| expressions::holds(&e, &scope)));
                    // The spec reads the scope, which reads the state: made
                    // before the job takes its event.
                    let spec =
                        admitted.then(|| job_spec(definition, defined, self.execution_id(index), minute, Some(&scope)));
                    self.take_event(index, &next);
                    match spec {
                        Some(spec) => change.emitted.extend(self.start_job(index, defined, spec, now, minute)),
                        None => {
                            // `listen.if` rejects it: recorded, nothing runs,
                            // the job listens on for the next.
                            let rejected = ExecutionState {
                                status: ExecutionStatus::Cancelled,
                                reason: Some(StatusReason::ConditionRejected),
                                started_at: None,
                            };
                            change.emitted.extend(self.listen_again(index, &rejected, now));
                        }
                    }
                }
            }
            change.changed = true;
            touched += 1;
        }
        touched
    }
}

/// Why an event was not delivered to a listening job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventError {
    /// The attempt has no such job (404).
    NoSuchJob,
    /// The job is not a listening job, or does not listen yet (its needs
    /// are not met): 409 `not-listening`.
    NotListening,
    /// A bad delivery (400) or one too many (409).
    Refused(DeliveryError),
}
