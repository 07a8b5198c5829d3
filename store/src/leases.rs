//! Leases (behaviour.md §5, §6): `EXEC#<execution>` / `LEASE`, a small item so
//! that a heartbeat costs one write unit. It exists only while the lease is
//! live; `lx_shard`/`lx_expires_at` put it in the sparse `leases-by-expiry`
//! index the reaper reads.
//!
//! The index holds a lower bound of the expiry, not the expiry: heartbeats
//! extend `expires_at` only, so they never move the lease in the index (a
//! moved key is a delete and a put there, two write units on every
//! heartbeat). The reaper finds a lease once its bound passed, reads it, and
//! either expires it or, heartbeated since, moves its entry up to its real
//! expiry (`advance_lease_index`): once a lease duration, not once a
//! heartbeat interval.
//!
//! The item is `runner_items::LeaseItem`. Its operations are here by
//! concern: the holder's fenced writes (`fenced`), its end with an outcome
//! (`completion`), and the reaper and the cancel flag (`expiry`).
//!
//! Fencing: every write is conditioned on the lease's epoch and the hash of
//! its token, so a runner that lost its lease (reaped, or completed by an
//! earlier attempt of its own) can never act on it again. Step reports are
//! the exception in where they go, not in how they are fenced: they land on
//! the execution's runner record, which carries the same epoch and token
//! hash from the claim on, so the item heartbeats rewrite never grows with
//! a job's steps.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::keys::LEASE_SK;
use super::records::RunnerStatus;
use super::runner_items::LeaseItem;
use super::{from_item, Item, Store};
use crate::error::StoreError;
use baton_api::facts::{JobOutcome, StepResult};

mod completion;
mod expiry;
mod fenced;

/// A step report was recorded.
#[derive(Debug, PartialEq, Eq)]
pub struct StepRecorded {
    /// The lease is flagged for cancel: the runner should stop.
    pub cancel_requested: bool,
    /// The lease already ended with this outcome, by this lease's own
    /// complete or settling report: a repeat of the report that settled it
    /// (its answer was lost) learns so, and nothing is written.
    pub settled: Option<JobOutcome>,
}

/// What the runners' side knows of an execution (`Store::live_runner`).
#[derive(Debug, Clone, PartialEq)]
pub struct LiveRunner {
    pub execution_id: Uuid,
    /// When and by which session it was claimed, if it was.
    pub claimed: Option<(DateTime<Utc>, Uuid)>,
    pub steps: BTreeMap<String, StepResult>,
}

/// The step reports of a lease as read, and how many reports that was.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportedSteps {
    pub steps: BTreeMap<String, StepResult>,
    pub reports: u64,
}

/// What a fenced write on a lease found.
#[derive(Debug, PartialEq)]
pub enum Fenced<T> {
    Ok(T),
    /// The lease is gone or has moved to another epoch: 409 `lease-lost`.
    LeaseLost,
    /// The token is not this lease's: 404 (do not reveal the lease).
    NotFound,
    /// The lease is the caller's, and the write is refused: 400 with this
    /// reason (a step report past the job's number of steps).
    Refused(String),
}

/// What a settling step report did.
#[derive(Debug, PartialEq, Eq)]
pub enum Settlement {
    Settled(Completion),
    /// The lease or its record is not as read (another report landed, the
    /// lease ended or moved): nothing was written; record the report the
    /// ordinary way, which tells which.
    Moved,
}

/// What complete recorded.
#[derive(Debug, PartialEq, Eq)]
pub enum Completion {
    Recorded(JobOutcome),
    /// A repeat of an earlier complete of the same lease.
    AlreadyRecorded(JobOutcome),
}

fn lease_from(item: Option<Item>) -> Result<Option<LeaseItem>, StoreError> {
    item.map(from_item).transpose()
}

impl Store {
    pub async fn lease(&self, execution_id: Uuid) -> Result<Option<LeaseItem>, StoreError> {
        lease_from(self.get(&LeaseItem::key(execution_id), LEASE_SK).await?)
    }

    /// What the runners' side knows of executions a run view shows as not
    /// finished: whether, when and by whom each was claimed, and its step
    /// reports so far (on the record; for a lease claimed before they moved
    /// there, on the lease). Executions without a record are left out.
    pub async fn live_runners(&self, executions: &[Uuid]) -> Result<Vec<LiveRunner>, StoreError> {
        let mut live = Vec::with_capacity(executions.len());
        for record in self.runner_records(executions).await? {
            let claimed = match (record.claimed_at, record.session_id) {
                (Some(at), Some(session)) if record.status != RunnerStatus::Pending => Some((at, session)),
                _ => None,
            };
            let steps = if record.status == RunnerStatus::Leased && record.token_hash.is_none() {
                self.lease(record.execution.id).await?.map(|lease| lease.steps).unwrap_or_default()
            } else {
                record.steps
            };
            live.push(LiveRunner { execution_id: record.execution.id, claimed, steps });
        }
        Ok(live)
    }

    /// The step reports of a live lease and how many were written (on its
    /// runner record; a lease claimed before keeps its own). `None` when the
    /// record is gone or on another epoch.
    pub async fn reported_steps(&self, lease: &LeaseItem) -> Result<Option<ReportedSteps>, StoreError> {
        Ok(self.runner_record(lease.execution.id).await?.filter(|record| record.epoch == lease.epoch).map(|record| {
            let mut steps = record.steps;
            for (id, step) in &lease.steps {
                steps.entry(id.clone()).or_insert_with(|| step.clone());
            }
            ReportedSteps { steps, reports: record.step_reports }
        }))
    }
}
