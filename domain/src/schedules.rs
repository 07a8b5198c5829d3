//! Pipelines' schedules (behaviour.md §18): when an `on.schedule` cron's
//! tick fires, what a run it starts knows, and which minutes a sweep reads.
//!
//! A tick is kept in the store under its minute (a timing wheel: the sweep
//! reads one partition a minute, never a Scan). The sweep runs on the
//! cloud's own scheduler every minute; a tick it reaches late by more than
//! [`MISSED_AFTER`] (the stack was down) is not made up, as GitHub makes up
//! none: its cron's next tick after now is kept instead.

use chrono::{DateTime, Duration, Timelike, Utc};
use serde_json::{Map, Value};

/// A tick reached later than this is missed, not fired.
pub const MISSED_AFTER: Duration = Duration::minutes(3);

/// The most minutes one sweep reads back (an outage longer than a day
/// leaves its older ticks to expire: they would be missed anyway).
pub const MAX_SWEEP_MINUTES: i64 = 24 * 60;

/// What a sweep does with a tick it reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tick {
    Fire,
    Missed,
}

/// Whether the tick due at `due` fires when reached at `now`.
pub fn tick(due: DateTime<Utc>, now: DateTime<Utc>) -> Tick {
    if now - due > MISSED_AFTER {
        Tick::Missed
    } else {
        Tick::Fire
    }
}

/// The minute `instant` falls in.
pub fn minute_of(instant: DateTime<Utc>) -> DateTime<Utc> {
    instant.with_second(0).and_then(|t| t.with_nanosecond(0)).unwrap_or(instant)
}

/// The minutes a sweep at `now` reads, oldest first: those after the last
/// one swept, up to `now`'s own (the first sweep reads the last few).
pub fn minutes_to_sweep(last_swept: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let current = minute_of(now);
    let earliest = current - Duration::minutes(MAX_SWEEP_MINUTES - 1);
    let first = match last_swept {
        Some(swept) => (minute_of(swept) + Duration::minutes(1)).max(earliest),
        None => current - MISSED_AFTER,
    };
    let mut minutes = Vec::new();
    let mut at = first;
    while at <= current {
        minutes.push(at);
        at += Duration::minutes(1);
    }
    minutes
}

/// The `github` fields of a scheduled run: `event_name` `schedule`, and
/// `github.event.schedule` the cron, as GitHub gives them.
pub fn github_fields(cron: &str) -> Map<String, Value> {
    let mut event = Map::new();
    event.insert("schedule".into(), Value::String(cron.to_string()));
    let mut fields = Map::new();
    fields.insert("event_name".into(), Value::String("schedule".into()));
    fields.insert("event".into(), Value::Object(event));
    for empty in
        ["ref", "ref_name", "ref_type", "sha", "repository", "repository_owner", "actor", "head_ref", "base_ref"]
    {
        fields.insert(empty.into(), Value::String(String::new()));
    }
    fields
}

/// The idempotency key of the run a tick starts: the same tick fired twice
/// (two sweeps at once) is one run.
pub fn idempotency_key(pipeline: &str, index: usize, due: DateTime<Utc>) -> String {
    format!("schedule:{pipeline}:{index}:{}", due.format("%Y-%m-%dT%H:%M"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).map(|t| t.with_timezone(&Utc)).unwrap()
    }

    #[test]
    fn a_tick_reached_in_time_fires_and_one_reached_after_an_outage_is_missed() {
        let due = at("2026-12-06T12:05:00Z");
        assert_eq!(tick(due, at("2026-12-06T12:05:02Z")), Tick::Fire);
        assert_eq!(tick(due, at("2026-12-06T12:07:59Z")), Tick::Fire, "a late sweep still fires it");
        assert_eq!(tick(due, at("2026-12-06T13:00:00Z")), Tick::Missed, "not made up after an outage");
    }

    #[test]
    fn a_sweep_reads_each_minute_once_from_the_last_swept_and_at_most_a_day() {
        let now = at("2026-12-06T12:05:30Z");
        let minutes = minutes_to_sweep(Some(at("2026-12-06T12:02:00Z")), now);
        assert_eq!(minutes, [at("2026-12-06T12:03:00Z"), at("2026-12-06T12:04:00Z"), at("2026-12-06T12:05:00Z")]);
        assert!(minutes_to_sweep(Some(at("2026-12-06T12:05:00Z")), now).is_empty(), "this minute is swept");
        assert_eq!(minutes_to_sweep(None, now).len(), 4, "a first sweep reads the last few minutes");
        let after_a_week = minutes_to_sweep(Some(at("2026-11-29T12:00:00Z")), now);
        assert_eq!(after_a_week.len() as i64, MAX_SWEEP_MINUTES);
        assert_eq!(after_a_week.last(), Some(&at("2026-12-06T12:05:00Z")));
    }

    #[test]
    fn a_scheduled_run_is_a_schedule_event_naming_its_cron() {
        let fields = github_fields("30 5 * * 1-5");
        assert_eq!(fields["event_name"], "schedule");
        assert_eq!(fields["event"]["schedule"], "30 5 * * 1-5");
        assert_eq!(idempotency_key("nightly", 0, at("2026-12-06T05:30:00Z")), "schedule:nightly:0:2026-12-06T05:30");
    }
}
