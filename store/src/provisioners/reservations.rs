//! A provisioner's reservations: the reserve transaction (the demand it
//! holds and the instance slots it takes, each conditioned on what was
//! read), the registration's link to its session, and the release.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::{TransactWriteItem, Update};
use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

use super::{Provisioner, ReservationItem, Reserved};
use crate::error::StoreError;
use crate::keys::{self, timestamp};
use crate::outbox::{ChangeFacts, FACTS_PER_OUTBOX_ITEM};
use crate::runner_items::{LabelSet, RegistrationToken, ReservationLink};
use crate::ItemHead;
use crate::{build, contention, n, s, Store};
use baton_api::facts::{Fact, ReservationCreated, ReservationReleased};
use baton_domain::runners::provisioners::demand::{spread_reservations, SetCounts};
use baton_domain::tokens::{self, hash_token, ReservationKey};

/// The most items of one DynamoDB transaction.
const TRANSACTION_ITEMS: usize = 100;

/// The items of a reserve transaction of `reservations` over `sets` job
/// sets: the provisioner's count, one count per job set, the reservation
/// and its token each, and the outbox items of their facts.
fn reserve_items(sets: usize, reservations: usize) -> usize {
    1 + sets + 2 * reservations + reservations.div_ceil(FACTS_PER_OUTBOX_ITEM)
}

/// The head of `plan` that one transaction can write: a reserve over many
/// job sets (tool labels and matrices make them common) would otherwise
/// pass DynamoDB's 100 items and fail on every try.
fn within_one_transaction(plan: Vec<(SetCounts, u32)>) -> Vec<(SetCounts, u32)> {
    let (mut sets, mut reservations) = (0, 0);
    let mut fitted = Vec::new();
    for (set, wanted) in plan {
        let fits = (1..=wanted as usize).rev().find(|k| reserve_items(sets + 1, reservations + k) <= TRANSACTION_ITEMS);
        let Some(take) = fits else { break };
        sets += 1;
        reservations += take;
        fitted.push((set, take as u32));
    }
    fitted
}

impl Store {
    /// Reserves up to `count` instances for `labels` (one of the
    /// provisioner's served sets), as demand and `max_instances` allow.
    #[allow(clippy::too_many_arguments)]
    pub async fn reserve(
        &self,
        provisioner_id: Uuid,
        labels: &[String],
        count: u32,
        expires_in_s: u32,
        key: Option<ReservationKey>,
        outbox_ttl_days: u32,
        now: DateTime<Utc>,
    ) -> Result<Vec<Reserved>, StoreError> {
        let mut made = Vec::new();
        // A named reserve: what an earlier try of it made is answered again
        // (the unreleased ones; a released one's index stays used), and only
        // the rest is reserved, under the indices no try used yet.
        let mut free_indices: Vec<u32> = Vec::new();
        if let Some(key) = &key {
            let ids: Vec<Uuid> = (0..count).map(|i| key.reservation_id(i)).collect();
            let earlier = self.reservations_of(provisioner_id, &ids).await?;
            for index in 0..count {
                match earlier.get(&key.reservation_id(index)) {
                    Some(reservation) if reservation.released_at.is_none() => {
                        made.push(Reserved { reservation: reservation.clone(), token: key.registration_token(index).1 })
                    }
                    Some(_) => {}
                    None => free_indices.push(index),
                }
            }
            if free_indices.len() + made.len() < count as usize {
                // Released ones count as made: the reserve was answered.
                return Ok(made);
            }
        }
        // (Two tries at once racing for one index: the loser's transaction
        // fails as a lost race, and a later retry finds the winner's.)
        let mut lost = 0;
        while (made.len() as u32) < count {
            let Some(provisioner) = self.provisioner(provisioner_id).await? else { break };
            if provisioner.removed_at.is_some() {
                break;
            }
            let slots = (i64::from(provisioner.settings.max_instances) - provisioner.reserved_instances).max(0) as u32;
            let want = (count - made.len() as u32).min(slots);
            if want == 0 {
                break;
            }
            let sets: Vec<SetCounts> =
                self.label_sets(&provisioner.workspace_id).await?.iter().map(LabelSet::counts).collect();
            // What one transaction holds; the rest is the loop's next turn.
            let plan = within_one_transaction(spread_reservations(labels, &sets, want));
            if plan.is_empty() {
                break;
            }
            let total: u32 = plan.iter().map(|(_, k)| k).sum();
            let identities: Vec<(Uuid, Uuid, String)> = (0..total as usize)
                .map(|n| match (&key, free_indices.get(n)) {
                    (Some(key), Some(index)) => {
                        let (token_id, token) = key.registration_token(*index);
                        (key.reservation_id(*index), token_id, token)
                    }
                    _ => {
                        let token_id = baton_domain::ids::new_id();
                        (baton_domain::ids::new_id(), token_id, tokens::new_registration_token(token_id))
                    }
                })
                .collect();
            let (items, reserved) =
                self.reservation_writes(&provisioner, labels, &plan, identities, expires_in_s, outbox_ttl_days, now)?;
            if contention::lost_race(self.transact(items).await)? {
                lost += 1;
                if lost == contention::MAX_LOST_RACES {
                    return Err(contention::too_contended("a reserve"));
                }
                contention::pause_after_lost_race().await;
                continue;
            }
            for r in &reserved {
                tracing::info!(provisioner_id = %provisioner.id, reservation_id = %r.reservation.id, labelset = %r.reservation.labelset, "reservation created");
            }
            let used = reserved.len();
            made.extend(reserved);
            free_indices.drain(..used.min(free_indices.len()));
        }
        Ok(made)
    }

    #[allow(clippy::too_many_arguments)]
    fn reservation_writes(
        &self,
        provisioner: &Provisioner,
        labels: &[String],
        plan: &[(SetCounts, u32)],
        identities: Vec<(Uuid, Uuid, String)>,
        expires_in_s: u32,
        outbox_ttl_days: u32,
        now: DateTime<Utc>,
    ) -> Result<(Vec<TransactWriteItem>, Vec<Reserved>), StoreError> {
        let total: u32 = plan.iter().map(|(_, k)| k).sum();
        let expires_at = now + Duration::seconds(i64::from(expires_in_s));
        let mut items = Vec::new();
        // The cap: within `max_instances` after this write, whatever other
        // reserves committed since the read.
        items.push(
            TransactWriteItem::builder()
                .update(build(
                    Update::builder()
                        .table_name(&self.table)
                        .key("pk", s(keys::provisioner_pk(provisioner.id)))
                        .key("sk", s(keys::PROVISIONER_SK))
                        .update_expression("ADD reserved_instances :k")
                        .condition_expression("attribute_not_exists(removed_at) AND reserved_instances <= :cap")
                        .expression_attribute_values(":k", n(total))
                        .expression_attribute_values(
                            ":cap",
                            n(i64::from(provisioner.settings.max_instances) - i64::from(total)),
                        )
                        .build(),
                )?)
                .build(),
        );
        // The demand: each set's `reserved` as read (no reserve in between)
        // and its `queued` covering the new total.
        for (set, k) in plan {
            let reserved_now =
                if set.reserved == 0 { "(attribute_not_exists(reserved) OR reserved = :r)" } else { "reserved = :r" };
            items.push(
                TransactWriteItem::builder()
                    .update(build(
                        LabelSet::update(&self.table, &provisioner.workspace_id, &set.labelset)
                            .update_expression("ADD reserved :k")
                            .condition_expression(format!("{reserved_now} AND queued >= :need"))
                            .expression_attribute_values(":k", n(*k))
                            .expression_attribute_values(":r", n(set.reserved))
                            .expression_attribute_values(":need", n(set.reserved.max(0) + i64::from(*k)))
                            .build(),
                    )?)
                    .build(),
            );
        }
        let mut reserved = Vec::new();
        let mut facts = ChangeFacts::new(provisioner.workspace_id.clone(), now, outbox_ttl_days);
        // Each reservation's id and token (derived for a named reserve).
        let mut identities = identities.into_iter();
        for (set, k) in plan {
            for _ in 0..*k {
                let Some((id, token_id, token)) = identities.next() else {
                    return Err(StoreError::Other("fewer reservation ids than the plan".into()));
                };
                let reservation = ReservationItem {
                    head: ItemHead::new(keys::provisioner_pk(provisioner.id), keys::reservation_sk(id), "reservation"),
                    id,
                    provisioner_id: provisioner.id,
                    workspace_id: provisioner.workspace_id.clone(),
                    labels: labels.to_vec(),
                    labelset: set.labelset.clone(),
                    expires_at,
                    created_at: now,
                    holds_demand: Some(true),
                    session_id: None,
                    provider_runner_id: None,
                    first_claim_at: None,
                    released_at: None,
                    release_reason: None,
                };
                // The ephemeral token: single use, bound to the labels and
                // the reservation, its session capped at `jobs_per_instance`
                // claims, expiring with the reservation. Listed under the
                // provisioner, not among the operator's tokens.
                let registration = RegistrationToken {
                    head: ItemHead::new(
                        keys::registration_token_pk(token_id),
                        keys::REGISTRATION_TOKEN_SK,
                        "registration_token",
                    ),
                    id: token_id,
                    workspace_id: provisioner.workspace_id.clone(),
                    name: Some(format!("reservation {id}")),
                    secret_hash: hash_token(&token),
                    expires_at: Some(expires_at),
                    single_use: true,
                    max_claims: Some(u64::from(provisioner.settings.jobs_per_instance)),
                    consumed_at: None,
                    revoked_at: None,
                    created_at: now,
                    rw_pk: format!("PROVTOKENS#{}", provisioner.id),
                    rw_sk: keys::registration_token_listing_sk(now, token_id),
                    labels: Some(labels.to_vec()),
                    reservation: Some(reservation.link()),
                };
                items.push(self.new_item_put(&reservation)?);
                items.push(self.new_item_put(&registration)?);
                facts.push(ReservationCreated {
                    provisioner_id: provisioner.id,
                    reservation_id: id,
                    labels: labels.to_vec(),
                    expires_at,
                })?;
                reserved.push(Reserved { reservation, token });
            }
        }
        items.extend(self.outbox_puts(facts)?);
        Ok((items, reserved))
    }

    /// The registration's write on its reservation: which session the
    /// token made; refused once the reservation was released.
    pub(crate) fn reservation_registration(
        &self,
        link: &ReservationLink,
        session_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<TransactWriteItem, StoreError> {
        Ok(TransactWriteItem::builder()
            .update(build(
                Update::builder()
                    .table_name(&self.table)
                    .key("pk", s(keys::provisioner_pk(link.provisioner_id)))
                    .key("sk", s(keys::reservation_sk(link.reservation_id)))
                    .update_expression("SET session_id = :session, registered_at = :now")
                    .condition_expression(
                        "attribute_exists(pk) AND attribute_not_exists(released_at) AND attribute_not_exists(session_id)",
                    )
                    .expression_attribute_values(":session", s(session_id.to_string()))
                    .expression_attribute_values(":now", s(timestamp(now)))
                    .build(),
            )?)
            .build())
    }

    /// The reservations of `provisioner_id` among `ids`, live or moved to
    /// the fleet's history (others' and unknown ones are simply absent): a
    /// late report naming one that ended, or a reserve tried again, meets
    /// it as it was.
    pub async fn reservations_of(
        &self,
        provisioner_id: Uuid,
        ids: &[Uuid],
    ) -> Result<BTreeMap<Uuid, ReservationItem>, StoreError> {
        let live: Vec<ReservationItem> = self
            .batch_get(ids.iter().map(|id| (keys::provisioner_pk(provisioner_id), keys::reservation_sk(*id))))
            .await?;
        let mut found: BTreeMap<Uuid, ReservationItem> = live.into_iter().map(|r| (r.id, r)).collect();
        // Each is in one partition or the other (its move is one
        // transaction); the history is read only for those not live, which
        // a report's events seldom name.
        let rest: Vec<Uuid> = ids.iter().filter(|id| !found.contains_key(id)).copied().collect();
        if !rest.is_empty() {
            let moved: Vec<ReservationItem> = self
                .batch_get(
                    rest.iter().map(|id| (keys::provisioner_history_pk(provisioner_id), keys::reservation_sk(*id))),
                )
                .await?;
            found.extend(moved.into_iter().map(|r| (r.id, r)));
        }
        Ok(found)
    }

    /// Releases a reservation as read, with its fact: the provisioner's slot
    /// comes back, and the demand it still held (an unused reservation)
    /// counts again. Conditioned on the reservation being as read
    /// (unreleased, holding demand or not), so it happens once.
    pub(super) async fn release_reservation(
        &self,
        provisioner: &Provisioner,
        reservation: &ReservationItem,
        reason: &'static str,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let held = reservation.holds_demand.is_some();
        let mut items = vec![TransactWriteItem::builder()
            .update(build(
                Update::builder()
                    .table_name(&self.table)
                    .key("pk", s(&reservation.head.pk))
                    .key("sk", s(&reservation.head.sk))
                    .update_expression("SET released_at = :now, release_reason = :reason REMOVE holds_demand")
                    .condition_expression(if held {
                        "attribute_not_exists(released_at) AND attribute_exists(holds_demand)"
                    } else {
                        "attribute_not_exists(released_at) AND attribute_not_exists(holds_demand)"
                    })
                    .expression_attribute_values(":now", s(timestamp(now)))
                    .expression_attribute_values(":reason", s(reason))
                    .build(),
            )?)
            .build()];
        items.push(self.provisioner_slots(provisioner.id, -1)?);
        if held {
            items.push(LabelSet::count_down(
                &self.table,
                &provisioner.workspace_id,
                &reservation.labelset,
                "reserved",
            )?);
        }
        let fact = Fact::new(
            provisioner.workspace_id.clone(),
            now,
            ReservationReleased {
                provisioner_id: provisioner.id,
                reservation_id: reservation.id,
                reason: reason.to_string(),
                released_at: now,
            },
        );
        items.push(self.outbox_put(&fact, 7)?);
        let released = !contention::lost_race(self.transact(items).await)?;
        if released {
            tracing::info!(provisioner_id = %provisioner.id, reservation_id = %reservation.id, reason, "reservation released");
        }
        Ok(released)
    }

    fn provisioner_slots(&self, provisioner_id: Uuid, by: i64) -> Result<TransactWriteItem, StoreError> {
        Ok(TransactWriteItem::builder()
            .update(build(
                Update::builder()
                    .table_name(&self.table)
                    .key("pk", s(keys::provisioner_pk(provisioner_id)))
                    .key("sk", s(keys::PROVISIONER_SK))
                    .update_expression("ADD reserved_instances :by")
                    .expression_attribute_values(":by", n(by))
                    .build(),
            )?)
            .build())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sets(jobs: &[u32]) -> Vec<(SetCounts, u32)> {
        jobs.iter()
            .enumerate()
            .map(|(i, k)| {
                let set = SetCounts {
                    labelset: format!("set-{i}"),
                    labels: vec![format!("l{i}")],
                    queued: i64::from(*k),
                    reserved: 0,
                    running: 0,
                };
                (set, *k)
            })
            .collect()
    }

    #[test]
    fn a_reserve_over_many_job_sets_is_cut_to_what_one_transaction_holds() {
        // 60 jobs of one set each: 35 of them would be 1 + 35 + 70 + 2 items.
        let plan = within_one_transaction(sets(&[1; 60]));
        let reservations: u32 = plan.iter().map(|(_, k)| k).sum();
        assert!(reserve_items(plan.len(), reservations as usize) <= TRANSACTION_ITEMS);
        assert!(reserve_items(plan.len() + 1, reservations as usize + 1) > TRANSACTION_ITEMS, "as many as fit");
        // One set's many jobs: only the reservations' own items limit it.
        let plan = within_one_transaction(sets(&[60]));
        assert_eq!(plan[0].1, 48, "1 + 1 + 2 × 48 + 2 = 100 items");
        assert!(within_one_transaction(Vec::new()).is_empty());
    }
}
