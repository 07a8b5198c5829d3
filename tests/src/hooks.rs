//! Webhook deliveries sent as a forge sends them: the raw body and the
//! forge's headers, signed with the hook's secret.

use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

use crate::http::Answer;
use crate::TestStack;

/// A forge's payload from the fixtures (`domain/tests/fixtures/hooks/`),
/// written in the shape the forges publish.
pub fn fixture(path: &str) -> Value {
    let file = format!("{}/../domain/tests/fixtures/hooks/{path}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// `X-Hub-Signature-256` as GitHub computes it.
pub fn github_signature(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// A hook of `ws` for `provider`: its id, URL and secret.
pub struct Hook {
    pub id: String,
    pub url: String,
    pub secret: String,
}

impl TestStack {
    pub async fn create_hook(&self, ws: &str, provider: &str, pipelines: Option<&[&str]>) -> Hook {
        let mut body = json!({ "provider": provider });
        if let Some(names) = pipelines {
            body["pipelines"] = json!(names);
        }
        let answer = self.post(&format!("/v1/workspaces/{ws}/hooks"), &self.admin_token, body).await;
        assert_eq!(answer.status, 201, "{:#}", answer.body);
        let text =
            |key: &str| answer.body[key].as_str().unwrap_or_else(|| panic!("{key} in {:#}", answer.body)).to_string();
        Hook { id: text("id"), url: text("url"), secret: text("secret") }
    }

    /// Posts `body` to the hook with `headers`, no token.
    pub async fn deliver(&self, hook_id: &str, headers: &[(&str, String)], body: &[u8]) -> Answer {
        let mut request = self.http.post(self.url(&format!("/v1/hooks/{hook_id}"))).body(body.to_vec());
        request = request.header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let response = request.send().await.expect("the API answers");
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        let body = if text.is_empty() { Value::Null } else { serde_json::from_str(&text).expect("a JSON body") };
        Answer { status, body }
    }

    /// A GitHub delivery of `event` (`payload` as JSON), signed with `secret`.
    pub async fn github_delivery(&self, hook: &Hook, event: &str, delivery: &str, payload: &Value) -> Answer {
        let body = serde_json::to_vec(payload).expect("JSON");
        let headers = [
            ("x-github-event", event.to_string()),
            ("x-github-delivery", delivery.to_string()),
            ("x-hub-signature-256", github_signature(&hook.secret, &body)),
            ("user-agent", "GitHub-Hookshot/5f3c1a2".to_string()),
        ];
        self.deliver(&hook.id, &headers, &body).await
    }
}

impl TestStack {
    /// The ids of every run of `ws`, over all pages.
    pub async fn run_ids(&self, ws: &str) -> Vec<String> {
        let mut ids = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let path = match &cursor {
                Some(c) => format!("/v1/workspaces/{ws}/runs?limit=100&cursor={c}"),
                None => format!("/v1/workspaces/{ws}/runs?limit=100"),
            };
            let page = self.get_ok(&path, &self.admin_token).await;
            ids.extend(
                page["items"].as_array().into_iter().flatten().filter_map(|r| r["id"].as_str().map(String::from)),
            );
            match page["next_cursor"].as_str() {
                Some(next) => cursor = Some(next.to_string()),
                None => return ids,
            }
        }
    }

    /// Waits until the runs a delivery's answer named exist (they are
    /// created after the answer); the workspace's run ids then.
    pub async fn wait_requested_runs(&self, ws: &str, answer: &Value) -> Vec<String> {
        let wanted: Vec<String> = answer["runs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["run_id"].as_str().map(String::from))
            .collect();
        let what = format!("the runs {wanted:?} of {ws}");
        crate::wait_for(&what, std::time::Duration::from_secs(180), || async {
            let ids = self.run_ids(ws).await;
            wanted.iter().all(|w| ids.contains(w)).then_some(ids)
        })
        .await
    }
}
