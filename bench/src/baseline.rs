//! The previous main's figures beside this run's. `bench/baseline/<commit>.json`
//! is the JSON report that the bench of that commit wrote (`make bench` there,
//! copied here); this run's report is read the same way, so the two columns
//! are computed by one piece of code from two reports of one format.
//!
//! One difference is the counting, not the code: reports from before the
//! bench counted index writes have no `per_job_index_write_units`; their
//! write units left the indexes out, which the table says.

use std::path::Path;

use serde_json::Value;

/// The previous main's report: the one JSON file in `dir`
/// (`bench/baseline/`), and its name, the commit it was made at.
pub fn previous(dir: &Path) -> Option<(String, Value)> {
    let path = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))?;
    let commit = path.file_stem()?.to_string_lossy().into_owned();
    let report = serde_json::from_str(&std::fs::read_to_string(&path).ok()?).ok()?;
    Some((commit, report))
}

/// Reads one figure from a report (`None`: the report lacks it).
type Reader = Box<dyn Fn(&Value) -> Option<f64>>;

/// One row: what is compared, and how to read it from a report.
struct Metric {
    label: String,
    read: Reader,
    /// Digits after the point.
    precision: usize,
}

fn shape<'a>(report: &'a Value, name: &str) -> Option<&'a Value> {
    report["workflows"].as_array()?.iter().find(|s| s["shape"] == name)
}

fn metrics(shapes: &[String]) -> Vec<Metric> {
    let mut out = vec![
        Metric {
            label: "idle runner, $ per month (agent's default)".into(),
            read: Box::new(|r| {
                r["idle_pushed_runner"]["month"]["cost"]["total"]
                    .as_f64()
                    .or_else(|| r["idle_runner"][0]["month"]["cost"]["total"].as_f64())
            }),
            precision: 4,
        },
        Metric {
            label: "idle runner, $ per month, 20 s long polls".into(),
            read: Box::new(|r| r["idle_runner"][0]["month"]["cost"]["total"].as_f64()),
            precision: 4,
        },
        Metric {
            label: "claim among 30 fitting label sets (4 KB specs), RCU".into(),
            read: Box::new(|r| {
                r["operations"]
                    .as_array()?
                    .iter()
                    .find(|o| o["name"].as_str().is_some_and(|n| n.starts_with("claim among 30")))?["read_units"]
                    .as_f64()
            }),
            precision: 1,
        },
    ];
    for name in shapes {
        // A figure of the shape's, as the report holds it.
        let field = |what: &str, field: &'static str, precision: usize| {
            let name = name.clone();
            Metric {
                label: format!("{name}: {what}"),
                read: Box::new(move |r: &Value| shape(r, &name)?[field].as_f64()),
                precision,
            }
        };
        let cost_name = name.clone();
        out.extend([
            field("WCU per job, heartbeats excluded", "per_job_write_units_without_heartbeats", 1),
            field("of which index writes", "per_job_index_write_units", 1),
            field("Step Functions transitions per job", "per_job_transitions", 2),
            Metric {
                label: format!("{name}: $ per 1,000 jobs"),
                read: Box::new(move |r| Some(shape(r, &cost_name)?["per_job_cost"]["total"].as_f64()? * 1000.0)),
                precision: 4,
            },
            field("needs → claimed, median s (emulator)", "median_dispatch_s", 2),
            field("create → end, median s (emulator)", "median_to_end_s", 2),
        ]);
    }
    out
}

/// The side-by-side table of `previous` (named `commit`) and `current`.
pub fn render(commit: &str, previous: &Value, current: &Value) -> String {
    let shapes: Vec<String> = current["workflows"]
        .as_array()
        .map(|s| s.iter().filter_map(|s| s["shape"].as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let mut s = format!("{:<58} {:>14} {:>14}\n", "", format!("main {commit}"), "this tree");
    let rows = metrics(&shapes);
    for (i, metric) in rows.iter().enumerate() {
        let (mut before, after) = ((metric.read)(previous), (metric.read)(current));
        // A baseline without an idle section: the previous default was the
        // 20 s long poll, whose code this run measures unchanged.
        if i == 0 && before.is_none() {
            before = (rows[1].read)(current);
        }
        if before.is_none() && after.is_none() {
            continue;
        }
        let show = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.*}", metric.precision));
        s.push_str(&format!("{:<58} {:>14} {:>14}\n", metric.label, show(before), show(after)));
    }
    s.push_str(
        "   (— : not measured in that report; a baseline without an idle section gets this run's long-poll figure as its\n\
         \x20   default's. The previous main's bench did not count index writes: its WCU leave\n\
         \x20   them out, so its figure understates what it cost; this tree's include them.)\n",
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rows_come_from_both_reports_and_a_figure_one_lacks_shows_as_a_dash() {
        let previous = json!({
            "idle_runner": [{"month": {"cost": {"total": 9.37}}}],
            "workflows": [{"shape": "single", "per_job_write_units_without_heartbeats": 56.0,
                           "per_job_transitions": 6.0, "per_job_cost": {"total": 0.000216},
                           "median_dispatch_s": 0.0, "median_to_end_s": 3.1}]
        });
        let current = json!({
            "idle_pushed_runner": {"month": {"cost": {"total": 0.031}}},
            "workflows": [{"shape": "single", "per_job_write_units_without_heartbeats": 30.0,
                           "per_job_index_write_units": 2.0, "per_job_transitions": 6.0,
                           "per_job_cost": {"total": 0.0001}, "median_dispatch_s": 0.0, "median_to_end_s": 1.2}]
        });
        let table = render("a737f9b", &previous, &current);
        let row = |label: &str| table.lines().find(|l| l.starts_with(label)).unwrap_or_default().to_string();
        assert!(row("idle runner").ends_with("9.3700         0.0310"), "{table}");
        assert!(row("single: WCU per job").ends_with("56.0           30.0"), "{table}");
        assert!(row("single: of which index writes").ends_with("—            2.0"), "{table}");
        assert!(row("single: $ per 1,000 jobs").ends_with("0.2160         0.1000"), "{table}");
        assert!(!table.contains("claim among 30"), "a row neither report has is left out");
    }
}
