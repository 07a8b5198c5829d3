//! The operator routes (api.md "Operators", "Provisioners") with a `bat_`
//! token, as the `baton` CLI uses them: registration tokens, provisioners,
//! secrets, artifacts and runs.

use std::time::Duration;

use baton_api::artifacts::{ArtifactDownload, ArtifactList};
use baton_api::hooks::{CreateHookRequest, HookCreated, HookList, HookSecretRotated};
use baton_api::logs::LogPage;
use baton_api::pipelines::{DispatchRequest, Pipeline, PipelineList, PipelineSummary, PutPipelineRequest};
use baton_api::provisioners::{CreateProvisioner, CreatedProvisioner, ProvisionerList};
use baton_api::runners::{CreateRegistrationToken, CreatedRegistrationToken};
use baton_api::runs::{
    ApprovalRequest, CreateRunRequest, EventDelivered, EventDelivery, JobView, RerunMode, RerunRequest, RunList,
    RunView,
};
use baton_api::secrets::{PutSecretRequest, SecretList};
use baton_api::status::RunStatus;
use baton_api::variables::{PutVariableRequest, Variable, VariableList};
use reqwest::Method;
use uuid::Uuid;

use crate::error::ClientError;
use crate::Client;

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
        self.client.send::<(), serde_json::Value>(Method::DELETE, &path, &self.token, None, Duration::ZERO).await?;
        Ok(())
    }

    /// Sets a workspace secret (204); the value is never answered back.
    pub async fn set_secret(&self, workspace: &str, name: &str, value: String) -> Result<(), ClientError> {
        let path = format!("/v1/workspaces/{}/secrets/{}", segment(workspace), segment(name));
        let body = PutSecretRequest { value };
        self.client.send::<_, serde_json::Value>(Method::PUT, &path, &self.token, Some(&body), Duration::ZERO).await?;
        Ok(())
    }

    /// Sets a workspace variable; the variable as stored (name upper-cased).
    pub async fn set_variable(&self, workspace: &str, name: &str, value: String) -> Result<Variable, ClientError> {
        let path = format!("/v1/workspaces/{}/variables/{}", segment(workspace), segment(name));
        self.client.send_for(Method::PUT, &path, &self.token, Some(&PutVariableRequest { value })).await
    }

    /// The workspace's variables, with their values, by name.
    pub async fn list_variables(&self, workspace: &str) -> Result<VariableList, ClientError> {
        let path = format!("/v1/workspaces/{}/variables", segment(workspace));
        self.client.send_for::<(), _>(Method::GET, &path, &self.token, None).await
    }

    pub async fn delete_variable(&self, workspace: &str, name: &str) -> Result<(), ClientError> {
        let path = format!("/v1/workspaces/{}/variables/{}", segment(workspace), segment(name));
        self.client.send::<(), serde_json::Value>(Method::DELETE, &path, &self.token, None, Duration::ZERO).await?;
        Ok(())
    }

    /// The workspace's secrets: names and update times, never values.
    pub async fn list_secrets(&self, workspace: &str) -> Result<SecretList, ClientError> {
        let path = format!("/v1/workspaces/{}/secrets", segment(workspace));
        self.client.send_for::<(), _>(Method::GET, &path, &self.token, None).await
    }

    pub async fn delete_secret(&self, workspace: &str, name: &str) -> Result<(), ClientError> {
        let path = format!("/v1/workspaces/{}/secrets/{}", segment(workspace), segment(name));
        self.client.send::<(), serde_json::Value>(Method::DELETE, &path, &self.token, None, Duration::ZERO).await?;
        Ok(())
    }

    /// Stores a workflow definition as the pipeline `name`: a new one, a
    /// new version, or (the same text) nothing.
    pub async fn put_pipeline(
        &self,
        workspace: &str,
        name: &str,
        definition: String,
    ) -> Result<PipelineSummary, ClientError> {
        let path = format!("/v1/workspaces/{}/pipelines/{}", segment(workspace), segment(name));
        self.client.send_for(Method::PUT, &path, &self.token, Some(&PutPipelineRequest { definition })).await
    }

    pub async fn list_pipelines(&self, workspace: &str) -> Result<PipelineList, ClientError> {
        let path = format!("/v1/workspaces/{}/pipelines", segment(workspace));
        self.client.send_for::<(), _>(Method::GET, &path, &self.token, None).await
    }

    pub async fn get_pipeline(&self, workspace: &str, name: &str) -> Result<Pipeline, ClientError> {
        let path = format!("/v1/workspaces/{}/pipelines/{}", segment(workspace), segment(name));
        self.client.send_for::<(), _>(Method::GET, &path, &self.token, None).await
    }

    pub async fn delete_pipeline(&self, workspace: &str, name: &str) -> Result<(), ClientError> {
        let path = format!("/v1/workspaces/{}/pipelines/{}", segment(workspace), segment(name));
        self.client.send::<(), serde_json::Value>(Method::DELETE, &path, &self.token, None, Duration::ZERO).await?;
        Ok(())
    }

    /// Runs the pipeline `name` now (a dispatch), with its inputs.
    pub async fn dispatch_pipeline(
        &self,
        workspace: &str,
        name: &str,
        body: &DispatchRequest,
    ) -> Result<RunView, ClientError> {
        let path = format!("/v1/workspaces/{}/pipelines/{}/runs", segment(workspace), segment(name));
        self.client.send_for(Method::POST, &path, &self.token, Some(body)).await
    }

    /// A new webhook: its URL and its secret (answered this once).
    pub async fn create_hook(&self, workspace: &str, body: &CreateHookRequest) -> Result<HookCreated, ClientError> {
        let path = format!("/v1/workspaces/{}/hooks", segment(workspace));
        self.client.send_for(Method::POST, &path, &self.token, Some(body)).await
    }

    pub async fn list_hooks(&self, workspace: &str) -> Result<HookList, ClientError> {
        let path = format!("/v1/workspaces/{}/hooks", segment(workspace));
        self.client.send_for::<(), _>(Method::GET, &path, &self.token, None).await
    }

    /// A new secret for the hook; the old one verifies for a grace period.
    pub async fn rotate_hook(&self, workspace: &str, id: Uuid) -> Result<HookSecretRotated, ClientError> {
        let path = format!("/v1/workspaces/{}/hooks/{id}/rotate", segment(workspace));
        self.client.send_for(Method::POST, &path, &self.token, Some(&serde_json::json!({}))).await
    }

    pub async fn delete_hook(&self, workspace: &str, id: Uuid) -> Result<(), ClientError> {
        let path = format!("/v1/workspaces/{}/hooks/{id}", segment(workspace));
        self.client.send::<(), serde_json::Value>(Method::DELETE, &path, &self.token, None, Duration::ZERO).await?;
        Ok(())
    }

    pub async fn list_artifacts(&self, workspace: &str, run: Uuid) -> Result<ArtifactList, ClientError> {
        let path = format!("/v1/workspaces/{}/runs/{run}/artifacts", segment(workspace));
        self.client.send_for::<(), _>(Method::GET, &path, &self.token, None).await
    }

    pub async fn artifact_download(
        &self,
        workspace: &str,
        run: Uuid,
        name: &str,
    ) -> Result<ArtifactDownload, ClientError> {
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
        workflow: Option<&str>,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> Result<RunList, ClientError> {
        let mut query = form_urlencoded::Serializer::new(String::new());
        if let Some(status) = status {
            query.append_pair("status", status.as_str());
        }
        if let Some(workflow) = workflow {
            query.append_pair("workflow", workflow);
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
        self.client.send_waiting_for::<(), _>(Method::GET, &path, &self.token, None, Duration::from_secs(wait_s)).await
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workspace_cannot_escape_its_path_segment() {
        assert_eq!(segment("ws-1.a_b"), "ws-1.a_b");
        assert_eq!(segment("../x y"), "..%2Fx%20y");
    }
}
