//! Terminate intents and reservation release (behaviour.md §15): which
//! instance must go and why, and when a reservation stops holding its slot.
//! Plain functions over what the store read; the store writes what they
//! decide, once (an intent, like a terminal state, is absorbing).

use baton_api::provisioners::{InstanceState, TerminateReason};
use chrono::{DateTime, Duration, Utc};

/// One lease a runner session took, as its execution's record tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseView {
    /// Still held (the runner has not completed it, nor has it been reaped).
    pub live: bool,
    /// Its job was cancelled: the runner is being told to stop.
    pub cancel_requested: bool,
}

impl LeaseView {
    /// A lease that keeps its instance's reservation: live and not cancelled.
    /// A cancelled lease keeps its row until it ends, so the provisioner can
    /// see the `job-cancelled` intent, but it does not block the release.
    pub fn blocks_release(&self) -> bool {
        self.live && !self.cancel_requested
    }
}

/// The runner session an instance's registration token made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionView {
    pub claims: u64,
    pub max_claims: u64,
    /// Since when it has held no lease (its registration, or its last claim
    /// or lease end, whichever came last).
    pub idle_since: DateTime<Utc>,
    pub leases: Vec<LeaseView>,
}

impl SessionView {
    fn holds_a_lease(&self) -> bool {
        self.leases.iter().any(|l| l.live)
    }
}

/// What the decision needs of one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceView {
    pub state: InstanceState,
    /// When the provisioner first reported it (its boot clock starts there).
    pub first_seen_at: DateTime<Utc>,
    pub reservation_expires_at: Option<DateTime<Utc>>,
    pub session: Option<SessionView>,
    /// Unreserved demand exists that this instance's runner could take.
    pub demand_fits: bool,
}

/// The provisioner's policy, from its settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetPolicy {
    pub idle_timeout: Duration,
    pub boot_timeout: Duration,
    pub warm: u32,
    pub removed: bool,
}

/// The intent each instance gets now (`None`: it may stay), in the order
/// given. Idle instances are terminated beyond the `warm` ones kept, the
/// most recently busy kept first.
pub fn decide(instances: &[InstanceView], policy: FleetPolicy, now: DateTime<Utc>) -> Vec<Option<TerminateReason>> {
    let mut decided: Vec<Option<TerminateReason>> =
        instances.iter().map(|i| reason_other_than_idle(i, policy, now)).collect();
    // Idle: registered, no lease, past the idle timeout, nothing queued it
    // could take; `warm` of them stay, the freshest first.
    let mut idle: Vec<(usize, DateTime<Utc>)> = instances
        .iter()
        .enumerate()
        .filter(|(i, _)| decided[*i].is_none())
        .filter_map(|(i, inst)| {
            let session = inst.session.as_ref()?;
            let is_idle = !inst.state.is_terminal()
                && !session.holds_a_lease()
                && !inst.demand_fits
                && now - session.idle_since >= policy.idle_timeout;
            is_idle.then_some((i, session.idle_since))
        })
        .collect();
    idle.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (i, _) in idle.into_iter().skip(policy.warm as usize) {
        decided[i] = Some(TerminateReason::Idle);
    }
    decided
}

fn reason_other_than_idle(instance: &InstanceView, policy: FleetPolicy, now: DateTime<Utc>) -> Option<TerminateReason> {
    if instance.state.is_terminal() {
        return None;
    }
    if policy.removed {
        return Some(TerminateReason::ProvisionerRemoved);
    }
    match &instance.session {
        Some(session) => {
            if session.leases.iter().any(|l| l.live && l.cancel_requested) {
                // Stop the machine rather than wait for its runner to notice.
                Some(TerminateReason::JobCancelled)
            } else if session.claims >= session.max_claims && !session.holds_a_lease() {
                Some(TerminateReason::Exhausted)
            } else {
                None
            }
        }
        None if now - instance.first_seen_at >= policy.boot_timeout => Some(TerminateReason::Orphan),
        // Its token can no longer register: the machine can never work.
        None if instance.reservation_expires_at.is_some_and(|at| at <= now) => {
            Some(TerminateReason::ReservationExpired)
        }
        None => None,
    }
}

/// The seed's release rule: a reservation is released once its instance is
/// terminal and no uncancelled lease remains on it.
pub fn releasable(instance: InstanceState, leases: &[LeaseView]) -> bool {
    instance.is_terminal() && !leases.iter().any(LeaseView::blocks_release)
}

/// An expired reservation whose token was never used is released too, and
/// its demand comes back.
pub fn expired_unused(expires_at: DateTime<Utc>, registered: bool, now: DateTime<Utc>) -> bool {
    !registered && expires_at <= now
}

/// How long an ended instance, or a released reservation, stays in its
/// fleet before it moves to the fleet's history, in seconds. Long enough
/// that a report sent again after a lost answer, a reserve tried again or
/// an intent's honour still meets it where it was; short enough that the
/// fleet a pass reads is what is alive now plus a few minutes of churn,
/// whatever months of one-job machines came before.
pub const HISTORY_AFTER_S: i64 = 600;

/// Whether something that ended (an instance's terminal state, a
/// reservation's release) at `ended_at` moves to the fleet's history now.
pub fn moves_to_history(ended_at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    now - ended_at >= Duration::seconds(HISTORY_AFTER_S)
}

#[cfg(test)]
mod tests {
    use super::*;
    use InstanceState::*;

    const LIVE: LeaseView = LeaseView { live: true, cancel_requested: false };
    const CANCELLED: LeaseView = LeaseView { live: true, cancel_requested: true };
    const ENDED: LeaseView = LeaseView { live: false, cancel_requested: false };

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
    }

    fn policy() -> FleetPolicy {
        FleetPolicy {
            idle_timeout: Duration::seconds(300),
            boot_timeout: Duration::seconds(600),
            warm: 0,
            removed: false,
        }
    }

    fn instance(session: Option<SessionView>) -> InstanceView {
        InstanceView {
            state: Running,
            first_seen_at: t(0),
            reservation_expires_at: Some(t(900)),
            session,
            demand_fits: false,
        }
    }

    fn session(claims: u64, max: u64, idle_since: i64, leases: Vec<LeaseView>) -> SessionView {
        SessionView { claims, max_claims: max, idle_since: t(idle_since), leases }
    }

    // The seed's cases.
    #[test]
    fn a_terminal_runner_with_one_cancelled_and_one_live_lease_keeps_its_reservation() {
        assert!(!releasable(Terminated, &[CANCELLED, LIVE]));
    }

    #[test]
    fn a_terminal_runner_with_only_a_cancelled_lease_releases_it_and_gets_job_cancelled() {
        assert!(releasable(Terminated, &[CANCELLED]));
        let running = instance(Some(session(1, 1, 0, vec![CANCELLED])));
        assert_eq!(decide(&[running], policy(), t(10)), vec![Some(TerminateReason::JobCancelled)]);
    }

    #[test]
    fn a_live_instance_never_releases_and_ended_leases_never_block() {
        assert!(!releasable(Running, &[]));
        assert!(releasable(Failed, &[ENDED, ENDED]));
        assert!(!releasable(Terminated, &[LIVE]));
    }

    #[test]
    fn an_ephemeral_runner_whose_job_ended_is_exhausted_not_before() {
        let busy = instance(Some(session(1, 1, 5, vec![LIVE])));
        let done = instance(Some(session(1, 1, 5, vec![ENDED])));
        let fresh = instance(Some(session(0, 1, 5, vec![])));
        assert_eq!(decide(&[busy, done, fresh], policy(), t(60)), vec![None, Some(TerminateReason::Exhausted), None]);
    }

    #[test]
    fn an_instance_that_never_registers_is_an_orphan_after_its_boot_timeout() {
        let booting = InstanceView { reservation_expires_at: Some(t(3_600)), ..instance(None) };
        assert_eq!(decide(std::slice::from_ref(&booting), policy(), t(599)), vec![None]);
        assert_eq!(decide(&[booting], policy(), t(600)), vec![Some(TerminateReason::Orphan)]);
        let expired = instance(None);
        assert_eq!(decide(&[expired], policy(), t(599)), vec![None]);
        let expired = InstanceView { first_seen_at: t(800), ..instance(None) };
        assert_eq!(decide(&[expired], policy(), t(900)), vec![Some(TerminateReason::ReservationExpired)]);
    }

    #[test]
    fn idle_instances_go_past_the_timeout_unless_work_fits_or_warm_keeps_them() {
        let idle_old = instance(Some(session(1, 5, 0, vec![ENDED])));
        let idle_newer = instance(Some(session(1, 5, 100, vec![ENDED])));
        let fits = InstanceView { demand_fits: true, ..idle_old.clone() };
        let young = instance(Some(session(1, 5, 350, vec![ENDED])));
        let all = [idle_old.clone(), idle_newer.clone(), fits, young];
        assert_eq!(
            decide(&all, policy(), t(400)),
            vec![Some(TerminateReason::Idle), Some(TerminateReason::Idle), None, None]
        );
        let warm = FleetPolicy { warm: 1, ..policy() };
        // The most recently busy one is the one kept warm.
        assert_eq!(decide(&[idle_old, idle_newer], warm, t(400)), vec![Some(TerminateReason::Idle), None]);
    }

    #[test]
    fn a_removed_provisioner_asks_every_live_instance_to_go_and_none_that_ended() {
        let removed = FleetPolicy { removed: true, ..policy() };
        let ended = InstanceView { state: Terminated, ..instance(None) };
        assert_eq!(
            decide(&[instance(None), ended], removed, t(1)),
            vec![Some(TerminateReason::ProvisionerRemoved), None]
        );
    }

    #[test]
    fn an_unused_reservation_is_released_at_its_expiry_a_used_one_is_not() {
        assert!(expired_unused(t(900), false, t(900)));
        assert!(!expired_unused(t(900), false, t(899)));
        assert!(!expired_unused(t(900), true, t(1_000)));
    }

    #[test]
    fn what_ended_moves_to_history_only_after_the_grace() {
        let ended = Utc::now();
        assert!(!moves_to_history(ended, ended), "a report sent again at once still finds it");
        assert!(!moves_to_history(ended, ended + Duration::seconds(HISTORY_AFTER_S - 1)));
        assert!(moves_to_history(ended, ended + Duration::seconds(HISTORY_AFTER_S)));
    }
}
