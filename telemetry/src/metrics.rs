//! Metrics as CloudWatch Embedded Metric Format: one JSON line on stdout that
//! CloudWatch turns into metrics with no API call (and so no latency or cost
//! on the request path).

use serde_json::json;

/// A metric unit understood by CloudWatch.
#[derive(Debug, Clone, Copy)]
pub enum Unit {
    Count,
    Milliseconds,
    Seconds,
}

impl Unit {
    fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Milliseconds => "Milliseconds",
            Unit::Seconds => "Seconds",
        }
    }
}

/// Renders one EMF document for `metrics` under the `Baton` namespace with the
/// given `function` dimension.
pub fn emf_line(function: &str, metrics: &[(&str, f64, Unit)], now_ms: i64) -> String {
    let definitions: Vec<_> =
        metrics.iter().map(|(name, _, unit)| json!({"Name": name, "Unit": unit.as_str()})).collect();
    let mut doc = json!({
        "_aws": {
            "Timestamp": now_ms,
            "CloudWatchMetrics": [{
                "Namespace": "Baton",
                "Dimensions": [["function"]],
                "Metrics": definitions,
            }]
        },
        "function": function,
    });
    if let Some(map) = doc.as_object_mut() {
        for (name, value, _) in metrics {
            map.insert((*name).to_string(), json!(value));
        }
    }
    doc.to_string()
}

/// Renders one EMF document of a stage-wide metric (dimension `stage` only),
/// for alarms that look at the deployment as a whole.
pub fn stage_emf_line(stage: &str, name: &str, value: f64, unit: Unit, now_ms: i64) -> String {
    json!({
        "_aws": {
            "Timestamp": now_ms,
            "CloudWatchMetrics": [{
                "Namespace": "Baton",
                "Dimensions": [["stage"]],
                "Metrics": [{"Name": name, "Unit": unit.as_str()}],
            }]
        },
        "stage": stage,
        name: value,
    })
    .to_string()
}

/// The longest dimension value CloudWatch keeps, in characters: a metric
/// with a longer one is dropped.
pub const DIMENSION_VALUE_CHARS: usize = 1024;

/// Renders one EMF document of a label set's demand (dimensions
/// `workspace` and `label_set`, the set's text of at most
/// [`DIMENSION_VALUE_CHARS`]): what an AWS auto scaling group's target
/// tracking can scale on without a provisioner.
pub fn demand_emf_line(workspace: &str, label_set: &str, queued: u64, running: u64, now_ms: i64) -> String {
    json!({
        "_aws": {
            "Timestamp": now_ms,
            "CloudWatchMetrics": [{
                "Namespace": "Baton",
                "Dimensions": [["workspace", "label_set"]],
                "Metrics": [{"Name": "DemandQueued", "Unit": "Count"}, {"Name": "DemandRunning", "Unit": "Count"}],
            }]
        },
        "workspace": workspace,
        "label_set": label_set,
        "DemandQueued": queued,
        "DemandRunning": running,
    })
    .to_string()
}

/// Prints a stage-wide metric now.
pub fn emit_for_stage(stage: &str, name: &str, value: f64, unit: Unit) {
    println!("{}", stage_emf_line(stage, name, value, unit, chrono::Utc::now().timestamp_millis()));
}

/// Prints metrics for `function` now.
pub fn emit(function: &str, metrics: &[(&str, f64, Unit)]) {
    println!("{}", emf_line(function, metrics, chrono::Utc::now().timestamp_millis()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emf_line_declares_every_metric_and_carries_its_value() {
        let line = emf_line("claim", &[("claims", 2.0, Unit::Count), ("lost_races", 1.0, Unit::Count)], 7);
        let doc: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(doc["_aws"]["Timestamp"], 7);
        assert_eq!(doc["_aws"]["CloudWatchMetrics"][0]["Metrics"][1]["Name"], "lost_races");
        assert_eq!(doc["claims"], 2.0);
        assert_eq!(doc["function"], "claim");
    }

    #[test]
    fn stage_metrics_carry_only_the_stage_dimension() {
        let doc: serde_json::Value =
            serde_json::from_str(&stage_emf_line("prod", "OldestPendingJobAgeSeconds", 42.0, Unit::Seconds, 1))
                .unwrap();
        assert_eq!(doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"], serde_json::json!([["stage"]]));
        assert_eq!(doc["OldestPendingJobAgeSeconds"], 42.0);
        assert_eq!(doc["stage"], "prod");
    }
}
