//! Listening jobs (behaviour.md §16, the seed's listening executions): a
//! job that, once its needs are met, listens for events instead of running
//! once. Each event delivered with `fire` runs the job's steps once, as an
//! execution of its own (one at a time, in delivery order), with the event
//! as `${{ event.name }}`, `${{ event.ref }}` and `${{ event.payload.* }}`;
//! `resolve` ends the listening after the running execution (the job
//! `succeeded`, or `failed` if its last execution failed); the listening
//! timeout ends it `failed`/`timed_out`. Deliveries are idempotent by
//! `ref`; one to a job that ended is acknowledged and changes nothing.
//!
//! Pure decisions here; the attempt applies them
//! (`AttemptState::deliver_event`, and its advance starts what is pending).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use baton_api::runs::Disposition;

/// The most event names a job may listen for.
pub const MAX_EVENT_NAMES: usize = 20;
/// The longest event name and `ref`.
pub const MAX_EVENT_NAME_LEN: usize = 100;
pub const MAX_REF_LEN: usize = 200;
/// The most an event's payload may weigh, as JSON text: it waits on the
/// attempt item until its execution starts, and travels in that
/// execution's spec.
pub const MAX_PAYLOAD_BYTES: usize = 8 * 1024;
/// The most events delivered to one listening job while they wait for
/// the running execution: more is 409 `too-many-pending-events` (the
/// attempt item must stay far under DynamoDB's 400 KB).
pub const MAX_PENDING_EVENTS: usize = 10;
/// The most deliveries one listening job remembers (their `ref`s make a
/// repeat idempotent): past it, deliveries are refused.
pub const MAX_DELIVERIES: usize = 200;
/// How long a job listens when it sets no `timeout-minutes`: a day.
pub const DEFAULT_LISTEN_TIMEOUT_MINUTES: u32 = 24 * 60;

/// A job's `listen:` as validated at create time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListenSpec {
    /// The event names it takes.
    pub events: Vec<String>,
    /// How long it listens, from when its needs were met.
    pub timeout_minutes: u32,
    /// `listen.if`: decided for each event it fires, which it reads
    /// (`${{ event.* }}`): an event it rejects runs nothing, its execution
    /// recorded `cancelled` (`condition_rejected`), and the job listens on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
}

/// One delivered event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobEvent {
    pub name: String,
    #[serde(rename = "ref")]
    pub reference: String,
    pub disposition: Disposition,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub payload: serde_json::Value,
    pub delivered_at: DateTime<Utc>,
}

/// Where a listening job stands: its deadline, the events waiting for the
/// running execution, the refs delivered so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListenState {
    pub until: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<JobEvent>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refs: Vec<String>,
}

/// Why a delivery is refused (nothing changes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryError {
    /// The name is not one the job listens for, or the ref or payload is
    /// out of bounds (400).
    Invalid(String),
    /// Too many events wait, or the job has taken its most (409).
    TooMany(String),
}

/// Checks a delivery's own fields, whatever the job's state.
pub fn check_event(
    spec: &ListenSpec,
    name: &str,
    reference: &str,
    payload: &serde_json::Value,
) -> Result<(), DeliveryError> {
    if !spec.events.iter().any(|event| event == name) {
        return Err(DeliveryError::Invalid(format!(
            "name: `{name}` is not one of the events it listens for ({})",
            spec.events.join(", ")
        )));
    }
    if reference.is_empty() || reference.len() > MAX_REF_LEN {
        return Err(DeliveryError::Invalid(format!("ref: 1 to {MAX_REF_LEN} characters")));
    }
    if !(payload.is_object() || payload.is_null()) {
        return Err(DeliveryError::Invalid("payload: a JSON object".into()));
    }
    let size = serde_json::to_string(payload).map_or(usize::MAX, |text| text.len());
    if size > MAX_PAYLOAD_BYTES {
        return Err(DeliveryError::Invalid(format!("payload: {size} bytes, at most {MAX_PAYLOAD_BYTES}")));
    }
    Ok(())
}

/// Takes `event` into `state`: `Ok(false)` when its ref was delivered
/// before (nothing changes), `Ok(true)` when it now waits its turn.
pub fn take(state: &mut ListenState, event: JobEvent) -> Result<bool, DeliveryError> {
    if state.refs.contains(&event.reference) {
        return Ok(false);
    }
    if state.refs.len() >= MAX_DELIVERIES {
        return Err(DeliveryError::TooMany(format!("a listening job takes at most {MAX_DELIVERIES} events")));
    }
    if state.pending.len() >= MAX_PENDING_EVENTS {
        return Err(DeliveryError::TooMany(format!(
            "{MAX_PENDING_EVENTS} events already wait for the running execution"
        )));
    }
    state.refs.push(event.reference.clone());
    state.pending.push(event);
    Ok(true)
}

/// The value `event.<path>` reads: `name`, `ref`, or a field of the
/// payload (a string as is, anything else as JSON; absent: empty).
pub fn value_of(event: &JobEvent, path: &[String]) -> Option<String> {
    match path.split_first() {
        Some((first, [])) if first == "name" => Some(event.name.clone()),
        Some((first, [])) if first == "ref" => Some(event.reference.clone()),
        Some((first, rest)) if first == "payload" => {
            let mut value = &event.payload;
            for key in rest {
                value = match value {
                    serde_json::Value::Object(map) => map.get(key)?,
                    serde_json::Value::Array(items) => items.get(key.parse::<usize>().ok()?)?,
                    _ => return None,
                };
            }
            Some(match value {
                serde_json::Value::String(text) => text.clone(),
                serde_json::Value::Null => String::new(),
                other => other.to_string(),
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> ListenSpec {
        ListenSpec { events: vec!["review".into()], timeout_minutes: 60, when: None }
    }

    fn event(reference: &str, disposition: Disposition) -> JobEvent {
        JobEvent {
            name: "review".into(),
            reference: reference.into(),
            disposition,
            payload: json!({"review": {"state": "approved", "by": ["ann", "ben"]}, "n": 3}),
            delivered_at: Utc::now(),
        }
    }

    #[test]
    fn a_repeated_ref_is_taken_once_and_the_queue_is_bounded() {
        let mut state = ListenState { until: Utc::now(), pending: vec![], refs: vec![] };
        assert_eq!(take(&mut state, event("r1", Disposition::Fire)), Ok(true));
        assert_eq!(take(&mut state, event("r1", Disposition::Resolve)), Ok(false), "the same ref, whatever it says");
        assert_eq!(state.pending.len(), 1);
        for i in 2..=MAX_PENDING_EVENTS {
            assert_eq!(take(&mut state, event(&format!("r{i}"), Disposition::Fire)), Ok(true));
        }
        assert!(matches!(take(&mut state, event("one-more", Disposition::Fire)), Err(DeliveryError::TooMany(_))));
    }

    #[test]
    fn deliveries_name_a_listened_event_with_a_bounded_ref_and_payload() {
        let ok = json!({"a": 1});
        assert_eq!(check_event(&spec(), "review", "r1", &ok), Ok(()));
        assert!(
            matches!(check_event(&spec(), "push", "r1", &ok), Err(DeliveryError::Invalid(m)) if m.starts_with("name"))
        );
        assert!(
            matches!(check_event(&spec(), "review", "", &ok), Err(DeliveryError::Invalid(m)) if m.starts_with("ref"))
        );
        let big = json!({"a": "x".repeat(MAX_PAYLOAD_BYTES)});
        assert!(
            matches!(check_event(&spec(), "review", "r1", &big), Err(DeliveryError::Invalid(m)) if m.starts_with("payload"))
        );
        assert!(matches!(check_event(&spec(), "review", "r1", &json!([1])), Err(DeliveryError::Invalid(_))));
    }

    #[test]
    fn event_references_read_the_name_ref_and_payload_paths() {
        let e = event("r9", Disposition::Fire);
        let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(value_of(&e, &path(&["name"])).as_deref(), Some("review"));
        assert_eq!(value_of(&e, &path(&["ref"])).as_deref(), Some("r9"));
        assert_eq!(value_of(&e, &path(&["payload", "review", "state"])).as_deref(), Some("approved"));
        assert_eq!(value_of(&e, &path(&["payload", "review", "by", "1"])).as_deref(), Some("ben"));
        assert_eq!(value_of(&e, &path(&["payload", "n"])).as_deref(), Some("3"));
        assert_eq!(value_of(&e, &path(&["payload", "missing"])), None);
    }
}
