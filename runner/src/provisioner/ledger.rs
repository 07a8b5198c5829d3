//! The local provisioner's books: its instances, their states (forward
//! only, as Baton keeps them), and the events not yet delivered to the API.
//! Pure: the shell records what happened and sends what [`Ledger::take_events`]
//! hands out; a failed delivery puts them back, in order.

use std::collections::BTreeMap;

use baton_api::provisioners::{InstanceEvent, InstanceState, InstanceView, TerminateReason};
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Why the provisioner stops an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopCause {
    /// Baton asked for it (a terminate intent).
    Intent(TerminateReason),
    /// The provisioner itself is shutting down.
    Shutdown,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    pub provider_runner_id: String,
    pub reservation_id: Option<Uuid>,
    pub labels: Vec<String>,
    pub state: InstanceState,
    pub runner_session_id: Option<Uuid>,
    /// Set once the provisioner decided to stop it.
    pub stopping: Option<StopCause>,
}

#[derive(Debug, Default)]
pub struct Ledger {
    instances: BTreeMap<String, Instance>,
    /// Not yet delivered, in the order they happened.
    pending: Vec<InstanceEvent>,
}

impl Ledger {
    /// A new instance for `reservation`, `requested`.
    pub fn open(&mut self, id: &str, reservation: Uuid, labels: &[String], at: DateTime<Utc>) {
        self.instances.insert(
            id.to_string(),
            Instance {
                provider_runner_id: id.to_string(),
                reservation_id: Some(reservation),
                labels: labels.to_vec(),
                state: InstanceState::Requested,
                runner_session_id: None,
                stopping: None,
            },
        );
        self.push(id, at);
    }

    /// Moves instance `id` to `state` (learning its session, when given) and
    /// queues the event. A state never moves backwards: an older or equal
    /// state changes nothing and queues nothing (false), as an unknown id.
    pub fn advance(&mut self, id: &str, state: InstanceState, session: Option<Uuid>, at: DateTime<Utc>) -> bool {
        let Some(instance) = self.instances.get_mut(id) else { return false };
        if state.rank() <= instance.state.rank() {
            return false;
        }
        instance.state = state;
        if session.is_some() {
            instance.runner_session_id = session;
        }
        self.push(id, at);
        true
    }

    /// Marks `id` as being stopped for `cause` and moves it to
    /// `terminating`; false when it is unknown, ended, or already stopping
    /// (the caller then sends no second signal).
    pub fn begin_stop(&mut self, id: &str, cause: StopCause, at: DateTime<Utc>) -> bool {
        let Some(instance) = self.instances.get_mut(id) else { return false };
        if instance.stopping.is_some() || instance.state.is_terminal() {
            return false;
        }
        instance.stopping = Some(cause);
        self.advance(id, InstanceState::Terminating, None, at)
    }

    pub fn get(&self, id: &str) -> Option<&Instance> {
        self.instances.get(id)
    }

    /// Instances whose process may still run.
    pub fn live(&self) -> impl Iterator<Item = &Instance> {
        self.instances.values().filter(|i| !i.state.is_terminal())
    }

    /// The terminate intents of `views` (the API's list) this provisioner
    /// must act on: its live instances not already being stopped.
    pub fn stops_due(&self, views: &[InstanceView]) -> Vec<(String, TerminateReason)> {
        views
            .iter()
            .filter_map(|view| {
                let intent = view.terminate.as_ref()?;
                let mine = self.instances.get(&view.provider_runner_id)?;
                (mine.stopping.is_none() && !mine.state.is_terminal())
                    .then(|| (view.provider_runner_id.clone(), intent.reason))
            })
            .collect()
    }

    /// Instances Baton still thinks alive that this process never started:
    /// an earlier run's, whose processes died with it (children get SIGTERM
    /// when their provisioner dies). Reporting them `terminated` lets Baton
    /// release their reservations instead of waiting on them.
    pub fn strangers(&self, views: &[InstanceView]) -> Vec<InstanceView> {
        views
            .iter()
            .filter(|v| !v.state.is_terminal() && !self.instances.contains_key(&v.provider_runner_id))
            .cloned()
            .collect()
    }

    /// Books a stranger (see [`Ledger::strangers`]) as `terminated`.
    pub fn close_stranger(&mut self, view: &InstanceView, at: DateTime<Utc>) {
        if self.instances.contains_key(&view.provider_runner_id) {
            return;
        }
        self.instances.insert(
            view.provider_runner_id.clone(),
            Instance {
                provider_runner_id: view.provider_runner_id.clone(),
                reservation_id: view.reservation_id,
                labels: Vec::new(),
                state: InstanceState::Terminated,
                runner_session_id: view.runner_session_id,
                stopping: None,
            },
        );
        self.push(&view.provider_runner_id, at);
    }

    /// Every undelivered event, oldest first; the ledger holds none after.
    pub fn take_events(&mut self) -> Vec<InstanceEvent> {
        std::mem::take(&mut self.pending)
    }

    /// Puts back events whose delivery failed, before any newer ones.
    pub fn restore_events(&mut self, mut events: Vec<InstanceEvent>) {
        events.append(&mut self.pending);
        self.pending = events;
    }

    pub fn has_events(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Forgets ended instances whose every event was delivered, so the
    /// books do not grow with every instance ever started.
    pub fn prune(&mut self) {
        let pending = &self.pending;
        self.instances.retain(|id, i| !i.state.is_terminal() || pending.iter().any(|e| &e.provider_runner_id == id));
    }

    /// An event of `id`'s current state (its reservation and session).
    fn push(&mut self, id: &str, at: DateTime<Utc>) {
        if let Some(instance) = self.instances.get(id) {
            self.pending.push(InstanceEvent {
                provider_runner_id: instance.provider_runner_id.clone(),
                state: instance.state,
                reservation_id: instance.reservation_id,
                runner_session_id: instance.runner_session_id,
                at: Some(at),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_api::provisioners::TerminateIntent;

    fn ledger_with(id: &str) -> (Ledger, Uuid) {
        let mut ledger = Ledger::default();
        let reservation = Uuid::now_v7();
        ledger.open(id, reservation, &["linux".to_string()], Utc::now());
        (ledger, reservation)
    }

    fn states(events: &[InstanceEvent]) -> Vec<InstanceState> {
        events.iter().map(|e| e.state).collect()
    }

    fn view(id: &str, state: InstanceState, intent: Option<TerminateReason>) -> InstanceView {
        InstanceView {
            provider_runner_id: id.into(),
            state,
            reservation_id: None,
            runner_session_id: None,
            terminate: intent.map(|reason| TerminateIntent { reason, at: Utc::now() }),
            first_seen_at: None,
        }
    }

    #[test]
    fn every_event_names_the_reservation_and_once_known_the_session() {
        let (mut ledger, reservation) = ledger_with("local-1");
        let session = Uuid::now_v7();
        assert!(ledger.advance("local-1", InstanceState::Booting, None, Utc::now()));
        assert!(ledger.advance("local-1", InstanceState::Running, Some(session), Utc::now()));
        assert!(ledger.advance("local-1", InstanceState::Terminated, None, Utc::now()));
        let events = ledger.take_events();
        assert_eq!(
            states(&events),
            vec![InstanceState::Requested, InstanceState::Booting, InstanceState::Running, InstanceState::Terminated]
        );
        assert!(events.iter().all(|e| e.reservation_id == Some(reservation) && e.at.is_some()));
        assert_eq!(events[3].runner_session_id, Some(session), "the session stays on later events");
        assert!(!ledger.has_events());
    }

    #[test]
    fn a_state_never_moves_backwards_and_a_repeat_is_not_reported_twice() {
        let (mut ledger, _) = ledger_with("local-1");
        assert!(ledger.advance("local-1", InstanceState::Running, None, Utc::now()));
        assert!(!ledger.advance("local-1", InstanceState::Booting, None, Utc::now()));
        assert!(!ledger.advance("local-1", InstanceState::Running, None, Utc::now()));
        assert!(!ledger.advance("unknown", InstanceState::Running, None, Utc::now()));
        assert_eq!(states(&ledger.take_events()), vec![InstanceState::Requested, InstanceState::Running]);
    }

    #[test]
    fn an_instance_is_stopped_once_and_only_while_it_lives() {
        let (mut ledger, _) = ledger_with("local-1");
        let idle = StopCause::Intent(TerminateReason::Idle);
        assert!(ledger.begin_stop("local-1", idle, Utc::now()));
        assert!(!ledger.begin_stop("local-1", StopCause::Shutdown, Utc::now()), "one signal, not two");
        assert_eq!(ledger.get("local-1").and_then(|i| i.stopping), Some(idle));
        assert_eq!(ledger.get("local-1").map(|i| i.state), Some(InstanceState::Terminating));
        let (mut ended, _) = ledger_with("local-2");
        ended.advance("local-2", InstanceState::Failed, None, Utc::now());
        assert!(!ended.begin_stop("local-2", StopCause::Shutdown, Utc::now()));
    }

    #[test]
    fn intents_are_acted_on_for_live_instances_not_yet_stopping() {
        let (mut ledger, _) = ledger_with("local-1");
        ledger.open("local-2", Uuid::now_v7(), &[], Utc::now());
        ledger.open("local-3", Uuid::now_v7(), &[], Utc::now());
        ledger.begin_stop("local-2", StopCause::Intent(TerminateReason::Idle), Utc::now());
        ledger.advance("local-3", InstanceState::Terminated, None, Utc::now());
        let views = [
            view("local-1", InstanceState::Running, Some(TerminateReason::JobCancelled)),
            view("local-2", InstanceState::Running, Some(TerminateReason::Idle)),
            view("local-3", InstanceState::Running, Some(TerminateReason::Exhausted)),
            view("local-4", InstanceState::Running, Some(TerminateReason::Orphan)),
        ];
        assert_eq!(ledger.stops_due(&views), vec![("local-1".to_string(), TerminateReason::JobCancelled)]);
        assert!(ledger.stops_due(&[view("local-1", InstanceState::Running, None)]).is_empty(), "no intent");
    }

    #[test]
    fn instances_of_an_earlier_run_are_closed_once() {
        let (mut ledger, _) = ledger_with("local-1");
        let views = [
            view("local-1", InstanceState::Running, Some(TerminateReason::Idle)),
            view("old-1", InstanceState::Running, Some(TerminateReason::Orphan)),
            view("old-2", InstanceState::Terminated, Some(TerminateReason::Orphan)),
        ];
        let strangers = ledger.strangers(&views);
        assert_eq!(strangers.iter().map(|v| v.provider_runner_id.as_str()).collect::<Vec<_>>(), vec!["old-1"]);
        ledger.take_events();
        ledger.close_stranger(&strangers[0], Utc::now());
        assert_eq!(states(&ledger.take_events()), vec![InstanceState::Terminated]);
        assert!(ledger.strangers(&views).is_empty(), "not reported again on the next poll");
        assert!(ledger.stops_due(&views[1..2]).is_empty(), "and never signalled");
    }

    #[test]
    fn a_failed_delivery_is_retried_before_newer_events() {
        let (mut ledger, _) = ledger_with("local-1");
        let first = ledger.take_events();
        ledger.advance("local-1", InstanceState::Running, None, Utc::now());
        ledger.restore_events(first);
        assert_eq!(states(&ledger.take_events()), vec![InstanceState::Requested, InstanceState::Running]);
    }

    #[test]
    fn ended_instances_are_forgotten_once_their_events_are_delivered() {
        let (mut ledger, _) = ledger_with("local-1");
        ledger.open("local-2", Uuid::now_v7(), &[], Utc::now());
        ledger.advance("local-1", InstanceState::Terminated, None, Utc::now());
        ledger.prune();
        assert!(ledger.get("local-1").is_some(), "its terminated event is not delivered yet");
        ledger.take_events();
        ledger.prune();
        assert!(ledger.get("local-1").is_none());
        assert_eq!(ledger.live().count(), 1);
    }
}
