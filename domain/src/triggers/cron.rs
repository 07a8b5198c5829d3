//! `on.schedule` crons as GitHub reads them: POSIX cron's five fields
//! (minute, hour, day of month, month, day of week), in UTC, with the
//! extensions GitHub's examples use and crontab.guru (which GitHub's docs
//! point to for checking a cron) accepts: steps (`*/15`, `1-30/5`, `5/15`),
//! month and day names (`JAN`, `mon`), and `7` for Sunday besides `0`.
//! `@daily` and the like are refused, as GitHub refuses them.
//!
//! Day of month and day of week: when both are restricted a day matching
//! either fires (POSIX); a field counts as unrestricted when it starts with
//! `*` (so `*/2` in one of them makes the two combine with "and", as in
//! Vixie cron and crontab.guru).

use std::fmt;

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Timelike, Utc};

/// How far [`Cron::next_after`] looks: a cron like `0 0 29 2 1` (the 29th
/// of February when a Monday) fires only every 28 years.
const HORIZON_YEARS: i32 = 60;

/// A parsed five-field cron.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    text: String,
    minutes: u64,
    hours: u32,
    days_of_month: u32,
    months: u16,
    /// Bit 0 is Sunday; `7` is folded onto it.
    days_of_week: u8,
    day_of_month_restricted: bool,
    day_of_week_restricted: bool,
}

/// Why a cron is refused: the field (by name) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronError(pub String);

impl fmt::Display for CronError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

struct FieldSpec {
    name: &'static str,
    low: u32,
    high: u32,
    names: &'static [&'static str],
}

const MINUTE: FieldSpec = FieldSpec { name: "minute", low: 0, high: 59, names: &[] };
const HOUR: FieldSpec = FieldSpec { name: "hour", low: 0, high: 23, names: &[] };
const DAY_OF_MONTH: FieldSpec = FieldSpec { name: "day of month", low: 1, high: 31, names: &[] };
const MONTH: FieldSpec = FieldSpec {
    name: "month",
    low: 1,
    high: 12,
    names: &["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"],
};
const DAY_OF_WEEK: FieldSpec =
    FieldSpec { name: "day of week", low: 0, high: 7, names: &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"] };

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
        let minutes = parse_field(fields[0], &MINUTE)?;
        let hours = parse_field(fields[1], &HOUR)?;
        let days_of_month = parse_field(fields[2], &DAY_OF_MONTH)?;
        let months = parse_field(fields[3], &MONTH)?;
        let mut days_of_week = parse_field(fields[4], &DAY_OF_WEEK)?;
        if days_of_week & (1 << 7) != 0 {
            days_of_week = (days_of_week | 1) & !(1 << 7);
        }
        let cron = Self {
            text: trimmed.to_string(),
            minutes,
            hours: narrow(hours),
            days_of_month: narrow(days_of_month),
            months: narrow(months),
            days_of_week: narrow(days_of_week),
            day_of_month_restricted: !fields[2].starts_with('*'),
            day_of_week_restricted: !fields[4].starts_with('*'),
        };
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
    /// or `None` when it never does again within the horizon.
    pub fn next_after(&self, instant: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let floor = instant.with_second(0)?.with_nanosecond(0)?;
        let mut at = floor + Duration::minutes(1);
        let horizon = instant + Duration::days(i64::from(HORIZON_YEARS) * 366);
        while at <= horizon {
            if !self.month_fires(at.month()) {
                let (year, month) = if at.month() == 12 { (at.year() + 1, 1) } else { (at.year(), at.month() + 1) };
                at = Utc.with_ymd_and_hms(year, month, 1, 0, 0, 0).single()?;
                continue;
            }
            if !self.day_fires(at.date_naive()) {
                at = Utc.from_utc_datetime(&at.date_naive().succ_opt()?.and_hms_opt(0, 0, 0)?);
                continue;
            }
            if self.hours & (1 << at.hour()) == 0 {
                at = at.with_minute(0)? + Duration::hours(1);
                continue;
            }
            if self.minutes & (1 << at.minute()) == 0 {
                at += Duration::minutes(1);
                continue;
            }
            return Some(at);
        }
        None
    }

    /// The shortest time between two consecutive firings, in minutes,
    /// counted up to a day (longer gaps between firing days are not
    /// measured): GitHub refuses under 5, Baton runs every minute.
    pub fn shortest_interval_minutes(&self) -> i64 {
        let minutes: Vec<i64> = (0..60).filter(|m| self.minutes & (1 << m) != 0).map(i64::from).collect();
        let hours: Vec<u32> = (0..24).filter(|h| self.hours & (1 << h) != 0).collect();
        let (Some(&first), Some(&last)) = (minutes.first(), minutes.last()) else { return i64::MAX };
        let mut shortest = minutes.windows(2).map(|pair| pair[1] - pair[0]).min().unwrap_or(i64::MAX);
        let across_hours = 60 - last + first;
        // From the last minute of an hour to the first of the next one.
        if hours.iter().any(|&h| h < 23 && hours.contains(&(h + 1))) {
            shortest = shortest.min(across_hours);
        }
        // Across midnight: only when two days in a row fire.
        if hours.contains(&23) && hours.contains(&0) && self.two_days_in_a_row_fire() {
            shortest = shortest.min(across_hours);
        }
        shortest.min(24 * 60)
    }

    fn month_fires(&self, month: u32) -> bool {
        self.months & (1 << month) != 0
    }

    fn day_fires(&self, date: NaiveDate) -> bool {
        if !self.month_fires(date.month()) {
            return false;
        }
        let by_month_day = self.days_of_month & (1 << date.day()) != 0;
        let by_week_day = self.days_of_week & (1 << date.weekday().num_days_from_sunday()) != 0;
        if self.day_of_month_restricted && self.day_of_week_restricted {
            by_month_day || by_week_day
        } else {
            by_month_day && by_week_day
        }
    }

    /// Whether some day and the next both fire (within a leap cycle of 28
    /// years, which every calendar pattern repeats over).
    fn two_days_in_a_row_fire(&self) -> bool {
        let Some(mut day) = NaiveDate::from_ymd_opt(2000, 1, 1) else { return false };
        let mut previous = false;
        for _ in 0..(28 * 366) {
            let fires = self.day_fires(day);
            if fires && previous {
                return true;
            }
            previous = fires;
            let Some(next) = day.succ_opt() else { return false };
            day = next;
        }
        false
    }
}

fn narrow<T: TryFrom<u64> + Default>(bits: u64) -> T {
    T::try_from(bits).unwrap_or_default()
}

/// One field: a comma-separated list of `*`, `n`, `a-b`, each optionally
/// `/step`; a bit per value allowed.
fn parse_field(text: &str, spec: &FieldSpec) -> Result<u64, CronError> {
    let mut bits = 0u64;
    for item in text.split(',') {
        let error = |what: String| CronError(format!("{}: `{item}` {what}", spec.name));
        if item.is_empty() {
            return Err(CronError(format!("{}: `{text}` has an empty item in its list", spec.name)));
        }
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => {
                let step: u32 = step
                    .parse()
                    .ok()
                    .filter(|&s| s > 0)
                    .ok_or_else(|| error("has a step that is not a whole number above 0".into()))?;
                (range, Some(step))
            }
            None => (item, None),
        };
        let (low, high) = if range == "*" {
            (spec.low, spec.high)
        } else if let Some((a, b)) = range.split_once('-') {
            let (a, b) = (value(a, spec, item)?, value(b, spec, item)?);
            if a > b {
                return Err(error(format!("goes downwards ({a} to {b}): a range goes from low to high")));
            }
            (a, b)
        } else {
            let a = value(range, spec, item)?;
            // `5/15`: from 5 to the end by 15, as crontab.guru reads it.
            if step.is_some() {
                (a, spec.high)
            } else {
                (a, a)
            }
        };
        let step = step.unwrap_or(1);
        let mut v = low;
        while v <= high {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok(bits)
}

fn value(text: &str, spec: &FieldSpec, item: &str) -> Result<u32, CronError> {
    if let Some(index) = spec.names.iter().position(|name| name.eq_ignore_ascii_case(text)) {
        let first = if spec.low == 0 { 0 } else { 1 };
        return u32::try_from(index).map(|i| i + first).map_err(|_| CronError(format!("{}: `{item}`", spec.name)));
    }
    let range = if spec.names.is_empty() {
        format!("{}–{}", spec.low, spec.high)
    } else {
        format!("{}–{} or {}–{}", spec.low, spec.high, spec.names[0], spec.names[spec.names.len() - 1])
    };
    match text.parse::<u32>() {
        Ok(v) if text.chars().all(|c| c.is_ascii_digit()) && (spec.low..=spec.high).contains(&v) => Ok(v),
        Ok(_) if text.chars().all(|c| c.is_ascii_digit()) => {
            Err(CronError(format!("{}: `{text}` is out of range, expected {range}", spec.name)))
        }
        _ => Err(CronError(format!(
            "{}: `{item}` is not a number, `*`, a range or a step (expected {range})",
            spec.name
        ))),
    }
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
        assert_eq!(Cron::parse("0 0 * * 7").unwrap().days_of_week, Cron::parse("0 0 * * 0").unwrap().days_of_week);
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

    #[test]
    fn the_shortest_interval() {
        let interval = |cron: &str| Cron::parse(cron).unwrap().shortest_interval_minutes();
        assert_eq!(interval("* * * * *"), 1);
        assert_eq!(interval("*/5 * * * *"), 5);
        assert_eq!(interval("*/4 * * * *"), 4);
        assert_eq!(interval("0,3 * * * *"), 3);
        assert_eq!(interval("58 * * * *"), 60);
        assert_eq!(interval("0,58 5,6 * * *"), 2, "06:00 two minutes after 05:58");
        assert_eq!(interval("0,58 5,7 * * *"), 58);
        assert_eq!(interval("0,58 0,23 * * *"), 2, "across midnight every day");
        assert_eq!(interval("0,58 0,23 1 * *"), 58, "the next day does not fire");
        assert_eq!(interval("30 5 * * *"), 24 * 60);
    }

    #[test]
    fn bad_crons_name_the_field() {
        for (cron, says) in [
            ("@daily", "not supported"),
            ("* * * *", "five fields"),
            ("* * * * * *", "five fields"),
            ("60 * * * *", "minute: `60` is out of range"),
            ("* 24 * * *", "hour: `24` is out of range"),
            ("* * 0 * *", "day of month: `0` is out of range"),
            ("* * * 13 *", "month: `13` is out of range"),
            ("* * * * 8", "day of week: `8` is out of range"),
            ("*/0 * * * *", "minute: `*/0` has a step"),
            ("5-1 * * * *", "goes downwards"),
            ("* * * FOO *", "month: `FOO` is not a number"),
            ("* * ? * *", "day of month"),
            ("* * L * *", "day of month"),
            ("1,,2 * * * *", "empty item"),
            ("* * * * MON#2", "day of week"),
        ] {
            let err = Cron::parse(cron).unwrap_err();
            assert!(err.0.contains(says), "{cron}: {err}");
        }
    }
}
