//! Demand and instances as `baton fleet` prints them: one line per label
//! set (queued, reserved, running, idle sessions, how long the oldest queued
//! job has waited) and one per instance (state, terminate intent).

use baton_api::provisioners::{Demand, InstanceList};
use chrono::{DateTime, Utc};

/// The fleet's picture at `now`.
pub fn fleet_lines(demand: &Demand, instances: &InstanceList, now: DateTime<Utc>) -> Vec<String> {
    let mut lines = vec![format!("demand (version {})", demand.version)];
    let width = demand.label_sets.iter().map(|s| s.labels.join(",").len()).max().unwrap_or(0).max("LABELS".len());
    lines.push(format!(
        "  {:<width$}  {:>6}  {:>8}  {:>7}  {:>4}  OLDEST QUEUED",
        "LABELS", "QUEUED", "RESERVED", "RUNNING", "IDLE"
    ));
    for set in &demand.label_sets {
        let oldest = set.oldest_queued_at.map_or_else(|| "-".to_string(), |at| age(now, at));
        lines.push(format!(
            "  {:<width$}  {:>6}  {:>8}  {:>7}  {:>4}  {oldest}",
            set.labels.join(","),
            set.queued,
            set.reserved,
            set.running,
            set.idle_sessions
        ));
    }
    lines.push(format!("instances ({})", instances.items.len()));
    for item in &instances.items {
        let mut line = format!("  {}  {}", item.provider_runner_id, item.state.as_str());
        if let Some(reservation) = item.reservation_id {
            line.push_str(&format!("  reservation {reservation}"));
        }
        if let Some(session) = item.runner_session_id {
            line.push_str(&format!("  session {session}"));
        }
        if let Some(intent) = &item.terminate {
            line.push_str(&format!("  terminate: {} ({} ago)", intent.reason.as_str(), age(now, intent.at)));
        }
        lines.push(line);
    }
    lines
}

/// How long ago `at` was, short: `42s`, `3m05s`, `2h07m` (a clock ahead of
/// ours shows `0s`).
pub fn age(now: DateTime<Utc>, at: DateTime<Utc>) -> String {
    let secs = (now - at).num_seconds().max(0);
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3_600 => format!("{}m{:02}s", s / 60, s % 60),
        s => format!("{}h{:02}m", s / 3_600, (s % 3_600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_api::provisioners::{InstanceState, InstanceView, LabelSetDemand, TerminateIntent, TerminateReason};
    use chrono::Duration;
    use uuid::Uuid;

    #[test]
    fn ages_are_short_and_never_negative() {
        let now = Utc::now();
        assert_eq!(age(now, now - Duration::seconds(42)), "42s");
        assert_eq!(age(now, now - Duration::seconds(185)), "3m05s");
        assert_eq!(age(now, now - Duration::seconds(7_620)), "2h07m");
        assert_eq!(age(now, now + Duration::seconds(5)), "0s");
    }

    #[test]
    fn the_fleet_shows_demand_per_label_set_and_each_instance_with_its_intent() {
        let now = Utc::now();
        let demand = Demand {
            label_sets: vec![
                LabelSetDemand {
                    labels: vec!["linux".into(), "x64".into()],
                    queued: 3,
                    reserved: 1,
                    running: 2,
                    idle_sessions: 0,
                    oldest_queued_at: Some(now - Duration::seconds(75)),
                },
                LabelSetDemand {
                    labels: vec!["gpu".into()],
                    queued: 0,
                    reserved: 0,
                    running: 0,
                    idle_sessions: 1,
                    oldest_queued_at: None,
                },
            ],
            version: "v7".into(),
        };
        let session = Uuid::nil();
        let instances = InstanceList {
            items: vec![
                InstanceView {
                    provider_runner_id: "local-a".into(),
                    state: InstanceState::Running,
                    reservation_id: None,
                    runner_session_id: Some(session),
                    terminate: Some(TerminateIntent { reason: TerminateReason::Idle, at: now - Duration::seconds(3) }),
                    first_seen_at: None,
                },
                InstanceView {
                    provider_runner_id: "local-b".into(),
                    state: InstanceState::Booting,
                    reservation_id: None,
                    runner_session_id: None,
                    terminate: None,
                    first_seen_at: None,
                },
            ],
            next_cursor: None,
        };
        let lines = fleet_lines(&demand, &instances, now);
        assert_eq!(
            lines,
            vec![
                "demand (version v7)".to_string(),
                "  LABELS     QUEUED  RESERVED  RUNNING  IDLE  OLDEST QUEUED".into(),
                "  linux,x64       3         1        2     0  1m15s".into(),
                "  gpu             0         0        0     1  -".into(),
                "instances (2)".into(),
                format!("  local-a  running  session {session}  terminate: idle (3s ago)"),
                "  local-b  booting".into(),
            ]
        );
    }
}
