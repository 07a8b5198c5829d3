//! Workspace secrets (behaviour.md §17), kept in AWS's own secret store:
//! SSM Parameter Store SecureStrings under `/baton/<stage>/secrets/<ws>/`,
//! encrypted with the stack's KMS key. The secrets route writes, lists and
//! deletes them; only the claim reads a value, for the job it hands out, so
//! a value is never in the table, a fact, the run view, the outbox or a log.
//!
//! At queue time a `${{ secrets.NAME }}` stays in the job's spec as written
//! ([`placeholder`]), and the spec lists the names its definition reads
//! (`JobSpec::secrets`); the claim puts the values in ([`put_in`]) for
//! those names only, so a value that came from an input or an output can
//! name no other secret.

use std::collections::BTreeMap;

use aws_sdk_ssm::types::ParameterType;
use chrono::{DateTime, Utc};

use baton_api::runners::ClaimedJob;
use baton_api::secrets::SecretSummary;
use baton_domain::hooks::HookSecrets;
use baton_store::StoreError;

/// GetParameters takes at most this many names.
const NAMES_PER_READ: usize = 10;

/// What a stored value that Parameter Store could not hold as written
/// starts with; base64 of the value follows.
const ENCODED: &str = "baton:base64:";

/// The value as Parameter Store is given it. Parameter Store refuses a
/// value holding `{{`…`}}` (it reserves that syntax for references to other
/// parameters), and Helm, Jinja and Go-template values are common secrets:
/// such a value is stored as base64 behind a marker, and so is one that
/// starts with the marker, so that reading the store back is unambiguous.
/// Every other value is stored as written, as before.
fn stored_form(value: &str) -> String {
    if value.contains("{{") || value.contains("}}") || value.starts_with(ENCODED) {
        format!("{ENCODED}{}", aws_smithy_types::base64::encode(value))
    } else {
        value.to_string()
    }
}

/// The value a stored form holds (see [`stored_form`]). A marked form that
/// is not base64 of UTF-8 is kept as stored: no encoding of Baton's made it.
fn value_of(stored: String) -> String {
    let Some(encoded) = stored.strip_prefix(ENCODED) else { return stored };
    match aws_smithy_types::base64::decode(encoded).ok().and_then(|bytes| String::from_utf8(bytes).ok()) {
        Some(value) => value,
        None => stored,
    }
}

use baton_domain::workflows::references::secret_placeholder as placeholder;

/// `job` with the values of `found` put in for its placeholders (of
/// `names` only), the values listed to mask and the names not found.
pub fn put_in(job: &mut ClaimedJob, names: &[String], found: &BTreeMap<String, String>) {
    let replace = |text: &mut String| {
        for name in names {
            if let Some(value) = found.get(name) {
                let marker = placeholder(name);
                if text.contains(&marker) {
                    *text = text.replace(&marker, value);
                }
            }
        }
    };
    job.work.env.values_mut().for_each(replace);
    for step in &mut job.work.steps {
        replace(&mut step.run);
        step.env.values_mut().for_each(replace);
        // An action's inputs (`with:`) read secrets as `env` does.
        step.with.values_mut().for_each(replace);
    }
    job.secret_values = names.iter().filter_map(|name| found.get(name).cloned()).collect();
    job.missing_secrets = names.iter().filter(|name| !found.contains_key(*name)).cloned().collect();
}

/// The secrets of a stage, in SSM Parameter Store.
#[derive(Clone, Debug)]
pub struct SecretStore {
    client: aws_sdk_ssm::Client,
    /// `/baton/<stage>/secrets`
    root: String,
    /// `/baton/<stage>/hooks`: webhook secrets, apart from the workspaces'
    /// so that no job can name one.
    hooks_root: String,
    /// The KMS key values are encrypted with (the stack's); SSM's default
    /// key when none is configured.
    kms_key_id: Option<String>,
}

impl SecretStore {
    pub fn new(client: aws_sdk_ssm::Client, stage: &str, kms_key_id: Option<String>) -> Self {
        Self {
            client,
            root: format!("/baton/{stage}/secrets"),
            hooks_root: format!("/baton/{stage}/hooks"),
            kms_key_id,
        }
    }

    fn dir(&self, workspace_id: &str) -> String {
        format!("{}/{workspace_id}", self.root)
    }

    fn path(&self, workspace_id: &str, name: &str) -> String {
        format!("{}/{name}", self.dir(workspace_id))
    }

    /// Sets (or replaces) a secret of `workspace_id`.
    pub async fn put(&self, workspace_id: &str, name: &str, value: &str) -> Result<(), StoreError> {
        self.put_secure(self.path(workspace_id, name), stored_form(value)).await
    }

    /// Writes `value` as a SecureString under the stack's key, replacing
    /// what was there.
    async fn put_secure(&self, name: String, value: String) -> Result<(), StoreError> {
        self.client
            .put_parameter()
            .name(name)
            .value(value)
            .r#type(ParameterType::SecureString)
            .set_key_id(self.kms_key_id.clone())
            .overwrite(true)
            .send()
            .await
            .map_err(|e| {
                StoreError::Other(format!("ssm PutParameter: {}", aws_sdk_ssm::error::DisplayErrorContext(e)))
            })?;
        Ok(())
    }

    /// Deletes the parameter `name`; `false` when there is none.
    async fn delete_parameter(&self, name: String) -> Result<bool, StoreError> {
        match self.client.delete_parameter().name(name).send().await {
            Ok(_) => Ok(true),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_parameter_not_found()) => Ok(false),
            Err(e) => {
                Err(StoreError::Other(format!("ssm DeleteParameter: {}", aws_sdk_ssm::error::DisplayErrorContext(e))))
            }
        }
    }

    /// The secrets of `workspace_id`, names and update times, sorted.
    pub async fn list(&self, workspace_id: &str) -> Result<Vec<SecretSummary>, StoreError> {
        let mut items = Vec::new();
        let mut next = None;
        loop {
            let page = self
                .client
                .get_parameters_by_path()
                .path(self.dir(workspace_id))
                .with_decryption(false)
                .set_next_token(next)
                .send()
                .await
                .map_err(|e| {
                    StoreError::Other(format!(
                        "ssm GetParametersByPath: {}",
                        aws_sdk_ssm::error::DisplayErrorContext(e)
                    ))
                })?;
            for parameter in page.parameters.unwrap_or_default() {
                let Some(name) = parameter.name.as_deref().and_then(|n| n.rsplit('/').next()) else { continue };
                let updated_at = parameter
                    .last_modified_date
                    .and_then(|d| DateTime::<Utc>::from_timestamp(d.secs(), d.subsec_nanos()));
                items.push(SecretSummary { name: name.to_string(), updated_at });
            }
            next = page.next_token;
            if next.is_none() {
                break;
            }
        }
        items.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(items)
    }

    /// Deletes a secret; `false` when `workspace_id` has none by that name.
    pub async fn delete(&self, workspace_id: &str, name: &str) -> Result<bool, StoreError> {
        self.delete_parameter(self.path(workspace_id, name)).await
    }

    fn hook_path(&self, hook_id: uuid::Uuid) -> String {
        format!("{}/{hook_id}", self.hooks_root)
    }

    /// Keeps a hook's secrets (a new hook's, or after a rotation).
    pub async fn put_hook_secrets(&self, hook_id: uuid::Uuid, secrets: &HookSecrets) -> Result<(), StoreError> {
        let value = serde_json::to_string(secrets).map_err(|e| StoreError::Other(format!("hook secrets: {e}")))?;
        self.put_secure(self.hook_path(hook_id), value).await
    }

    /// A hook's secrets, decrypted; `None` when it has none (deleted).
    pub async fn hook_secrets(&self, hook_id: uuid::Uuid) -> Result<Option<HookSecrets>, StoreError> {
        match self.client.get_parameter().name(self.hook_path(hook_id)).with_decryption(true).send().await {
            Ok(out) => {
                let Some(value) = out.parameter.and_then(|p| p.value) else { return Ok(None) };
                serde_json::from_str(&value)
                    .map(Some)
                    .map_err(|_| StoreError::Malformed(format!("the secrets of hook {hook_id}")))
            }
            Err(e) if e.as_service_error().is_some_and(|s| s.is_parameter_not_found()) => Ok(None),
            Err(e) => {
                Err(StoreError::Other(format!("ssm GetParameter: {}", aws_sdk_ssm::error::DisplayErrorContext(e))))
            }
        }
    }

    pub async fn delete_hook_secrets(&self, hook_id: uuid::Uuid) -> Result<(), StoreError> {
        self.delete_parameter(self.hook_path(hook_id)).await.map(|_| ())
    }

    /// The values of `names` in `workspace_id` that exist, decrypted; in
    /// reads of ten names (none at all for no names).
    pub async fn read(&self, workspace_id: &str, names: &[String]) -> Result<BTreeMap<String, String>, StoreError> {
        let mut found = BTreeMap::new();
        for chunk in names.chunks(NAMES_PER_READ) {
            let out = self
                .client
                .get_parameters()
                .set_names(Some(chunk.iter().map(|name| self.path(workspace_id, name)).collect()))
                .with_decryption(true)
                .send()
                .await
                .map_err(|e| {
                    StoreError::Other(format!("ssm GetParameters: {}", aws_sdk_ssm::error::DisplayErrorContext(e)))
                })?;
            for parameter in out.parameters.unwrap_or_default() {
                if let (Some(path), Some(value)) = (parameter.name, parameter.value) {
                    if let Some(name) = path.rsplit('/').next() {
                        found.insert(name.to_string(), value_of(value));
                    }
                }
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_api::facts::StepSpec;

    #[test]
    fn a_value_parameter_store_would_refuse_is_stored_encoded_and_read_back_as_set() {
        let helm = "password: {{ .Values.db.password }}";
        assert!(!stored_form(helm).contains("{{"), "Parameter Store refuses {{{{…}}}} in a value");
        assert_eq!(value_of(stored_form(helm)), helm);
        for value in ["plain-t0k3n", "a { brace } and {single}", "ends with }}", "{{", ENCODED, "baton:base64:!!"] {
            assert_eq!(value_of(stored_form(value)), value, "{value:?}");
        }
        assert_eq!(stored_form("plain-t0k3n"), "plain-t0k3n", "other values are stored as written");
        assert_eq!(value_of("baton:base64:not base64".into()), "baton:base64:not base64");
    }

    #[test]
    fn the_claim_puts_in_only_the_names_the_definition_reads_and_lists_what_is_missing() {
        let mut job = ClaimedJob {
            work: baton_api::facts::JobWork {
                key: "deploy".into(),
                labels: vec!["linux".into()],
                timeout_s: 60,
                env: BTreeMap::from([("TOKEN".into(), placeholder("DEPLOY_TOKEN"))]),
                steps: vec![StepSpec {
                    // An input that spelled another secret's placeholder gets nothing.
                    run: format!("deploy {} {}", placeholder("DEPLOY_TOKEN"), placeholder("OTHER")),
                    env: BTreeMap::from([("KEY".into(), placeholder("SIGNING_KEY"))]),
                    ..StepSpec::default()
                }],
                outputs: BTreeMap::new(),
                mask_env: Vec::new(),
            },
            secret_values: Vec::new(),
            missing_secrets: Vec::new(),
        };
        let names = vec!["DEPLOY_TOKEN".to_string(), "SIGNING_KEY".to_string()];
        let found = BTreeMap::from([("DEPLOY_TOKEN".to_string(), "t0k3n".to_string())]);
        put_in(&mut job, &names, &found);
        assert_eq!(job.work.env["TOKEN"], "t0k3n");
        assert_eq!(job.work.steps[0].run, format!("deploy t0k3n {}", placeholder("OTHER")));
        assert_eq!(job.secret_values, ["t0k3n"]);
        assert_eq!(job.missing_secrets, ["SIGNING_KEY"]);
        assert!(job.masks().contains(&"t0k3n".to_string()));
    }
}
