//! A provisioner's instance reports: each state moves only forward, ties
//! the instance to its reservation, honours the intent of one that stops,
//! and a stop lets the fleet decide again.

use aws_sdk_dynamodb::types::ReturnValue;
use baton_api::provisioners::InstanceEvent;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{InstanceItem, Provisioner, ReportOutcome};
use crate::error::StoreError;
use crate::keys::{self, timestamp};
use crate::runner_items::ReservationLink;
use crate::{contention, from_item, n, s, Store};
use baton_domain::runners::provisioners::instances::stops;

impl Store {
    /// Applies a provisioner's instance report (events already validated),
    /// in order: a state moves only forward; an instance that stops while
    /// Baton asked it to go honours that intent; one that ended lets its
    /// reservation go if no uncancelled lease remains (the fleet pass).
    pub async fn report_instances(
        &self,
        provisioner: &Provisioner,
        events: &[InstanceEvent],
        now: DateTime<Utc>,
    ) -> Result<ReportOutcome, StoreError> {
        let mut outcome = ReportOutcome::default();
        let mut any_stopped = false;
        for event in events {
            let at = event.at.unwrap_or(now);
            let mut set = vec![
                "#type = :type",
                "provider_runner_id = :prid",
                "provisioner_id = :prov",
                "#state = :state",
                "#rank = :rank",
                "state_at = :at",
                "first_seen_at = if_not_exists(first_seen_at, :now)",
            ];
            // The condition is `instances::moves_forward` as DynamoDB can
            // check it: only a higher rank than the one stored is a move.
            let mut update = self
                .client
                .update_item()
                .table_name(&self.table)
                .key("pk", s(keys::provisioner_pk(provisioner.id)))
                .key("sk", s(keys::instance_sk(&event.provider_runner_id)))
                .condition_expression("attribute_not_exists(#rank) OR #rank < :rank")
                .expression_attribute_names("#type", "type")
                .expression_attribute_names("#state", "state")
                .expression_attribute_names("#rank", "rank")
                .expression_attribute_values(":type", s("instance"))
                .expression_attribute_values(":prid", s(&event.provider_runner_id))
                .expression_attribute_values(":prov", s(provisioner.id.to_string()))
                .expression_attribute_values(":state", serde_dynamo::to_attribute_value(event.state)?)
                .expression_attribute_values(":rank", n(event.state.rank()))
                .expression_attribute_values(":at", s(timestamp(at)))
                .expression_attribute_values(":now", s(timestamp(now)));
            if let Some(id) = event.reservation_id {
                set.push("reservation_id = if_not_exists(reservation_id, :res)");
                update = update.expression_attribute_values(":res", s(id.to_string()));
            }
            if let Some(id) = event.runner_session_id {
                set.push("session_id = if_not_exists(session_id, :session)");
                update = update.expression_attribute_values(":session", s(id.to_string()));
            }
            let update = update.update_expression(format!("SET {}", set.join(", "))).return_values(ReturnValue::AllNew);
            let written = contention::retry_conflicts(|| async {
                match update.clone().send().await {
                    Ok(out) => Ok(out.attributes),
                    Err(err) if matches!(err.as_service_error(), Some(e) if e.is_conditional_check_failed_exception()) => Ok(None),
                    Err(err) => Err(err.into()),
                }
            })
            .await?;
            let instance: InstanceItem = match written {
                Some(attributes) => {
                    outcome.accepted += 1;
                    from_item(attributes)?
                }
                // No move: this state (or a later one) is stored already.
                // Perhaps by this very report's earlier try, whose answer
                // was lost after the update but before the link, the honour
                // or the release it leads to; they are each idempotent, so
                // they are done again from what is stored (skipping them
                // left a reservation unlinked, never released: the 30 %
                // soak's leak).
                None => {
                    let key = (keys::provisioner_pk(provisioner.id), keys::instance_sk(&event.provider_runner_id));
                    match self.get(&key.0, &key.1).await? {
                        Some(stored) => from_item(stored)?,
                        None => continue,
                    }
                }
            };
            if instance.state.rank() < event.state.rank() {
                continue;
            }
            if let Some(reservation_id) = instance.reservation_id {
                self.link_instance(provisioner.id, reservation_id, &instance.provider_runner_id).await?;
            }
            if stops(event.state) {
                any_stopped = true;
                if let Some(reason) = instance.terminate_reason {
                    if self.honor(&instance, now).await? {
                        outcome.honored.push((instance.provider_runner_id.clone(), reason));
                    }
                }
            }
        }
        if any_stopped {
            if let Some((_, released)) = self.fleet_pass(provisioner.id, now).await? {
                outcome.reservations_released = released;
            }
        }
        Ok(outcome)
    }

    /// Ties a reservation to the instance first reported for it.
    async fn link_instance(
        &self,
        provisioner_id: Uuid,
        reservation_id: Uuid,
        provider_runner_id: &str,
    ) -> Result<(), StoreError> {
        let link = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(keys::provisioner_pk(provisioner_id)))
            .key("sk", s(keys::reservation_sk(reservation_id)))
            .update_expression("SET provider_runner_id = :prid")
            .condition_expression("attribute_exists(pk) AND attribute_not_exists(provider_runner_id)")
            .expression_attribute_values(":prid", s(provider_runner_id));
        crate::condition_may_fail(|| link.clone().send()).await.map(|_| ())
    }

    async fn honor(&self, instance: &InstanceItem, now: DateTime<Utc>) -> Result<bool, StoreError> {
        let honor = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(&instance.pk))
            .key("sk", s(&instance.sk))
            .update_expression("SET honored_at = :now")
            .condition_expression("attribute_exists(terminate_reason) AND attribute_not_exists(honored_at)")
            .expression_attribute_values(":now", s(timestamp(now)));
        crate::condition_may_fail(|| honor.clone().send()).await
    }

    /// A lease path's share of the convergence: when a lease of a reserved
    /// session ends or is cancelled, its fleet is decided again (an
    /// `exhausted` or `job-cancelled` intent, a release whose last blocking
    /// lease just ended). Failures are the caller's to log: the next pass
    /// (a report, a read) converges all the same.
    pub async fn converge_reservation(&self, link: &ReservationLink, now: DateTime<Utc>) -> Result<(), StoreError> {
        self.fleet_pass(link.provisioner_id, now).await.map(|_| ())
    }
}
