//! EventBridge schedules (which moto accepts but never fires): the dev host
//! fires each scheduled function at its configured period.

use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::cloudwatch_events::CloudWatchEvent;

use crate::functions::Functions;
use crate::Shutdown;

pub struct Ticker {
    pub function: String,
    pub period: Duration,
    pub functions: Arc<Functions>,
}

impl Ticker {
    pub async fn run(self, mut shutdown: Shutdown) {
        let mut interval = tokio::time::interval(self.period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = interval.tick() => {
                    let mut event = CloudWatchEvent::default();
                    event.detail_type = Some("Scheduled Event".into());
                    event.source = Some("aws.events".into());
                    event.time = chrono::Utc::now();
                    if let Err(err) = self.functions.scheduled(&self.function, event).await {
                        tracing::error!(error = %err, "scheduled function failed");
                    }
                }
            }
        }
    }
}

/// Amazon EventBridge Scheduler's schedules of pipelines (which moto keeps
/// but never fires): every `period` the dev host reads the stack's schedule
/// group and delivers each tick that fell due since its last look to the
/// schedules' target, as the scheduler would: the schedule's input with
/// the tick's time in, again at the next look while the target fails and
/// the tick is younger than the scheduler's retry window. Ticks due before
/// the host started are not made up (nor does the scheduler make up a tick
/// the stack missed).
pub struct SchedulerFirer {
    pub group: String,
    /// The Baton function every schedule targets.
    pub target: String,
    pub period: Duration,
    pub scheduler: aws_sdk_scheduler::Client,
    pub functions: Arc<Functions>,
}

/// One tick to deliver.
struct Due {
    schedule: String,
    at: chrono::DateTime<chrono::Utc>,
    input: String,
}

impl SchedulerFirer {
    pub async fn run(self, mut shutdown: Shutdown) {
        let mut interval = tokio::time::interval(self.period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut since = chrono::Utc::now();
        let mut retrying: Vec<Due> = Vec::new();
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = interval.tick() => {
                    let now = chrono::Utc::now();
                    match self.due(since, now).await {
                        Ok(due) => {
                            since = now;
                            retrying.extend(due);
                        }
                        Err(err) => tracing::error!(error = %err, group = %self.group, "reading the schedules failed; the next look reads again"),
                    }
                    let mut failed = Vec::new();
                    for due in retrying.drain(..) {
                        if !self.deliver(&due).await && now - due.at < baton_domain::schedules::MISSED_AFTER {
                            failed.push(due);
                        }
                    }
                    retrying = failed;
                }
            }
        }
    }

    /// The ticks of every schedule of the group in (`since`, `now`].
    async fn due(
        &self,
        since: chrono::DateTime<chrono::Utc>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<Due>, String> {
        let mut names = Vec::new();
        let mut pages = self.scheduler.list_schedules().group_name(&self.group).into_paginator().items().send();
        while let Some(summary) = pages.next().await {
            let summary = summary.map_err(|e| aws_sdk_scheduler::error::DisplayErrorContext(e).to_string())?;
            names.extend(summary.name);
        }
        let mut due = Vec::new();
        for name in names {
            let schedule = match self.scheduler.get_schedule().group_name(&self.group).name(&name).send().await {
                Ok(schedule) => schedule,
                // Deleted since the list: nothing to fire.
                Err(err) if err.as_service_error().is_some_and(|e| e.is_resource_not_found_exception()) => continue,
                Err(err) => return Err(aws_sdk_scheduler::error::DisplayErrorContext(err).to_string()),
            };
            let (Some(expression), Some(input)) = (schedule.schedule_expression, schedule.target.and_then(|t| t.input))
            else {
                continue;
            };
            let Some(cron) = aws_cron(&expression) else {
                tracing::error!(schedule = %name, expression = %expression, "a schedule the dev host cannot read");
                continue;
            };
            due.extend(ticks(&cron, since, now).into_iter().map(|at| Due {
                schedule: name.clone(),
                at,
                input: input.clone(),
            }));
        }
        Ok(due)
    }

    /// Delivers one tick; `false` when the target failed.
    async fn deliver(&self, due: &Due) -> bool {
        let time = baton_domain::time::format(due.at);
        let input = due.input.replace(baton_domain::schedules::SCHEDULED_TIME, &time);
        let tick = match serde_json::from_str(&input) {
            Ok(tick) => tick,
            Err(err) => {
                tracing::error!(schedule = %due.schedule, error = %err, "a schedule's input is not a tick");
                return true;
            }
        };
        match self.functions.schedule_tick(&self.target, tick).await {
            Ok(Ok(())) => true,
            Ok(Err(err)) => {
                tracing::warn!(schedule = %due.schedule, at = %time, error = %err, "schedule target failed; retried at the next look");
                false
            }
            Err(err) => {
                tracing::error!(error = %err, "the schedules' target is no function of the dev host");
                true
            }
        }
    }
}

/// The minutes `cron` fires in within (`since`, `now`]. The search starts
/// from `since` cut to the whole second: the cron crate keeps the start's
/// fraction of a second, so a search from 10:01:00.166 would find
/// 10:02:00.166, which the look at 10:02:00.150 has not reached and the
/// next look's search (from 10:02:00.150) passes: a minute never fired.
fn ticks(
    cron: &croner::Cron,
    since: chrono::DateTime<chrono::Utc>,
    now: chrono::DateTime<chrono::Utc>,
) -> Vec<chrono::DateTime<chrono::Utc>> {
    use chrono::SubsecRound;
    let mut found = Vec::new();
    let mut after = since.trunc_subsecs(0);
    while let Ok(at) = cron.find_next_occurrence(&after, false) {
        if at > now {
            break;
        }
        found.push(at);
        after = at;
    }
    found
}

/// An EventBridge Scheduler `cron(minutes hours day-of-month month
/// day-of-week year)` as the cron crate reads five fields: `?` is "any",
/// the year (always `*` in Baton's schedules) is left out. Baton's
/// schedules name the days of the week, so AWS's 1–7 numbering never
/// reaches the crate.
fn aws_cron(expression: &str) -> Option<croner::Cron> {
    let fields: Vec<&str> = expression.strip_prefix("cron(")?.strip_suffix(')')?.split_whitespace().collect();
    let [minute, hour, dom, month, dow, "*"] = fields[..] else {
        return None;
    };
    let any = |field: &str| if field == "?" { "*".to_string() } else { field.to_string() };
    let five = [minute.to_string(), hour.to_string(), any(dom), month.to_string(), any(dow)].join(" ");
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Disallowed)
        .year(croner::parser::Year::Disallowed)
        .build()
        .parse(&five)
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> chrono::DateTime<chrono::Utc> {
        chrono::DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&chrono::Utc)
    }

    #[test]
    fn an_amazon_cron_is_read_as_the_scheduler_fires_it() {
        let every_minute = aws_cron("cron(* * * * ? *)").unwrap();
        assert_eq!(
            every_minute.find_next_occurrence(&at("2026-12-07T10:00:30Z"), false).unwrap(),
            at("2026-12-07T10:01:00Z")
        );
        let fridays = aws_cron("cron(0 0 ? * FRI *)").unwrap();
        assert_eq!(
            fridays.find_next_occurrence(&at("2026-12-07T00:00:00Z"), false).unwrap(),
            at("2026-12-11T00:00:00Z")
        );
        let odd_days = aws_cron("cron(0 0 1/2 * ? *)").unwrap();
        assert_eq!(
            odd_days.find_next_occurrence(&at("2026-12-07T00:00:00Z"), false).unwrap(),
            at("2026-12-09T00:00:00Z")
        );
        assert!(aws_cron("rate(5 minutes)").is_none());
        assert!(aws_cron("cron(0 0 * * ? 2027)").is_none(), "Baton's schedules are every year's");
    }

    #[test]
    fn looks_at_any_fraction_of_a_second_fire_each_minute_once() {
        let every_minute = aws_cron("cron(* * * * ? *)").unwrap();
        // Looks about a second apart, each at its own fraction of a second,
        // across three minutes (150 looks, 160.7 s).
        let mut since = at("2026-12-07T10:00:30.700Z");
        let mut fired = Vec::new();
        for step_ms in [1166, 850, 1349, 1000, 1001].into_iter().cycle().take(150) {
            let now = since + chrono::Duration::milliseconds(step_ms);
            fired.extend(ticks(&every_minute, since, now));
            since = now;
        }
        assert_eq!(
            fired,
            [at("2026-12-07T10:01:00Z"), at("2026-12-07T10:02:00Z"), at("2026-12-07T10:03:00Z")],
            "each minute, on the minute, once"
        );
    }
}
