//! The pending queue and the runners' record of each execution
//! (behaviour.md §3, §4, §7).
//!
//! Items (keys in `store::keys`; a pending item and a registry entry are
//! `runner_items::{PendingItem, LabelSet}`):
//! - the runners' record of an execution (`store::records`), never deleted:
//!   the durable tombstone that makes a replayed enqueue a no-op.
//! - `Q#<workspace>#<labelset>` / `<queued_at>#<execution>`: a pending item,
//!   carrying everything the runner needs, in the partition of its workspace
//!   and canonical label set, ordered by `queued_at`.
//! - `QREG#<workspace>` / `<labelset>`: the label sets a workspace has queued
//!   work for, so a claim queries only partitions whose labels fit. An entry
//!   whose partition a claim finds empty is pruned (`prune_label_set`), so
//!   the registry holds the sets with pending work, not every set ever used.
//!   Each entry also counts, for provisioners' demand (`runners::provisioners::demand`),
//!   its claimable executions (`queued`), its executions under a lease
//!   (`running`) and the reservations holding demand on it (`reserved`).
//!   Every count moves in the transaction that makes the change it counts
//!   (queue, claim, reconcile, complete, expiry, reserve, release), so it is
//!   exact; an entry is pruned only when all three are zero.

use aws_sdk_dynamodb::types::{AttributeValue, Delete, TransactWriteItem, Update};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::keys::{self, execution_pk, RUNNER_SK};
use super::records::{RunnerRecord, RunnerStatus};
use super::runner_items::{ClaimAnswer, ExecutionRef, LabelSet, LeaseItem, PendingItem, ReservationLink, Session};
use super::{build, from_item, n, s, Store, TxOutcome};
use crate::error::StoreError;
use crate::ItemHead;
use baton_api::facts::{dispatch_at, Fact, JobClaimed, JobExecutionQueued, QueuedJob};

/// What an enqueue did.
#[derive(Debug, PartialEq, Eq)]
pub enum Enqueued {
    Queued,
    /// The execution was queued already and no runner has claimed it yet.
    StillPending,
    /// The execution was known already (claimed, expired or ended).
    AlreadyKnown,
}

/// What one claim attempt on one candidate did.
#[derive(Debug)]
pub enum ClaimAttempt {
    Won,
    /// Another runner took it first.
    Lost,
    /// The pending item was stale (its execution is leased or finished); it
    /// was removed and no claim was spent.
    Stale,
    SessionExhausted,
    /// The claim's `request_id` took a job already (a retry racing its
    /// original): answer with what it took.
    AlreadyAnswered,
    /// The session's reservation no longer holds demand (taken by another
    /// claim, or released): claim without taking it.
    ReservationSpent,
    /// The transaction's last try met a conflict or throttling: as a lost
    /// race the claim moves on, but an earlier try of it (the SDK's retry)
    /// may have applied with its answer lost, so the job may be leased to
    /// this session already.
    Unsure,
}

/// What one claim writes, as [`Store::try_claim`] was given it: each try
/// of the claim writes it again.
#[derive(Clone, Copy)]
struct ClaimWrites<'a> {
    pending: &'a PendingItem,
    session: &'a Session,
    lease: &'a LeaseItem,
    fact: &'a Fact<JobClaimed>,
    outbox_ttl_days: u32,
    answer: Option<&'a ClaimAnswer>,
}

impl Store {
    /// Makes an execution claimable, for a queued fact whose execution is
    /// not (the orchestrator makes its jobs claimable itself; facts written
    /// otherwise still flow through here). Idempotent through the runners'
    /// record: its put is conditioned on absence, so a replay (before or
    /// after a claim, an expiry or a termination) writes nothing and the
    /// first `queued_at` stands.
    pub async fn enqueue(
        &self,
        fact: &Fact<JobExecutionQueued>,
        labels: Vec<String>,
        labelset: &str,
    ) -> Result<Enqueued, StoreError> {
        // The orchestrator made the execution claimable when it queued it:
        // one read spares the transaction (whose refusal AWS would bill as
        // writes). The conditional put below still settles any race.
        if let Some(record) = self.runner_record(fact.detail.job_execution_id).await? {
            return Ok(if record.status == RunnerStatus::Pending {
                Enqueued::StillPending
            } else {
                Enqueued::AlreadyKnown
            });
        }
        // The fact does not tell the attempt's size: the bus path it is.
        let [put_record, put_pending] =
            self.claimable_puts(&fact.header.workspace_id, &fact.detail, &labels, labelset, false)?;
        let register = self.label_set_registration(&fact.header.workspace_id, &labels, labelset, 1)?;
        let items = vec![put_record, put_pending, register];
        Ok(match self.transact(items).await? {
            TxOutcome::Committed => Enqueued::Queued,
            TxOutcome::ConditionFailed { .. } => Enqueued::AlreadyKnown,
        })
    }

    /// What makes a queued execution claimable: its runners' record (put on
    /// absence: the tombstone that makes a replay a no-op) and its pending
    /// item. The orchestrator writes them in the transaction that queues the
    /// job, so no hop lies between "queued" and "claimable"; the enqueue
    /// consumer of the queued fact then finds the record and writes nothing.
    pub fn claimable_puts(
        &self,
        ws: &str,
        d: &JobExecutionQueued,
        labels: &[String],
        labelset: &str,
        direct_adoption: bool,
    ) -> Result<[TransactWriteItem; 2], StoreError> {
        let execution = ExecutionRef {
            id: d.job_execution_id,
            workspace_id: ws.to_string(),
            run_id: d.run_id,
            job_id: d.job_id,
            attempt: d.attempt,
        };
        let pending = PendingItem {
            head: ItemHead::new(
                keys::queue_pk(ws, labelset),
                // Ordered by when it is dispatched: its priority moves it ahead
                // of (or behind) what was queued around it, in the same range
                // read, so priority costs a claim nothing.
                keys::pending_sk(dispatch_at(d.queued_at, d.job.priority), d.job_execution_id),
                "pending",
            ),
            execution: execution.clone(),
            queued_at: d.queued_at,
            epoch: 0,
            job: QueuedJob { labels: labels.to_vec(), ..d.job.clone() },
            direct_adoption,
        };
        let record = RunnerRecord {
            queued_at: Some(d.queued_at),
            pending_pk: Some(pending.head.pk.clone()),
            pending_sk: Some(pending.head.sk.clone()),
            ..RunnerRecord::unclaimed(execution, RunnerStatus::Pending)
        };
        Ok([self.new_item_put(&record)?, self.item_put(&pending)?])
    }

    /// Registers `labelset` as one with queued work (a fresh version, so a
    /// prune that read the old one cannot remove it), counting the `queued`
    /// executions the same transaction makes claimable. A transaction holds
    /// at most one of these a set: DynamoDB refuses two writes of one item.
    pub fn label_set_registration(
        &self,
        ws: &str,
        labels: &[String],
        labelset: &str,
        queued: usize,
    ) -> Result<TransactWriteItem, StoreError> {
        let register = build(
            LabelSet::update(&self.table, ws, labelset)
                .update_expression("SET labels = :labels, #type = :type, v = :v ADD queued :queued")
                .expression_attribute_names("#type", "type")
                .expression_attribute_values(":queued", n(queued))
                .expression_attribute_values(":labels", serde_dynamo::to_attribute_value(labels)?)
                .expression_attribute_values(":type", s("labelset"))
                .expression_attribute_values(":v", s(Uuid::now_v7().to_string()))
                .build(),
        )?;
        Ok(TransactWriteItem::builder().update(register).build())
    }

    /// The label sets `workspace_id` has queued work for, every page of them.
    pub async fn label_sets(&self, workspace_id: &str) -> Result<Vec<LabelSet>, StoreError> {
        let mut pages = self.query_partition(keys::labelset_registry_pk(workspace_id)).into_paginator().items().send();
        let mut sets = Vec::new();
        while let Some(item) = pages.next().await {
            sets.push(from_item(item?)?);
        }
        Ok(sets)
    }

    /// Removes `set` from the registry if its partition holds no pending
    /// item, as a strongly consistent read sees it, no enqueue bumped its
    /// version since `set` was read (an enqueue after the removal registers
    /// it again), and it counts nothing (a running job's end or a
    /// reservation's release will still write its counts). `true` if it was
    /// removed.
    pub async fn prune_label_set(&self, workspace_id: &str, set: &LabelSet) -> Result<bool, StoreError> {
        let head =
            self.query_partition(keys::queue_pk(workspace_id, &set.sk)).consistent_read(true).limit(1).send().await?;
        if head.count() > 0 || set.queued > 0 || set.running > 0 || set.reserved > 0 {
            return Ok(false);
        }
        let delete = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(keys::labelset_registry_pk(workspace_id)))
            .key("sk", s(&set.sk))
            .condition_expression(
                "v = :v AND (attribute_not_exists(queued) OR queued <= :zero) \
                 AND (attribute_not_exists(running) OR running <= :zero) \
                 AND (attribute_not_exists(reserved) OR reserved <= :zero)",
            )
            .expression_attribute_values(":v", s(&set.v))
            .expression_attribute_values(":zero", n(0));
        super::condition_may_fail(|| delete.clone().send()).await
    }

    /// The oldest `limit` pending items of one label set.
    pub async fn pending_head(
        &self,
        workspace_id: &str,
        labelset: &str,
        limit: i32,
    ) -> Result<Vec<PendingItem>, StoreError> {
        let out = self.query_partition(keys::queue_pk(workspace_id, labelset)).limit(limit).send().await?;
        out.items.unwrap_or_default().into_iter().map(from_item).collect()
    }

    /// Tries to move one pending item to a lease, atomically with the
    /// `runners.job.claimed` fact, the session's claim count and the label
    /// set's counts. A reserved instance's first claim also takes its
    /// reservation's hold off the demand it was holding (once: the
    /// reservation's `holds_demand` is the condition).
    pub async fn try_claim(
        &self,
        pending: &PendingItem,
        session: &Session,
        lease: &LeaseItem,
        fact: &Fact<JobClaimed>,
        outbox_ttl_days: u32,
        answer: Option<&ClaimAnswer>,
    ) -> Result<ClaimAttempt, StoreError> {
        let claim = ClaimWrites { pending, session, lease, fact, outbox_ttl_days, answer };
        let first_of_reservation = session.reservation.as_ref().filter(|_| session.claims == 0);
        match self.try_claim_counting(claim, first_of_reservation).await? {
            // The reservation's hold was taken already (a concurrent claim of
            // the same session, or its release): claim without it.
            ClaimAttempt::ReservationSpent => match self.try_claim_counting(claim, None).await? {
                ClaimAttempt::ReservationSpent => Ok(ClaimAttempt::Lost),
                other => Ok(other),
            },
            other => Ok(other),
        }
    }

    async fn try_claim_counting(
        &self,
        claim: ClaimWrites<'_>,
        first_of_reservation: Option<&ReservationLink>,
    ) -> Result<ClaimAttempt, StoreError> {
        let ClaimWrites { pending, session, lease, fact, outbox_ttl_days, answer } = claim;
        let delete_pending = build(
            Delete::builder()
                .table_name(&self.table)
                .key("pk", s(&pending.head.pk))
                .key("sk", s(&pending.head.sk))
                .condition_expression("attribute_exists(pk)")
                .build(),
        )?;
        // The record must still be pending at the epoch the item was queued
        // with: a stale pending item (leased or finished execution) fails here,
        // and so does one the workflow ended (a cancel, a timeout) whose
        // terminated fact has not been reconciled yet (`withdrawn_at`).
        let lease_record = build(
            Update::builder()
                .table_name(&self.table)
                .key("pk", s(execution_pk(pending.execution.id)))
                .key("sk", s(RUNNER_SK))
                // The lease's fence goes onto the record too: step reports
                // are written here (see `RunnerRecord::token_hash`).
                .update_expression(
                    "SET #status = :leased, epoch = :epoch, token_hash = :h, session_id = :session, \
                     claimed_at = :at, steps = :none REMOVE pending_pk, pending_sk",
                )
                .condition_expression("#status = :pending AND epoch = :prev AND attribute_not_exists(withdrawn_at)")
                .expression_attribute_names("#status", "status")
                .expression_attribute_values(":leased", s(RunnerStatus::Leased.as_str()))
                .expression_attribute_values(":pending", s(RunnerStatus::Pending.as_str()))
                .expression_attribute_values(":epoch", n(lease.epoch))
                .expression_attribute_values(":prev", n(pending.epoch))
                .expression_attribute_values(":h", s(&lease.token_hash))
                .expression_attribute_values(":session", s(lease.session_id.to_string()))
                .expression_attribute_values(":at", s(keys::timestamp(lease.claimed_at)))
                .expression_attribute_values(":none", AttributeValue::M(Default::default()))
                .build(),
        )?;
        let mut items = vec![
            TransactWriteItem::builder().delete(delete_pending).build(),
            TransactWriteItem::builder().update(lease_record).build(),
            self.new_item_put(lease)?,
            self.outbox_put(fact, outbox_ttl_days)?,
        ];
        if session.max_claims.is_some() {
            let mut count = Update::builder()
                .table_name(&self.table)
                .key("pk", s(keys::session_pk(session.id)))
                .key("sk", s(keys::SESSION_SK))
                // The stored cap, not the one this claim read: a terminate
                // intent lowers it to the claims made (`provisioners::fleet`,
                // `request_termination`), and a claim ordered after that
                // intent must fail here rather than lease a job on a machine
                // about to be stopped.
                .condition_expression("claims < max_claims")
                .expression_attribute_values(":one", n(1));
            count = if session.reservation.is_some() {
                // A reserved instance's session keeps what its terminate
                // intents and its reservation's release are decided on: the
                // executions it took and when it last took one.
                count
                    .update_expression(
                        "SET claims = claims + :one, last_claim_at = :at, \
                         executions = list_append(if_not_exists(executions, :none), :execution)",
                    )
                    .expression_attribute_values(":at", s(keys::timestamp(lease.claimed_at)))
                    .expression_attribute_values(":none", AttributeValue::L(vec![]))
                    .expression_attribute_values(
                        ":execution",
                        AttributeValue::L(vec![s(pending.execution.id.to_string())]),
                    )
            } else {
                count.update_expression("SET claims = claims + :one")
            };
            items.push(TransactWriteItem::builder().update(build(count.build())?).build());
        }
        let count_at = session.max_claims.map(|_| 4);
        // The label set's counts: one fewer queued, one more running; and a
        // reservation's first claim takes its hold off the set it was on
        // (one update when that is this set: one item, one write).
        let labelset = keys::labelset_of_queue_pk(&pending.head.pk).unwrap_or_default().to_string();
        let mut counts = "ADD queued :minus, running :one".to_string();
        let mut reservation_at = None;
        if let Some(link) = first_of_reservation {
            reservation_at = Some(items.len());
            let spend = build(
                Update::builder()
                    .table_name(&self.table)
                    .key("pk", s(keys::provisioner_pk(link.provisioner_id)))
                    .key("sk", s(keys::reservation_sk(link.reservation_id)))
                    .update_expression("SET first_claim_at = :at REMOVE holds_demand")
                    .condition_expression("attribute_exists(holds_demand)")
                    .expression_attribute_values(":at", s(keys::timestamp(lease.claimed_at)))
                    .build(),
            )?;
            items.push(TransactWriteItem::builder().update(spend).build());
            if link.labelset == labelset {
                counts.push_str(", reserved :minus");
            } else {
                items.push(LabelSet::count_down(&self.table, &session.workspace_id, &link.labelset, "reserved")?);
            }
        }
        let set_counts = build(
            LabelSet::update(&self.table, &pending.execution.workspace_id, &labelset)
                .update_expression(counts)
                .expression_attribute_values(":minus", n(-1))
                .expression_attribute_values(":one", n(1))
                .build(),
        )?;
        items.push(TransactWriteItem::builder().update(set_counts).build());
        let answer_at = items.len();
        if let Some(answer) = answer {
            items.push(self.new_item_put(answer)?);
        }
        match self.transact(items).await {
            Ok(TxOutcome::Committed) => Ok(ClaimAttempt::Won),
            // Another transaction kept holding one of the items (a claim of
            // the same job, a runner's complete of the session's count) or
            // the partition kept throttling: a lost race, not a failure;
            // the claim moves on to the next candidate. Unsure, though: the
            // SDK's earlier try may have applied, its answer lost.
            Err(err) if err.is_conflict_or_throttling() => Ok(ClaimAttempt::Unsure),
            Err(err) => Err(err),
            Ok(TxOutcome::ConditionFailed { reasons }) => {
                let failed = |i: usize| reasons.get(i).is_some_and(|r| r.is_some());
                if answer.is_some() && failed(answer_at) {
                    Ok(ClaimAttempt::AlreadyAnswered)
                } else if reservation_at.is_some_and(failed) {
                    Ok(ClaimAttempt::ReservationSpent)
                } else if count_at.is_some_and(failed) {
                    Ok(ClaimAttempt::SessionExhausted)
                } else if failed(0) {
                    Ok(ClaimAttempt::Lost)
                } else {
                    // Only the execution's state disagreed: the item is stale.
                    self.delete_pending(&pending.head.pk, &pending.head.sk).await?;
                    Ok(ClaimAttempt::Stale)
                }
            }
        }
    }

    async fn delete_pending(&self, pk: &str, sk: &str) -> Result<(), StoreError> {
        self.client.delete_item().table_name(&self.table).key("pk", s(pk)).key("sk", s(sk)).send().await?;
        Ok(())
    }

    /// Terminal reconciliation (behaviour.md §7) of one execution: a pending
    /// execution loses its pending item and becomes `terminated`; a leased one
    /// gets its lease flagged for cancellation (first timestamp wins) and
    /// keeps it, so its runner can still complete; an unknown one gets a
    /// tombstone so a late enqueue cannot queue it. Touches nothing else.
    /// Idempotent: every write is conditioned on the state it read; a lost
    /// race re-reads (bounded). `Ok(true)`: a lease was flagged (its runner
    /// is worth telling).
    pub async fn reconcile_terminated(
        &self,
        workspace_id: &str,
        lease_ref: &baton_api::facts::JobExecutionTerminated,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        for _ in 0..5 {
            let record = self.runner_record(lease_ref.job_execution_id).await?;
            let done = match record {
                None => {
                    let tombstone = RunnerRecord {
                        terminated_at: Some(now),
                        ..RunnerRecord::unclaimed(
                            ExecutionRef {
                                id: lease_ref.job_execution_id,
                                workspace_id: workspace_id.to_string(),
                                run_id: lease_ref.run_id,
                                job_id: lease_ref.job_id,
                                attempt: lease_ref.attempt,
                            },
                            RunnerStatus::Terminated,
                        )
                    };
                    matches!(self.transact(vec![self.new_item_put(&tombstone)?]).await?, TxOutcome::Committed)
                }
                Some(record) if record.execution.workspace_id != workspace_id => {
                    tracing::error!(execution_id = %record.execution.id, "terminated fact names another workspace; ignored");
                    true
                }
                Some(record) if record.status == RunnerStatus::Pending => {
                    let mut items = vec![TransactWriteItem::builder()
                        .update(build(
                            Update::builder()
                                .table_name(&self.table)
                                .key("pk", s(&record.head.pk))
                                .key("sk", s(RUNNER_SK))
                                .update_expression(
                                    "SET #status = :terminated, terminated_at = :now REMOVE pending_pk, pending_sk",
                                )
                                .condition_expression("#status = :pending AND epoch = :epoch")
                                .expression_attribute_names("#status", "status")
                                .expression_attribute_values(":terminated", s(RunnerStatus::Terminated.as_str()))
                                .expression_attribute_values(":pending", s(RunnerStatus::Pending.as_str()))
                                .expression_attribute_values(":now", s(keys::timestamp(now)))
                                .expression_attribute_values(":epoch", n(record.epoch))
                                .build(),
                        )?)
                        .build()];
                    if let (Some(pk), Some(sk)) = (&record.pending_pk, &record.pending_sk) {
                        items.push(
                            TransactWriteItem::builder()
                                .delete(build(
                                    Delete::builder().table_name(&self.table).key("pk", s(pk)).key("sk", s(sk)).build(),
                                )?)
                                .build(),
                        );
                        // No longer claimable: out of its set's `queued`, in
                        // the write that moves the record out of `pending`.
                        if let Some(labelset) = keys::labelset_of_queue_pk(pk) {
                            items.push(LabelSet::count_down(&self.table, workspace_id, labelset, "queued")?);
                        }
                    }
                    matches!(self.transact(items).await?, TxOutcome::Committed)
                }
                Some(record) if record.status == RunnerStatus::Leased => {
                    self.flag_lease_for_cancel(record.execution.id, record.epoch, now).await?;
                    return Ok(true);
                }
                Some(_) => true, // completed, expired or terminated already
            };
            if done {
                return Ok(false);
            }
        }
        Err(StoreError::Other(format!("reconciling {} kept losing races; will be retried", lease_ref.job_execution_id)))
    }
}
