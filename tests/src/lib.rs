//! The harness of the integration tests: a freshly provisioned stack (its own
//! stage prefix, so tests share one emulator without seeing each other's
//! resources), the dev host in front of it, and waits on conditions.
//!
//! The emulator is started by `make test` (scripts/test.sh), which exports
//! `BATON_AWS_ENDPOINT`. Nothing here mocks AWS.

pub mod history;
pub mod hooks;
pub mod http;
pub mod logs;
pub mod provisioners;
pub mod runners;
pub mod runs;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_lambda_events::sqs::SqsEvent;
use baton_api::facts::ALL_DETAIL_TYPES;
use baton_devhost::sqs::SqsHandler;
use baton_devhost::{function_env, DevHost, HostOptions};
use baton_localstack::provision::{default_infra_dir, provision, Plan, PlannedQueue, PlannedRule, Provisioned};
use baton_localstack::resources::{Naming, Resources};
use baton_localstack::schema::validate;
use baton_service::aws::AwsClients;
use baton_service::facts::subscriber::consume;
use baton_store::Store;

/// A fact as the capture subscriber received it, with the outcome of
/// validating it against its JSON Schema.
#[derive(Debug, Clone)]
pub struct Captured {
    pub detail_type: String,
    pub detail: serde_json::Value,
    pub schema_check: Result<(), String>,
}

/// Logical name of the subscriber every test stack adds to receive every fact.
pub const CAPTURE: &str = "capture";

/// One provisioned stack with the dev host running in front of it, and a
/// capture subscriber that receives every fact Baton publishes.
pub struct TestStack {
    /// An admin operator token (`bat_`), valid for every workspace.
    pub admin_token: String,
    pub captured: Arc<Mutex<Vec<Captured>>>,
    pub clients: AwsClients,
    pub provisioned: Provisioned,
    pub host: DevHost,
    pub api: String,
    pub http: reqwest::Client,
    pub store: Store,
    /// What the dev host was started with, to start it again.
    host_env: HashMap<String, String>,
    host_options: HostOptions,
}

/// The emulator's endpoint; the tests cannot run without it.
pub fn endpoint() -> String {
    std::env::var("BATON_AWS_ENDPOINT")
        .unwrap_or_else(|_| panic!("BATON_AWS_ENDPOINT is not set: run the tests with `make test`, which starts moto"))
}

/// How long a test waits for the pipeline to carry something (a fact, a
/// queued job, a claim).
pub const WAIT: Duration = Duration::from_secs(60);

/// A workspace no other test uses.
pub fn workspace() -> String {
    format!("ws-{}", &uuid::Uuid::now_v7().simple().to_string()[20..])
}

/// A stage name no other test uses.
pub fn unique_stage() -> String {
    use rand::Rng;
    let n: u64 = rand::rng().random();
    format!("t{:010x}", n & 0xff_ffff_ffff)
}

/// Settings that make tests fast: short retry delays; everything else is the
/// production default unless a test overrides it.
pub fn test_env() -> HashMap<String, String> {
    HashMap::new()
}

impl TestStack {
    pub async fn start() -> Self {
        Self::start_with(|_| {}, HashMap::new()).await
    }

    /// A stack whose plan `customize` may extend (a probe subscriber, …) and
    /// whose functions see `overrides` in their configuration.
    pub async fn start_with(customize: impl FnOnce(&mut Plan), overrides: HashMap<String, String>) -> Self {
        Self::start_custom(customize, overrides, HostOptions::default()).await
    }

    /// As [`TestStack::start_with`], with the dev host's options (extra SQS
    /// functions, delays) chosen by the test.
    pub async fn start_custom(
        customize: impl FnOnce(&mut Plan),
        overrides: HashMap<String, String>,
        mut options: HostOptions,
    ) -> Self {
        // The functions' JSON logs; nextest shows them for a failing test.
        baton_telemetry::logs::init();
        let captured: Arc<Mutex<Vec<Captured>>> = Arc::default();
        options.extra_sqs_functions.insert(CAPTURE.into(), capture_handler(captured.clone()));
        let clients = AwsClients::local(&endpoint()).await;
        let mut plan = Plan::new(&Resources::load(), &Naming::for_stage(&unique_stage()), &default_infra_dir())
            .expect("the plan builds from resources.json");
        // The harness's observer must never be the weakest subscriber: under
        // the chaos suite's `trigger.sqs` faults its deliveries are abandoned
        // and duplicated like any other, and with 5 receives a fact could
        // reach its dead letters (seen once in `make test`), failing a run
        // for nothing Baton did.
        add_subscriber(&mut plan, CAPTURE, ALL_DETAIL_TYPES.iter().map(|d| d.to_string()).collect(), 20);
        customize(&mut plan);
        Self::assemble(clients, &plan, overrides, options, captured).await
    }

    /// Every captured fact so far, as `(detail type, detail)`, in the order
    /// they arrived (evidence a failing soak keeps).
    pub fn all_facts(&self) -> Vec<(String, serde_json::Value)> {
        let captured = self.captured.lock().unwrap_or_else(|e| e.into_inner());
        captured.iter().map(|c| (c.detail_type.clone(), c.detail.clone())).collect()
    }

    /// The captured facts of `detail_type` so far.
    pub fn facts(&self, detail_type: &str) -> Vec<serde_json::Value> {
        let captured = self.captured.lock().unwrap_or_else(|e| e.into_inner());
        captured.iter().filter(|c| c.detail_type == detail_type).map(|c| c.detail.clone()).collect()
    }

    /// Waits until a fact of `detail_type` matching `pred` was published.
    pub async fn wait_fact(
        &self,
        detail_type: &str,
        timeout: Duration,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        wait_for(&format!("a {detail_type} fact"), timeout, || async {
            self.facts(detail_type).into_iter().find(|d| pred(d))
        })
        .await
    }

    /// Every fact published so far validated against its schema.
    pub fn assert_all_facts_valid(&self) {
        let captured = self.captured.lock().unwrap_or_else(|e| e.into_inner());
        for fact in captured.iter() {
            if let Err(err) = &fact.schema_check {
                panic!("{} does not match its schema: {err}\n{:#}", fact.detail_type, fact.detail);
            }
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.api)
    }

    /// A stack provisioned from `plan` exactly as given (no capture
    /// subscriber is added), on `clients` — the benchmark passes clients that
    /// count requests, so the dev host's functions use them too.
    pub async fn start_on(
        clients: AwsClients,
        plan: &Plan,
        overrides: HashMap<String, String>,
        options: HostOptions,
    ) -> Self {
        Self::assemble(clients, plan, overrides, options, Arc::default()).await
    }

    /// Provisions `plan`, starts the dev host on it with an admin token and
    /// `overrides`, and keeps `captured` (what a capture subscriber, if the
    /// plan has one, collects).
    async fn assemble(
        clients: AwsClients,
        plan: &Plan,
        overrides: HashMap<String, String>,
        options: HostOptions,
        captured: Arc<Mutex<Vec<Captured>>>,
    ) -> Self {
        let provisioned = provision(&clients, plan).await.expect("provisioning on the emulator");
        let admin_token = baton_domain::tokens::new_operator_token();
        let mut env = test_env();
        env.insert("BATON_ADMIN_TOKEN".into(), admin_token.clone());
        env.extend(overrides);
        let env = function_env(&provisioned, &env);
        let host = DevHost::start(&clients, &provisioned, &env, options.clone()).await.expect("dev host starts");
        let api = host.api_url.clone();
        let store = Store::new(clients.dynamodb().clone(), provisioned.table.clone());
        Self {
            admin_token,
            captured,
            clients,
            provisioned,
            host,
            api,
            http: reqwest::Client::new(),
            store,
            host_env: env,
            host_options: options,
        }
    }

    /// A new operator token scoped to workspace `ws` (what `baton-ops`
    /// mints), unnamed and in no group.
    pub async fn workspace_token(&self, ws: &str) -> String {
        self.named_token(ws, None, &[]).await
    }

    /// A new operator token of workspace `ws` with a name and groups: an
    /// approver (behaviour.md §16).
    pub async fn approver_token(&self, ws: &str, name: &str, groups: &[&str]) -> String {
        self.named_token(ws, Some(name), groups).await
    }

    async fn named_token(&self, ws: &str, name: Option<&str>, groups: &[&str]) -> String {
        let token = baton_domain::tokens::new_operator_token();
        let groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        self.store.put_operator_token_in_groups(&token, Some(ws), name, &groups).await.expect("an operator token");
        token
    }

    /// Kills the dev host as a crash would (every invocation in flight is
    /// dropped where it stands), then provisions the stage again over the
    /// same emulator and starts a new dev host on it: what a developer does
    /// after `baton-devhost run` died. The API moves to a new port.
    pub async fn crash_and_restart_host(&mut self) {
        self.host.abort();
        self.provisioned =
            provision(&self.clients, &self.provisioned.plan).await.expect("provisioning again keeps the stage");
        self.host = DevHost::start(&self.clients, &self.provisioned, &self.host_env, self.host_options.clone())
            .await
            .expect("the dev host starts again");
        self.api = self.host.api_url.clone();
    }
}

/// Adds a subscriber (rule → queue with DLQ) to the plan, for a function the
/// test mounts itself.
/// Dev host options whose `function`'s queue only acknowledges what it
/// receives: a test that must show a path works without that subscriber
/// (its messages are taken and dropped, as if it were never there).
pub fn options_without_subscriber(function: &str) -> HostOptions {
    let mut options = HostOptions::default();
    let acknowledge: SqsHandler = Arc::new(|_| Box::pin(async { Ok(Default::default()) }));
    options.extra_sqs_functions.insert(function.into(), acknowledge);
    options
}

pub fn add_subscriber(plan: &mut Plan, logical: &str, facts: Vec<String>, max_receive_count: u32) {
    let name = format!("{}{logical}", plan.prefix);
    plan.queues.push(PlannedQueue {
        logical: logical.into(),
        name: name.clone(),
        dlq_name: format!("{name}-dlq"),
        function: logical.into(),
        visibility_timeout_s: 30,
        max_receive_count,
        batch_size: 10,
    });
    plan.rules.push(PlannedRule {
        name: name.clone(),
        queue: name,
        event_pattern: serde_json::json!({"detail-type": facts}),
    });
}

fn capture_handler(captured: Arc<Mutex<Vec<Captured>>>) -> SqsHandler {
    Arc::new(move |event: SqsEvent| {
        let captured = captured.clone();
        Box::pin(async move {
            Ok(consume(event, |delivered| {
                let captured = captured.clone();
                async move {
                    let schema_check = validate(&delivered.detail_type, &delivered.detail);
                    captured.lock().unwrap_or_else(|e| e.into_inner()).push(Captured {
                        detail_type: delivered.detail_type,
                        detail: delivered.detail,
                        schema_check,
                    });
                    Ok(())
                }
            })
            .await)
        })
    })
}

/// Polls `check` until it yields a value, failing the test after `timeout`.
/// Tests wait on conditions, never on bare sleeps.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
