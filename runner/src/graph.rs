//! A run's job graph (its current attempt's jobs, their `needs` and
//! statuses) as Mermaid or Graphviz DOT text, for `baton run graph`.

use baton_api::runs::{JobView, RunView};

/// The jobs of the run's current attempt (none if it has no such attempt).
fn current_jobs(view: &RunView) -> &[JobView] {
    view.attempts.iter().find(|a| a.attempt == view.header.current_attempt).map_or(&[], |a| a.jobs.as_slice())
}

/// A node id safe in both languages: job keys hold `-`, which neither
/// takes bare in an id.
fn node(key: &str) -> String {
    format!("j_{}", key.replace('-', "_h_"))
}

fn label(job: &JobView) -> String {
    let carried = if job.carried_over { ", carried over" } else { "" };
    let soft = if job.soft_failed { ", soft-failed" } else { "" };
    let group = match job.concurrency.as_ref().filter(|group| group.waiting) {
        Some(group) => format!(", waiting for {}", group.group),
        None => String::new(),
    };
    let unschedulable = match job.executions.last().and_then(|e| e.unschedulable.as_ref()) {
        Some(_) => ", unschedulable",
        None => "",
    };
    format!("{} ({}{soft}{carried}{group}{unschedulable})", job.key, job.status)
}

/// Mermaid `flowchart LR`, one class per status so renderers colour them.
pub fn mermaid(view: &RunView) -> String {
    let mut out = format!(
        "%% run {} #{} attempt {}: {}\nflowchart LR\n",
        view.header.name, view.header.number, view.header.current_attempt, view.header.status
    );
    let jobs = current_jobs(view);
    for job in jobs {
        out.push_str(&format!("  {}[\"{}\"]:::{}\n", node(&job.key), label(job).replace('"', "'"), job.status));
    }
    for job in jobs {
        for need in &job.needs {
            out.push_str(&format!("  {} --> {}\n", node(need), node(&job.key)));
        }
    }
    for (status, colour) in STATUS_COLOURS {
        out.push_str(&format!("  classDef {status} fill:{colour}\n"));
    }
    out
}

/// Graphviz DOT, nodes filled by status.
pub fn dot(view: &RunView) -> String {
    let mut out = format!(
        "digraph run {{\n  label=\"run {} #{} attempt {}: {}\";\n  rankdir=LR;\n  node [shape=box, style=filled];\n",
        view.header.name.replace('"', "'"),
        view.header.number,
        view.header.current_attempt,
        view.header.status
    );
    let jobs = current_jobs(view);
    for job in jobs {
        let colour = STATUS_COLOURS.iter().find(|(s, _)| *s == job.status.as_str()).map_or("#ffffff", |(_, c)| c);
        out.push_str(&format!(
            "  {} [label=\"{}\", fillcolor=\"{colour}\"];\n",
            node(&job.key),
            label(job).replace('"', "'")
        ));
    }
    for job in jobs {
        for need in &job.needs {
            out.push_str(&format!("  {} -> {};\n", node(need), node(&job.key)));
        }
    }
    out.push_str("}\n");
    out
}

const STATUS_COLOURS: [(&str, &str); 7] = [
    ("pending", "#eeeeee"),
    ("queued", "#fff3c4"),
    ("running", "#ffe08a"),
    ("succeeded", "#b7e4c7"),
    ("failed", "#f4a3a3"),
    ("cancelled", "#d0d0d0"),
    ("skipped", "#e0e0e0"),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> RunView {
        let job = |key: &str, status: &str, needs: &[&str]| {
            serde_json::json!({"id": uuid::Uuid::nil(), "key": key, "status": status, "status_reason": null,
                "labels": ["linux"], "needs": needs, "carried_over": false, "executions": []})
        };
        serde_json::from_value(serde_json::json!({
            "id": uuid::Uuid::nil(), "workspace_id": "ws1", "name": "ci", "number": 3,
            "status": "running", "current_attempt": 1,
            "created_at": "2026-01-01T00:00:00Z", "started_at": null, "finished_at": null,
            "attempts": [{"attempt": 1, "status": "running", "status_reason": null, "rerun_mode": null,
                "started_at": null, "finished_at": null,
                "jobs": [job("build", "succeeded", &[]), job("unit-test", "running", &["build"]),
                         job("report", "pending", &["build", "unit-test"])]}]
        }))
        .unwrap()
    }

    #[test]
    fn mermaid_has_a_node_per_job_with_its_status_and_an_edge_per_need() {
        let text = mermaid(&view());
        assert!(text.contains("flowchart LR"));
        assert!(text.contains("j_unit_h_test[\"unit-test (running)\"]:::running"), "{text}");
        assert!(text.contains("j_build --> j_unit_h_test"));
        assert!(text.contains("j_unit_h_test --> j_report"));
        assert_eq!(text.matches("-->").count(), 3);
    }

    #[test]
    fn dot_is_a_digraph_with_filled_nodes_and_edges() {
        let text = dot(&view());
        assert!(text.starts_with("digraph run {"));
        assert!(text.contains("j_build [label=\"build (succeeded)\", fillcolor=\"#b7e4c7\"];"), "{text}");
        assert!(text.contains("j_build -> j_report;"));
        assert_eq!(text.matches("->").count(), 3);
        assert!(text.trim_end().ends_with('}'));
    }
}
