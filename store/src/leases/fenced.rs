//! The holder's writes on its live lease: heartbeats, step reports and log
//! charges, each fenced by the lease's epoch and its token's hash (a step
//! report by the copy of the fence on the runner record).

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{lease_from, Fenced, StepRecorded};
use crate::error::StoreError;
use crate::keys::{execution_pk, timestamp, LEASE_SK, RUNNER_SK};
use crate::records::{RunnerRecord, RunnerStatus};
use crate::runner_items::LeaseItem;
use crate::{from_item, n, s, Item, Store};
use baton_api::facts::StepResult;
use baton_domain::workflows::definition::MAX_STEPS_PER_JOB;

/// A fenced update of the lease: the update, its own condition beyond the
/// fence, an attribute name it uses, and why a failed own condition refuses it.
#[derive(Default)]
struct FencedUpdate<'a> {
    update: &'a str,
    condition: Option<&'a str>,
    name: Option<(&'a str, String)>,
    refusal: Option<String>,
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
