//! Provisioners driven over the HTTP API: created by the admin, and their
//! instances as Baton lists them.

use serde_json::Value;

use crate::TestStack;

impl TestStack {
    /// Creates a provisioner in `ws` with `settings` as the admin; its id
    /// and token (panics unless 201).
    pub async fn create_provisioner(&self, ws: &str, settings: Value) -> (String, String) {
        let answer = self.post(&format!("/v1/workspaces/{ws}/provisioners"), &self.admin_token, settings).await;
        assert_eq!(answer.status, 201, "{}", answer.body);
        let field = |name: &str| answer.body[name].as_str().unwrap_or_else(|| panic!("a {name}")).to_string();
        (field("id"), field("token"))
    }

    /// The instances of the provisioner holding `token` (panics unless 200).
    pub async fn instances(&self, token: &str) -> Vec<Value> {
        self.get_ok("/v1/provisioners/instances", token).await["items"].as_array().cloned().unwrap_or_default()
    }
}

/// Whether an instance of a provisioner's list has not ended (neither
/// terminated nor failed).
pub fn is_live(instance: &Value) -> bool {
    !matches!(instance["state"].as_str(), Some("terminated" | "failed"))
}
