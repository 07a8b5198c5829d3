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
//! Fencing: every write is conditioned on the lease's epoch and the hash of
//! its token, so a runner that lost its lease (reaped, or completed by an
//! earlier attempt of its own) can never act on it again. Step reports are
//! the exception in where they go, not in how they are fenced: they land on
//! the execution's runner record, which carries the same epoch and token
//! hash from the claim on, so the item heartbeats rewrite never grows with
//! a job's steps.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::{
    AttributeValue, Delete, ReturnValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::keys::{execution_pk, timestamp, LEASES_BY_EXPIRY, LEASE_SK, RUNNER_SK};
use super::records::{RunnerRecord, RunnerStatus};
use super::{build, from_item, n, s, Item, Store, TxOutcome};
use crate::error::StoreError;
use baton_api::facts::{Fact, JobCompleted, JobLeaseExpired, JobOutcome, StepResult};
use baton_domain::workflows::definition::MAX_STEPS_PER_JOB;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LeaseItem {
    pub pk: String,
    pub sk: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub execution_id: Uuid,
    pub workspace_id: String,
    pub run_id: Uuid,
    pub job_id: Uuid,
    pub attempt: u32,
    pub session_id: Uuid,
    pub epoch: u64,
    pub token_hash: String,
    #[serde(with = "baton_domain::time::stored")]
    pub claimed_at: DateTime<Utc>,
    #[serde(with = "baton_domain::time::stored")]
    pub expires_at: DateTime<Utc>,
    pub heartbeated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "baton_domain::time::stored_option")]
    pub cancel_requested_at: Option<DateTime<Utc>>,
    /// Step reports of a lease claimed before they moved to the runner
    /// record (`RunnerRecord::token_hash`); empty, and not stored, on any
    /// lease claimed since.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub steps: BTreeMap<String, StepResult>,
    pub lx_shard: String,
    /// A lower bound of `expires_at` in epoch milliseconds, the index's sort
    /// key (the reaper moves it up; heartbeats leave it).
    pub lx_expires_at: i64,
    /// Its complete adopts the outcome itself (`workflows::execution::DIRECT_ADOPTION_MAX_JOBS`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub direct_adoption: bool,
    /// The label set whose `running` count this lease is in (its end takes
    /// it out). Absent on leases claimed before the counts existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labelset: Option<String>,
    /// The reservation of the session that holds it: its end may release
    /// the reservation (`Store::converge_reservation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<super::provisioners::ReservationLink>,
    /// The job's number of steps: its last step's terminal report settles
    /// it (`runners::settle`). Absent on leases of jobs queued before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_count: Option<u32>,
}

impl LeaseItem {
    /// The write that takes this lease out of its label set's `running`
    /// count, in the transaction that ends it.
    pub fn running_count_end(&self, table: &str) -> Result<Option<TransactWriteItem>, StoreError> {
        let Some(labelset) = &self.labelset else { return Ok(None) };
        let update = build(
            Update::builder()
                .table_name(table)
                .key("pk", s(super::keys::labelset_registry_pk(&self.workspace_id)))
                .key("sk", s(labelset))
                .update_expression("ADD running :minus")
                .expression_attribute_values(":minus", n(-1))
                .build(),
        )?;
        Ok(Some(TransactWriteItem::builder().update(update).build()))
    }

    pub fn key(execution_id: Uuid) -> String {
        execution_pk(execution_id)
    }

    pub fn lease_ref(&self) -> baton_api::facts::LeaseRef {
        baton_api::facts::LeaseRef {
            run_id: self.run_id,
            attempt: self.attempt,
            job_id: self.job_id,
            job_execution_id: self.execution_id,
            session_id: self.session_id,
            epoch: self.epoch,
        }
    }
}

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

/// A fenced update of the lease: the update, its own condition beyond the
/// fence, an attribute name it uses, and why a failed own condition refuses it.
#[derive(Default)]
struct FencedUpdate<'a> {
    update: &'a str,
    condition: Option<&'a str>,
    name: Option<(&'a str, String)>,
    refusal: Option<String>,
}

/// The step report that settles a job, and the record's report count its
/// other steps were read at.
struct FinalStep<'a> {
    step: &'a StepResult,
    seen_reports: u64,
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

/// Names the chunks of one log charge (`Store::charge_log_bytes`), in any
/// order: 16 hex digits of a SHA-256, small enough to ride on the lease.
fn log_charge_digest(chunks: &[(u64, u64)]) -> String {
    let mut sorted = chunks.to_vec();
    sorted.sort_unstable();
    let named: String = sorted.iter().map(|(seq, bytes)| format!("{seq}:{bytes};")).collect();
    baton_domain::tokens::hash_token(&named)[..16].to_string()
}

impl Store {
    /// Diagnoses a failed fenced write from the item as it was (`ALL_OLD`).
    fn fence_failure<T>(
        old: Option<Item>,
        epoch: u64,
        token_hash: &str,
        refusal: Option<String>,
    ) -> Result<Fenced<T>, StoreError> {
        match lease_from(old)? {
            Some(lease) if lease.epoch == epoch && lease.token_hash != token_hash => Ok(Fenced::NotFound),
            // The fence held: what failed is the write's own condition.
            Some(lease) if lease.epoch == epoch => Ok(refusal.map_or(Fenced::LeaseLost, Fenced::Refused)),
            _ => Ok(Fenced::LeaseLost),
        }
    }

    /// One conditional write, no read: extends the lease and returns it (the
    /// cancel flag comes back with it).
    pub async fn heartbeat(
        &self,
        execution_id: Uuid,
        epoch: u64,
        token_hash: &str,
        expires_at: DateTime<Utc>,
    ) -> Result<Fenced<LeaseItem>, StoreError> {
        let values = [(":x", s(timestamp(expires_at))), (":t", AttributeValue::Bool(true))];
        // Not the index key: the reaper moves that (see the module's notes).
        let update = FencedUpdate { update: "SET expires_at = :x, heartbeated = :t", ..Default::default() };
        self.fenced_update(execution_id, epoch, token_hash, update, values).await
    }

    /// Records one step's progress on the execution's runner record, fenced
    /// like a heartbeat by the epoch and token hash the claim wrote there;
    /// the answer says whether the lease is flagged for cancel.
    ///
    /// Not on the lease: every heartbeat rewrites the lease, and a lease
    /// holding a 100-step job's reports would bill each heartbeat by their
    /// size. A lease claimed before the record carried the fence keeps its
    /// reports on itself until it ends.
    pub async fn report_step(
        &self,
        execution_id: Uuid,
        epoch: u64,
        token_hash: &str,
        step: &StepResult,
    ) -> Result<Fenced<StepRecorded>, StoreError> {
        let report: AttributeValue = serde_dynamo::to_attribute_value(step)?;
        let refusal = format!("a job has at most {MAX_STEPS_PER_JOB} steps; this lease holds reports of as many");
        let written = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(execution_pk(execution_id)))
            .key("sk", s(RUNNER_SK))
            .update_expression("SET steps.#step = :report ADD step_reports :one")
            // The map stays bounded (its steps travel in the lease-expired
            // fact): a new step id is taken while fewer than a job's maximum
            // are held.
            .condition_expression(
                "#status = :leased AND epoch = :e AND token_hash = :h \
                 AND (attribute_exists(steps.#step) OR size(steps) < :max)",
            )
            .expression_attribute_names("#status", "status")
            .expression_attribute_names("#step", step.id.to_string())
            .expression_attribute_values(":leased", s(RunnerStatus::Leased.as_str()))
            .expression_attribute_values(":e", n(epoch))
            .expression_attribute_values(":h", s(token_hash))
            .expression_attribute_values(":max", n(MAX_STEPS_PER_JOB as u64))
            .expression_attribute_values(":report", report.clone())
            .expression_attribute_values(":one", n(1))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let old = match written {
            Ok(out) => {
                let record: RunnerRecord = from_item(out.attributes.unwrap_or_default())?;
                return Ok(Fenced::Ok(StepRecorded {
                    cancel_requested: record.cancel_requested_at.is_some(),
                    settled: None,
                }));
            }
            Err(err) => match err.as_service_error() {
                Some(aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException(e)) => {
                    e.item.clone().map(from_item::<RunnerRecord>).transpose()?
                }
                _ => return Err(err.into()),
            },
        };
        match old {
            Some(record)
                if record.status == RunnerStatus::Completed
                    && record.completed_epoch == Some(epoch)
                    && record.completed_token_hash.as_deref() == Some(token_hash) =>
            {
                Ok(Fenced::Ok(StepRecorded { cancel_requested: false, settled: record.outcome }))
            }
            Some(record) if record.status == RunnerStatus::Leased && record.epoch == epoch => {
                match record.token_hash.as_deref() {
                    Some(held) if held == token_hash => Ok(Fenced::Refused(refusal)),
                    Some(_) => Ok(Fenced::NotFound),
                    None => self.report_step_on_lease(execution_id, epoch, token_hash, step, report, refusal).await,
                }
            }
            _ => Ok(Fenced::LeaseLost),
        }
    }

    /// A step report of a lease claimed before the runner record carried
    /// its fence: on the lease, as it was then.
    async fn report_step_on_lease(
        &self,
        execution_id: Uuid,
        epoch: u64,
        token_hash: &str,
        step: &StepResult,
        report: AttributeValue,
        refusal: String,
    ) -> Result<Fenced<StepRecorded>, StoreError> {
        let update = FencedUpdate {
            update: "SET steps.#step = :report",
            condition: Some("(attribute_exists(steps.#step) OR size(steps) < :max)"),
            name: Some(("#step", step.id.to_string())),
            refusal: Some(refusal),
        };
        let max = n(MAX_STEPS_PER_JOB as u64);
        let fenced =
            self.fenced_update(execution_id, epoch, token_hash, update, [(":report", report), (":max", max)]).await?;
        Ok(match fenced {
            Fenced::Ok(lease) => {
                Fenced::Ok(StepRecorded { cancel_requested: lease.cancel_requested_at.is_some(), settled: None })
            }
            Fenced::LeaseLost => Fenced::LeaseLost,
            Fenced::NotFound => Fenced::NotFound,
            Fenced::Refused(reason) => Fenced::Refused(reason),
        })
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
                self.lease(record.execution_id).await?.map(|lease| lease.steps).unwrap_or_default()
            } else {
                record.steps
            };
            live.push(LiveRunner { execution_id: record.execution_id, claimed, steps });
        }
        Ok(live)
    }

    /// The step reports of a live lease and how many were written (on its
    /// runner record; a lease claimed before keeps its own). `None` when the
    /// record is gone or on another epoch.
    pub async fn reported_steps(&self, lease: &LeaseItem) -> Result<Option<ReportedSteps>, StoreError> {
        Ok(self.runner_record(lease.execution_id).await?.filter(|record| record.epoch == lease.epoch).map(|record| {
            let mut steps = record.steps;
            for (id, step) in &lease.steps {
                steps.entry(id.clone()).or_insert_with(|| step.clone());
            }
            ReportedSteps { steps, reports: record.step_reports }
        }))
    }

    /// Charges the chunks of one upload request (`(seq, bytes)`) to the
    /// live lease (fenced like a heartbeat), refused once the job's log
    /// would pass `cap`: the runner caps its log, and this holds whatever
    /// runner sends.
    ///
    /// Counted once: the update writes a digest of the chunks it charges
    /// (`log_charge`) and is conditioned on it not being the last charge's.
    /// The SDK's retry of an update whose answer was lost, and a runner's
    /// repeat of the request it just made (its `PUT` failed), find their own
    /// charge and get the lease as it is, nothing added. One small
    /// attribute, not a record a chunk: the lease stays the one-unit item
    /// heartbeats rewrite, and a charge stays one write unit.
    pub async fn charge_log_bytes(
        &self,
        execution_id: Uuid,
        epoch: u64,
        token_hash: &str,
        chunks: &[(u64, u64)],
        cap: u64,
    ) -> Result<Fenced<LeaseItem>, StoreError> {
        let bytes: u64 = chunks.iter().map(|(_, b)| *b).sum();
        let refusal = format!("the job's log reached its cap of {cap} bytes");
        if bytes > cap {
            return Ok(Fenced::Refused(refusal));
        }
        let charge = log_charge_digest(chunks);
        let update = FencedUpdate {
            update: "ADD log_bytes :b SET log_charge = :c",
            condition: Some(
                "(attribute_not_exists(log_charge) OR log_charge <> :c) \
                 AND (attribute_not_exists(log_bytes) OR log_bytes <= :room)",
            ),
            name: None,
            refusal: Some(refusal),
        };
        let values = [(":b", n(bytes)), (":room", n(cap.saturating_sub(bytes))), (":c", s(&charge))];
        match self.fenced_update(execution_id, epoch, token_hash, update, values).await? {
            // The fence held and the charge's own condition failed: this
            // very charge was made already, or the cap is reached.
            Fenced::Refused(reason) => {
                let item = self.get(&LeaseItem::key(execution_id), LEASE_SK).await?;
                let made = item.as_ref().and_then(|i| i.get("log_charge")).and_then(|c| c.as_s().ok()) == Some(&charge);
                Ok(match lease_from(item)? {
                    Some(lease) if made && lease.epoch == epoch && lease.token_hash == token_hash => Fenced::Ok(lease),
                    Some(lease) if lease.epoch == epoch && lease.token_hash == token_hash => Fenced::Refused(reason),
                    Some(lease) if lease.epoch == epoch => Fenced::NotFound,
                    _ => Fenced::LeaseLost,
                })
            }
            other => Ok(other),
        }
    }

    /// An update of the live lease conditioned on its epoch and token hash,
    /// returning the lease as written; on a failed condition the item as it
    /// was tells a lost lease (gone, or another epoch) from a foreign token.
    async fn fenced_update<const N: usize>(
        &self,
        execution_id: Uuid,
        epoch: u64,
        token_hash: &str,
        write: FencedUpdate<'_>,
        values: [(&str, AttributeValue); N],
    ) -> Result<Fenced<LeaseItem>, StoreError> {
        let condition = match write.condition {
            Some(extra) => format!("epoch = :e AND token_hash = :h AND {extra}"),
            None => "epoch = :e AND token_hash = :h".to_string(),
        };
        let mut request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(LeaseItem::key(execution_id)))
            .key("sk", s(LEASE_SK))
            .update_expression(write.update)
            .condition_expression(condition)
            .expression_attribute_values(":e", n(epoch))
            .expression_attribute_values(":h", s(token_hash))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        if let Some((placeholder, value)) = write.name {
            request = request.expression_attribute_names(placeholder, value);
        }
        for (placeholder, value) in values {
            request = request.expression_attribute_values(placeholder, value);
        }
        match request.send().await {
            Ok(out) => match lease_from(out.attributes)? {
                Some(lease) => Ok(Fenced::Ok(lease)),
                None => Err(StoreError::Malformed("a fenced update returned no item".into())),
            },
            Err(err) => match err.as_service_error() {
                Some(aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException(e)) => {
                    Self::fence_failure(e.item.clone(), epoch, token_hash, write.refusal)
                }
                _ => Err(err.into()),
            },
        }
    }

    /// Ends the lease at once and records the outcome, with the
    /// `runners.job.completed` fact, in one transaction. A repeat of the same
    /// lease's complete finds the recorded outcome and returns it.
    /// `lease` is the lease as read before (when its epoch is this one): its
    /// end comes out of its label set's `running` count here.
    pub async fn complete(
        &self,
        execution_id: Uuid,
        epoch: u64,
        token_hash: &str,
        lease: Option<&LeaseItem>,
        fact: &Fact<JobCompleted>,
        outbox_ttl_days: u32,
    ) -> Result<Fenced<Completion>, StoreError> {
        let items = self.completion_items(execution_id, epoch, token_hash, lease, fact, None, outbox_ttl_days)?;
        match self.transact(items).await? {
            TxOutcome::Committed => Ok(Fenced::Ok(Completion::Recorded(fact.detail.status))),
            TxOutcome::ConditionFailed { .. } => {
                if let Some(outcome) = self.recorded_by(execution_id, epoch, token_hash).await? {
                    return Ok(Fenced::Ok(Completion::AlreadyRecorded(outcome)));
                }
                match self.lease(execution_id).await? {
                    Some(lease) if lease.epoch == epoch && lease.token_hash != token_hash => Ok(Fenced::NotFound),
                    _ => Ok(Fenced::LeaseLost),
                }
            }
        }
    }

    /// Settles a job on its last step's report (`runners::settle`): records
    /// the report and ends the lease with the outcome and its
    /// `runners.job.completed` fact in one transaction, as a complete does.
    /// `seen_reports` is the record's `step_reports` the settled steps were
    /// read at: a report that landed since makes this write fail
    /// (`Settlement::Moved`) rather than settle on steps it did not see.
    pub async fn settle_on_steps(
        &self,
        lease: &LeaseItem,
        last: &StepResult,
        seen_reports: u64,
        fact: &Fact<JobCompleted>,
        outbox_ttl_days: u32,
    ) -> Result<Settlement, StoreError> {
        let (execution_id, epoch) = (lease.execution_id, lease.epoch);
        let final_step = FinalStep { step: last, seen_reports };
        let items = self.completion_items(
            execution_id,
            epoch,
            &lease.token_hash,
            Some(lease),
            fact,
            Some(final_step),
            outbox_ttl_days,
        )?;
        match self.transact(items).await? {
            TxOutcome::Committed => Ok(Settlement::Settled(Completion::Recorded(fact.detail.status))),
            TxOutcome::ConditionFailed { .. } => {
                // A repeat of the report that settled it (its answer was lost).
                Ok(match self.recorded_by(execution_id, epoch, &lease.token_hash).await? {
                    Some(outcome) => Settlement::Settled(Completion::AlreadyRecorded(outcome)),
                    None => Settlement::Moved,
                })
            }
        }
    }

    /// The outcome recorded by this lease's own complete or settling report.
    async fn recorded_by(
        &self,
        execution_id: Uuid,
        epoch: u64,
        token_hash: &str,
    ) -> Result<Option<JobOutcome>, StoreError> {
        Ok(self.runner_record(execution_id).await?.and_then(|r| {
            let ours = r.status == RunnerStatus::Completed
                && r.completed_epoch == Some(epoch)
                && r.completed_token_hash.as_deref() == Some(token_hash);
            ours.then(|| r.outcome.unwrap_or(JobOutcome::Failed))
        }))
    }

    /// The writes that end a lease with its outcome: the fenced delete of
    /// the lease, the runner record's outcome (and, when a step report
    /// settles it, that report), the fact, and the label set's count.
    #[allow(clippy::too_many_arguments)]
    fn completion_items(
        &self,
        execution_id: Uuid,
        epoch: u64,
        token_hash: &str,
        lease: Option<&LeaseItem>,
        fact: &Fact<JobCompleted>,
        final_step: Option<FinalStep<'_>>,
        outbox_ttl_days: u32,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let outcome = fact.detail.status;
        let end_lease = build(
            Delete::builder()
                .table_name(&self.table)
                .key("pk", s(LeaseItem::key(execution_id)))
                .key("sk", s(LEASE_SK))
                .condition_expression("epoch = :e AND token_hash = :h")
                .expression_attribute_values(":e", n(epoch))
                .expression_attribute_values(":h", s(token_hash))
                .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
                .build(),
        )?;
        // The outputs ride along (when there are any; the step reports are
        // on the record already): a timeout that adopts this outcome before
        // its fact arrives reads them here (`RunnerRecord::completed_results`).
        let mut set =
            "SET #status = :completed, outcome = :o, completed_epoch = :e, completed_token_hash = :h".to_string();
        let mut condition = "#status = :leased AND epoch = :e".to_string();
        if !fact.detail.outputs.is_empty() {
            set.push_str(", outputs = :out");
        }
        if final_step.is_some() {
            // The report itself, fenced like any report, and only on the
            // reports its steps were read at.
            set.push_str(", steps.#step = :report ADD step_reports :one");
            condition.push_str(" AND token_hash = :h AND step_reports = :seen");
        }
        let mut record = Update::builder()
            .table_name(&self.table)
            .key("pk", s(execution_pk(execution_id)))
            .key("sk", s(RUNNER_SK))
            .update_expression(set)
            .condition_expression(condition);
        if !fact.detail.outputs.is_empty() {
            let outputs = serde_dynamo::to_attribute_value(&fact.detail.outputs)?;
            record = record.expression_attribute_values(":out", outputs);
        }
        if let Some(final_step) = &final_step {
            record = record
                .expression_attribute_names("#step", final_step.step.id.to_string())
                .expression_attribute_values(":report", serde_dynamo::to_attribute_value(final_step.step)?)
                .expression_attribute_values(":one", n(1))
                .expression_attribute_values(":seen", n(final_step.seen_reports));
        }
        let record = build(
            record
                .expression_attribute_names("#status", "status")
                .expression_attribute_values(":completed", s(RunnerStatus::Completed.as_str()))
                .expression_attribute_values(":leased", s(RunnerStatus::Leased.as_str()))
                .expression_attribute_values(":o", serde_dynamo::to_attribute_value(outcome)?)
                .expression_attribute_values(":e", n(epoch))
                .expression_attribute_values(":h", s(token_hash))
                .build(),
        )?;
        let mut items = vec![
            TransactWriteItem::builder().delete(end_lease).build(),
            TransactWriteItem::builder().update(record).build(),
            self.outbox_put(fact, outbox_ttl_days)?,
        ];
        // Only the lease read at this epoch tells its set; the delete's
        // condition makes the count move with this very lease's end.
        if let Some(count) = lease.filter(|l| l.epoch == epoch).map(|l| l.running_count_end(&self.table)).transpose()? {
            items.extend(count);
        }
        Ok(items)
    }

    pub async fn lease(&self, execution_id: Uuid) -> Result<Option<LeaseItem>, StoreError> {
        lease_from(self.get(&LeaseItem::key(execution_id), LEASE_SK).await?)
    }

    /// Live leases of one index shard whose index bound passed before `now`,
    /// oldest first: the expired ones, and heartbeated ones whose entry the
    /// reaper moves up (`advance_lease_index`).
    ///
    /// The index projects keys only: every heartbeat moves a lease in it, and
    /// a copy of the whole lease (its step reports included) would bill that
    /// move by the lease's size. The few expired leases are read from the
    /// table instead; one already gone (completed meanwhile) is skipped.
    pub async fn expired_leases(
        &self,
        shard: &str,
        now: DateTime<Utc>,
        limit: i32,
    ) -> Result<Vec<LeaseItem>, StoreError> {
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(LEASES_BY_EXPIRY)
            .key_condition_expression("lx_shard = :shard AND lx_expires_at < :now")
            .expression_attribute_values(":shard", s(shard))
            .expression_attribute_values(":now", n(now.timestamp_millis()))
            .limit(limit)
            .send()
            .await?;
        let keys: Vec<String> = out
            .items
            .unwrap_or_default()
            .into_iter()
            .filter_map(|mut key| match key.remove("pk") {
                Some(aws_sdk_dynamodb::types::AttributeValue::S(pk)) => Some(pk),
                _ => None,
            })
            .collect();
        let read = futures::future::try_join_all(
            keys.iter().map(|pk| async move { lease_from(self.get(pk, LEASE_SK).await?) }),
        )
        .await?;
        Ok(read.into_iter().flatten().collect())
    }

    /// Moves a heartbeated lease's index entry up to its expiry as read, so
    /// the reaper finds it again only when it may have expired. Only ever
    /// forward, and only on the same claim: a second reaper doing the same,
    /// or a complete that deleted the lease, makes this a no-op.
    pub async fn advance_lease_index(&self, lease: &LeaseItem) -> Result<(), StoreError> {
        let bound = lease.expires_at.timestamp_millis();
        let advance = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(&lease.pk))
            .key("sk", s(LEASE_SK))
            .update_expression("SET lx_expires_at = :bound")
            .condition_expression("epoch = :e AND lx_expires_at < :bound")
            .expression_attribute_values(":bound", n(bound))
            .expression_attribute_values(":e", n(lease.epoch));
        super::condition_may_fail(|| advance.clone().send()).await.map(|_| ())
    }

    /// Expires one lease with its tombstone and its `lease_expired` fact. The
    /// condition re-checks the expiry at write time, so a heartbeat that lands
    /// after the reaper read the index saves the lease; and only one of two
    /// concurrent reapers can delete it, so there is one fact per lease.
    /// The steps `reported` as read go into the fact and onto the record,
    /// conditioned on the count of reports read: a step report that lands
    /// in between makes this `false` too, and the next pass reads it.
    /// `false` when the lease was saved or already gone.
    pub async fn expire_lease(
        &self,
        lease: &LeaseItem,
        reported: &ReportedSteps,
        now: DateTime<Utc>,
        fact: &Fact<JobLeaseExpired>,
        outbox_ttl_days: u32,
    ) -> Result<bool, StoreError> {
        let delete = build(
            Delete::builder()
                .table_name(&self.table)
                .key("pk", s(&lease.pk))
                .key("sk", s(LEASE_SK))
                .condition_expression("epoch = :e AND expires_at < :now")
                .expression_attribute_values(":e", n(lease.epoch))
                .expression_attribute_values(":now", s(timestamp(now)))
                .build(),
        )?;
        let tombstone = build(
            Update::builder()
                .table_name(&self.table)
                .key("pk", s(execution_pk(lease.execution_id)))
                .key("sk", s(RUNNER_SK))
                // The record keeps the steps (a lease claimed before they
                // moved there brings its own): the orchestrator adopts them
                // from there if the job's timeout comes before this expiry's
                // fact does, and the fact must say what the record says.
                .update_expression("SET #status = :expired, steps = :steps")
                .condition_expression(
                    "#status = :leased AND epoch = :e AND (attribute_not_exists(step_reports) OR step_reports = :n)",
                )
                .expression_attribute_names("#status", "status")
                .expression_attribute_values(":expired", s(RunnerStatus::Expired.as_str()))
                .expression_attribute_values(":steps", serde_dynamo::to_attribute_value(&reported.steps)?)
                .expression_attribute_values(":n", n(reported.reports))
                .expression_attribute_values(":leased", s(RunnerStatus::Leased.as_str()))
                .expression_attribute_values(":e", n(lease.epoch))
                .build(),
        )?;
        let mut items = vec![
            TransactWriteItem::builder().delete(delete).build(),
            TransactWriteItem::builder().update(tombstone).build(),
            self.outbox_put(fact, outbox_ttl_days)?,
        ];
        items.extend(lease.running_count_end(&self.table)?);
        Ok(matches!(self.transact(items).await?, TxOutcome::Committed))
    }

    /// Flags a live lease for cancellation, on the lease (a heartbeat's
    /// answer) and on its runner record (a step report's); the first
    /// timestamp wins. A lease that already ended needs no flag. Each write
    /// is idempotent, so a retry after a failure between them completes it.
    pub async fn flag_lease_for_cancel(
        &self,
        execution_id: Uuid,
        epoch: u64,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let flag = |sk: &str, condition: &str| {
            self.client
                .update_item()
                .table_name(&self.table)
                .key("pk", s(execution_pk(execution_id)))
                .key("sk", s(sk))
                .update_expression("SET cancel_requested_at = if_not_exists(cancel_requested_at, :now)")
                .condition_expression(condition)
                .expression_attribute_values(":now", s(timestamp(now)))
                .expression_attribute_values(":e", n(epoch))
        };
        let on_record = flag(RUNNER_SK, "#status = :leased AND epoch = :e")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":leased", s(RunnerStatus::Leased.as_str()));
        super::condition_may_fail(|| on_record.clone().send()).await?;
        let on_lease = flag(LEASE_SK, "attribute_exists(pk) AND epoch = :e");
        super::condition_may_fail(|| on_lease.clone().send()).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::log_charge_digest;

    #[test]
    fn a_log_charge_is_named_by_its_chunks_whatever_their_order() {
        let charge = log_charge_digest(&[(1, 100), (2, 50)]);
        assert_eq!(charge.len(), 16);
        assert_eq!(log_charge_digest(&[(2, 50), (1, 100)]), charge);
        assert_ne!(log_charge_digest(&[(1, 100)]), charge);
        assert_ne!(log_charge_digest(&[(1, 100), (2, 51)]), charge);
        assert_ne!(log_charge_digest(&[(12, 5)]), log_charge_digest(&[(1, 25)]));
    }
}
