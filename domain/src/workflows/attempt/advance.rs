//! One bounded step of the orchestrator (behaviour.md §9): the attempt
//! started, its timeouts applied, its listening jobs served, `fail-fast`
//! applied, then what the scheduler decides started, skipped or cancelled.

use std::ops::ControlFlow;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::changes::Change;
use super::concurrency_groups::GroupTurn;
use super::runner_events::RunnerEndings;
use super::state::AttemptState;
use super::transitions::scaled;
use crate::workflows::dag::{plan_advance, Decision, JobSnapshot};
use crate::workflows::definition::WorkflowDefinition;
use crate::workflows::references::ExpressionData;
use crate::workflows::spec::job_spec;
use crate::workflows::status::{derive_attempt_status, AttemptStatus, ExecutionStatus, JobStatus, StatusReason};

/// What [`AttemptState::advance_inline`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct InlineAdvance {
    pub change: Change,
    /// Nothing is left for the orchestrator: another step would change
    /// nothing and no job waits for data.
    pub complete: bool,
}

/// What became of a job the scheduler said to start.
enum Start {
    /// It started: queued, waiting for approvers or events, or skipped by
    /// its `if:`.
    Done,
    /// Not in this step, and there is nothing to read for it: a retry's
    /// backoff, `max-parallel`.
    NotYet,
    /// It waits for data to be read or for its group's answer: the step is
    /// not complete.
    Blocked,
    /// Its group said it waits, which it records now (a change): the step
    /// is not complete.
    HoldRecorded,
    /// Its matrix was decided and its legs took its place (a change): they
    /// start in the next step, which reads the definition with them.
    Decided,
}

impl AttemptState {
    /// [`Self::advance`] where a job outcome was adopted, as far as it goes
    /// without reading anything: `None`, the state untouched, when the
    /// advance needs the runners' records of overdue executions or data for
    /// the expressions of jobs due to start (the orchestrator reads those).
    /// [`InlineAdvance::complete`]: a further step would change nothing.
    pub fn advance_inline(
        &mut self,
        definition: &WorkflowDefinition,
        now: DateTime<Utc>,
        minute: Duration,
        budget: usize,
    ) -> Option<InlineAdvance> {
        let no_endings = RunnerEndings::new();
        if !self.overdue_executions(now).is_empty() {
            return None;
        }
        let mut next = self.clone();
        let change = next.advance(definition, now, minute, budget, &no_endings, &ExpressionData::default());
        if !change.missing.is_empty() || !change.timed_out.is_empty() || !change.unschedulable.is_empty() {
            return None;
        }
        // A matrix decided changes the definition the next step reads: the
        // orchestrator's steps read it so, this probe would not.
        if next.matrices.len() != self.matrices.len() {
            return None;
        }
        let probe = next.clone().advance(definition, now, minute, budget, &no_endings, &ExpressionData::default());
        let complete = !probe.changed && probe.missing.is_empty();
        *self = next;
        Some(InlineAdvance { change, complete })
    }

    /// One bounded step of the orchestrator (behaviour.md §9): start the
    /// attempt, apply the run timeout and job timeouts, then start, skip and
    /// cancel what [`plan_advance`] says, touching at most `budget` jobs.
    /// Finalises the attempt once every job is terminal. Call again until
    /// nothing changes.
    ///
    /// An overdue execution that `ended` on the runners' side takes that
    /// ending instead of the timeout; every other one it times out is listed
    /// in [`Change::timed_out`]. `data` is what has been read for the
    /// expressions of jobs due to start: a job whose data is missing waits,
    /// and [`Change::missing`] says what to read.
    pub fn advance(
        &mut self,
        definition: &WorkflowDefinition,
        now: DateTime<Utc>,
        minute: Duration,
        budget: usize,
        ended: &RunnerEndings,
        data: &ExpressionData,
    ) -> Change {
        let mut change = Change::default();
        if self.waits_for_group() {
            self.cancel_outside_group(now, budget, &mut change);
            return change;
        }
        if self.status == AttemptStatus::Pending {
            self.status = AttemptStatus::Running;
            self.started_at = Some(now);
            self.deadline = Some(now + scaled(definition.timeout_minutes, minute));
            change.changed = true;
        }
        let mut touched = self.leave_job_groups(data, &mut change);
        if self.run_timed_out(now) {
            self.time_out_run(ended, now, budget, touched, &mut change);
            return change;
        }
        if self.time_out_jobs(definition, ended, now, budget, &mut touched, &mut change).is_break() {
            return change;
        }
        touched += self.advance_listening(definition, now, minute, data, &mut change, budget.saturating_sub(touched));
        if touched >= budget {
            return change;
        }
        if self.fail_fast(definition, now, budget, &mut touched, &mut change).is_break() {
            return change;
        }
        let complete = self.follow_plan(definition, now, minute, data, budget.saturating_sub(touched), &mut change);
        if complete && self.all_jobs_terminal() {
            // From the statuses as they are now: a job this pass decided
            // itself (an `if:` over outputs skipping it) is not in the plan.
            let statuses: Vec<JobStatus> = self.jobs.iter().map(|job| job.status).collect();
            let outcome = derive_attempt_status(&statuses, self.status == AttemptStatus::Cancelled);
            let emitted = self.finish(outcome, None, now);
            change.changed |= !emitted.is_empty();
            change.emitted.extend(emitted);
        }
        change
    }

    /// An attempt waiting for its group starts nothing (nor does its run
    /// timeout count) before it holds it; a cancel is the only change
    /// meanwhile, and what one cancel could not hold is cancelled here,
    /// `always()` jobs too (they would run outside the group).
    fn cancel_outside_group(&mut self, now: DateTime<Utc>, budget: usize, change: &mut Change) {
        if !self.status.is_terminal() {
            return;
        }
        let left: Vec<usize> =
            (0..self.jobs.len()).filter(|i| !self.jobs[*i].status.is_terminal()).take(budget).collect();
        for index in left {
            change.emitted.extend(self.cancel_job(index, StatusReason::RunCancelled, now));
            change.changed = true;
        }
    }

    /// `fail-fast`: a failed leg cancels its siblings that have not ended
    /// (a soft-failed leg succeeded and cancels nothing). `Break` once the
    /// `budget` is spent.
    fn fail_fast(
        &mut self,
        definition: &WorkflowDefinition,
        now: DateTime<Utc>,
        budget: usize,
        touched: &mut usize,
        change: &mut Change,
    ) -> ControlFlow<()> {
        for group in definition.matrices.iter().filter(|group| group.fail_fast) {
            let failed = self.jobs.iter().any(|job| job.status == JobStatus::Failed && group.legs.contains(&job.key));
            if !failed {
                continue;
            }
            for leg in &group.legs {
                let Some(index) = self.jobs.iter().position(|job| &job.key == leg) else { continue };
                if self.jobs[index].status.is_terminal() {
                    continue;
                }
                if *touched >= budget {
                    return ControlFlow::Break(());
                }
                change.emitted.extend(self.cancel_job(index, StatusReason::FailFast, now));
                change.changed = true;
                *touched += 1;
            }
        }
        ControlFlow::Continue(())
    }

    /// Starts, skips and cancels what the scheduler decides now, touching
    /// at most `budget` jobs. Whether it did all that was decided (a job
    /// left waiting for data or for its group, or the budget spent, leaves
    /// the step incomplete).
    fn follow_plan(
        &mut self,
        definition: &WorkflowDefinition,
        now: DateTime<Utc>,
        minute: Duration,
        data: &ExpressionData,
        budget: usize,
        change: &mut Change,
    ) -> bool {
        let snapshots: Vec<JobSnapshot> = self
            .jobs
            .iter()
            .map(|job| {
                let defined = definition.job(&job.key);
                JobSnapshot {
                    key: job.key.clone(),
                    needs: defined.map(|d| d.needs.clone()).unwrap_or_default(),
                    condition: defined.map(|d| d.condition).unwrap_or_default(),
                    status: job.status,
                }
            })
            .collect();
        let plan = plan_advance(&snapshots, self.status == AttemptStatus::Cancelled);
        let decisions = plan
            .cancel
            .iter()
            .map(|key| (key, Decision::Cancel))
            .chain(plan.skip.iter().map(|key| (key, Decision::Skip)))
            .chain(plan.start.iter().map(|key| (key, Decision::Start)));
        let mut complete = true;
        let mut touched = 0;
        for (key, decision) in decisions {
            if touched >= budget {
                complete = false;
                break;
            }
            let Some(index) = self.jobs.iter().position(|job| &job.key == key) else { continue };
            match decision {
                Decision::Cancel => {
                    change.emitted.extend(self.cancel_job(index, StatusReason::RunCancelled, now));
                }
                Decision::Skip => {
                    change.emitted.extend(self.end_job(
                        index,
                        JobStatus::Skipped,
                        ExecutionStatus::Cancelled,
                        Some(StatusReason::ConditionRejected),
                        now,
                    ));
                }
                Decision::Start => match self.start_due(definition, index, now, minute, data, change) {
                    Start::Done => {}
                    Start::NotYet => continue,
                    Start::Blocked => {
                        complete = false;
                        continue;
                    }
                    Start::HoldRecorded | Start::Decided => {
                        complete = false;
                        change.changed = true;
                        touched += 1;
                        continue;
                    }
                },
            }
            change.changed = true;
            touched += 1;
        }
        complete
    }

    /// Starts job `index`, which the scheduler says is due: queued for a
    /// runner, waiting for its approvers or its events, or skipped by its
    /// `if:`, once its backoff, `max-parallel`, its data and its group let
    /// it.
    fn start_due(
        &mut self,
        definition: &WorkflowDefinition,
        index: usize,
        now: DateTime<Utc>,
        minute: Duration,
        data: &ExpressionData,
        change: &mut Change,
    ) -> Start {
        // A job without an execution (carried over) is terminal
        // and never planned; nothing to start if it were.
        let Some(defined) = definition.job(&self.jobs[index].key) else { return Start::NotYet };
        // A retry waits for its backoff (the attempt's next
        // deadline brings the orchestration back then).
        let waits = self.jobs[index].execution.as_ref().and_then(|e| e.not_before);
        if waits.is_some_and(|at| at > now) {
            return Start::NotYet;
        }
        // `max-parallel`: the leg waits while its siblings fill
        // the limit; the next advance after one ends starts it.
        if let Some(limit) = definition.group_of_leg(&defined.key).and_then(|group| group.max_parallel) {
            let group = definition.group_of_leg(&defined.key).map(|g| g.legs.as_slice()).unwrap_or_default();
            let active = self
                .jobs
                .iter()
                .filter(|job| group.contains(&job.key))
                .filter(|job| matches!(job.status, JobStatus::Queued | JobStatus::Running))
                .count();
            if active >= limit as usize {
                return Start::NotYet;
            }
        }
        let Some(scope) = self.scope_for(definition, defined, data, &mut change.missing) else {
            return Start::Blocked;
        };
        let admitted = defined.when.as_deref().is_none_or(|when| defined.condition.when_holds(when, &scope));
        // A matrix decided now: the job's `if:` is the matrix job's (GitHub
        // decides it before the matrix); each leg takes its group itself.
        if let (true, Some(runtime)) = (admitted, defined.runtime_matrix.as_ref()) {
            let decided = runtime.evaluate(&scope);
            return match self.decide_matrix(index, defined, decided, now, change) {
                true => Start::Decided,
                false => Start::Done,
            };
        }
        // A job in a concurrency group starts only holding it.
        let turn = if admitted { self.job_group_turn(index, defined, &scope, data) } else { GroupTurn::Free };
        let holds = match turn {
            GroupTurn::Free => None,
            GroupTurn::Holds(hold) => Some(hold),
            GroupTurn::Waits(hold) => {
                if self.jobs[index].concurrency.is_some() {
                    return Start::Blocked;
                }
                self.jobs[index].concurrency = Some(hold);
                return Start::HoldRecorded;
            }
            GroupTurn::Ask(request) => {
                change.missing.groups.push(request);
                return Start::Blocked;
            }
        };
        let emitted = if admitted && defined.approval.is_some() {
            self.await_approval(index, defined, now, minute).into_iter().collect()
        } else if let (true, Some(listen)) = (admitted, defined.listen.as_ref()) {
            self.start_listening(index, listen, now, minute).into_iter().collect()
        } else if admitted {
            let spec = job_spec(definition, defined, self.execution_id(index), minute, Some(&scope));
            let Some(emitted) = self.start_job(index, defined, spec, now, minute) else { return Start::NotYet };
            vec![emitted]
        } else {
            self.end_job(
                index,
                JobStatus::Skipped,
                ExecutionStatus::Cancelled,
                Some(StatusReason::ConditionRejected),
                now,
            )
        };
        if let Some(hold) = holds {
            self.jobs[index].concurrency = Some(hold);
        }
        change.emitted.extend(emitted);
        Start::Done
    }
}
