//! The attempt and its jobs in their concurrency groups: whose turn it is,
//! leaving a group, being replaced in one (`workflows::concurrency`).

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::changes::{Change, Emitted, GroupRequest};
use super::state::AttemptState;
use crate::workflows::concurrency::{self, GroupHold, HoldStatus, Member};
use crate::workflows::definition::JobDefinition;
use crate::workflows::references::{ExpressionData, JobScope};
use crate::workflows::status::StatusReason;

impl AttemptState {
    /// This attempt as its concurrency group lists it.
    pub fn member(&self) -> Member {
        Member { run_id: self.run_id, attempt: self.attempt, job: None }
    }

    /// Job `index` as its concurrency group lists it.
    fn job_member(&self, index: usize) -> Member {
        Member { run_id: self.run_id, attempt: self.attempt, job: Some(self.jobs[index].id) }
    }

    /// Where job `index`, due to start, stands with its concurrency group:
    /// free to start (no group, or holding it), holding it now (the group
    /// said so), waiting (the group said so), or not asked yet.
    pub(super) fn job_group_turn(
        &self,
        index: usize,
        defined: &JobDefinition,
        scope: &JobScope<'_>,
        data: &ExpressionData,
    ) -> GroupTurn {
        let Some(spec) = &defined.concurrency else { return GroupTurn::Free };
        let job = &self.jobs[index];
        if job.concurrency.as_ref().is_some_and(|hold| hold.status == HoldStatus::Holding) {
            return GroupTurn::Free;
        }
        // The name was checked when the run was created, from the same
        // inputs, matrix values and ids: it cannot come out bad here. Were
        // it to, the job's key stands in (the job still takes turns).
        let hold = concurrency::hold_of(spec, scope).unwrap_or_else(|_| GroupHold {
            group: defined.key.clone(),
            cancel_in_progress: false,
            queue: spec.queue,
            limit: spec.limit,
            status: HoldStatus::Waiting,
        });
        match data.joined.get(&job.id) {
            Some(true) => GroupTurn::Holds(GroupHold { status: HoldStatus::Holding, ..hold }),
            Some(false) => GroupTurn::Waits(hold),
            None => GroupTurn::Ask(GroupRequest::Join { hold, member: self.job_member(index) }),
        }
    }

    /// Jobs that ended in a group they have not left yet leave it (asked of
    /// the orchestrator; once it says they have, their holds are marked
    /// left). How many holds it marked.
    pub(super) fn leave_job_groups(&mut self, data: &ExpressionData, change: &mut Change) -> usize {
        let mut marked = 0;
        for index in 0..self.jobs.len() {
            let job = &self.jobs[index];
            let Some(hold) = job.concurrency.as_ref().filter(|h| h.status != HoldStatus::Left) else { continue };
            if !job.status.is_terminal() {
                continue;
            }
            if data.left.contains(&job.id) {
                if let Some(hold) = self.jobs[index].concurrency.as_mut() {
                    hold.status = HoldStatus::Left;
                }
                change.changed = true;
                marked += 1;
            } else {
                let group = hold.group.clone();
                change.missing.groups.push(GroupRequest::Leave { group, member: self.job_member(index) });
            }
        }
        marked
    }

    /// The concurrency groups held (or waited for) by jobs that have not
    /// left them: what a done attempt leaves on its way out.
    pub fn job_groups(&self) -> Vec<(String, Member)> {
        (0..self.jobs.len())
            .filter_map(|index| {
                let hold = self.jobs[index].concurrency.as_ref().filter(|h| h.status != HoldStatus::Left)?;
                Some((hold.group.clone(), self.job_member(index)))
            })
            .collect()
    }

    /// Job `job_id` is replaced in its concurrency group by a newer job:
    /// it ends `cancelled` (reason `concurrency_replaced`; its runner is
    /// told as on any cancel) unless it has ended already (`None`).
    pub fn replace_job(&mut self, job_id: Uuid, now: DateTime<Utc>) -> Option<Vec<Emitted>> {
        let index = self.jobs.iter().position(|job| job.id == job_id)?;
        if self.jobs[index].status.is_terminal() {
            return None;
        }
        Some(self.cancel_job(index, StatusReason::ConcurrencyReplaced, now))
    }

    /// Whether it waits for its concurrency group (no job may start).
    pub fn waits_for_group(&self) -> bool {
        self.concurrency.as_ref().is_some_and(|hold| hold.status == HoldStatus::Waiting)
    }

    /// It holds its group now: its jobs may start. `false` when it already
    /// did, has no group, or has ended (nothing will start any more).
    pub fn hold_group(&mut self) -> bool {
        match &mut self.concurrency {
            Some(hold) if hold.status == HoldStatus::Waiting && !self.status.is_terminal() => {
                hold.status = HoldStatus::Holding;
                true
            }
            _ => false,
        }
    }
}

/// Where a job due to start stands with its concurrency group.
pub(super) enum GroupTurn {
    /// It has no group, or holds it already: it starts.
    Free,
    /// The group just said it holds it: it starts, holding.
    Holds(GroupHold),
    /// The group said it waits: it waits, its hold recorded.
    Waits(GroupHold),
    /// The group must be asked first.
    Ask(GroupRequest),
}
