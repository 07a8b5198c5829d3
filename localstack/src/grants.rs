//! A function's IAM grants, enforced on the local stack: on AWS a function
//! can do only what its `permissions` in `infra/resources.json` grant (the
//! CDK stack turns each into an IAM statement), and the emulator grants
//! everything. Each function of the dev host gets clients whose requests are
//! checked here first; a request its grants do not cover is answered as AWS
//! answers it (`AccessDeniedException`, 400 for the JSON protocols, 403 for
//! S3 and the management API), so a missing grant fails a local test exactly
//! as it would fail in production. Test equipment (`baton-localstack`).
//!
//! The mapping follows the CDK stack's `grant` (infra/lib/baton-stack.ts):
//! a permission allows the same actions here as its IAM statement there.

use crate::resources::Function;

/// One parsed permission of resources.json.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permission {
    TableRead,
    TableWrite,
    TableDescribe,
    StreamRead,
    BusPut,
    BusDescribe,
    /// `states:start:<machine>`
    StatesStart(String),
    /// `states:stop:<machine>`
    StatesStop(String),
    /// `states:read[:<machine>]`
    StatesRead(Option<String>),
    StatesDescribe,
    StatesCallback,
    /// `queue:send:<queue>`
    QueueSend(String),
    QueueList,
    LogsWrite,
    LogsRead,
    /// `artifacts:write`: multipart uploads of archives (the function
    /// starts, completes and aborts them; runners send the parts with URLs
    /// it signs).
    ArtifactsWrite,
    /// `artifacts:read`: presigned `GET`s of archives.
    ArtifactsRead,
    PushPost,
    /// `ec2:runner-instances` (the AWS provisioner): describe, launch (with
    /// tags) and terminate runner instances. The CDK scopes it with IAM
    /// conditions (the launch template, the `baton:stage` tag) that this
    /// local check cannot see.
    Ec2RunnerInstances,
    /// `ssm:runner-tokens`: write, list and delete the runner tokens under
    /// `/baton/<stage>/runner-tokens`.
    SsmRunnerTokens,
    /// `ssm:provisioner-token`: read the provisioner token (the parameter
    /// the operator names; the CDK scopes it to that one).
    SsmProvisionerToken,
    /// `ssm:secrets`: write, list and delete workspace secrets under
    /// `/baton/<stage>/secrets` (the secrets route); never read a value.
    SsmSecrets,
    /// `ssm:secrets-read`: read secret values under `/baton/<stage>/secrets`
    /// (the claim, for the job it hands out).
    SsmSecretsRead,
    /// `ssm:hook-secrets`: write, read and delete the webhook secrets under
    /// `/baton/<stage>/hooks` (the hooks function, which verifies with them).
    SsmHookSecrets,
    /// `scheduler:schedules`: create, read, change, list and delete the
    /// schedules of the stack's schedule group (and pass them the role that
    /// invokes their target, which the CDK grants and this check cannot see).
    SchedulerSchedules,
}

impl Permission {
    pub fn parse(raw: &str) -> Result<Self, String> {
        Ok(match raw {
            "table:read" => Permission::TableRead,
            "table:write" => Permission::TableWrite,
            "table:describe" => Permission::TableDescribe,
            "stream:read" => Permission::StreamRead,
            "bus:put" => Permission::BusPut,
            "bus:describe" => Permission::BusDescribe,
            "states:read" => Permission::StatesRead(None),
            "states:describe" => Permission::StatesDescribe,
            "states:callback" => Permission::StatesCallback,
            "queue:list" => Permission::QueueList,
            "logs:write" => Permission::LogsWrite,
            "logs:read" => Permission::LogsRead,
            "artifacts:write" => Permission::ArtifactsWrite,
            "artifacts:read" => Permission::ArtifactsRead,
            "push:post" => Permission::PushPost,
            "ec2:runner-instances" => Permission::Ec2RunnerInstances,
            "ssm:runner-tokens" => Permission::SsmRunnerTokens,
            "ssm:provisioner-token" => Permission::SsmProvisionerToken,
            "ssm:secrets" => Permission::SsmSecrets,
            "ssm:secrets-read" => Permission::SsmSecretsRead,
            "ssm:hook-secrets" => Permission::SsmHookSecrets,
            "scheduler:schedules" => Permission::SchedulerSchedules,
            scoped => {
                let target = |prefix: &str| scoped.strip_prefix(prefix).filter(|t| !t.is_empty()).map(str::to_string);
                if let Some(machine) = target("states:start:") {
                    Permission::StatesStart(machine)
                } else if let Some(machine) = target("states:stop:") {
                    Permission::StatesStop(machine)
                } else if let Some(machine) = target("states:read:") {
                    Permission::StatesRead(Some(machine))
                } else if let Some(queue) = target("queue:send:") {
                    Permission::QueueSend(queue)
                } else {
                    return Err(format!("unknown permission {raw:?}"));
                }
            }
        })
    }
}

/// What one AWS request asks for, as IAM sees it: the service, the action
/// and the name of the resource it acts on where a grant is scoped to one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Action<'a> {
    pub service: &'a str,
    pub operation: &'a str,
    /// The queue URL, state machine or execution ARN the request names.
    pub resource: Option<&'a str>,
}

/// The grants of one function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grants {
    pub function: String,
    permissions: Vec<Permission>,
}

impl Grants {
    /// The grants resources.json gives `function` (a stream trigger also
    /// reads its stream, as the CDK's event source grants it).
    pub fn of(function: &Function) -> Result<Self, String> {
        let mut permissions =
            function.permissions.iter().map(|p| Permission::parse(p)).collect::<Result<Vec<_>, _>>()?;
        if function.trigger == crate::resources::Trigger::Stream {
            permissions.push(Permission::StreamRead);
        }
        Ok(Self { function: function.name.clone(), permissions })
    }

    pub fn has(&self, permission: &Permission) -> bool {
        self.permissions.contains(permission)
    }

    /// Whether the function's role may make this request.
    pub fn allows(&self, action: &Action<'_>) -> bool {
        self.permissions.iter().any(|p| allows(p, action))
    }
}

/// Whether `resource` (a queue URL, a state machine or execution ARN) is the
/// logical resource `logical` of the stack: physical names end with it.
fn names(resource: Option<&str>, logical: &str) -> bool {
    resource.is_some_and(|r| {
        let r = r.trim_end_matches('/');
        // A queue URL ends `/baton-<stage>-<queue>`; a state machine ARN
        // `:baton-<stage>-<machine>`; an execution ARN
        // `:baton-<stage>-<machine>:<execution>`.
        r.ends_with(&format!("-{logical}")) || r.contains(&format!("-{logical}:"))
    })
}

/// `/baton/<stage>/runner-tokens` or a parameter under it: the only SSM
/// names `ssm:runner-tokens` reaches.
fn is_runner_token_path(name: &str) -> bool {
    let mut parts = name.strip_prefix("/baton/").unwrap_or("").splitn(3, '/');
    let (stage, dir, rest) = (parts.next(), parts.next(), parts.next());
    stage.is_some_and(|s| !s.is_empty()) && dir == Some("runner-tokens") && rest.is_none_or(|r| !r.contains('/'))
}

/// `/baton/<stage>/secrets`, or a workspace's directory or secret under it.
fn is_secrets_path(name: &str) -> bool {
    is_stage_path(name, "secrets")
}

fn is_hook_secrets_path(name: &str) -> bool {
    is_stage_path(name, "hooks")
}

/// Whether `name` is under `/baton/<stage>/<dir>/`.
fn is_stage_path(name: &str, dir: &str) -> bool {
    let mut parts = name.strip_prefix("/baton/").unwrap_or("").splitn(3, '/');
    let (stage, found) = (parts.next(), parts.next());
    stage.is_some_and(|s| !s.is_empty()) && found == Some(dir)
}

fn allows(permission: &Permission, action: &Action<'_>) -> bool {
    let op = action.operation;
    match (permission, action.service) {
        (Permission::TableRead, "dynamodb") => {
            matches!(op, "GetItem" | "BatchGetItem" | "Query" | "Scan" | "TransactGetItems" | "ConditionCheckItem")
        }
        (Permission::TableWrite, "dynamodb") => {
            matches!(
                op,
                "PutItem"
                    | "UpdateItem"
                    | "DeleteItem"
                    | "BatchWriteItem"
                    | "TransactWriteItems"
                    | "ConditionCheckItem"
            )
        }
        (Permission::TableDescribe, "dynamodb") => op == "DescribeTable",
        (Permission::StreamRead, "streams") => {
            matches!(op, "DescribeStream" | "GetShardIterator" | "GetRecords" | "ListStreams")
        }
        (Permission::BusPut, "events") => op == "PutEvents",
        (Permission::BusDescribe, "events") => op == "DescribeEventBus",
        (Permission::StatesStart(machine), "states") => op == "StartExecution" && names(action.resource, machine),
        (Permission::StatesStop(machine), "states") => op == "StopExecution" && names(action.resource, machine),
        (Permission::StatesRead(machine), "states") => {
            matches!(op, "DescribeStateMachine" | "ListExecutions" | "DescribeExecution" | "GetExecutionHistory")
                && machine.as_ref().is_none_or(|m| names(action.resource, m))
        }
        (Permission::StatesDescribe, "states") => matches!(op, "DescribeStateMachine" | "ListStateMachines"),
        (Permission::StatesCallback, "states") => {
            matches!(op, "SendTaskSuccess" | "SendTaskFailure" | "SendTaskHeartbeat")
        }
        (Permission::QueueSend(queue), "sqs") => {
            matches!(op, "SendMessage" | "SendMessageBatch") && names(action.resource, queue)
        }
        (Permission::QueueList, "sqs") => op == "ListQueues",
        // Presigned PUTs are signed, not sent: only the function's own
        // requests reach this check.
        (Permission::LogsWrite, "s3") => matches!(op, "PutObject" | "CreateMultipartUpload" | "UploadPart"),
        (Permission::LogsRead, "s3") => matches!(op, "GetObject" | "ListObjectsV2" | "HeadObject"),
        (Permission::ArtifactsWrite, "s3") => matches!(
            op,
            "PutObject" | "CreateMultipartUpload" | "UploadPart" | "CompleteMultipartUpload" | "AbortMultipartUpload"
        ),
        (Permission::ArtifactsRead, "s3") => matches!(op, "GetObject" | "HeadObject"),
        (Permission::PushPost, "apigatewaymanagement") => op == "PostToConnection",
        (Permission::Ec2RunnerInstances, "ec2") => {
            matches!(op, "DescribeInstances" | "RunInstances" | "CreateTags" | "TerminateInstances")
        }
        (Permission::SsmRunnerTokens, "ssm") => {
            matches!(op, "PutParameter" | "DeleteParameter" | "GetParametersByPath")
                && action.resource.is_some_and(is_runner_token_path)
        }
        (Permission::SsmProvisionerToken, "ssm") => op == "GetParameter",
        (Permission::SsmSecrets, "ssm") => {
            matches!(op, "PutParameter" | "DeleteParameter" | "GetParametersByPath")
                && action.resource.is_some_and(is_secrets_path)
        }
        (Permission::SsmSecretsRead, "ssm") => op == "GetParameters" && action.resource.is_some_and(is_secrets_path),
        (Permission::SsmHookSecrets, "ssm") => {
            matches!(op, "PutParameter" | "GetParameter" | "DeleteParameter")
                && action.resource.is_some_and(is_hook_secrets_path)
        }
        (Permission::SchedulerSchedules, "scheduler") => {
            matches!(op, "CreateSchedule" | "GetSchedule" | "UpdateSchedule" | "DeleteSchedule" | "ListSchedules")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Resources;

    fn action<'a>(service: &'a str, operation: &'a str, resource: Option<&'a str>) -> Action<'a> {
        Action { service, operation, resource }
    }

    #[test]
    fn every_permission_of_resources_json_parses() {
        for function in &Resources::load().functions {
            Grants::of(function).unwrap_or_else(|e| panic!("{}: {e}", function.name));
        }
    }

    #[test]
    fn a_grant_allows_its_actions_and_nothing_else() {
        let resources = Resources::load();
        let grants = |name: &str| Grants::of(resources.function(name).unwrap()).unwrap();
        let heartbeat = grants("heartbeat");
        assert!(heartbeat.allows(&action("dynamodb", "UpdateItem", None)));
        assert!(!heartbeat.allows(&action("dynamodb", "Query", None)), "heartbeat has no table:read");
        assert!(!heartbeat.allows(&action("apigatewaymanagement", "PostToConnection", None)));
        let start = grants("start-attempt");
        let machine = "arn:aws:states:us-east-1:123456789012:stateMachine:baton-dev-run-attempt";
        assert!(start.allows(&action("states", "StartExecution", Some(machine))));
        let other = "arn:aws:states:us-east-1:123456789012:stateMachine:baton-dev-other";
        assert!(!start.allows(&action("states", "StartExecution", Some(other))), "scoped to its machine");
        assert!(!start.allows(&action("dynamodb", "GetItem", None)));
        let relay = grants("relay");
        assert!(relay.allows(&action("streams", "GetRecords", None)), "a stream trigger reads its stream");
        assert!(relay.allows(&action("events", "PutEvents", None)));
    }

    #[test]
    fn only_the_secrets_route_writes_secrets_and_only_the_claim_reads_them() {
        let resources = Resources::load();
        let grants = |name: &str| Grants::of(resources.function(name).unwrap()).unwrap();
        let secret = "/baton/prod/secrets/ws1/DEPLOY_TOKEN";
        let (route, claim, runs) = (grants("secrets"), grants("claim"), grants("runs-read"));
        assert!(route.allows(&action("ssm", "PutParameter", Some(secret))));
        assert!(route.allows(&action("ssm", "GetParametersByPath", Some("/baton/prod/secrets/ws1"))));
        assert!(!route.allows(&action("ssm", "GetParameters", Some(secret))), "the route never reads a value");
        assert!(!route.allows(&action("ssm", "PutParameter", Some("/baton/prod/runner-tokens/x"))));
        assert!(claim.allows(&action("ssm", "GetParameters", Some(secret))));
        assert!(!claim.allows(&action("ssm", "PutParameter", Some(secret))));
        assert!(!runs.allows(&action("ssm", "GetParameters", Some(secret))), "no other function reads them");
    }

    #[test]
    fn the_aws_provisioner_reaches_runner_tokens_and_its_own_token_only() {
        let resources = Resources::load();
        let function = &resources.aws_provisioner.as_ref().expect("resources.json has the AWS provisioner").function;
        let grants = Grants::of(function).unwrap();
        let token = "/baton/prod/runner-tokens/0190c0de-0000-7000-8000-000000000000";
        assert!(grants.allows(&action("ssm", "PutParameter", Some(token))));
        assert!(grants.allows(&action("ssm", "DeleteParameter", Some(token))));
        assert!(grants.allows(&action("ssm", "GetParametersByPath", Some("/baton/prod/runner-tokens"))));
        assert!(!grants.allows(&action("ssm", "PutParameter", Some("/baton/prod/other/x"))), "outside the path");
        assert!(!grants.allows(&action("ssm", "DeleteParameter", Some("/baton/prod/runner-tokens/a/b"))));
        assert!(grants.allows(&action("ssm", "GetParameter", Some("/ops/baton-provisioner-token"))));
        assert!(!grants.allows(&action("ssm", "GetParameters", Some("/baton/prod/secrets/ws/A"))), "not the claim's");
        assert!(grants.allows(&action("ec2", "RunInstances", None)));
        assert!(grants.allows(&action("ec2", "TerminateInstances", None)));
        assert!(!grants.allows(&action("ec2", "StopInstances", None)));
        assert!(!grants.allows(&action("dynamodb", "GetItem", None)), "a provisioner reads Baton through its API");
    }

    #[test]
    fn scoped_names_match_the_physical_resource_only() {
        let queue = "http://127.0.0.1:5055/123456789012/baton-dev-orchestrate";
        assert!(names(Some(queue), "orchestrate"));
        assert!(!names(Some("http://127.0.0.1:5055/123456789012/baton-dev-orchestrate-dlq"), "orchestrate"));
        assert!(names(Some("arn:aws:states:r:1:execution:baton-dev-run-attempt:abc"), "run-attempt"));
        assert!(!names(None, "orchestrate"));
    }
}
