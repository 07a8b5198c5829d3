//! Runs driven over the HTTP API as an operator drives them: created,
//! viewed and waited on as the admin, and read back from their views.

use std::time::{Duration, Instant};

use baton_api::runners::ClaimResponse;
use serde_json::{json, Value};

use crate::TestStack;

/// How long a run may take to reach a state: the emulator is slow, and
/// every job crosses the pipeline twice (queued, then completed).
pub const RUN_WAIT: Duration = Duration::from_secs(90);

/// An API answer that names what it is about by its `id` (a run's view, a
/// created resource).
pub trait Identified {
    /// The `id`; panics when there is none.
    fn id(&self) -> String;
}

impl Identified for Value {
    fn id(&self) -> String {
        self["id"].as_str().unwrap_or_else(|| panic!("an id in {self:#}")).to_string()
    }
}

/// A run created in a workspace, its first job claimed by a new runner.
pub struct LeasedRun {
    /// The run's view as its creation answered it.
    pub view: Value,
    /// The runner's session.
    pub session_token: String,
    pub claim: ClaimResponse,
}

impl TestStack {
    /// Creates a run of `yaml` in `ws` as the admin; its view (panics
    /// unless 201).
    pub async fn create_run(&self, ws: &str, yaml: &str) -> Value {
        let answer =
            self.post(&format!("/v1/workspaces/{ws}/runs"), &self.admin_token, json!({"definition": yaml})).await;
        assert_eq!(answer.status, 201, "{:#}", answer.body);
        answer.body
    }

    /// The view of run `run_id` of `ws`, as the admin (panics unless 200).
    pub async fn run_view(&self, ws: &str, run_id: &str) -> Value {
        self.get_ok(&format!("/v1/workspaces/{ws}/runs/{run_id}"), &self.admin_token).await
    }

    /// Waits until the run view satisfies `pred`, returning it; after
    /// [`RUN_WAIT`], fails showing the last view.
    pub async fn wait_view(&self, ws: &str, run_id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        self.wait_view_within(ws, run_id, what, RUN_WAIT, pred).await
    }

    /// As [`TestStack::wait_view`], waiting up to `timeout`.
    pub async fn wait_view_within(
        &self,
        ws: &str,
        run_id: &str,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let view = self.run_view(ws, run_id).await;
            if pred(&view) {
                return view;
            }
            assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}; last view:\n{view:#}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Waits until the run is `status`; its view.
    pub async fn wait_run_status(&self, ws: &str, run_id: &str, status: &str) -> Value {
        self.wait_view(ws, run_id, &format!("run {run_id} to be {status}"), |v| v["status"] == status).await
    }

    /// Creates a run of `yaml` in `ws` and claims its first job with a new
    /// `linux` runner of `ws`.
    pub async fn leased_run(&self, ws: &str, yaml: &str) -> LeasedRun {
        let view = self.create_run(ws, yaml).await;
        let session_token = self.runner(ws, &["linux"]).await.session_token;
        let claim = self.wait_claim(&session_token).await;
        LeasedRun { view, session_token, claim }
    }
}

/// Job `key` of attempt `attempt` in a run view.
pub fn job_in<'a>(view: &'a Value, attempt: u32, key: &str) -> &'a Value {
    let attempts = view["attempts"].as_array().expect("attempts");
    let attempt = attempts.iter().find(|a| a["attempt"] == attempt).unwrap_or_else(|| panic!("attempt {attempt}"));
    attempt["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .find(|j| j["key"] == key)
        .unwrap_or_else(|| panic!("job {key} in {view:#}"))
}

/// The texts of a log page's lines, in order.
pub fn log_texts(page: &Value) -> Vec<String> {
    page["lines"].as_array().into_iter().flatten().filter_map(|l| l["text"].as_str().map(String::from)).collect()
}
