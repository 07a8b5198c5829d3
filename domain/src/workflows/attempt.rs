//! The state of one attempt of a run, and every change made to it: started,
//! advanced by the orchestrator, moved by a runner's fact, cancelled (pure:
//! each change mutates the state and returns the facts it must publish, in
//! the same transaction, by the caller).
//!
//! Why one state for the whole attempt: an attempt's jobs and their
//! executions live on **one** item (the attempt item). A run of 256 jobs
//! would need 512 job and execution items, past the 100 items a
//! `TransactWriteItems` holds, so creating a run could not be atomic; one
//! item keeps creation at a handful of items and lets the orchestrator read
//! the whole attempt with one `GetItem`. The item stays small (ids, statuses and
//! timestamps, 400 to 600 bytes a job; the definition lives in its own frozen
//! snapshot item, step results and outputs in one item per finished
//! execution): 148 KB for 256 finished jobs with 99-character keys (a unit
//! test measures it), under DynamoDB's 400 KB. The cost is contention:
//! every change of the attempt is a compare-and-set on its `version`, so
//! outcomes of jobs finishing together retry against each other (writers
//! in one process take an in-process lock first, see `store::serialize`),
//! and every write is billed for the whole item (1 KB a unit, twice in a
//! transaction): a 10-job attempt is about 5 KB; a 256-job one pays more per
//! outcome, the price of atomic creation and a one-read orchestrator.
//!
//! Changes that publish facts are bounded (`budget` jobs a call) so that one
//! transaction never exceeds 100 items; the caller loops until nothing
//! changes.
//!
//! The state lives in `state`; each other submodule holds one concern of
//! its changes.

mod advance;
mod approval_jobs;
mod cancel;
mod changes;
mod concurrency_groups;
mod deadlines;
mod expression_scope;
mod listening_jobs;
mod retries;
mod runner_events;
mod runtime_matrices;
mod state;
mod transitions;

pub use advance::InlineAdvance;
pub use approval_jobs::ApprovalError;
pub use cancel::AlreadyFinished;
pub use changes::{Change, Emitted, GroupRequest, MissingData};
pub use listening_jobs::EventError;
pub use runner_events::{step_statuses, RunnerEffect, RunnerEndings};
pub use state::{withdrawn_executions, AttemptState, ExecutionRecord, JobState, NewAttempt, RunState};

#[cfg(test)]
mod tests;
