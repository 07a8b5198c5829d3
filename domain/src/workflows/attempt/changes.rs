//! What a change of the attempt returns: the facts to publish with it, and
//! what the orchestrator must read or ask its groups before the change can
//! go further.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::workflows::concurrency::{GroupHold, Member};
use baton_api::facts::{
    ApprovalDecided, JobExecutionQueued, JobExecutionTerminated, JobSpec, JobTerminated, JobWaiting, RunCancelled,
    RunTerminated,
};

/// A fact a change must publish, in the transaction that writes the change.
// The queued variant carries the job's spec: these live for one change, a
// few dozen at most, so a box would cost an allocation each for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Emitted {
    /// A job queued: its fact, and its spec (written to the table with it).
    Queued {
        fact: JobExecutionQueued,
        spec: JobSpec,
    },
    ExecutionTerminated(JobExecutionTerminated),
    JobTerminated(JobTerminated),
    RunTerminated(RunTerminated),
    RunCancelled(RunCancelled),
    /// An approval or a listening job started waiting.
    JobWaiting(JobWaiting),
    /// An approver's decision (`workflows::approval`).
    ApprovalDecided(ApprovalDecided),
    /// An execution that ran on no runner ended with these outputs (an
    /// approval's inputs): its result item, as a runner's outcome writes.
    Results {
        run_id: Uuid,
        attempt: u32,
        execution_id: Uuid,
        outputs: BTreeMap<String, serde_json::Value>,
    },
}

/// The result of one bounded change.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Change {
    /// Whether the state changed (and so must be written).
    pub changed: bool,
    pub emitted: Vec<Emitted>,
    /// Executions this change timed out. The caller writes the change only
    /// if their runners' records still hold no finish: a complete that
    /// landed on the runners' side first wins (finished beats timeout).
    pub timed_out: Vec<Uuid>,
    /// Executions this change failed as unschedulable. The caller writes
    /// the change only if their runners' records still show no claim (a
    /// claim that landed first wins).
    pub unschedulable: Vec<Uuid>,
    /// What jobs due to start need for their expressions and the caller
    /// has not read yet; those jobs wait (the change is not complete).
    pub missing: MissingData,
}

/// Data the expressions of jobs due to start read, not given to `advance`,
/// and the concurrency groups jobs must join or leave first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MissingData {
    /// The run's own data: its inputs and its `github` context.
    pub run: bool,
    /// The outputs of these (finished) executions.
    pub outputs: Vec<Uuid>,
    /// Groups to join (jobs due to start) or leave (jobs that ended); the
    /// answers go in [`ExpressionData::joined`] and [`ExpressionData::left`].
    ///
    /// [`ExpressionData::joined`]: crate::workflows::references::ExpressionData::joined
    /// [`ExpressionData::left`]: crate::workflows::references::ExpressionData::left
    pub groups: Vec<GroupRequest>,
}

impl MissingData {
    pub fn is_empty(&self) -> bool {
        !self.run && self.outputs.is_empty() && self.groups.is_empty()
    }
}

/// A job's business with its concurrency group, for the orchestrator (the
/// group item is its own write: `store::concurrency`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupRequest {
    /// The job is due to start: it joins (idempotent: joining again tells
    /// whether it holds the group now).
    Join { hold: GroupHold, member: Member },
    /// The job ended: it leaves, and whoever holds the group in its place
    /// is woken.
    Leave { group: String, member: Member },
}
