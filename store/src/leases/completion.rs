//! A lease's end with its outcome: the runner's complete, or the terminal
//! report of the job's last step that settles it, each with the
//! `runners.job.completed` fact in the same transaction.

use aws_sdk_dynamodb::types::{Delete, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update};
use uuid::Uuid;

use super::{Completion, Fenced, Settlement};
use crate::error::StoreError;
use crate::keys::{execution_pk, LEASE_SK, RUNNER_SK};
use crate::records::RunnerStatus;
use crate::runner_items::LeaseItem;
use crate::{build, n, s, Store, TxOutcome};
use baton_api::facts::{Fact, JobCompleted, JobOutcome, StepResult};

/// The lease a completion ends: by its execution, epoch and token, and as
/// read before (`read`, when its epoch is this one: its end comes out of
/// its label set's `running` count).
struct EndingLease<'a> {
    execution_id: Uuid,
    epoch: u64,
    token_hash: &'a str,
    read: Option<&'a LeaseItem>,
}

/// The step report that settles a job, and the record's report count its
/// other steps were read at.
struct FinalStep<'a> {
    step: &'a StepResult,
    seen_reports: u64,
}

impl Store {
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
        let ending = EndingLease { execution_id, epoch, token_hash, read: lease };
        let items = self.completion_items(ending, fact, None, outbox_ttl_days)?;
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
        let (execution_id, epoch) = (lease.execution.id, lease.epoch);
        let final_step = FinalStep { step: last, seen_reports };
        let ending = EndingLease { execution_id, epoch, token_hash: &lease.token_hash, read: Some(lease) };
        let items = self.completion_items(ending, fact, Some(final_step), outbox_ttl_days)?;
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
    fn completion_items(
        &self,
        ending: EndingLease<'_>,
        fact: &Fact<JobCompleted>,
        final_step: Option<FinalStep<'_>>,
        outbox_ttl_days: u32,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let EndingLease { execution_id, epoch, token_hash, read: lease } = ending;
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
}
