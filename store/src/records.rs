//! The runners' record of an execution, `EXEC#<execution>` / `RUNNER`: its
//! status, the lease epoch, where its pending item is and, once completed,
//! the recorded outcome and who completed it. It is never deleted: it is the
//! durable tombstone that makes a replayed enqueue a no-op (behaviour.md §3),
//! and the queue (enqueue, claim) and the leases (complete, expiry) each
//! move it by a compare-and-set on its status and epoch.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::{TransactWriteItem, Update};

use super::keys::{execution_pk, RUNNER_SK};
use super::{build, from_item, s, Store};
use crate::error::StoreError;
use crate::runner_items::ExecutionRef;
use crate::ItemHead;
use baton_api::facts::{JobOutcome, StepResult};
use baton_domain::workflows::attempt::step_statuses;
use baton_domain::workflows::{ExecutionEvent, WorkflowDefinition};

/// Status of the runners' record of an execution: `pending → leased →
/// completed | expired`, or `terminated` (ended by the workflows side before
/// or while it ran). The record is never deleted, whatever its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunnerStatus {
    Pending,
    Leased,
    Completed,
    Expired,
    Terminated,
}

impl RunnerStatus {
    /// The stored spelling, for condition and update expressions.
    pub fn as_str(self) -> &'static str {
        match self {
            RunnerStatus::Pending => "pending",
            RunnerStatus::Leased => "leased",
            RunnerStatus::Completed => "completed",
            RunnerStatus::Expired => "expired",
            RunnerStatus::Terminated => "terminated",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunnerRecord {
    #[serde(flatten)]
    pub head: ItemHead,
    #[serde(flatten)]
    pub execution: ExecutionRef,
    pub status: RunnerStatus,
    pub epoch: u64,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "baton_domain::time::stored_option")]
    pub queued_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_pk: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_sk: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<JobOutcome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_epoch: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_token_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "baton_domain::time::stored_option")]
    pub terminated_at: Option<DateTime<Utc>>,
    /// From the claim on: the lease's token hash, its session and the
    /// claim's instant, written with the status. Step reports are fenced on
    /// them here, so the lease item that every heartbeat rewrites stays one
    /// write unit whatever the job's number of steps. `None` on a record
    /// leased before step reports moved here (`Store::report_step`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "baton_domain::time::stored_option")]
    pub claimed_at: Option<DateTime<Utc>>,
    /// A cancel flagged the lease (as on the lease item: a step report's
    /// answer carries it, and reads it from here).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "baton_domain::time::stored_option")]
    pub cancel_requested_at: Option<DateTime<Utc>>,
    /// The step reports of the lease, by step id. Kept when the lease ends,
    /// so the workflows side can adopt the steps' outcome from the record
    /// (an expiry, a timeout) and a run view reads them for a running job.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub steps: BTreeMap<String, StepResult>,
    /// How many step reports were written: a lease expires with the steps
    /// it read only if no report landed since (`Store::expire_lease`).
    #[serde(default)]
    pub step_reports: u64,
    /// The job's outputs, as its complete reported them. A timeout that
    /// adopts the outcome from this record (the completed fact still on its
    /// way) writes them, with the step reports above, where dependants and
    /// the view read them; without them a dependant's `if:` and env saw
    /// empty outputs. Not stored when empty, so a job without outputs pays
    /// nothing for it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub outputs: BTreeMap<String, serde_json::Value>,
}

impl RunnerRecord {
    /// A record no claim has touched, at epoch 0: `pending` (being queued)
    /// or `terminated` (a tombstone that keeps a late enqueue out).
    pub fn unclaimed(execution: ExecutionRef, status: RunnerStatus) -> Self {
        Self {
            head: ItemHead::new(execution_pk(execution.id), RUNNER_SK, "runner_execution"),
            execution,
            status,
            epoch: 0,
            queued_at: None,
            pending_pk: None,
            pending_sk: None,
            outcome: None,
            completed_epoch: None,
            completed_token_hash: None,
            terminated_at: None,
            token_hash: None,
            session_id: None,
            claimed_at: None,
            cancel_requested_at: None,
            steps: BTreeMap::new(),
            step_reports: 0,
            outputs: BTreeMap::new(),
        }
    }

    /// The steps reported and the outputs of a completion recorded here,
    /// if there are any: what an adoption from the record writes beside the
    /// outcome.
    pub fn completed_results(&self) -> Option<(Vec<StepResult>, &BTreeMap<String, serde_json::Value>)> {
        let reported = !self.outputs.is_empty() || !self.steps.is_empty();
        (self.status == RunnerStatus::Completed && reported)
            .then(|| (self.steps.values().cloned().collect(), &self.outputs))
    }

    /// What the runners' side did with the execution, as the event the
    /// workflows side applies: its ending ([`Self::ending`]), else its
    /// claim while it runs. `None` while nobody has claimed it.
    pub fn ending_or_claim(&self, definition: &WorkflowDefinition, job_key: &str) -> Option<ExecutionEvent> {
        self.ending(definition, job_key).or_else(|| {
            (self.status == RunnerStatus::Leased)
                .then(|| ExecutionEvent::Claimed { at: self.claimed_at.unwrap_or(DateTime::<Utc>::UNIX_EPOCH) })
        })
    }

    /// How the execution ended on the runners' side, as the event the
    /// workflows side applies: finished (the recorded outcome) or lease
    /// expired (with the steps the lease held). `None` while it may still
    /// run, or once the workflows side ended it.
    pub fn ending(&self, definition: &WorkflowDefinition, job_key: &str) -> Option<ExecutionEvent> {
        match self.status {
            RunnerStatus::Completed => Some(ExecutionEvent::Completed {
                status: self.outcome.unwrap_or(JobOutcome::Failed),
                // The recorded outcome already counts a failed step.
                steps: Vec::new(),
                exit_code: baton_domain::workflows::execution::failing_exit_code(self.steps.values()),
            }),
            RunnerStatus::Expired => {
                let reported: Vec<StepResult> = self.steps.values().cloned().collect();
                Some(ExecutionEvent::LeaseExpired {
                    steps: step_statuses(definition, job_key, self.execution.id, &reported),
                })
            }
            RunnerStatus::Pending | RunnerStatus::Leased | RunnerStatus::Terminated => None,
        }
    }
}

impl Store {
    pub async fn runner_record(&self, execution_id: Uuid) -> Result<Option<RunnerRecord>, StoreError> {
        self.get(&execution_pk(execution_id), RUNNER_SK).await?.map(from_item).transpose()
    }

    /// The runner records of `executions` that exist, read eventually
    /// consistently in `BatchGetItem`s of 100 keys: what a run view shows
    /// of a wide run's unfinished jobs in a few requests, at half the read
    /// units of consistent single reads (a view a moment stale is fine).
    pub async fn runner_records(&self, executions: &[Uuid]) -> Result<Vec<RunnerRecord>, StoreError> {
        self.batch_get_eventually(executions.iter().map(|id| (execution_pk(*id), RUNNER_SK.to_string()))).await
    }

    /// A transaction's check that the runners' side has not ended the
    /// execution (no record yet, or one still pending, leased or
    /// terminated). The timeout path writes only with it: a complete or a
    /// lease expiry that committed after the orchestrator read the record
    /// fails the check, and the timeout is decided again with it. The check
    /// also withdraws the execution from claims (`withdrawn_at`, as
    /// `AttemptsStore::withdrawn_update` does for a cancel): one transaction
    /// may not touch an item twice, so the flag rides on the check.
    pub fn not_ended_by_runner_check(
        &self,
        execution_id: Uuid,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<TransactWriteItem, StoreError> {
        self.withdrawn_if(execution_id, now, &[RunnerStatus::Pending, RunnerStatus::Leased, RunnerStatus::Terminated])
    }

    /// A transaction's check that nobody has claimed the execution (no
    /// record yet, or one still pending), which withdraws it from claims
    /// as [`Self::not_ended_by_runner_check`] does: the unschedulable path
    /// writes only with it, so a claim that landed first wins and one that
    /// comes after finds it withdrawn.
    pub fn unclaimed_check(
        &self,
        execution_id: Uuid,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<TransactWriteItem, StoreError> {
        self.withdrawn_if(execution_id, now, &[RunnerStatus::Pending])
    }

    /// Withdraws the execution from claims on the condition that its
    /// runners' record is absent or in one of `statuses`.
    fn withdrawn_if(
        &self,
        execution_id: Uuid,
        now: chrono::DateTime<chrono::Utc>,
        statuses: &[RunnerStatus],
    ) -> Result<TransactWriteItem, StoreError> {
        let names: Vec<String> = (0..statuses.len()).map(|i| format!(":s{i}")).collect();
        let mut check = Update::builder()
            .table_name(&self.table)
            .key("pk", s(execution_pk(execution_id)))
            .key("sk", s(RUNNER_SK))
            .update_expression("SET withdrawn_at = if_not_exists(withdrawn_at, :at)")
            .condition_expression(format!("attribute_not_exists(pk) OR #status IN ({})", names.join(", ")))
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":at", s(super::keys::timestamp(now)));
        for (name, status) in names.iter().zip(statuses) {
            check = check.expression_attribute_values(name, s(status.as_str()));
        }
        let check = build(check.build())?;
        Ok(TransactWriteItem::builder().update(check).build())
    }
}
