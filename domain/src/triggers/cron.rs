//! `on.schedule` crons as GitHub reads them: POSIX cron's five fields
//! (minute, hour, day of month, month, day of week), in UTC, with what
//! GitHub's examples use and crontab.guru (which GitHub's docs point to for
//! checking a cron) accepts: lists, ranges, steps (`*/15`, `1-30/5`,
//! `5/15`), month and day names (`JAN`, `mon`), and `7` for Sunday besides
//! `0`. `@daily` and the like are refused, as GitHub refuses them, and so
//! are the extensions some cron libraries read (`L`, `W`, `#`, `?`).
//!
//! Parsing and "when next" are the `croner` crate's. Day of month and day
//! of week follow Vixie cron, as crontab.guru reads them: when both are
//! restricted a day matching either fires; a field starting with `*`
//! (`*/2` too) counts as unrestricted, and the two then combine with "and"
//! (croner's `dom_and_dow` mode). What is here is GitHub's subset of the
//! syntax, that choice of mode, and errors that name the field.

use std::fmt;

use chrono::{DateTime, TimeZone, Timelike, Utc};
use croner::parser::{CronParser, Seconds, Year};

/// A parsed five-field cron.
#[derive(Debug, Clone)]
pub struct Cron {
    text: String,
    schedule: croner::Cron,
}

impl PartialEq for Cron {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for Cron {}

/// Why a cron is refused: the field (by name) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronError(pub String);

impl fmt::Display for CronError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The five fields: name, the values GitHub documents, the names allowed.
const FIELDS: [(&str, &str, &[&str]); 5] = [
    ("minute", "0–59", &[]),
    ("hour", "0–23", &[]),
    ("day of month", "1–31", &[]),
    ("month", "1–12 or JAN–DEC", &["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]),
    ("day of week", "0–7 or SUN–SAT", &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]),
];

fn parser(dom_and_dow: bool) -> CronParser {
    CronParser::builder().seconds(Seconds::Disallowed).year(Year::Disallowed).dom_and_dow(dom_and_dow).build()
}

impl Cron {
    /// Parses a cron as GitHub accepts it; see the module doc.
    pub fn parse(text: &str) -> Result<Self, CronError> {
        let trimmed = text.trim();
        if trimmed.starts_with('@') {
            return Err(CronError(format!(
                "`{trimmed}` is not supported (as on GitHub): write the five fields, e.g. `0 0 * * *` for daily"
            )));
        }
        let fields: Vec<&str> = trimmed.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(CronError(format!(
                "expected five fields (minute hour day-of-month month day-of-week), found {}",
                fields.len()
            )));
        }
        for (position, field) in fields.iter().enumerate() {
            check_field(field, position)?;
        }
        let dom_and_dow = fields[2].starts_with('*') || fields[4].starts_with('*');
        let schedule =
            parser(dom_and_dow).parse(trimmed).map_err(|err| CronError(format!("`{trimmed}`: {}", tidy(&err))))?;
        let cron = Self { text: trimmed.to_string(), schedule };
        let start = Utc.with_ymd_and_hms(2000, 1, 1, 0, 0, 0).single();
        if start.and_then(|start| cron.next_after(start)).is_none() {
            return Err(CronError(format!("`{trimmed}` never fires: no such day exists")));
        }
        Ok(cron)
    }

    /// The cron as written (trimmed): what a schedule tick names.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The first minute strictly after `instant` at which the cron fires,
    /// or `None` when it never does again within the crate's search.
    pub fn next_after(&self, instant: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // Within the minute: croner counts from the instant's nanosecond.
        let instant = instant.with_nanosecond(0).unwrap_or(instant);
        self.schedule.find_next_occurrence(&instant, false).ok()
    }

    /// Whether the cron fires in the minute `instant` falls in.
    pub fn fires_at(&self, instant: DateTime<Utc>) -> bool {
        let minute = instant.with_second(0).and_then(|t| t.with_nanosecond(0)).unwrap_or(instant);
        self.schedule.is_time_matching(&minute).unwrap_or(false)
    }

    /// The cron as Amazon EventBridge Scheduler writes one: `cron(minutes
    /// hours day-of-month month day-of-week year)`, where one of the two
    /// day fields must be `?`, days of the week are 1–7 from Sunday (named
    /// here, so no number is misread) and take no step. GitHub's "either
    /// day field" (both restricted) is two schedules; its "both day
    /// fields" (one written `*/n`) cannot be said, so the day of month
    /// alone is: the ticks are then a superset, and the target keeps only
    /// those [`Cron::fires_at`] accepts. A cron that can be said exactly is
    /// one schedule that fires exactly when it does.
    pub fn aws_expressions(&self) -> Vec<String> {
        let fields: Vec<&str> = self.text.split_whitespace().collect();
        let [minute, hour, dom, month, dow] = fields[..] else {
            // A parsed cron has five fields; nothing to schedule otherwise.
            return Vec::new();
        };
        // Month names in capitals, as AWS's documentation writes them.
        let (minute, hour, month) =
            (aws_steps(minute, "0"), aws_steps(hour, "0"), aws_steps(month, "1").to_uppercase());
        let by_dom = |dom: &str| format!("cron({minute} {hour} {} {month} ? *)", aws_steps(dom, "1"));
        let by_dow = || format!("cron({minute} {hour} ? {month} {} *)", self.weekday_names(dow));
        match (dom, dow) {
            ("*", "*") => vec![by_dom("*")],
            (_, "*") => vec![by_dom(dom)],
            ("*", _) => vec![by_dow()],
            _ if !dom.starts_with('*') && !dow.starts_with('*') => vec![by_dom(dom), by_dow()],
            _ => vec![by_dom(dom)],
        }
    }

    /// The days of the week field `dow` names, as AWS's names (`MON,WED`),
    /// read by the crate: each day of a week that starts on a Sunday.
    fn weekday_names(&self, dow: &str) -> String {
        const NAMES: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
        let Ok(days) = parser(false).parse(&format!("0 0 * * {dow}")) else {
            return "*".into();
        };
        let sunday = Utc.with_ymd_and_hms(2023, 1, 1, 0, 0, 0).single();
        let names: Vec<&str> = NAMES
            .iter()
            .enumerate()
            .filter(|(offset, _)| {
                let day = sunday.map(|s| s + chrono::Duration::days(*offset as i64));
                day.is_some_and(|day| days.is_time_matching(&day).unwrap_or(false))
            })
            .map(|(_, name)| *name)
            .collect();
        names.join(",")
    }
}

/// A field's `*/n` items as `<first>/n`, AWS's way of writing a step from
/// the start of the range.
fn aws_steps(field: &str, first: &str) -> String {
    field
        .split(',')
        .map(|item| match item.strip_prefix("*/") {
            Some(step) => format!("{first}/{step}"),
            None => item.to_string(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// One field in GitHub's syntax (numbers, `*`, `,`, `-`, `/`, and the
/// field's names), then read by the crate alone, so that its refusal names
/// the field.
fn check_field(field: &str, position: usize) -> Result<(), CronError> {
    let (name, values, names) = FIELDS[position];
    if field.split(',').any(str::is_empty) {
        return Err(CronError(format!("{name}: `{field}` has an empty item in its list")));
    }
    let mut word = String::new();
    for c in field.chars().chain([' ']) {
        if c.is_ascii_alphabetic() {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            if !names.iter().any(|n| n.eq_ignore_ascii_case(&word)) {
                return Err(CronError(format!(
                    "{name}: `{field}`: `{word}` is not in GitHub's cron syntax (numbers, `*`, `,`, `-`, `/`; \
                     expected {values})"
                )));
            }
            word.clear();
        }
        if !(c.is_ascii_digit() || matches!(c, '*' | ',' | '-' | '/' | ' ')) {
            return Err(CronError(format!(
                "{name}: `{field}`: `{c}` is not in GitHub's cron syntax (numbers, `*`, `,`, `-`, `/`; expected \
                 {values})"
            )));
        }
    }
    let mut alone = ["*"; 5];
    alone[position] = field;
    parser(false)
        .parse(&alone.join(" "))
        .map(|_| ())
        .map_err(|err| CronError(format!("{name}: `{field}`: {} (expected {values})", tidy(&err))))
}

/// The crate's message without its category, as a clause.
fn tidy(err: &croner::errors::CronError) -> String {
    let text = err.to_string();
    let text = text.split_once(": ").map_or(text.as_str(), |(_, rest)| rest).trim_end_matches('.');
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| first.to_lowercase().chain(chars).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    fn next(cron: &str, after: &str) -> String {
        Cron::parse(cron).unwrap().next_after(at(after)).unwrap().to_rfc3339()
    }

    #[test]
    fn githubs_examples() {
        // "every day at 5:30 and 17:30 UTC"
        assert_eq!(next("30 5,17 * * *", "2024-03-10T06:00:00Z"), "2024-03-10T17:30:00+00:00");
        assert_eq!(next("30 5,17 * * *", "2024-03-10T17:30:00Z"), "2024-03-11T05:30:00+00:00");
        // "15 4,5 * * *"
        assert_eq!(next("15 4,5 * * *", "2024-03-10T04:15:00Z"), "2024-03-10T05:15:00+00:00");
        // "30 5 * * 1,3": Mondays and Wednesdays (2024-03-10 is a Sunday)
        assert_eq!(next("30 5 * * 1,3", "2024-03-10T00:00:00Z"), "2024-03-11T05:30:00+00:00");
        assert_eq!(next("30 5 * * 1,3", "2024-03-11T05:30:00Z"), "2024-03-13T05:30:00+00:00");
        // "30 5 * * 1-5": weekdays
        assert_eq!(next("30 5 * * 1-5", "2024-03-08T05:30:00Z"), "2024-03-11T05:30:00+00:00");
    }

    #[test]
    fn steps_ranges_lists_and_names() {
        assert_eq!(next("*/15 * * * *", "2024-01-01T00:00:30Z"), "2024-01-01T00:15:00+00:00");
        assert_eq!(next("0 9-17/4 * * MON-FRI", "2024-03-08T17:00:00Z"), "2024-03-11T09:00:00+00:00");
        assert_eq!(next("5/20 * * * *", "2024-01-01T00:06:00Z"), "2024-01-01T00:25:00+00:00");
        assert_eq!(next("0 0 1 jan,Jul *", "2024-02-01T00:00:00Z"), "2024-07-01T00:00:00+00:00");
        assert_eq!(next("00 18 * * 0", "2024-03-10T18:00:00Z"), "2024-03-17T18:00:00+00:00");
    }

    #[test]
    fn seven_is_sunday_too() {
        assert_eq!(next("0 0 * * 7", "2024-03-11T00:00:00Z"), next("0 0 * * 0", "2024-03-11T00:00:00Z"));
        assert_eq!(next("0 12 * * 5-7", "2024-03-10T12:00:00Z"), "2024-03-15T12:00:00+00:00");
    }

    #[test]
    fn day_of_month_or_day_of_week_when_both_are_restricted() {
        // The 13th, or any Friday: 2024-03-10 (Sunday) → Wednesday the 13th,
        // then Friday the 15th.
        assert_eq!(next("0 0 13 * 5", "2024-03-10T00:00:00Z"), "2024-03-13T00:00:00+00:00");
        assert_eq!(next("0 0 13 * 5", "2024-03-13T00:00:00Z"), "2024-03-15T00:00:00+00:00");
        // Only one restricted: that one alone decides.
        assert_eq!(next("0 0 13 * *", "2024-03-13T00:00:00Z"), "2024-04-13T00:00:00+00:00");
        // `*/2` counts as unrestricted: odd days that are Mondays.
        assert_eq!(next("0 0 */2 * 1", "2024-03-10T00:00:00Z"), "2024-03-11T00:00:00+00:00");
        assert_eq!(next("0 0 */2 * 1", "2024-03-11T00:00:00Z"), "2024-03-25T00:00:00+00:00");
    }

    #[test]
    fn rare_days_are_found_and_impossible_ones_refused() {
        assert_eq!(next("0 0 29 2 *", "2024-03-01T00:00:00Z"), "2028-02-29T00:00:00+00:00");
        assert!(Cron::parse("0 0 30 2 *").unwrap_err().0.contains("never fires"));
        assert!(Cron::parse("0 0 31 4,6,9,11 *").is_err());
    }

    #[test]
    fn next_is_strictly_after_and_ignores_seconds() {
        assert_eq!(next("* * * * *", "2024-01-01T00:00:00Z"), "2024-01-01T00:01:00+00:00");
        assert_eq!(next("* * * * *", "2024-01-01T00:00:59.999Z"), "2024-01-01T00:01:00+00:00");
        assert_eq!(next("59 23 31 12 *", "2024-12-31T23:58:00Z"), "2024-12-31T23:59:00+00:00");
        assert_eq!(next("0 0 1 1 *", "2024-12-31T23:59:00Z"), "2025-01-01T00:00:00+00:00");
    }

    fn aws(cron: &str) -> Vec<String> {
        Cron::parse(cron).unwrap().aws_expressions()
    }

    #[test]
    fn a_cron_is_said_to_amazons_scheduler_with_one_day_field_left_open() {
        assert_eq!(aws("* * * * *"), ["cron(* * * * ? *)"]);
        assert_eq!(aws("30 5,17 * * *"), ["cron(30 5,17 * * ? *)"]);
        assert_eq!(aws("*/15 9-17/4 1 JAN,jul *"), ["cron(0/15 9-17/4 1 JAN,JUL ? *)"]);
        assert_eq!(aws("0 0 */2 * *"), ["cron(0 0 1/2 * ? *)"]);
    }

    #[test]
    fn days_of_the_week_are_named_as_amazon_counts_them_from_sunday() {
        assert_eq!(aws("30 5 * * 1-5"), ["cron(30 5 ? * MON,TUE,WED,THU,FRI *)"]);
        assert_eq!(aws("0 0 * * 0"), aws("0 0 * * 7"));
        assert_eq!(aws("0 0 * * 7"), ["cron(0 0 ? * SUN *)"]);
        assert_eq!(aws("0 12 * * 5-7"), ["cron(0 12 ? * SUN,FRI,SAT *)"]);
        // Amazon takes no step in this field: the days are listed.
        assert_eq!(aws("0 0 * * */2"), ["cron(0 0 ? * SUN,TUE,THU,SAT *)"]);
        assert_eq!(aws("0 0 * * mon,Wed"), ["cron(0 0 ? * MON,WED *)"]);
    }

    #[test]
    fn either_day_field_is_two_schedules_and_both_is_filtered_by_the_target() {
        // The 13th or any Friday.
        assert_eq!(aws("0 0 13 * 5"), ["cron(0 0 13 * ? *)", "cron(0 0 ? * FRI *)"]);
        // Odd days that are Mondays: every odd day wakes the target, which
        // keeps the Mondays.
        assert_eq!(aws("0 0 */2 * 1"), ["cron(0 0 1/2 * ? *)"]);
        let cron = Cron::parse("0 0 */2 * 1").unwrap();
        assert!(cron.fires_at(at("2024-03-11T00:00:30Z")), "Monday the 11th");
        assert!(!cron.fires_at(at("2024-03-13T00:00:00Z")), "Wednesday the 13th");
        assert!(!cron.fires_at(at("2024-03-11T00:01:00Z")), "another minute");
    }

    #[test]
    fn bad_crons_name_the_field() {
        for (cron, says) in [
            ("@daily", "not supported"),
            ("* * * *", "five fields"),
            ("* * * * * *", "five fields"),
            ("60 * * * *", "minute: `60`"),
            ("* 24 * * *", "hour: `24`"),
            ("* * 0 * *", "day of month: `0`"),
            ("* * * 13 *", "month: `13`"),
            ("* * * * 8", "day of week: `8`"),
            ("*/0 * * * *", "minute: `*/0`"),
            ("* * * FOO *", "month: `FOO`: `FOO` is not in GitHub's cron syntax"),
            ("* * ? * *", "day of month: `?`"),
            ("* * L * *", "day of month: `L`"),
            ("* * 15W * *", "day of month: `15W`"),
            ("* * * * MON#2", "day of week: `MON#2`"),
            ("* * * * 5L", "day of week: `5L`"),
            ("1,,2 * * * *", "minute: `1,,2` has an empty item"),
            ("5-1 * * * *", "minute: `5-1`"),
        ] {
            let err = Cron::parse(cron).unwrap_err();
            assert!(err.0.contains(says), "{cron}: {err}");
        }
        let err = Cron::parse("61 * * * *").unwrap_err();
        assert!(err.0.contains("expected 0–59"), "{err}");
    }
}
