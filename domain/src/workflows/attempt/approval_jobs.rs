//! Approval jobs in an attempt: waiting for their approvers, their
//! decisions, their timeout (`workflows::approval` decides the rules).

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::changes::{Change, Emitted};
use super::state::AttemptState;
use super::transitions::scaled;
use crate::workflows::approval::{self, ApprovalSpec, Approver, TimedOut, Verdict};
use crate::workflows::definition::{JobDefinition, WorkflowDefinition};
use crate::workflows::status::{ExecutionStatus, JobStatus, StatusReason};
use baton_api::facts::{ApprovalDecided, WaitingFor};
use baton_api::runs::ApprovalRequest;

impl AttemptState {
    /// Job `index`, an approval, starts waiting for its approvers: no
    /// runner, no queue; its timeout counts from now.
    pub(super) fn await_approval(
        &mut self,
        index: usize,
        defined: &JobDefinition,
        now: DateTime<Utc>,
        minute: Duration,
    ) -> Option<Emitted> {
        let job = &mut self.jobs[index];
        let execution = job.execution.as_mut()?;
        job.continue_on_error = defined.continue_on_error.as_deref() == Some("true");
        let since = *execution.queued_at.get_or_insert(now);
        execution.started_at.get_or_insert(now);
        let until = since + scaled(defined.timeout_minutes, minute);
        execution.deadline = Some(until);
        self.start_waiting(index, WaitingFor::Approval, until)
    }

    /// Ends the waiting approval `index` as its `on-timeout` says.
    pub(super) fn time_out_approval(&mut self, index: usize, spec: &ApprovalSpec, now: DateTime<Utc>) -> Vec<Emitted> {
        match approval::on_timeout(spec, &self.jobs[index].decisions) {
            TimedOut::Fail => {
                self.end_job(index, JobStatus::Failed, ExecutionStatus::Failed, Some(StatusReason::TimedOut), now)
            }
            TimedOut::Skip => {
                self.end_job(index, JobStatus::Skipped, ExecutionStatus::Cancelled, Some(StatusReason::TimedOut), now)
            }
            TimedOut::Approve { outputs } => self.approve(index, outputs, now),
        }
    }

    /// Ends approval `index` approved: succeeded, its outputs written.
    fn approve(
        &mut self,
        index: usize,
        outputs: BTreeMap<String, serde_json::Value>,
        now: DateTime<Utc>,
    ) -> Vec<Emitted> {
        let results = Emitted::Results {
            run_id: self.run_id,
            attempt: self.attempt,
            execution_id: self.execution_id(index),
            outputs,
        };
        let mut emitted = self.end_job(index, JobStatus::Succeeded, ExecutionStatus::Succeeded, None, now);
        emitted.push(results);
        emitted
    }

    /// Records an approver's decision on approval job `job_id`
    /// (behaviour.md §16): refused unless the job waits and the approver
    /// may decide; a repeat by the same approver changes nothing
    /// (`Ok(None)`). Enough approvals end the job `succeeded` with the
    /// inputs as its outputs; a rejection ends it `failed`/`rejected`. The
    /// orchestration then starts (or skips) what follows.
    pub fn decide_approval(
        &mut self,
        definition: &WorkflowDefinition,
        job_id: Uuid,
        approver: &Approver,
        creator: Option<&str>,
        request: ApprovalRequest,
        now: DateTime<Utc>,
    ) -> Result<Option<Change>, ApprovalError> {
        let index = self.job_index(job_id).ok_or(ApprovalError::NoSuchJob)?;
        let key = self.jobs[index].key.clone();
        let spec = definition.job(&key).and_then(|d| d.approval.as_ref()).ok_or(ApprovalError::NotWaiting)?;
        if self.jobs[index].status != JobStatus::Waiting {
            return Err(ApprovalError::NotWaiting);
        }
        approval::may_decide(spec, approver, creator).map_err(ApprovalError::Refused)?;
        let decision = approval::recorded(approver, request.decision, request.comment, request.inputs, now);
        let Some(verdict) =
            approval::decide(spec, &self.jobs[index].decisions, &decision).map_err(ApprovalError::Refused)?
        else {
            return Ok(None);
        };
        let approvals = self.jobs[index]
            .decisions
            .iter()
            .chain([&decision])
            .filter(|d| d.decision == approval::Decision::Approve)
            .count();
        let outcome = match verdict {
            Verdict::Waiting { .. } => "waiting",
            Verdict::Approved { .. } => "approved",
            Verdict::Rejected => "rejected",
        };
        let fact = ApprovalDecided {
            run_id: self.run_id,
            attempt: self.attempt,
            job_id,
            job_key: key,
            by: decision.by.clone(),
            decision: decision.decision,
            comment: decision.comment.clone(),
            inputs: decision.inputs.clone(),
            decided_at: now,
            outcome: outcome.to_string(),
            approvals: approvals as u32,
            required: spec.required,
        };
        self.jobs[index].decisions.push(decision);
        let mut change = Change { changed: true, ..Change::default() };
        change.emitted.push(Emitted::ApprovalDecided(fact));
        match verdict {
            Verdict::Waiting { .. } => {}
            Verdict::Approved { outputs } => change.emitted.extend(self.approve(index, outputs, now)),
            Verdict::Rejected => change.emitted.extend(self.end_job(
                index,
                JobStatus::Failed,
                ExecutionStatus::Failed,
                Some(StatusReason::Rejected),
                now,
            )),
        }
        Ok(Some(change))
    }
}

/// Why a decision on an approval job was not recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalError {
    /// The attempt has no such job (404).
    NoSuchJob,
    /// The job is not an approval, or does not wait (yet, or any more):
    /// 409 `not-waiting`.
    NotWaiting,
    /// The approver may not decide, or the inputs are wrong.
    Refused(approval::Refusal),
}
