//! EC2's describe lag, which moto does not have: `DescribeInstances` is
//! eventually consistent on AWS, and a describe (a tag-filtered one too)
//! can miss an instance launched a moment before. With a window set, the
//! local stack's EC2 client records the instances each `RunInstances`
//! answers with, and leaves them out of `DescribeInstances` answers until
//! the window has passed since their launch, as a lagging EC2 would.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The instances launched within the window, and when.
#[derive(Debug)]
pub struct DescribeLag {
    window: Duration,
    launched: Mutex<Vec<(String, Instant)>>,
}

impl DescribeLag {
    pub fn new(window: Duration) -> Self {
        Self { window, launched: Mutex::new(Vec::new()) }
    }

    /// Records the instances of a `RunInstances` answer as launched `at`.
    pub fn launched(&self, answer: &str, at: Instant) {
        let ids = instance_ids(answer);
        if let Ok(mut launched) = self.launched.lock() {
            launched.extend(ids.into_iter().map(|id| (id, at)));
        }
    }

    /// A `DescribeInstances` answer as EC2 lagging by the window gives it
    /// `at`: without the reservations of instances launched too recently.
    pub fn describe(&self, answer: &str, at: Instant) -> String {
        let lagging: Vec<String> = match self.launched.lock() {
            Ok(launched) => launched
                .iter()
                .filter(|(_, when)| at.duration_since(*when) < self.window)
                .map(|(id, _)| id.clone())
                .collect(),
            Err(_) => Vec::new(),
        };
        without_instances(answer, &lagging)
    }
}

/// The `<instanceId>`s of an EC2 answer.
fn instance_ids(xml: &str) -> Vec<String> {
    xml.split("<instanceId>")
        .skip(1)
        .filter_map(|rest| rest.split_once("</instanceId>").map(|(id, _)| id.to_string()))
        .collect()
}

/// `xml` (a `DescribeInstances` answer) without the reservations (the
/// `<item>`s directly under `<reservationSet>`) holding one of `ids`.
fn without_instances(xml: &str, ids: &[String]) -> String {
    if ids.is_empty() {
        return xml.to_string();
    }
    let Some(open) = xml.find("<reservationSet>").map(|at| at + "<reservationSet>".len()) else {
        return xml.to_string();
    };
    let Some(close) = xml[open..].find("</reservationSet>").map(|at| open + at) else { return xml.to_string() };
    let set = &xml[open..close];
    let mut kept = String::with_capacity(set.len());
    let mut depth = 0usize;
    let mut start = 0usize;
    let mut at = 0usize;
    // Items nest (tags, groups, devices are `<item>`s too): a reservation
    // is an item opened at depth 0 and closed back to it.
    while at < set.len() {
        let rest = &set[at..];
        if rest.starts_with("<item>") {
            if depth == 0 {
                kept.push_str(&set[start..at]);
                start = at;
            }
            depth += 1;
            at += "<item>".len();
        } else if rest.starts_with("</item>") {
            depth = depth.saturating_sub(1);
            at += "</item>".len();
            if depth == 0 {
                let reservation = &set[start..at];
                if !ids.iter().any(|id| reservation.contains(&format!("<instanceId>{id}</instanceId>"))) {
                    kept.push_str(reservation);
                }
                start = at;
            }
        } else {
            at += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
    kept.push_str(&set[start..]);
    format!("{}{kept}{}", &xml[..open], &xml[close..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reservation(id: &str) -> String {
        format!(
            "<item><reservationId>r-{id}</reservationId><groupSet><item><groupId>sg-1</groupId></item></groupSet>\
             <instancesSet><item><instanceId>{id}</instanceId><tagSet><item><key>baton:stage</key><value>t</value></item>\
             </tagSet></item></instancesSet></item>"
        )
    }

    fn answer(ids: &[&str]) -> String {
        let set: String = ids.iter().map(|id| reservation(id)).collect();
        format!("<DescribeInstancesResponse><requestId>x</requestId><reservationSet>{set}</reservationSet></DescribeInstancesResponse>")
    }

    #[test]
    fn a_fresh_launch_is_missing_from_describe_until_the_window_passed() {
        let lag = DescribeLag::new(Duration::from_secs(20));
        let launched_at = Instant::now();
        lag.launched("<RunInstancesResponse><instancesSet><item><instanceId>i-new</instanceId></item></instancesSet></RunInstancesResponse>", launched_at);
        let described = answer(&["i-old", "i-new", "i-other"]);
        assert_eq!(lag.describe(&described, launched_at + Duration::from_secs(5)), answer(&["i-old", "i-other"]));
        assert_eq!(
            lag.describe(&described, launched_at + Duration::from_secs(21)),
            described,
            "listed once the window passed"
        );
        assert_eq!(lag.describe(&answer(&[]), launched_at), answer(&[]));
    }
}
