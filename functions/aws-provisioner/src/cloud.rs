//! The thin shell over EC2 and SSM: each call is one AWS request (or one
//! paged listing) translated to and from `plan`'s plain values. Nothing is
//! decided here.

use aws_sdk_ec2::types::{Filter, LaunchTemplateSpecification, ResourceType, ShutdownBehavior, Tag, TagSpecification};
use aws_sdk_ssm::types::ParameterType;
use aws_smithy_types::error::display::DisplayErrorContext;
use baton_api::provisioners::ReserveRequest;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::plan::{self, Ec2State, Launch, Machine, TokenParameter};

/// A failed AWS call, with the SDK's whole error chain in its message.
#[derive(Debug, thiserror::Error)]
#[error("{call}: {message}")]
pub struct CloudError {
    pub call: &'static str,
    pub message: String,
}

fn failed<E: std::error::Error>(call: &'static str) -> impl FnOnce(E) -> CloudError {
    move |err| CloudError { call, message: DisplayErrorContext(&err).to_string() }
}

/// The EC2 side: this provisioner's instances of this stage.
#[derive(Debug, Clone)]
pub struct Ec2 {
    pub client: aws_sdk_ec2::Client,
    pub launch_template: String,
    /// `$Default`, `$Latest` or a number.
    pub launch_template_version: String,
}

impl Ec2 {
    /// Every instance tagged with this stage and provisioner, whatever its
    /// state (EC2 shows terminated ones for about an hour).
    pub async fn machines(&self, stage: &str, provisioner: Uuid) -> Result<Vec<Machine>, CloudError> {
        let mut pages = self
            .client
            .describe_instances()
            .filters(Filter::builder().name(format!("tag:{}", plan::TAG_STAGE)).values(stage).build())
            .filters(
                Filter::builder()
                    .name(format!("tag:{}", plan::TAG_PROVISIONER))
                    .values(provisioner.to_string())
                    .build(),
            )
            .into_paginator()
            .send();
        let mut machines = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(failed("ec2:DescribeInstances"))?;
            for instance in page.reservations().iter().flat_map(|r| r.instances()) {
                let (Some(id), Some(state)) = (
                    instance.instance_id(),
                    instance.state().and_then(|s| s.name()).and_then(|n| Ec2State::parse(n.as_str())),
                ) else {
                    continue;
                };
                let reservation_id = instance
                    .tags()
                    .iter()
                    .find(|t| t.key() == Some(plan::TAG_RESERVATION))
                    .and_then(|t| t.value())
                    .and_then(|v| Uuid::parse_str(v).ok());
                machines.push(Machine { instance_id: id.to_string(), state, reservation_id });
            }
        }
        Ok(machines)
    }

    /// Launches one instance from the operator's launch template, tagged at
    /// creation (the only way the CDK lets this function tag), shut-down
    /// behaviour `terminate` so the boot script's power-off ends it. The
    /// reservation id is the client token: a retried call launches nothing
    /// twice.
    pub async fn launch(&self, launch: &Launch) -> Result<Machine, CloudError> {
        let tags = launch.tags.iter().map(|(k, v)| Tag::builder().key(k).value(v).build());
        // The CDK stack names the template by id (its IAM condition needs the
        // id's ARN); a name works too, for set-ups without the stack.
        let template = if self.launch_template.starts_with("lt-") {
            LaunchTemplateSpecification::builder().launch_template_id(&self.launch_template)
        } else {
            LaunchTemplateSpecification::builder().launch_template_name(&self.launch_template)
        };
        let template = template.version(&self.launch_template_version).build();
        let out = self
            .client
            .run_instances()
            .launch_template(template)
            .min_count(1)
            .max_count(1)
            .client_token(launch.reservation_id.to_string())
            .instance_initiated_shutdown_behavior(ShutdownBehavior::Terminate)
            .user_data(aws_smithy_types::base64::encode(launch.user_data.as_bytes()))
            .tag_specifications(
                TagSpecification::builder()
                    .resource_type(ResourceType::Instance)
                    .set_tags(Some(tags.collect()))
                    .build(),
            )
            .send()
            .await
            .map_err(failed("ec2:RunInstances"))?;
        let instance = out
            .instances()
            .first()
            .ok_or_else(|| CloudError { call: "ec2:RunInstances", message: "answered without an instance".into() })?;
        let instance_id = instance.instance_id().unwrap_or_default().to_string();
        let state = instance.state().and_then(|s| s.name()).and_then(|n| Ec2State::parse(n.as_str()));
        Ok(Machine {
            instance_id,
            state: state.unwrap_or(Ec2State::Pending),
            reservation_id: Some(launch.reservation_id),
        })
    }

    pub async fn terminate(&self, ids: &[String]) -> Result<(), CloudError> {
        self.client
            .terminate_instances()
            .set_instance_ids(Some(ids.to_vec()))
            .send()
            .await
            .map_err(failed("ec2:TerminateInstances"))?;
        Ok(())
    }
}

/// The SSM side: the provisioner token, and the runner tokens of the stage.
#[derive(Debug, Clone)]
pub struct Ssm {
    pub client: aws_sdk_ssm::Client,
}

impl Ssm {
    /// A SecureString's clear value (the provisioner token). A name under
    /// `/aws/reference/secretsmanager/` reads a Secrets Manager secret the
    /// same way.
    pub async fn secret(&self, name: &str) -> Result<String, CloudError> {
        let out = self
            .client
            .get_parameter()
            .name(name)
            .with_decryption(true)
            .send()
            .await
            .map_err(failed("ssm:GetParameter"))?;
        out.parameter()
            .and_then(|p| p.value())
            .map(|v| v.trim().to_string())
            .ok_or_else(|| CloudError { call: "ssm:GetParameter", message: format!("{name} has no value") })
    }

    /// Writes a runner token for its instance to read (and delete).
    pub async fn put_token(&self, name: &str, token: &str, reservation: Uuid) -> Result<(), CloudError> {
        self.client
            .put_parameter()
            .name(name)
            .value(token)
            .r#type(ParameterType::SecureString)
            .description(format!("Baton runner token of reservation {reservation}; deleted once read"))
            // A repeated write (a retried tick) puts the same token again.
            .overwrite(true)
            .send()
            .await
            .map_err(failed("ssm:PutParameter"))?;
        Ok(())
    }

    /// Keeps a reserve until it is answered (`plan::kept_reserve_parameter`).
    pub async fn keep_reserve(&self, name: &str, reserve: &ReserveRequest) -> Result<(), CloudError> {
        let value = serde_json::to_string(reserve)
            .map_err(|e| CloudError { call: "ssm:PutParameter", message: format!("{name}: {e}") })?;
        self.client
            .put_parameter()
            .name(name)
            .value(value)
            .r#type(ParameterType::String)
            .description("A Baton reserve not answered yet; the next tick sends it again under its request_id")
            .overwrite(true)
            .send()
            .await
            .map_err(failed("ssm:PutParameter"))?;
        Ok(())
    }

    /// Deletes a token parameter (or a kept reserve); one already gone (the
    /// instance read it) is what was wanted.
    pub async fn delete_parameter(&self, name: &str) -> Result<(), CloudError> {
        match self.client.delete_parameter().name(name).send().await {
            Ok(_) => Ok(()),
            Err(err) if err.as_service_error().is_some_and(|e| e.is_parameter_not_found()) => Ok(()),
            Err(err) => Err(failed("ssm:DeleteParameter")(err)),
        }
    }

    /// The parameters under `path`: names, write times, and the values of
    /// the String ones (kept reserves); a token's value is not decrypted.
    pub async fn tokens(&self, path: &str) -> Result<Vec<TokenParameter>, CloudError> {
        let mut pages = self
            .client
            .get_parameters_by_path()
            .path(path)
            .recursive(false)
            .with_decryption(false)
            .into_paginator()
            .send();
        let mut found = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(failed("ssm:GetParametersByPath"))?;
            for parameter in page.parameters() {
                let Some(name) = parameter.name() else { continue };
                let written_at =
                    parameter.last_modified_date().and_then(|d| DateTime::<Utc>::from_timestamp(d.secs(), 0));
                let value = (parameter.r#type() == Some(&ParameterType::String))
                    .then(|| parameter.value().map(str::to_string))
                    .flatten();
                found.push(TokenParameter { name: name.to_string(), written_at, value });
            }
        }
        Ok(found)
    }
}
