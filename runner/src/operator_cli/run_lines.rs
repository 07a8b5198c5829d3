//! A run view as `baton run get` and `run watch` print it: one line per
//! status, and of a newer view only the lines that changed.

use std::collections::HashMap;

use baton_api::runs::{Decision, RunView};
use baton_api::status::JobStatus;

/// One line per status that is new or changed in `next` compared with
/// `previous` (everything when there is no previous view): the run, each
/// job of the current attempt, and each step of its latest execution; a
/// finished job or step shows how long it took.
pub(super) fn changes(previous: Option<&RunView>, next: &RunView) -> Vec<String> {
    painted_changes(previous, next, false)
}

/// [`changes`], each status coloured (ANSI) when `colour`.
pub(super) fn painted_changes(previous: Option<&RunView>, next: &RunView, colour: bool) -> Vec<String> {
    let mut before: HashMap<String, String> = HashMap::new();
    if let Some(previous) = previous {
        for (key, status) in statuses(previous) {
            before.insert(key, status);
        }
    }
    statuses(next)
        .into_iter()
        .filter(|(key, status)| before.get(key) != Some(status))
        .map(|(key, status)| format!("{key}: {}", paint(&status, colour)))
        .collect()
}

/// `status` with its first word coloured by what it means.
fn paint(status: &str, colour: bool) -> String {
    if !colour {
        return status.to_string();
    }
    let (word, rest) = status.split_once(' ').map_or((status, ""), |(w, r)| (w, r));
    let code = match word {
        "succeeded" => "32",
        "failed" => "31",
        "running" | "queued" => "33",
        "cancelled" | "skipped" => "90",
        _ => "0",
    };
    let space = if rest.is_empty() { "" } else { " " };
    format!("\x1b[{code}m{word}\x1b[0m{space}{rest}")
}

/// ` in 1.2s` for what has finished, nothing for what still runs (a
/// duration that grows would print a line per poll).
fn took(finished: bool, duration_ms: Option<u64>) -> String {
    match duration_ms.filter(|_| finished) {
        Some(ms) if ms < 60_000 => format!(" in {:.1}s", ms as f64 / 1000.0),
        Some(ms) => format!(" in {}m{:02}s", ms / 60_000, (ms / 1000) % 60),
        None => String::new(),
    }
}

/// `(what, status)` pairs of a run view, in display order.
fn statuses(view: &RunView) -> Vec<(String, String)> {
    let current = view.attempts.iter().find(|a| a.attempt == view.header.current_attempt);
    let mut status = view.header.status.to_string();
    if let Some(attempt) = current {
        match &attempt.concurrency {
            // `pending (waiting for concurrency group deploy-prod)`
            Some(group) if group.waiting => {
                status.push_str(&format!(" (waiting for concurrency group {})", group.group))
            }
            _ => {}
        }
        if let Some(reason) = attempt.status_reason.filter(|_| view.header.status.is_terminal()) {
            status.push_str(&format!(" ({reason})"));
        }
    }
    let title = view.header.title.as_ref().map_or(String::new(), |title| format!(" · {title}"));
    let heading =
        format!("run {} #{}{title} (attempt {})", view.header.name, view.header.number, view.header.current_attempt);
    let mut out = vec![(heading, status)];
    let Some(attempt) = current else { return out };
    for job in &attempt.jobs {
        let mut status = job.status.to_string();
        if let Some(reason) = &job.status_reason {
            let reason =
                serde_json::to_value(reason).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
            // `succeeded (soft-failed: step_failed)`: it failed, and
            // `continue-on-error` kept the run going.
            let soft = if job.soft_failed { "soft-failed: " } else { "" };
            status.push_str(&format!(" ({soft}{reason})"));
        }
        if job.carried_over {
            status.push_str(" [carried over]");
        }
        // `pending (waiting for concurrency group deploy-prod)`: a job
        // whose group another run's job holds.
        if let Some(group) = job.concurrency.as_ref().filter(|group| group.waiting) {
            status.push_str(&format!(" (waiting for concurrency group {})", group.group));
        }
        // `listening for review (2 waiting; until …)`: a listening job.
        if let (false, Some(listening)) = (job.status.is_terminal(), &job.listening) {
            let until =
                listening.until.map(|d| format!("; until {}", d.format("%Y-%m-%d %H:%M UTC"))).unwrap_or_default();
            status.push_str(&format!(
                " (listening for {}; {} waiting{until})",
                listening.events.join(", "),
                listening.pending.len()
            ));
        }
        // `queued (unschedulable: nobody offers gpu, linux; fails at …)`.
        if let Some(flag) = job.executions.last().and_then(|e| e.unschedulable.as_ref()) {
            status.push_str(&format!(
                " (unschedulable: no runner or provisioner offers {}; fails at {})",
                flag.labels.join(", "),
                flag.fails_at.format("%Y-%m-%d %H:%M:%S UTC")
            ));
        }
        // `[try 2 of 3]`: which execution this is, under `retry:`.
        if job.listening.is_none() && (job.max_retries > 0 || job.executions.len() > 1) {
            status.push_str(&format!(" [try {} of {}]", job.executions.len().max(1), job.max_retries + 1));
        }
        // `waiting (approvals 1 of 2 from alice, release-managers; until …)`:
        // what an approval waits for; each decision changes the line.
        if let (JobStatus::Waiting, Some(approval)) = (job.status, &job.approval) {
            let approvals = approval.decisions.iter().filter(|d| d.decision == Decision::Approve).count();
            let from = if approval.from.is_empty() { "any operator".to_string() } else { approval.from.join(", ") };
            let until =
                approval.deadline.map(|d| format!("; until {}", d.format("%Y-%m-%d %H:%M UTC"))).unwrap_or_default();
            status.push_str(&format!(" (approvals {approvals} of {} from {from}{until})", approval.required));
        }
        status.push_str(&took(job.status.is_terminal(), job.duration_ms));
        out.push((format!("  job {}", job.key), status));
        if let Some(approval) = &job.approval {
            for decision in &approval.decisions {
                let verb = match decision.decision {
                    Decision::Approve => "approved",
                    Decision::Reject => "rejected",
                };
                let comment = decision.comment.as_deref().map(|c| format!(": {c}")).unwrap_or_default();
                out.push((
                    format!("    {verb} by {}", decision.by),
                    format!("at {}{comment}", decision.at.format("%H:%M:%S")),
                ));
            }
        }
        if let Some(execution) = job.executions.last() {
            for (index, step) in execution.steps.iter().enumerate() {
                let name = step.name.clone().unwrap_or_else(|| format!("step-{}", index + 1));
                let mut status = serde_json::to_value(step.status)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default();
                if let Some(code) = step.exit_code {
                    status.push_str(&format!(" (exit {code})"));
                }
                if step.soft_failed {
                    status.push_str(" [continued]");
                }
                status.push_str(&took(step.finished_at.is_some(), step.duration_ms));
                out.push((format!("    step {}/{name}", job.key), status));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use baton_api::status::{RunStatus, StatusReason};
    use uuid::Uuid;

    use super::*;

    fn view(job_status: &str, step_status: &str, exit: Option<i32>) -> RunView {
        let step = serde_json::json!({"id": Uuid::nil(), "name": "compile", "status": step_status, "exit_code": exit});
        let execution = serde_json::json!({"id": Uuid::nil(), "status": job_status, "status_reason": null,
            "queued_at": null, "started_at": null, "finished_at": null, "runner_session_id": null, "steps": [step]});
        let job = serde_json::json!({"id": Uuid::nil(), "key": "build", "status": job_status, "status_reason": null,
            "labels": ["linux"], "needs": [], "carried_over": false, "executions": [execution]});
        let attempt = serde_json::json!({"attempt": 1, "status": "running", "status_reason": null, "rerun_mode": null,
            "started_at": null, "finished_at": null, "jobs": [job]});
        serde_json::from_value(serde_json::json!({
            "id": Uuid::nil(), "workspace_id": "ws1", "name": "ci", "number": 7,
            "status": "running", "current_attempt": 1,
            "created_at": "2026-01-01T00:00:00Z", "started_at": null, "finished_at": null,
            "attempts": [attempt]
        }))
        .expect("a run view")
    }

    #[test]
    fn a_run_with_a_title_shows_it_after_its_number() {
        let mut titled = view("pending", "pending", None);
        titled.header.title = Some("deploy 1.4.2 to production".into());
        assert_eq!(changes(None, &titled)[0], "run ci #7 · deploy 1.4.2 to production (attempt 1): running");
    }

    #[test]
    fn a_run_waiting_for_its_group_says_which_and_a_replaced_one_says_why() {
        let mut waiting = view("pending", "pending", None);
        waiting.header.status = RunStatus::Pending;
        waiting.attempts[0].concurrency =
            Some(baton_api::runs::ConcurrencyView { group: "deploy-prod".into(), waiting: true });
        assert_eq!(
            changes(None, &waiting)[0],
            "run ci #7 (attempt 1): pending (waiting for concurrency group deploy-prod)"
        );
        let mut replaced = waiting.clone();
        replaced.header.status = RunStatus::Cancelled;
        replaced.attempts[0].status = RunStatus::Cancelled;
        replaced.attempts[0].status_reason = Some(StatusReason::ConcurrencyReplaced);
        replaced.attempts[0].concurrency =
            Some(baton_api::runs::ConcurrencyView { group: "deploy-prod".into(), waiting: false });
        assert_eq!(changes(Some(&waiting), &replaced)[0], "run ci #7 (attempt 1): cancelled (concurrency_replaced)");
    }

    #[test]
    fn an_unschedulable_job_says_what_nobody_offers_and_when_it_fails() {
        let mut flagged = view("queued", "pending", None);
        let execution = serde_json::json!({
            "id": "0192a000-0000-7000-8000-0000000000e1", "status": "queued", "status_reason": null,
            "queued_at": "2026-01-01T00:00:00Z", "started_at": null, "finished_at": null,
            "runner_session_id": null, "steps": [],
            "unschedulable": {"labels": ["gpu", "linux"], "fails_at": "2026-01-01T00:15:00Z"}
        });
        flagged.attempts[0].jobs[0].executions = vec![serde_json::from_value(execution).expect("an execution")];
        let lines = changes(None, &flagged);
        assert!(
            lines.iter().any(|l| l.ends_with(
                "queued (unschedulable: no runner or provisioner offers gpu, linux; fails at 2026-01-01 00:15:00 UTC)"
            )),
            "{lines:?}"
        );
    }

    #[test]
    fn a_job_waiting_for_its_group_says_which() {
        let mut waiting = view("pending", "pending", None);
        waiting.attempts[0].jobs[0].concurrency =
            Some(baton_api::runs::ConcurrencyView { group: "deploy-prod".into(), waiting: true });
        let lines = changes(None, &waiting);
        assert!(lines.iter().any(|l| l.ends_with("pending (waiting for concurrency group deploy-prod)")), "{lines:?}");
        let mut holding = waiting.clone();
        holding.attempts[0].jobs[0].concurrency =
            Some(baton_api::runs::ConcurrencyView { group: "deploy-prod".into(), waiting: false });
        assert!(!changes(None, &holding).iter().any(|l| l.contains("waiting for concurrency group")));
    }

    #[test]
    fn the_first_view_shows_everything() {
        let lines = changes(None, &view("queued", "pending", None));
        assert_eq!(
            lines,
            vec!["run ci #7 (attempt 1): running", "  job build: queued", "    step build/compile: pending"]
        );
    }

    #[test]
    fn later_views_show_only_what_changed() {
        let a = view("running", "running", None);
        let b = view("running", "succeeded", Some(0));
        assert_eq!(changes(Some(&a), &b), vec!["    step build/compile: succeeded (exit 0)"]);
        assert!(changes(Some(&b), &b).is_empty());
    }

    #[test]
    fn finished_steps_show_their_duration_and_colour_is_optional() {
        let mut v = view("running", "succeeded", Some(0));
        let step = &mut v.attempts[0].jobs[0].executions[0].steps[0];
        step.finished_at = Some(chrono::Utc::now());
        step.duration_ms = Some(1_250);
        let plain = changes(None, &v);
        assert_eq!(plain[2], "    step build/compile: succeeded (exit 0) in 1.2s");
        let painted = painted_changes(None, &v, true);
        assert_eq!(painted[2], "    step build/compile: \x1b[32msucceeded\x1b[0m (exit 0) in 1.2s");
    }
}
