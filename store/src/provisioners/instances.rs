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
use baton_api::provisioners::TerminateReason;
use baton_domain::runners::provisioners::instances::stops;

/// How many instances of one report are applied at once.
const REPORT_CONCURRENCY: usize = 16;

/// What one event did.
#[derive(Default)]
struct Applied {
    /// Its state was a move forward.
    accepted: bool,
    /// The instance stopped (the fleet decides again).
    stopped: bool,
    /// The terminate intent it honoured, with its reason.
    honored: Option<(String, TerminateReason)>,
}

impl Store {
    /// Applies a provisioner's instance report (events already validated):
    /// a state moves only forward; an instance that stops while Baton asked
    /// it to go honours that intent; one that ended lets its reservation go
    /// if no uncancelled lease remains (the fleet pass, once a report).
    ///
    /// Each instance's events are applied in order, the instances side by
    /// side: an event is a few round trips, and a report that carried a
    /// fleet's backlog one event after another outlasted the gateway's 30 s
    /// on a busy table, was sent again, and again (the provisioner's
    /// reservations stayed held, its jobs without machines). Order between
    /// instances never mattered: each write is a compare-and-set on its own
    /// instance's rank.
    pub async fn report_instances(
        &self,
        provisioner: &Provisioner,
        events: &[InstanceEvent],
        now: DateTime<Utc>,
    ) -> Result<ReportOutcome, StoreError> {
        let mut by_instance: Vec<Vec<&InstanceEvent>> = Vec::new();
        for event in events {
            match by_instance.iter_mut().find(|mine| mine[0].provider_runner_id == event.provider_runner_id) {
                Some(mine) => mine.push(event),
                None => by_instance.push(vec![event]),
            }
        }
        let mut applied: Vec<Applied> = Vec::with_capacity(events.len());
        for instances in by_instance.chunks(REPORT_CONCURRENCY) {
            let chunk =
                futures::future::try_join_all(instances.iter().map(|mine| self.apply_in_order(provisioner, mine, now)))
                    .await?;
            applied.extend(chunk.into_iter().flatten());
        }
        let mut outcome = ReportOutcome::default();
        let mut any_stopped = false;
        for applied in applied {
            outcome.accepted += u32::from(applied.accepted);
            any_stopped |= applied.stopped;
            outcome.honored.extend(applied.honored);
        }
        if any_stopped {
            if let Some((_, released)) = self.fleet_pass(provisioner.id, now).await? {
                outcome.reservations_released = released;
            }
        }
        Ok(outcome)
    }

    /// One instance's events, in the order reported.
    async fn apply_in_order(
        &self,
        provisioner: &Provisioner,
        events: &[&InstanceEvent],
        now: DateTime<Utc>,
    ) -> Result<Vec<Applied>, StoreError> {
        let mut applied = Vec::with_capacity(events.len());
        for event in events {
            applied.push(self.apply_instance_event(provisioner, event, now).await?);
        }
        Ok(applied)
    }

    /// One event of an instance: its state moved forward (or found already
    /// there), its reservation linked, the intent of one that stops honoured.
    async fn apply_instance_event(
        &self,
        provisioner: &Provisioner,
        event: &InstanceEvent,
        now: DateTime<Utc>,
    ) -> Result<Applied, StoreError> {
        let mut applied = Applied::default();
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
                Err(err) if matches!(err.as_service_error(), Some(e) if e.is_conditional_check_failed_exception()) => {
                    Ok(None)
                }
                Err(err) => Err(err.into()),
            }
        })
        .await?;
        let instance: InstanceItem = match written {
            Some(attributes) => {
                applied.accepted = true;
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
                    None => return Ok(applied),
                }
            }
        };
        if instance.state.rank() < event.state.rank() {
            return Ok(applied);
        }
        if let Some(reservation_id) = instance.reservation_id {
            self.link_instance(provisioner.id, reservation_id, &instance.provider_runner_id).await?;
        }
        if stops(event.state) {
            applied.stopped = true;
            if let Some(reason) = instance.terminate_reason {
                if self.honor(&instance, now).await? {
                    applied.honored = Some((instance.provider_runner_id.clone(), reason));
                }
            }
        }
        Ok(applied)
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
            .key("pk", s(&instance.head.pk))
            .key("sk", s(&instance.head.sk))
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
