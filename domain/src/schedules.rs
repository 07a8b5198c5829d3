//! Pipelines' schedules (behaviour.md §18) on Amazon EventBridge Scheduler:
//! which schedules a pipeline's `on.schedule` crons are, what each one's
//! tick tells the function it wakes, and whether that tick starts a run.
//!
//! One schedule a cron (two where GitHub's "either day field" needs both,
//! `Cron::aws_expressions`), named from a hash of the workspace and the
//! pipeline so that a pipeline's schedules are listed by a name prefix and
//! kept in step with it by name. A schedule's tick carries its cron and
//! the minute it was due (`<aws.scheduler.scheduled-time>`); the target
//! checks the cron is still the pipeline's and fires in that minute, so a
//! schedule that outlived a change, or that wakes on a superset of its
//! cron's minutes, starts nothing. A tick reached later than
//! [`MISSED_AFTER`] (the stack was down; the scheduler retried) is not made
//! up, as GitHub makes up none.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::triggers::cron::Cron;

/// A tick reached later than this is missed, not fired (and the
/// scheduler is told to give up retrying after as long).
pub const MISSED_AFTER: Duration = Duration::minutes(3);

/// What the scheduler puts in the target's input for the minute it was
/// due: its context attribute, replaced by the time.
pub const SCHEDULED_TIME: &str = "<aws.scheduler.scheduled-time>";

/// What the target does with a tick it is woken for.
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

/// One schedule: its name in the stack's schedule group, its expression,
/// and the input its target gets on each tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub name: String,
    pub expression: String,
    pub input: String,
}

/// A tick, as the target reads its input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduledTick {
    pub workspace_id: String,
    pub pipeline: String,
    /// The cron's place in `on.schedule`.
    pub index: usize,
    pub cron: String,
    /// When it was due: RFC 3339 once the scheduler has replaced
    /// [`SCHEDULED_TIME`].
    pub scheduled_time: String,
}

/// The start of the names of a pipeline's schedules (`p-<hash>-`): AWS
/// names are at most 64 characters of `[0-9A-Za-z_.-]`, a workspace id and
/// a pipeline name together may be longer or hold other characters.
pub fn name_prefix(workspace_id: &str, pipeline: &str) -> String {
    let digest = Sha256::digest(format!("{workspace_id}\n{pipeline}").as_bytes());
    format!("p-{}-", &hex::encode(digest)[..32])
}

/// The schedules of a pipeline whose `on.schedule` is `crons`, in order.
pub fn schedules(workspace_id: &str, pipeline: &str, crons: &[Cron]) -> Vec<Schedule> {
    let prefix = name_prefix(workspace_id, pipeline);
    let mut all = Vec::new();
    for (index, cron) in crons.iter().enumerate() {
        let tick = ScheduledTick {
            workspace_id: workspace_id.to_string(),
            pipeline: pipeline.to_string(),
            index,
            cron: cron.text().to_string(),
            scheduled_time: SCHEDULED_TIME.to_string(),
        };
        let input = serde_json::to_string(&tick).unwrap_or_default();
        for (part, expression) in cron.aws_expressions().into_iter().enumerate() {
            all.push(Schedule { name: format!("{prefix}{index}-{part}"), expression, input: input.clone() });
        }
    }
    all
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

/// The idempotency key of the run a tick starts: the same tick delivered
/// twice, or woken for by both schedules of one cron, is one run.
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
        assert_eq!(tick(due, at("2026-12-06T12:07:59Z")), Tick::Fire, "a retried tick still fires");
        assert_eq!(tick(due, at("2026-12-06T13:00:00Z")), Tick::Missed, "not made up after an outage");
    }

    #[test]
    fn a_pipelines_crons_are_schedules_named_by_a_prefix_of_its_own() {
        let crons = [Cron::parse("0 3 * * *").unwrap(), Cron::parse("0 0 13 * 5").unwrap()];
        let made = schedules("ws-1", "nightly build", &crons);
        let prefix = name_prefix("ws-1", "nightly build");
        let names: Vec<&str> = made.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, [format!("{prefix}0-0"), format!("{prefix}1-0"), format!("{prefix}1-1")]);
        assert!(names
            .iter()
            .all(|n| n.len() <= 64 && n.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))));
        assert_ne!(prefix, name_prefix("ws-1", "nightly"), "another pipeline");
        assert_ne!(prefix, name_prefix("ws-2", "nightly build"), "another workspace");
        assert!(!name_prefix("ws-1", "nightly").starts_with(&name_prefix("ws-1", "nightl")), "no prefix of another");
        let tick: ScheduledTick = serde_json::from_str(&made[2].input).unwrap();
        assert_eq!((tick.index, tick.cron.as_str()), (1, "0 0 13 * 5"));
        assert_eq!(tick.scheduled_time, SCHEDULED_TIME);
        assert_eq!(made[2].expression, "cron(0 0 ? * FRI *)");
    }

    #[test]
    fn a_scheduled_run_is_a_schedule_event_naming_its_cron() {
        let fields = github_fields("30 5 * * 1-5");
        assert_eq!(fields["event_name"], "schedule");
        assert_eq!(fields["event"]["schedule"], "30 5 * * 1-5");
        assert_eq!(idempotency_key("nightly", 0, at("2026-12-06T05:30:00Z")), "schedule:nightly:0:2026-12-06T05:30");
    }
}
