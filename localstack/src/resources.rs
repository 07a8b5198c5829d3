//! The typed model of `infra/resources.json`, the one source of truth for the
//! table, the bus, the rules, the queues, the routes, the schedules and the
//! state machines. The local provisioner and the dev host read it here; the CDK
//! stack reads the same file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

const RESOURCES_JSON: &str = include_str!("../../infra/resources.json");

/// Directory of the state machine definitions, relative to `infra/`.
pub const STATE_MACHINE_DIR: &str = "statemachines";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Resources {
    pub table: Table,
    pub bus: Bus,
    #[serde(default)]
    pub buckets: Vec<Bucket>,
    pub functions: Vec<Function>,
    pub routes: Vec<Route>,
    pub push: Push,
    pub subscribers: Vec<Subscriber>,
    pub task_queues: Vec<TaskQueue>,
    pub schedules: Vec<Schedule>,
    /// Pipelines' schedules on EventBridge Scheduler.
    pub scheduler: Scheduler,
    pub state_machines: Vec<StateMachine>,
    /// The AWS reference provisioner: optional, apart from `functions` so
    /// that the local stack (which never runs it) and every iteration over
    /// the functions leave it out; the CDK stack builds it only when given
    /// its `provisioner` props.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws_provisioner: Option<AwsProvisioner>,
}

/// `aws_provisioner` in resources.json.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AwsProvisioner {
    /// Its function (trigger `schedule`) and permissions.
    pub function: Function,
    /// Its schedule's default period (the CDK prop `provisioner.periodS`
    /// overrides it); whole minutes.
    pub period_s: u32,
    /// Facts that wake it between its scheduled ticks (a job queued: demand
    /// changed), through a queue of its own: one tick a batch.
    #[serde(default)]
    pub wake_on: Vec<String>,
    /// How long its wake queue gathers facts into one batch (one tick).
    #[serde(default)]
    pub wake_batching_s: u32,
}

/// An S3 bucket (job logs): private, objects expire after `retention_days`;
/// its name reaches the functions as the variable `env`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Bucket {
    pub name: String,
    pub retention_days: u32,
    pub env: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Table {
    pub name: String,
    pub partition_key: String,
    pub sort_key: String,
    pub ttl_attribute: String,
    pub stream_view_type: String,
    pub global_secondary_indexes: Vec<Gsi>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Gsi {
    pub name: String,
    pub partition_key: KeyAttribute,
    pub sort_key: KeyAttribute,
    /// `ALL` (the default) or `KEYS_ONLY`: what the index copies of an
    /// item. Every write of an indexed item is billed again on the index, by
    /// the size of what it copies.
    #[serde(default = "all_attributes")]
    pub projection: String,
}

fn all_attributes() -> String {
    "ALL".into()
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct KeyAttribute {
    pub name: String,
    /// `S` or `N`.
    #[serde(rename = "type")]
    pub kind: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Bus {
    pub name: String,
    pub archive_retention_days: u32,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    Http,
    Stream,
    Sqs,
    Schedule,
    /// A route of the runners' push socket (API Gateway WebSocket API).
    Websocket,
    /// The target of pipelines' EventBridge Scheduler schedules
    /// (`scheduler` in resources.json).
    Scheduler,
}

/// The runners' push socket (`push` in resources.json).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Push {
    pub name: String,
    /// The function of the `$connect` and `$disconnect` routes.
    pub function: String,
    /// The `action` of the keep-alive message, answered by the gateway.
    pub keepalive_action: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Function {
    pub name: String,
    pub trigger: Trigger,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<u32>,
    /// What the function's role may do (`table:read`, `push:post`, …): the
    /// CDK stack grants exactly these, and the dev host enforces them.
    #[serde(default)]
    pub permissions: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Route {
    pub method: String,
    /// API Gateway route template, e.g. `/v1/runners/leases/{execution_id}/heartbeat`.
    pub path: String,
    pub function: String,
}

/// A consumer of facts: one EventBridge rule → one SQS queue (with a DLQ) → one function.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Subscriber {
    pub name: String,
    pub function: String,
    /// The `detail-type`s the rule routes to this subscriber's queue.
    pub facts: Vec<String>,
    pub max_receive_count: u32,
    pub visibility_timeout_s: u32,
    pub batch_size: u32,
}

/// A queue that Step Functions writes task tokens to (`sqs:sendMessage.waitForTaskToken`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TaskQueue {
    pub name: String,
    pub function: String,
    pub max_receive_count: u32,
    pub visibility_timeout_s: u32,
    pub batch_size: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Schedule {
    pub name: String,
    pub function: String,
    /// The configuration variable that holds the period in seconds.
    pub period_config: String,
}

/// `scheduler` in resources.json: the schedule group pipelines' schedules
/// live in, and the function each one invokes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Scheduler {
    pub group: String,
    pub target: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StateMachine {
    pub name: String,
    /// File under `infra/statemachines/`.
    pub definition: String,
    /// `${Key}` placeholders in the definition → the task queue whose URL replaces them.
    pub queue_substitutions: BTreeMap<String, String>,
}

/// Physical names of one deployed (or locally provisioned) stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Naming {
    prefix: String,
}

impl Naming {
    /// Names for the stage: every resource is called `baton-<stage>-<logical>`.
    pub fn for_stage(stage: &str) -> Self {
        Self { prefix: format!("baton-{stage}-") }
    }
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
    pub fn physical(&self, logical: &str) -> String {
        format!("{}{logical}", self.prefix)
    }
    pub fn dlq(&self, logical: &str) -> String {
        format!("{}{logical}-dlq", self.prefix)
    }
}

/// The DLQ of every queue is named after it with this suffix.
pub const DLQ_SUFFIX: &str = "-dlq";

impl Resources {
    /// The resources this build was compiled with.
    pub fn load() -> Self {
        // The file is compiled in and covered by a unit test, so a parse
        // failure here can only be a broken build, never bad input.
        #[allow(clippy::expect_used)]
        serde_json::from_str(RESOURCES_JSON).expect("infra/resources.json is valid (tested)")
    }

    pub fn function(&self, name: &str) -> Option<&Function> {
        self.functions.iter().find(|f| f.name == name)
    }

    pub fn subscriber(&self, name: &str) -> Option<&Subscriber> {
        self.subscribers.iter().find(|s| s.name == name)
    }
}

impl Subscriber {
    /// The EventBridge pattern of the subscriber's rule. Facts are routed by
    /// `detail-type` alone: each one names its context, entity and fact.
    pub fn event_pattern(&self) -> serde_json::Value {
        serde_json::json!({ "detail-type": self.facts })
    }
}

impl StateMachine {
    /// The definition with every `${Key}` replaced by the URL of its queue.
    pub fn render(&self, raw_definition: &str, queue_url: impl Fn(&str) -> Option<String>) -> Result<String, String> {
        let mut out = raw_definition.to_string();
        for (key, queue) in &self.queue_substitutions {
            let url = queue_url(queue).ok_or_else(|| format!("state machine {}: no queue {queue}", self.name))?;
            out = out.replace(&format!("${{{key}}}"), &url);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

    use super::*;

    /// Every schedule of `resources.json` names a period the configuration
    /// holds, so the dev host and the stack fire it at what was configured.
    #[test]
    fn every_schedule_runs_at_a_configured_period() {
        use baton_service::config::Config;
        let map = HashMap::from([
            ("BATON_TABLE".to_string(), "t".to_string()),
            ("BATON_BUS".to_string(), "b".to_string()),
            ("BATON_DEMAND_METRICS_PERIOD_S".to_string(), "120".to_string()),
        ]);
        let config = Config::from_map(&map).unwrap();
        for schedule in Resources::load().schedules {
            assert!(config.schedule_period(&schedule.period_config).is_some(), "{}", schedule.period_config);
        }
        assert_eq!(config.schedule_period("BATON_DEMAND_METRICS_PERIOD_S"), Some(std::time::Duration::from_secs(120)));
        assert_eq!(config.schedule_period("BATON_POLL_INTERVAL_S"), None);
    }

    #[test]
    fn resources_json_parses_and_references_are_consistent() {
        let resources = Resources::load();
        let functions: HashSet<_> = resources.functions.iter().map(|f| f.name.as_str()).collect();
        for route in &resources.routes {
            assert!(functions.contains(route.function.as_str()), "route {} → unknown function", route.path);
            assert_eq!(resources.function(&route.function).map(|f| f.trigger), Some(Trigger::Http));
        }
        for sub in &resources.subscribers {
            assert!(functions.contains(sub.function.as_str()), "subscriber {} → unknown function", sub.name);
            assert!(!sub.facts.is_empty());
            assert!(sub.max_receive_count >= 1 && sub.batch_size >= 1 && sub.batch_size <= 10);
        }
        for queue in &resources.task_queues {
            assert!(functions.contains(queue.function.as_str()));
        }
        for schedule in &resources.schedules {
            assert!(functions.contains(schedule.function.as_str()));
        }
        let queues: HashSet<_> = resources.task_queues.iter().map(|q| q.name.as_str()).collect();
        for machine in &resources.state_machines {
            for queue in machine.queue_substitutions.values() {
                assert!(queues.contains(queue.as_str()), "state machine {} → unknown queue {queue}", machine.name);
            }
        }
        let mut routes = HashSet::new();
        for route in &resources.routes {
            assert!(routes.insert((route.method.clone(), route.path.clone())), "duplicate route {}", route.path);
        }
    }

    /// The OpenAPI document describes exactly the routes API Gateway
    /// serves: no route undocumented, no documented route unserved.
    #[test]
    fn the_openapi_document_has_exactly_the_routes_of_resources_json() {
        let resources = Resources::load();
        let served: std::collections::BTreeSet<(String, String)> =
            resources.routes.iter().map(|r| (r.method.to_uppercase(), r.path.clone())).collect();
        let document = serde_json::to_value(baton_api::openapi::document()).unwrap();
        let mut documented = std::collections::BTreeSet::new();
        for (path, item) in document["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                documented.insert((method.to_uppercase(), path.clone()));
            }
        }
        assert_eq!(served, documented);
    }

    #[test]
    fn physical_names_carry_the_stage_prefix() {
        let naming = Naming::for_stage("dev");
        assert_eq!(naming.physical("state"), "baton-dev-state");
        assert_eq!(naming.dlq("enqueue"), "baton-dev-enqueue-dlq");
    }

    /// ARCHITECTURE.md's table of facts and their subscribers says what
    /// `resources.json` configures: every fact Baton writes and every fact
    /// a subscriber takes is a row, and each row names exactly the
    /// subscribers whose rule routes that fact to them.
    #[test]
    fn architecture_md_lists_every_fact_and_its_subscribers() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../ARCHITECTURE.md");
        let text = std::fs::read_to_string(path).unwrap();
        let start = text.find("<!-- facts-table:start -->").expect("the table's start marker");
        let end = text.find("<!-- facts-table:end -->").expect("the table's end marker");
        let mut listed: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for row in text[start..end].lines().filter(|l| l.starts_with("| `")) {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let fact = cells[1].trim_matches('`').to_string();
            let subscribers = cells[2].split(',').map(str::trim).filter(|s| *s != "—" && !s.is_empty());
            let previous = listed.insert(fact.clone(), subscribers.map(str::to_string).collect());
            assert!(previous.is_none(), "{fact} is listed twice");
        }
        let mut configured: BTreeMap<String, BTreeSet<String>> = baton_api::facts::ALL_DETAIL_TYPES
            .iter()
            .chain([&baton_api::runs::EXTERNAL_JOB_EVENT])
            .map(|fact| (fact.to_string(), BTreeSet::new()))
            .collect();
        for subscriber in Resources::load().subscribers {
            for fact in subscriber.facts {
                configured.entry(fact).or_default().insert(subscriber.name.clone());
            }
        }
        assert_eq!(listed, configured, "ARCHITECTURE.md's facts table differs from infra/resources.json");
    }
}
