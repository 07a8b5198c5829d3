//! The local provisioner: turns `infra/resources.json` into a [`Plan`] of
//! physical resources and creates them on an endpoint (the moto server). The
//! CDK stack builds the same plan from the same file; `baton-devhost plan`
//! prints it so the infra tests can check the two agree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection, ProjectionType,
    ScalarAttributeType, StreamSpecification, StreamViewType, TimeToLiveSpecification,
};
use aws_sdk_sqs::types::QueueAttributeName;
use serde::{Deserialize, Serialize};

use crate::resources::{Naming, Resources};
use baton_service::aws::AwsClients;
use baton_store::display_sdk_error;

/// Everything a stack consists of, with physical names.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Plan {
    pub prefix: String,
    pub table: PlannedTable,
    pub bus: String,
    #[serde(default)]
    pub buckets: Vec<PlannedBucket>,
    pub queues: Vec<PlannedQueue>,
    pub rules: Vec<PlannedRule>,
    pub state_machines: Vec<PlannedStateMachine>,
    pub schedules: Vec<PlannedSchedule>,
    /// Pipelines' schedule group, and the function its schedules invoke.
    pub scheduler: PlannedScheduler,
    pub routes: Vec<crate::resources::Route>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PlannedScheduler {
    pub group: String,
    /// The physical name of the target function.
    pub target_function: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PlannedTable {
    pub name: String,
    pub partition_key: String,
    pub sort_key: String,
    pub ttl_attribute: String,
    pub stream_view_type: String,
    pub global_secondary_indexes: Vec<crate::resources::Gsi>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PlannedBucket {
    pub logical: String,
    /// The local name; on AWS CloudFormation names it (S3 names are global).
    pub name: String,
    pub retention_days: u32,
    /// The variable that gives the functions its name.
    pub env: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PlannedQueue {
    /// Logical name (subscriber or task queue).
    pub logical: String,
    pub name: String,
    pub dlq_name: String,
    pub function: String,
    pub visibility_timeout_s: u32,
    pub max_receive_count: u32,
    pub batch_size: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PlannedRule {
    pub name: String,
    /// Physical name of the target queue.
    pub queue: String,
    pub event_pattern: serde_json::Value,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PlannedStateMachine {
    pub logical: String,
    pub name: String,
    /// The definition as in `infra/statemachines/` (placeholders unreplaced).
    pub definition: serde_json::Value,
    /// Placeholder → physical queue name whose URL replaces it.
    pub queue_substitutions: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PlannedSchedule {
    pub name: String,
    pub function: String,
    pub period_config: String,
}

/// A failure to plan or create the stack.
#[derive(Debug, thiserror::Error)]
#[error("provisioning failed: {0}")]
pub struct ProvisionError(pub String);

/// Where `infra/` is in this checkout.
pub fn default_infra_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("infra")
}

impl Plan {
    pub fn new(resources: &Resources, naming: &Naming, infra_dir: &Path) -> Result<Self, ProvisionError> {
        let mut queues = Vec::new();
        let mut rules = Vec::new();
        for sub in &resources.subscribers {
            queues.push(PlannedQueue {
                logical: sub.name.clone(),
                name: naming.physical(&sub.name),
                dlq_name: naming.dlq(&sub.name),
                function: sub.function.clone(),
                visibility_timeout_s: sub.visibility_timeout_s,
                max_receive_count: sub.max_receive_count,
                batch_size: sub.batch_size,
            });
            rules.push(PlannedRule {
                name: naming.physical(&sub.name),
                queue: naming.physical(&sub.name),
                event_pattern: sub.event_pattern(),
            });
        }
        for queue in &resources.task_queues {
            queues.push(PlannedQueue {
                logical: queue.name.clone(),
                name: naming.physical(&queue.name),
                dlq_name: naming.dlq(&queue.name),
                function: queue.function.clone(),
                visibility_timeout_s: queue.visibility_timeout_s,
                max_receive_count: queue.max_receive_count,
                batch_size: queue.batch_size,
            });
        }
        let mut state_machines = Vec::new();
        for machine in &resources.state_machines {
            let path = infra_dir.join(crate::resources::STATE_MACHINE_DIR).join(&machine.definition);
            let raw = std::fs::read_to_string(&path)
                .map_err(|e| ProvisionError(format!("reading {}: {e}", path.display())))?;
            let definition = serde_json::from_str(&raw)
                .map_err(|e| ProvisionError(format!("{} is not JSON: {e}", path.display())))?;
            state_machines.push(PlannedStateMachine {
                logical: machine.name.clone(),
                name: naming.physical(&machine.name),
                definition,
                queue_substitutions: machine
                    .queue_substitutions
                    .iter()
                    .map(|(k, q)| (k.clone(), naming.physical(q)))
                    .collect(),
            });
        }
        Ok(Self {
            prefix: naming.prefix().to_string(),
            table: PlannedTable {
                name: naming.physical(&resources.table.name),
                partition_key: resources.table.partition_key.clone(),
                sort_key: resources.table.sort_key.clone(),
                ttl_attribute: resources.table.ttl_attribute.clone(),
                stream_view_type: resources.table.stream_view_type.clone(),
                global_secondary_indexes: resources.table.global_secondary_indexes.clone(),
            },
            bus: naming.physical(&resources.bus.name),
            buckets: resources
                .buckets
                .iter()
                .map(|b| PlannedBucket {
                    logical: b.name.clone(),
                    name: naming.physical(&b.name),
                    retention_days: b.retention_days,
                    env: b.env.clone(),
                })
                .collect(),
            queues,
            rules,
            state_machines,
            schedules: resources
                .schedules
                .iter()
                .map(|s| PlannedSchedule {
                    name: naming.physical(&s.name),
                    function: s.function.clone(),
                    period_config: s.period_config.clone(),
                })
                .collect(),
            scheduler: PlannedScheduler {
                group: naming.physical(&resources.scheduler.group),
                target_function: naming.physical(&resources.scheduler.target),
            },
            routes: resources.routes.clone(),
        })
    }

    pub fn queue(&self, logical: &str) -> Option<&PlannedQueue> {
        self.queues.iter().find(|q| q.logical == logical)
    }
}

/// A created queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueRef {
    pub url: String,
    pub arn: String,
    pub dlq_url: String,
}

/// What provisioning created, with the addresses the functions need.
#[derive(Debug, Clone)]
pub struct Provisioned {
    pub plan: Plan,
    pub table: String,
    pub stream_arn: String,
    pub bus: String,
    /// Logical queue name → its addresses.
    pub queues: BTreeMap<String, QueueRef>,
    /// Logical state machine name → ARN.
    pub state_machines: BTreeMap<String, String>,
    /// Bucket variable (`BATON_LOGS_BUCKET`) → bucket name.
    pub buckets: BTreeMap<String, String>,
    /// The configuration of `schedule-sync`: the group, the target's ARN,
    /// the role it is invoked with (`BATON_SCHEDULE_*`).
    pub scheduler: BTreeMap<String, String>,
}

const LOCAL_ROLE_ARN: &str = "arn:aws:iam::123456789012:role/baton-local-states";
const DLQ_RETENTION_S: &str = "1209600";

fn err<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> ProvisionError + '_ {
    move |e| ProvisionError(format!("{what}: {e}"))
}

/// Creates what is missing of `plan` and keeps what is there (idempotent), so
/// that a dev host restarts over an emulator that holds its stage and the
/// runs in flight carry on. Meant for the local emulator; on AWS the CDK
/// stack creates the same resources.
pub async fn provision(clients: &AwsClients, plan: &Plan) -> Result<Provisioned, ProvisionError> {
    let stream_arn = create_table(clients, &plan.table).await?;
    let bus = clients.eventbridge().create_event_bus().name(&plan.bus).send().await;
    if let Err(e) = bus {
        let exists = e.as_service_error().is_some_and(|s| s.is_resource_already_exists_exception());
        if !exists {
            return Err(ProvisionError(format!("event bus {}: {}", plan.bus, display_sdk_error(&e))));
        }
    }

    let mut buckets = BTreeMap::new();
    for bucket in &plan.buckets {
        create_bucket(clients, bucket).await?;
        buckets.insert(bucket.env.clone(), bucket.name.clone());
    }
    let mut queues = BTreeMap::new();
    for queue in &plan.queues {
        queues.insert(queue.logical.clone(), create_queue(clients, queue).await?);
    }
    for rule in &plan.rules {
        let queue = plan
            .queues
            .iter()
            .find(|q| q.name == rule.queue)
            .and_then(|q| queues.get(&q.logical))
            .ok_or_else(|| ProvisionError(format!("rule {} targets unknown queue", rule.name)))?;
        clients
            .eventbridge()
            .put_rule()
            .name(&rule.name)
            .event_bus_name(&plan.bus)
            .event_pattern(rule.event_pattern.to_string())
            .send()
            .await
            .map_err(|e| ProvisionError(format!("rule {}: {}", rule.name, display_sdk_error(&e))))?;
        let target =
            aws_sdk_eventbridge::types::Target::builder().id("queue").arn(&queue.arn).build().map_err(err("target"))?;
        clients
            .eventbridge()
            .put_targets()
            .rule(&rule.name)
            .event_bus_name(&plan.bus)
            .targets(target)
            .send()
            .await
            .map_err(|e| ProvisionError(format!("targets of {}: {}", rule.name, display_sdk_error(&e))))?;
    }
    let mut state_machines = BTreeMap::new();
    for machine in &plan.state_machines {
        let mut definition = machine.definition.to_string();
        for (key, queue_name) in &machine.queue_substitutions {
            let url = plan
                .queues
                .iter()
                .find(|q| &q.name == queue_name)
                .and_then(|q| queues.get(&q.logical))
                .map(|q| q.url.clone())
                .ok_or_else(|| ProvisionError(format!("{}: no queue {queue_name}", machine.name)))?;
            definition = definition.replace(&format!("${{{key}}}"), &url);
        }
        let arn = create_state_machine(clients, &machine.name, definition).await?;
        state_machines.insert(machine.logical.clone(), arn);
    }
    let scheduler = create_schedule_group(clients, &plan.scheduler).await?;
    Ok(Provisioned {
        plan: plan.clone(),
        table: plan.table.name.clone(),
        stream_arn,
        bus: plan.bus.clone(),
        queues,
        state_machines,
        buckets,
        scheduler,
    })
}

/// The schedule group pipelines' schedules go in (kept if there), and the
/// configuration naming it, the target and a role (the emulator checks
/// neither ARN; the dev host fires the schedules itself).
async fn create_schedule_group(
    clients: &AwsClients,
    planned: &PlannedScheduler,
) -> Result<BTreeMap<String, String>, ProvisionError> {
    let created = clients.scheduler().create_schedule_group().name(&planned.group).send().await;
    if let Err(e) = created {
        if !e.as_service_error().is_some_and(|s| s.is_conflict_exception()) {
            return Err(ProvisionError(format!("schedule group {}: {}", planned.group, display_sdk_error(&e))));
        }
    }
    Ok(BTreeMap::from([
        ("BATON_SCHEDULE_GROUP".to_string(), planned.group.clone()),
        (
            "BATON_SCHEDULE_TARGET_ARN".to_string(),
            format!("arn:aws:lambda:us-east-1:123456789012:function:{}", planned.target_function),
        ),
        ("BATON_SCHEDULE_ROLE_ARN".to_string(), format!("arn:aws:iam::123456789012:role/{}", planned.group)),
    ]))
}

/// A private bucket whose objects expire after the planned retention, as
/// the CDK stack makes it; one that exists is kept.
async fn create_bucket(clients: &AwsClients, bucket: &PlannedBucket) -> Result<(), ProvisionError> {
    use aws_sdk_s3::types::{
        BucketLifecycleConfiguration, ExpirationStatus, LifecycleExpiration, LifecycleRule, LifecycleRuleFilter,
    };
    if let Err(e) = clients.s3().create_bucket().bucket(&bucket.name).send().await {
        let exists =
            e.as_service_error().is_some_and(|s| s.is_bucket_already_owned_by_you() || s.is_bucket_already_exists());
        if !exists {
            return Err(ProvisionError(format!("bucket {}: {}", bucket.name, display_sdk_error(&e))));
        }
    }
    let rule = LifecycleRule::builder()
        .id("expire-logs")
        .status(ExpirationStatus::Enabled)
        .filter(LifecycleRuleFilter::builder().prefix("").build())
        .expiration(LifecycleExpiration::builder().days(bucket.retention_days as i32).build())
        .build()
        .map_err(err("lifecycle rule"))?;
    let lifecycle = BucketLifecycleConfiguration::builder().rules(rule).build().map_err(err("lifecycle"))?;
    clients
        .s3()
        .put_bucket_lifecycle_configuration()
        .bucket(&bucket.name)
        .lifecycle_configuration(lifecycle)
        .send()
        .await
        .map_err(|e| ProvisionError(format!("lifecycle of {}: {}", bucket.name, display_sdk_error(&e))))?;
    Ok(())
}

/// Creates the state machine, or brings an existing one of that name to
/// `definition` (its executions in flight carry on).
async fn create_state_machine(clients: &AwsClients, name: &str, definition: String) -> Result<String, ProvisionError> {
    let failed = |e: String| ProvisionError(format!("state machine {name}: {e}"));
    let created =
        clients.sfn().create_state_machine().name(name).definition(&definition).role_arn(LOCAL_ROLE_ARN).send().await;
    match created {
        Ok(out) => Ok(out.state_machine_arn().to_string()),
        Err(e) if e.as_service_error().is_some_and(|s| s.is_state_machine_already_exists()) => {
            let mut pages = clients.sfn().list_state_machines().into_paginator().send();
            while let Some(page) = pages.next().await {
                let page = page.map_err(|e| failed(display_sdk_error(&e)))?;
                if let Some(existing) = page.state_machines().iter().find(|m| m.name() == name) {
                    let arn = existing.state_machine_arn().to_string();
                    clients
                        .sfn()
                        .update_state_machine()
                        .state_machine_arn(&arn)
                        .definition(&definition)
                        .send()
                        .await
                        .map_err(|e| failed(display_sdk_error(&e)))?;
                    return Ok(arn);
                }
            }
            Err(failed("exists but is not listed".into()))
        }
        Err(e) => Err(failed(display_sdk_error(&e))),
    }
}

async fn create_table(clients: &AwsClients, table: &PlannedTable) -> Result<String, ProvisionError> {
    let key = |name: &str, kind: KeyType| {
        KeySchemaElement::builder().attribute_name(name).key_type(kind).build().map_err(err("key schema"))
    };
    let attribute = |name: &str, kind: &str| {
        let kind = if kind == "N" { ScalarAttributeType::N } else { ScalarAttributeType::S };
        AttributeDefinition::builder().attribute_name(name).attribute_type(kind).build().map_err(err("attribute"))
    };
    let mut attributes = vec![attribute(&table.partition_key, "S")?, attribute(&table.sort_key, "S")?];
    let mut gsis = Vec::new();
    for gsi in &table.global_secondary_indexes {
        attributes.push(attribute(&gsi.partition_key.name, &gsi.partition_key.kind)?);
        attributes.push(attribute(&gsi.sort_key.name, &gsi.sort_key.kind)?);
        gsis.push(
            GlobalSecondaryIndex::builder()
                .index_name(&gsi.name)
                .key_schema(key(&gsi.partition_key.name, KeyType::Hash)?)
                .key_schema(key(&gsi.sort_key.name, KeyType::Range)?)
                .projection(
                    Projection::builder().projection_type(ProjectionType::from(gsi.projection.as_str())).build(),
                )
                .build()
                .map_err(err("gsi"))?,
        );
    }
    let created = clients
        .dynamodb()
        .create_table()
        .table_name(&table.name)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key(&table.partition_key, KeyType::Hash)?)
        .key_schema(key(&table.sort_key, KeyType::Range)?)
        .set_attribute_definitions(Some(attributes))
        .set_global_secondary_indexes(Some(gsis))
        .stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::from(table.stream_view_type.as_str()))
                .build()
                .map_err(err("stream"))?,
        )
        .send()
        .await;
    let description = match created {
        Ok(out) => out.table_description,
        // The stage is there already (a restarted dev host): keep its table,
        // its items and its stream.
        Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_in_use_exception()) => {
            let described = clients
                .dynamodb()
                .describe_table()
                .table_name(&table.name)
                .send()
                .await
                .map_err(|e| ProvisionError(format!("table {}: {}", table.name, display_sdk_error(&e))))?;
            return described
                .table()
                .and_then(|d| d.latest_stream_arn())
                .map(str::to_string)
                .ok_or_else(|| ProvisionError(format!("table {} has no stream", table.name)));
        }
        Err(e) => return Err(ProvisionError(format!("table {}: {}", table.name, display_sdk_error(&e)))),
    };
    clients
        .dynamodb()
        .update_time_to_live()
        .table_name(&table.name)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .enabled(true)
                .attribute_name(&table.ttl_attribute)
                .build()
                .map_err(err("ttl"))?,
        )
        .send()
        .await
        .map_err(|e| ProvisionError(format!("ttl of {}: {}", table.name, display_sdk_error(&e))))?;
    description
        .and_then(|d| d.latest_stream_arn)
        .ok_or_else(|| ProvisionError(format!("table {} has no stream", table.name)))
}

async fn create_queue(clients: &AwsClients, queue: &PlannedQueue) -> Result<QueueRef, ProvisionError> {
    let dlq = clients
        .sqs()
        .create_queue()
        .queue_name(&queue.dlq_name)
        .attributes(QueueAttributeName::MessageRetentionPeriod, DLQ_RETENTION_S)
        .send()
        .await
        .map_err(|e| ProvisionError(format!("queue {}: {}", queue.dlq_name, display_sdk_error(&e))))?;
    let dlq_url = dlq.queue_url().unwrap_or_default().to_string();
    let dlq_arn = queue_arn(clients, &dlq_url).await?;
    let redrive = serde_json::json!({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": queue.max_receive_count});
    let created = clients
        .sqs()
        .create_queue()
        .queue_name(&queue.name)
        .attributes(QueueAttributeName::VisibilityTimeout, queue.visibility_timeout_s.to_string())
        .attributes(QueueAttributeName::RedrivePolicy, redrive.to_string())
        .send()
        .await
        .map_err(|e| ProvisionError(format!("queue {}: {}", queue.name, display_sdk_error(&e))))?;
    let url = created.queue_url().unwrap_or_default().to_string();
    let arn = queue_arn(clients, &url).await?;
    Ok(QueueRef { url, arn, dlq_url })
}

async fn queue_arn(clients: &AwsClients, url: &str) -> Result<String, ProvisionError> {
    let out = clients
        .sqs()
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| ProvisionError(format!("attributes of {url}: {}", display_sdk_error(&e))))?;
    out.attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn))
        .cloned()
        .ok_or_else(|| ProvisionError(format!("{url} has no ARN")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_names_everything_with_the_stage_prefix() {
        let plan = Plan::new(&Resources::load(), &Naming::for_stage("unit"), &default_infra_dir()).unwrap();
        assert_eq!(plan.table.name, "baton-unit-state");
        assert_eq!(plan.bus, "baton-unit-facts");
        assert!(plan.queues.iter().all(|q| q.name.starts_with("baton-unit-") && q.dlq_name.ends_with("-dlq")));
        assert_eq!(plan.rules.len(), Resources::load().subscribers.len());
    }
}
