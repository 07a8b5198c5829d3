//! The operator side of the API (api.md "Operators", "Provisioners"), used
//! by the `baton` CLI: registration tokens, provisioners and runs, over the
//! shared request and view types.

use std::collections::HashMap;

use baton_api::logs::LogPage;
use baton_api::provisioners::{CreateProvisioner, CreatedProvisioner, ProvisionerList};
use baton_api::runners::{CreateRegistrationToken, CreatedRegistrationToken};
use baton_api::runs::RerunMode;
use baton_api::runs::{
    ApprovalRequest, CreateRunRequest, Decision, EventDelivered, EventDelivery, JobView, RerunRequest, RunList, RunView,
};
use baton_api::status::{JobStatus, RunStatus};
use reqwest::Method;
use uuid::Uuid;

use crate::client::{Client, ClientError};

/// An operator (`bat_…` token) talking to one API.
#[derive(Debug, Clone)]
pub struct Operator {
    pub client: Client,
    pub token: String,
}

impl Operator {
    pub fn new(api: &str, token: &str) -> Result<Self, ClientError> {
        Ok(Self { client: Client::new(api)?, token: token.to_string() })
    }

    pub async fn create_registration_token(
        &self,
        workspace: &str,
        body: &CreateRegistrationToken,
    ) -> Result<CreatedRegistrationToken, ClientError> {
        let path = format!("/v1/workspaces/{}/registration-tokens", segment(workspace));
        self.client.send_for(Method::POST, &path, &self.token, Some(body)).await
    }

    /// Registers a provisioner; the answer holds its `bpt_` token, shown this once.
    pub async fn create_provisioner(
        &self,
        workspace: &str,
        body: &CreateProvisioner,
    ) -> Result<CreatedProvisioner, ClientError> {
        let path = format!("/v1/workspaces/{}/provisioners", segment(workspace));
        self.client.send_for(Method::POST, &path, &self.token, Some(body)).await
    }

    pub async fn list_provisioners(&self, workspace: &str) -> Result<ProvisionerList, ClientError> {
        let path = format!("/v1/workspaces/{}/provisioners", segment(workspace));
        self.client.send_for::<(), _>(Method::GET, &path, &self.token, None).await
    }

    /// Removes a provisioner: its token stops working and its instances get
    /// `provisioner-removed` intents (204, no body).
    pub async fn remove_provisioner(&self, workspace: &str, id: Uuid) -> Result<(), ClientError> {
        let path = format!("/v1/workspaces/{}/provisioners/{id}", segment(workspace));
        self.client
            .send::<(), serde_json::Value>(Method::DELETE, &path, &self.token, None, crate::client::REQUEST_TIMEOUT)
            .await?;
        Ok(())
    }

    /// Sets a workspace secret (204); the value is never answered back.
    pub async fn set_secret(&self, workspace: &str, name: &str, value: String) -> Result<(), ClientError> {
        let path = format!("/v1/workspaces/{}/secrets/{}", segment(workspace), segment(name));
        let body = baton_api::secrets::PutSecretRequest { value };
        self.client
            .send::<_, serde_json::Value>(Method::PUT, &path, &self.token, Some(&body), crate::client::REQUEST_TIMEOUT)
            .await?;
        Ok(())
    }

    /// The workspace's secrets: names and update times, never values.
    pub async fn list_secrets(&self, workspace: &str) -> Result<baton_api::secrets::SecretList, ClientError> {
        let path = format!("/v1/workspaces/{}/secrets", segment(workspace));
        self.client.send_for::<(), _>(Method::GET, &path, &self.token, None).await
    }

    pub async fn delete_secret(&self, workspace: &str, name: &str) -> Result<(), ClientError> {
        let path = format!("/v1/workspaces/{}/secrets/{}", segment(workspace), segment(name));
        self.client
            .send::<(), serde_json::Value>(Method::DELETE, &path, &self.token, None, crate::client::REQUEST_TIMEOUT)
            .await?;
        Ok(())
    }

    pub async fn list_artifacts(
        &self,
        workspace: &str,
        run: Uuid,
    ) -> Result<baton_api::artifacts::ArtifactList, ClientError> {
        let path = format!("/v1/workspaces/{}/runs/{run}/artifacts", segment(workspace));
        self.client.send_for::<(), _>(Method::GET, &path, &self.token, None).await
    }

    pub async fn artifact_download(
        &self,
        workspace: &str,
        run: Uuid,
        name: &str,
    ) -> Result<baton_api::artifacts::ArtifactDownload, ClientError> {
        let path = format!("/v1/workspaces/{}/runs/{run}/artifacts/{}", segment(workspace), segment(name));
        self.client.send_for::<(), _>(Method::GET, &path, &self.token, None).await
    }

    pub async fn submit_run(&self, workspace: &str, body: &CreateRunRequest) -> Result<RunView, ClientError> {
        let path = format!("/v1/workspaces/{}/runs", segment(workspace));
        self.client.send_for(Method::POST, &path, &self.token, Some(body)).await
    }

    pub async fn get_run(&self, workspace: &str, run: Uuid) -> Result<RunView, ClientError> {
        let path = format!("/v1/workspaces/{}/runs/{run}", segment(workspace));
        self.client.send_for::<(), _>(Method::GET, &path, &self.token, None).await
    }

    /// A page of the workspace's runs, newest first.
    pub async fn list_runs(
        &self,
        workspace: &str,
        status: Option<RunStatus>,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> Result<RunList, ClientError> {
        let mut query = form_urlencoded::Serializer::new(String::new());
        if let Some(status) = status {
            query.append_pair("status", status.as_str());
        }
        if let Some(limit) = limit {
            query.append_pair("limit", &limit.to_string());
        }
        if let Some(cursor) = cursor {
            query.append_pair("cursor", cursor);
        }
        let query = query.finish();
        let mut path = format!("/v1/workspaces/{}/runs", segment(workspace));
        if !query.is_empty() {
            path = format!("{path}?{query}");
        }
        self.client.send_for::<(), _>(Method::GET, &path, &self.token, None).await
    }

    /// A page of job `job`'s log lines from `cursor` (waiting up to `wait_s`
    /// for new lines of a running job).
    // One argument per query parameter of the route.
    #[allow(clippy::too_many_arguments)]
    pub async fn read_logs(
        &self,
        workspace: &str,
        run: Uuid,
        job: Uuid,
        attempt: u32,
        execution: Option<Uuid>,
        cursor: &str,
        wait_s: u64,
    ) -> Result<LogPage, ClientError> {
        let mut query = form_urlencoded::Serializer::new(String::new());
        query.append_pair("attempt", &attempt.to_string());
        if let Some(execution) = execution {
            query.append_pair("execution", &execution.to_string());
        }
        query.append_pair("cursor", cursor);
        query.append_pair("wait_s", &wait_s.to_string());
        let path = format!("/v1/workspaces/{}/runs/{run}/jobs/{job}/logs?{}", segment(workspace), query.finish());
        let timeout = crate::client::REQUEST_TIMEOUT + std::time::Duration::from_secs(wait_s);
        self.client.send::<(), _>(Method::GET, &path, &self.token, None, timeout).await?.ok_or_else(|| {
            ClientError::Permanent { status: 204, code: "empty-response".into(), message: "no log page".into() }
        })
    }

    pub async fn cancel_run(&self, workspace: &str, run: Uuid) -> Result<RunView, ClientError> {
        let path = format!("/v1/workspaces/{}/runs/{run}/cancel", segment(workspace));
        self.client.send_for(Method::POST, &path, &self.token, Some(&serde_json::json!({}))).await
    }

    pub async fn decide_approval(
        &self,
        workspace: &str,
        run: Uuid,
        job: Uuid,
        request: &ApprovalRequest,
    ) -> Result<JobView, ClientError> {
        let path = format!("/v1/workspaces/{}/runs/{run}/jobs/{job}/approval", segment(workspace));
        self.client.send_for(Method::POST, &path, &self.token, Some(request)).await
    }

    pub async fn deliver_event(
        &self,
        workspace: &str,
        run: Uuid,
        job: Uuid,
        delivery: &EventDelivery,
    ) -> Result<EventDelivered, ClientError> {
        let path = format!("/v1/workspaces/{}/runs/{run}/jobs/{job}/events", segment(workspace));
        self.client.send_for(Method::POST, &path, &self.token, Some(delivery)).await
    }

    pub async fn rerun(&self, workspace: &str, run: Uuid, mode: RerunMode) -> Result<RunView, ClientError> {
        let path = format!("/v1/workspaces/{}/runs/{run}/rerun", segment(workspace));
        self.client.send_for(Method::POST, &path, &self.token, Some(&RerunRequest { mode })).await
    }
}

/// A workspace id as one path segment (ids are `[A-Za-z0-9._-]`; anything
/// else is percent-encoded so it cannot escape the segment).
fn segment(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for byte in raw.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// One line per status that is new or changed in `next` compared with
/// `previous` (everything when there is no previous view): the run, each
/// job of the current attempt, and each step of its latest execution; a
/// finished job or step shows how long it took.
pub fn changes(previous: Option<&RunView>, next: &RunView) -> Vec<String> {
    painted_changes(previous, next, false)
}

/// [`changes`], each status coloured (ANSI) when `colour`.
pub fn painted_changes(previous: Option<&RunView>, next: &RunView, colour: bool) -> Vec<String> {
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
    let current = view.attempts.iter().find(|a| a.attempt == view.current_attempt);
    let mut status = view.status.to_string();
    if let Some(attempt) = current {
        match &attempt.concurrency {
            // `pending (waiting for concurrency group deploy-prod)`
            Some(group) if group.waiting => {
                status.push_str(&format!(" (waiting for concurrency group {})", group.group))
            }
            _ => {}
        }
        if let Some(reason) = attempt.status_reason.filter(|_| view.status.is_terminal()) {
            status.push_str(&format!(" ({reason})"));
        }
    }
    let mut out = vec![(format!("run {} #{} (attempt {})", view.name, view.number, view.current_attempt), status)];
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
    use super::*;
    use baton_api::status::StatusReason;

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
    fn a_run_waiting_for_its_group_says_which_and_a_replaced_one_says_why() {
        let mut waiting = view("pending", "pending", None);
        waiting.status = RunStatus::Pending;
        waiting.attempts[0].concurrency =
            Some(baton_api::runs::ConcurrencyView { group: "deploy-prod".into(), waiting: true });
        assert_eq!(
            changes(None, &waiting)[0],
            "run ci #7 (attempt 1): pending (waiting for concurrency group deploy-prod)"
        );
        let mut replaced = waiting.clone();
        replaced.status = RunStatus::Cancelled;
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

    #[test]
    fn a_workspace_cannot_escape_its_path_segment() {
        assert_eq!(segment("ws-1.a_b"), "ws-1.a_b");
        assert_eq!(segment("../x y"), "..%2Fx%20y");
    }
}
