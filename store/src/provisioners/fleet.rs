//! A provisioner's fleet as read (its partition, the sessions its
//! reservations made, their executions' records, the workspace's label-set
//! counts) and what it decides: terminate intents and releases, written
//! conditioned on what was read.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use baton_api::provisioners::{InstanceView, TerminateIntent, TerminateReason};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::history::MOVES_PER_PASS;
use super::{
    InstanceItem, Provisioner, ReservationItem, RELEASED_EXPIRED_UNUSED, RELEASED_INSTANCE_ENDED,
    RELEASED_PROVISIONER_REMOVED,
};
use crate::error::StoreError;
use crate::keys::{self, timestamp};
use crate::records::{RunnerRecord, RunnerStatus};
use crate::runner_items::{LabelSet, Session};
use crate::{build, contention, from_item, n, s, Store};
use baton_api::facts::{Fact, InstanceTerminateRequested};
use baton_domain::runners::labels::is_subset;
use baton_domain::runners::provisioners::demand::{served_demand, SetCounts};
use baton_domain::runners::provisioners::intents::{self, LeaseView, SessionView};

/// A provisioner's whole fleet as read, with what its decisions need.
#[derive(Debug, Clone)]
pub struct Fleet {
    pub provisioner: Provisioner,
    pub reservations: Vec<ReservationItem>,
    pub instances: Vec<InstanceItem>,
    sessions: HashMap<Uuid, Session>,
    records: HashMap<Uuid, RunnerRecord>,
    pub sets: Vec<LabelSet>,
}

impl Fleet {
    fn reservation(&self, id: Option<Uuid>) -> Option<&ReservationItem> {
        id.and_then(|id| self.reservations.iter().find(|r| r.id == id))
    }

    fn session_of(&self, instance: &InstanceItem) -> Option<&Session> {
        let id = instance.session_id.or_else(|| self.reservation(instance.reservation_id)?.session_id)?;
        self.sessions.get(&id)
    }

    fn leases_of(&self, session: &Session) -> Vec<LeaseView> {
        session
            .executions
            .iter()
            .map(|id| match self.records.get(id) {
                Some(r) if r.session_id == Some(session.id) && r.status == RunnerStatus::Leased => {
                    LeaseView { live: true, cancel_requested: r.cancel_requested_at.is_some() }
                }
                // The session lists an execution only from the claim that
                // leased it (one transaction), and a record never goes back
                // to `pending`: a pending one is the record as it was before
                // that claim, read eventually consistently on AWS a moment
                // after it. Counted as live, as a record not readable yet
                // is, so that neither a release nor an `exhausted` or `idle`
                // intent runs ahead of a lease (the machine would be stopped
                // under its job, which would end `runner_lost`).
                Some(r) if r.status == RunnerStatus::Pending => LeaseView { live: true, cancel_requested: false },
                Some(_) => LeaseView { live: false, cancel_requested: false },
                None => LeaseView { live: true, cancel_requested: false },
            })
            .collect()
    }

    /// Its instances as the API shows them (provisioners and operators
    /// alike), by `provider_runner_id`.
    pub fn instance_views(&self) -> Vec<InstanceView> {
        let mut views: Vec<InstanceView> = self
            .instances
            .iter()
            .map(|i| InstanceView {
                provider_runner_id: i.provider_runner_id.clone(),
                state: i.state,
                reservation_id: i.reservation_id,
                runner_session_id: i.session_id.or_else(|| self.reservation(i.reservation_id)?.session_id),
                terminate: i.terminate_reason.zip(i.terminate_at).map(|(reason, at)| TerminateIntent { reason, at }),
                first_seen_at: Some(i.first_seen_at),
            })
            .collect();
        views.sort_by(|a, b| a.provider_runner_id.cmp(&b.provider_runner_id));
        views
    }

    /// Whether work is waiting that the machine of `reservation` could
    /// take: its own reservation still holds a queued job's demand (that
    /// job waits for this very machine, and counts as reserved, not as
    /// unreserved demand), or unreserved demand fits its labels.
    fn demand_fits(&self, reservation: &ReservationItem) -> bool {
        let own = reservation.holds_demand.is_some()
            && self.sets.iter().any(|set| set.sk == reservation.labelset && set.queued > 0);
        own || self.sets.iter().any(|set| set.counts().unreserved() > 0 && is_subset(&set.labels, &reservation.labels))
    }

    /// The intent each live instance without one gets now.
    pub fn decide_intents(&self, now: DateTime<Utc>) -> Vec<(usize, TerminateReason)> {
        let undecided: Vec<usize> = (0..self.instances.len())
            .filter(|i| self.instances[*i].terminate_reason.is_none() && !self.instances[*i].state.is_terminal())
            .collect();
        let views: Vec<intents::InstanceView> = undecided
            .iter()
            .map(|i| {
                let instance = &self.instances[*i];
                let reservation = self.reservation(instance.reservation_id);
                let session = self.session_of(instance).map(|session| SessionView {
                    claims: session.claims,
                    max_claims: session.max_claims.unwrap_or(u64::MAX),
                    idle_since: session.last_claim_at.unwrap_or(session.created_at),
                    leases: self.leases_of(session),
                });
                intents::InstanceView {
                    state: instance.state,
                    first_seen_at: instance.first_seen_at,
                    reservation_expires_at: reservation.map(|r| r.expires_at),
                    session,
                    demand_fits: reservation.is_some_and(|r| self.demand_fits(r)),
                }
            })
            .collect();
        intents::decide(&views, self.provisioner.policy(), now)
            .into_iter()
            .zip(undecided)
            .filter_map(|(reason, i)| reason.map(|r| (i, r)))
            .collect()
    }

    /// The reservations to release now, and why.
    pub fn releases(&self, now: DateTime<Utc>) -> Vec<(usize, &'static str)> {
        let mut released = Vec::new();
        for (i, reservation) in self.reservations.iter().enumerate() {
            if reservation.released_at.is_some() {
                continue;
            }
            let instance = self.instances.iter().find(|i| links(reservation, i));
            let leases = reservation.session_id.and_then(|id| self.sessions.get(&id)).map(|s| self.leases_of(s));
            if self.provisioner.removed_at.is_some()
                && leases.as_deref().is_none_or(|l| !l.iter().any(LeaseView::blocks_release))
            {
                released.push((i, RELEASED_PROVISIONER_REMOVED));
            } else if instance.is_some_and(|inst| intents::releasable(inst.state, leases.as_deref().unwrap_or(&[]))) {
                released.push((i, RELEASED_INSTANCE_ENDED));
            } else if intents::expired_unused(reservation.expires_at, reservation.session_id.is_some(), now) {
                released.push((i, RELEASED_EXPIRED_UNUSED));
            }
        }
        released
    }

    /// The reservation an instance belongs to: by the link, or by the
    /// instance's own record of it.
    fn reservation_for(&self, instance: &InstanceItem) -> Option<&ReservationItem> {
        self.reservations.iter().find(|r| links(r, instance))
    }

    /// What moves to the fleet's history now (`intents::moves_to_history`):
    /// instances terminal for the grace whose reservation is released (or
    /// gone), and reservations released for the grace whose instance, if
    /// any, is terminal. Neither moves while the other still decides
    /// something with it (a release needs the instance; an intent the
    /// reservation's session).
    pub fn settled(&self, now: DateTime<Utc>) -> (Vec<usize>, Vec<usize>) {
        let instances = (0..self.instances.len())
            .filter(|i| {
                let instance = &self.instances[*i];
                instance.state.is_terminal()
                    && intents::moves_to_history(instance.state_at, now)
                    && self.reservation_for(instance).is_none_or(|r| r.released_at.is_some())
            })
            .collect();
        let reservations = (0..self.reservations.len())
            .filter(|r| {
                let reservation = &self.reservations[*r];
                reservation.released_at.is_some_and(|at| intents::moves_to_history(at, now))
                    && !self.instances.iter().any(|i| !i.state.is_terminal() && links(reservation, i))
            })
            .collect();
        (instances, reservations)
    }

    /// Idle registered runners of this fleet that could take work of `served`.
    pub fn idle_sessions(&self, served: &[String]) -> u64 {
        self.reservations
            .iter()
            .filter(|r| r.released_at.is_none() && is_subset(served, &r.labels))
            .filter_map(|r| self.sessions.get(&r.session_id?))
            .filter(|s| !s.is_capped_out() && !self.leases_of(s).iter().any(|l| l.live))
            .count() as u64
    }
}

/// Whether `instance` is `reservation`'s: by the reservation's link, or by
/// the instance's own record of it (written with its state, so it holds
/// even when the link's write was lost).
fn links(reservation: &ReservationItem, instance: &InstanceItem) -> bool {
    reservation.provider_runner_id.as_ref() == Some(&instance.provider_runner_id)
        || instance.reservation_id == Some(reservation.id)
}

/// Demand per served set, as the demand route answers it.
pub fn demand_of(fleet: &Fleet) -> Vec<(Vec<String>, baton_domain::runners::provisioners::demand::ServedDemand, u64)> {
    let sets: Vec<SetCounts> = fleet.sets.iter().map(LabelSet::counts).collect();
    fleet
        .provisioner
        .settings
        .label_sets
        .iter()
        .map(|served| (served.clone(), served_demand(served, &sets), fleet.idle_sessions(served)))
        .collect()
}

impl Store {
    /// Reads a provisioner's fleet: its partition, the sessions its
    /// reservations made, their executions' records, and the workspace's
    /// label-set counts.
    pub async fn fleet(&self, provisioner_id: Uuid) -> Result<Option<Fleet>, StoreError> {
        let mut pages = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(keys::provisioner_pk(provisioner_id)))
            .consistent_read(true)
            .into_paginator()
            .items()
            .send();
        let mut provisioner = None;
        let mut reservations = Vec::new();
        let mut instances = Vec::new();
        while let Some(item) = pages.next().await {
            let item = item?;
            let sk = match item.get("sk") {
                Some(AttributeValue::S(sk)) => sk.clone(),
                _ => continue,
            };
            if sk == keys::PROVISIONER_SK {
                provisioner = Some(from_item::<Provisioner>(item)?);
            } else if sk.starts_with(keys::RESERVATION_PREFIX) {
                reservations.push(from_item::<ReservationItem>(item)?);
            } else if sk.starts_with(keys::INSTANCE_PREFIX) {
                instances.push(from_item::<InstanceItem>(item)?);
            }
        }
        let Some(provisioner) = provisioner else { return Ok(None) };
        // Released reservations' sessions still matter while their
        // instance lives (intents); those of ended instances do not.
        let live_instances: Vec<&InstanceItem> = instances.iter().filter(|i| !i.state.is_terminal()).collect();
        let mut session_ids: Vec<Uuid> = reservations
            .iter()
            .filter(|r| r.released_at.is_none() || live_instances.iter().any(|i| i.reservation_id == Some(r.id)))
            .filter_map(|r| r.session_id)
            .chain(live_instances.iter().filter_map(|i| i.session_id))
            .collect();
        session_ids.sort();
        session_ids.dedup();
        let sessions: HashMap<Uuid, Session> = self
            .batch_get::<Session>(session_ids.iter().map(|id| (keys::session_pk(*id), keys::SESSION_SK.to_string())))
            .await?
            .into_iter()
            .filter(|s| s.reservation.as_ref().is_some_and(|r| r.provisioner_id == provisioner_id))
            .map(|s| (s.id, s))
            .collect();
        let executions: Vec<Uuid> = sessions.values().flat_map(|s| s.executions.iter().copied()).collect();
        let records: HashMap<Uuid, RunnerRecord> =
            self.runner_records(&executions).await?.into_iter().map(|r| (r.execution.id, r)).collect();
        let sets = self.label_sets(&provisioner.workspace_id).await?;
        Ok(Some(Fleet { provisioner, reservations, instances, sessions, records, sets }))
    }

    /// Reads the fleet and writes what it decides now: the intents not yet
    /// written and the releases due. Any path may run it (a report, a read
    /// of instances or demand, a lease's end, a removal); every write is
    /// conditioned on the state read, so running it twice writes once.
    pub async fn fleet_pass(
        &self,
        provisioner_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Option<(Fleet, u32)>, StoreError> {
        let Some(fleet) = self.fleet(provisioner_id).await? else { return Ok(None) };
        self.write_fleet_decisions(fleet, now).await.map(Some)
    }

    /// Writes what `fleet`, as read, decides at `now`: the intents not yet
    /// written and the releases due. Every write is conditioned on what was
    /// read, so a fleet read before a claim (or another pass) writes nothing
    /// that claim made wrong.
    pub async fn write_fleet_decisions(
        &self,
        mut fleet: Fleet,
        now: DateTime<Utc>,
    ) -> Result<(Fleet, u32), StoreError> {
        for (i, reason) in fleet.decide_intents(now) {
            let session = fleet.session_of(&fleet.instances[i]).map(|s| (s.id, s.claims));
            if self.request_termination(&fleet.provisioner, &fleet.instances[i], session, reason, now).await? {
                fleet.instances[i].terminate_reason = Some(reason);
                fleet.instances[i].terminate_at = Some(now);
            }
        }
        let mut released = 0;
        for (i, reason) in fleet.releases(now) {
            if self.release_reservation(&fleet.provisioner, &fleet.reservations[i], reason, now).await? {
                fleet.reservations[i].released_at = Some(now);
                fleet.reservations[i].release_reason = Some(reason.to_string());
                released += 1;
            }
        }
        self.move_settled_to_history(&mut fleet, now).await;
        Ok((fleet, released))
    }

    /// Moves what the fleet has settled to its history, at most
    /// `MOVES_PER_PASS` items a pass. Housekeeping: a failure is logged and
    /// left to the next pass, never the caller's (a demand read, a report).
    async fn move_settled_to_history(&self, fleet: &mut Fleet, now: DateTime<Utc>) {
        let (instances, reservations) = fleet.settled(now);
        let mut moved = (Vec::new(), Vec::new());
        for i in instances.into_iter().take(MOVES_PER_PASS) {
            match self.move_instance_to_history(&fleet.instances[i], now).await {
                Ok(true) => moved.0.push(i),
                Ok(false) => {}
                Err(err) => {
                    tracing::warn!(provisioner_id = %fleet.provisioner.id, error = %err, "moving an ended instance to history");
                    break;
                }
            }
        }
        for r in reservations.into_iter().take(MOVES_PER_PASS.saturating_sub(moved.0.len())) {
            match self.move_reservation_to_history(&fleet.reservations[r], now).await {
                Ok(true) => moved.1.push(r),
                Ok(false) => {}
                Err(err) => {
                    tracing::warn!(provisioner_id = %fleet.provisioner.id, error = %err, "moving a released reservation to history");
                    break;
                }
            }
        }
        // The fleet as answered is the live one (indices ascending: removed from the end).
        for i in moved.0.into_iter().rev() {
            fleet.instances.remove(i);
        }
        for r in moved.1.into_iter().rev() {
            fleet.reservations.remove(r);
        }
    }

    /// Writes an instance's terminate intent with its fact, once. A machine
    /// told to go must take no more work, so the same transaction caps its
    /// runner session (`session`: its id and its claims as read) at the
    /// claims it has, on condition that it has no more than were read. Both
    /// this and a claim write the session item, so they are ordered: a claim
    /// that came first fails this condition (nothing is written; the next
    /// pass decides on the fleet with its lease), and a claim that comes
    /// after finds the session capped and is refused `session-exhausted`.
    /// Without it, an `idle` intent decided on a read a claim overtook
    /// stopped the machine under the job it had just claimed.
    async fn request_termination(
        &self,
        provisioner: &Provisioner,
        instance: &InstanceItem,
        session: Option<(Uuid, u64)>,
        reason: TerminateReason,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let update = build(
            Update::builder()
                .table_name(&self.table)
                .key("pk", s(&instance.head.pk))
                .key("sk", s(&instance.head.sk))
                .update_expression("SET terminate_reason = :reason, terminate_at = :now")
                .condition_expression("attribute_exists(pk) AND attribute_not_exists(terminate_reason)")
                .expression_attribute_values(":reason", serde_dynamo::to_attribute_value(reason)?)
                .expression_attribute_values(":now", s(timestamp(now)))
                .build(),
        )?;
        let fact = Fact::new(
            provisioner.workspace_id.clone(),
            now,
            InstanceTerminateRequested {
                provisioner_id: provisioner.id,
                provider_runner_id: instance.provider_runner_id.clone(),
                reservation_id: instance.reservation_id,
                runner_session_id: instance.session_id,
                reason,
                requested_at: now,
            },
        );
        let mut items = vec![TransactWriteItem::builder().update(update).build(), self.outbox_put(&fact, 7)?];
        if let Some((session_id, claims)) = session {
            let cap = build(
                Update::builder()
                    .table_name(&self.table)
                    .key("pk", s(keys::session_pk(session_id)))
                    .key("sk", s(keys::SESSION_SK))
                    .update_expression("SET max_claims = claims")
                    .condition_expression("attribute_exists(pk) AND claims = :read")
                    .expression_attribute_values(":read", n(claims))
                    .build(),
            )?;
            items.push(TransactWriteItem::builder().update(cap).build());
        }
        let decided = !contention::lost_race(self.transact(items).await)?;
        if decided {
            tracing::info!(provisioner_id = %provisioner.id, provider_runner_id = %instance.provider_runner_id, reason = reason.as_str(), "terminate intent");
        }
        Ok(decided)
    }
}

#[cfg(test)]
mod tests {
    use baton_api::provisioners::{CreateProvisioner, InstanceState};
    use chrono::Duration;

    use super::*;
    use crate::runner_items::ExecutionRef;
    use crate::ItemHead;
    use baton_domain::runners::provisioners::settings::validate;

    /// An ephemeral machine (one job) whose runner claimed `execution`, as
    /// a fleet pass reads it, the runners' record of that execution being
    /// `record` (absent: not readable yet).
    fn fleet(record: Option<RunnerRecord>, execution: Uuid, now: DateTime<Utc>) -> Fleet {
        let request = CreateProvisioner {
            name: "f".into(),
            label_sets: vec![vec!["linux".into()]],
            max_instances: 3,
            jobs_per_instance: Some(1),
            idle_timeout_s: None,
            boot_timeout_s: None,
            warm: None,
            idempotency_key: None,
        };
        let provisioner_id = Uuid::now_v7();
        let session_id = Uuid::now_v7();
        let provisioner = Provisioner {
            head: ItemHead::new(keys::provisioner_pk(provisioner_id), keys::PROVISIONER_SK, "provisioner"),
            id: provisioner_id,
            workspace_id: "ws1".into(),
            settings: validate(&request).unwrap(),
            secret_hash: String::new(),
            reserved_instances: 1,
            removed_at: None,
            created_at: now,
            rw_pk: String::new(),
            rw_sk: String::new(),
        };
        let instance = InstanceItem {
            head: ItemHead::new(keys::provisioner_pk(provisioner_id), "INSTANCE#i-1", "instance"),
            provider_runner_id: "i-1".into(),
            provisioner_id,
            state: InstanceState::Running,
            rank: 0,
            reservation_id: None,
            session_id: Some(session_id),
            first_seen_at: now,
            state_at: now,
            terminate_reason: None,
            terminate_at: None,
            honored_at: None,
        };
        let session = Session {
            head: ItemHead::new(keys::session_pk(session_id), keys::SESSION_SK, "session"),
            id: session_id,
            workspace_id: "ws1".into(),
            name: None,
            labels: vec!["linux".into()],
            max_claims: Some(1),
            claims: 1,
            token_hash: String::new(),
            expires_at: now + Duration::hours(1),
            last_seen_at: now,
            created_at: now,
            reservation: None,
            executions: vec![execution],
            last_claim_at: Some(now),
        };
        Fleet {
            provisioner,
            reservations: Vec::new(),
            instances: vec![instance],
            sessions: HashMap::from([(session_id, session)]),
            records: record.map(|r| HashMap::from([(execution, r)])).unwrap_or_default(),
            sets: Vec::new(),
        }
    }

    #[test]
    fn a_claimed_execution_whose_record_still_reads_pending_holds_its_machine() {
        let now = Utc::now();
        let execution = Uuid::now_v7();
        let place = ExecutionRef {
            id: execution,
            workspace_id: "ws1".into(),
            run_id: Uuid::now_v7(),
            job_id: Uuid::now_v7(),
            attempt: 1,
        };
        let record = |status| RunnerRecord::unclaimed(place.clone(), status);
        // The record read eventually consistently a moment after the claim
        // that listed the execution in the session: still `pending`. The
        // machine is busy, not exhausted.
        assert_eq!(fleet(Some(record(RunnerStatus::Pending)), execution, now).decide_intents(now), vec![]);
        assert_eq!(fleet(None, execution, now).decide_intents(now), vec![], "a record not readable yet holds it too");
        // Its job ended: the one-job machine is exhausted.
        let ended = fleet(Some(record(RunnerStatus::Completed)), execution, now);
        assert_eq!(ended.decide_intents(now), vec![(0, TerminateReason::Exhausted)]);
    }

    #[test]
    fn a_machine_whose_own_reservation_still_holds_a_queued_job_is_not_idle() {
        let now = Utc::now();
        // Registered an hour ago (past the 300 s idle timeout), no claim yet.
        let mut fleet = fleet(None, Uuid::now_v7(), now - Duration::hours(1));
        let session = fleet.sessions.values_mut().next().expect("a session");
        session.executions.clear();
        session.claims = 0;
        session.last_claim_at = None;
        let reservation = ReservationItem {
            head: ItemHead::new(fleet.provisioner.head.pk.clone(), keys::reservation_sk(Uuid::now_v7()), "reservation"),
            id: Uuid::now_v7(),
            provisioner_id: fleet.provisioner.id,
            workspace_id: "ws1".into(),
            labels: vec!["linux".into()],
            labelset: "linux".into(),
            expires_at: now + Duration::minutes(15),
            created_at: now - Duration::hours(1),
            holds_demand: Some(true),
            session_id: Some(session.id),
            provider_runner_id: Some("i-1".into()),
            first_claim_at: None,
            released_at: None,
            release_reason: None,
        };
        fleet.instances[0].reservation_id = Some(reservation.id);
        fleet.reservations.push(reservation);
        // The job it was reserved for is still queued: counted reserved, so
        // no *unreserved* demand fits, yet that job waits for this machine.
        let set = |queued| LabelSet {
            pk: "QREG#ws1".into(),
            sk: "linux".into(),
            labels: vec!["linux".into()],
            v: String::new(),
            queued,
            running: 0,
            reserved: 1,
        };
        fleet.sets = vec![set(1)];
        assert_eq!(fleet.decide_intents(now), vec![], "its own job waits for it");
        // That job went (cancelled, or another runner took it): idle.
        fleet.sets = vec![set(0)];
        assert_eq!(fleet.decide_intents(now), vec![(0, TerminateReason::Idle)]);
    }
}
