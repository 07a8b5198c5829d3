//! Baton's HTTP API called as any client calls it: a bearer token, a JSON
//! body, and the status with the JSON answer.

use serde_json::Value;

use crate::TestStack;

/// A JSON response: status and body (`Value::Null` when empty).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

impl Answer {
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }
}

impl TestStack {
    pub async fn post(&self, path: &str, token: &str, body: Value) -> Answer {
        self.send(reqwest::Method::POST, path, token, Some(body.to_string())).await
    }

    pub async fn get(&self, path: &str, token: &str) -> Answer {
        self.send(reqwest::Method::GET, path, token, None).await
    }

    /// A GET that must answer 200; its body.
    pub async fn get_ok(&self, path: &str, token: &str) -> Value {
        let answer = self.get(path, token).await;
        assert_eq!(answer.status, 200, "{path}: {:#}", answer.body);
        answer.body
    }

    pub async fn send(&self, method: reqwest::Method, path: &str, token: &str, body: Option<String>) -> Answer {
        let mut request = self.http.request(method, self.url(path)).bearer_auth(token);
        if let Some(body) = body {
            request = request.header("content-type", "application/json").body(body);
        }
        let response = request.send().await.expect("the API answers");
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        let body = if text.is_empty() { Value::Null } else { serde_json::from_str(&text).expect("a JSON body") };
        Answer { status, body }
    }
}
