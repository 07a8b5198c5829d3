//! Fault injection for the local stack: AWS failing the way it fails on a
//! busy day, which moto never does (it serialises requests, never throttles,
//! never loses a response after applying a write).
//!
//! Off unless `BATON_FAULTS` is set, and in the `baton-localstack` crate,
//! which only the dev host, the tests and the bench depend on: a deployed
//! function cannot inject faults. It sits in the HTTP client of every AWS
//! client the local stack builds (`AwsClients::local`), below the SDK's own
//! retries, so a fault meets the SDK exactly as a real one would: throttling
//! and 500s are retried by the SDK, a transaction conflict is not, and a
//! write whose response was lost is sent again by the SDK's retry.
//!
//! `BATON_FAULTS` is a `;`-separated list: `seed=<u64>` and rules
//! `<service>[.<Operation>]:<fault>=<rate>` (service and operation may be
//! `*`), for example
//!
//! ```text
//! seed=7;dynamodb:conflict=0.05;dynamodb:throttle=0.02;*:lost=0.02;events.PutEvents:partial=0.1
//! ```
//!
//! | fault | on | what the client sees |
//! | --- | --- | --- |
//! | `conflict` | DynamoDB writes | `TransactionCanceledException` with a `TransactionConflict` reason (transactions), `TransactionConflictException` (single-item writes); nothing applied |
//! | `throttle` | DynamoDB | `ProvisionedThroughputExceededException`; nothing applied |
//! | `server-error` | any | 500 `InternalServerError`; nothing applied |
//! | `lost` | any | the request **is applied**, then its response is lost (500) |
//! | `partial` | `events.PutEvents` | some entries fail with `InternalFailure` inside a 200; those are not delivered |
//! | `invalid-token` | `states.SendTask*` | the request is applied, then `InvalidToken` (as for a token already used) |
//! | `task-timed-out` | `states.SendTask*` | `TaskTimedOut`; nothing applied |
//! | `integration-throttled` | `states.sendMessage` | Step Functions' own `sqs:sendMessage` of a `.waitForTaskToken` task (the `Step` task) is throttled: the task fails with `SQS.AmazonSQSException` and its message never arrives (moto sends the message itself, so the dev host's poller of the task queue fails the task with `SendTaskFailure` instead of handing the message over) |
//! | `duplicate` | `trigger.sqs`, `trigger.stream` | the dev host delivers a handled message (a batch of stream records) again, as SQS and Lambda do at least once |
//! | `reorder` | `trigger.sqs` | the dev host hands a batch over in reverse order |
//! | `late` | `trigger.sqs`, `trigger.stream` | the dev host holds a batch `late_ms` (plan option, default 3000) before the function sees it; later messages of the queue overtake it |
//! | `abandon` | `trigger.sqs`, `trigger.stream` | the invocation is dropped right after its first AWS write answered (a Lambda timeout or crash), and the batch is delivered again as Lambda would |
//! | `replay` | `trigger.http` | the client hears 504 at once while the invocation runs on to its end, unheard: the client's retry then runs beside it, as a retry after a timeout does on AWS |
//!
//! Besides the rules, `late_ms=<ms>` sets how long a `late` delivery is held,
//! and `index_lag_ms=<ms>` makes index reads lag that long behind the
//! writes of the plan's clients (`crate::index_lag`).
//!
//! `states.sendMessage` is not a request of the functions: it stands for
//! the state machine's service integration, decided once per task message
//! that carries a token.
//!
//! A trigger's operation is `sqs.<function>` or `stream.<function>`; a rule
//! for `trigger.sqs` covers every queue, one for `trigger.sqs.job-outcomes`
//! one function's.
//!
//! What AWS guarantees stays true under the faults: a `TransactWriteItems`
//! sent again with the `ClientRequestToken` of one that succeeded succeeds
//! without applying anything again (moto ignores the token; this layer
//! keeps the promise, so a lost response is as survivable here as on AWS).
//!
//! Deterministic by seed: the k-th request of each operation meets the same
//! fault in every run with the same seed, so a failing run can be replayed
//! (concurrency can still change which request is the k-th).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::byte_stream::ByteStream;
use rand::{Rng, SeedableRng};

use crate::grants::{Action, Grants};
use crate::index_lag::{IndexLag, Item, Written};

/// How long a `late` delivery is held unless the plan says (`late_ms`).
pub const DEFAULT_LATE_MS: u64 = 3000;

/// The environment variable that switches faults on.
pub const FAULTS_ENV: &str = "BATON_FAULTS";

/// The "service" of the dev host's triggers (`trigger.sqs`, `trigger.stream`):
/// not AWS requests, the deliveries the dev host makes as Lambda would.
pub const TRIGGER: &str = "trigger";

/// A kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fault {
    Conflict,
    Throttle,
    ServerError,
    Lost,
    Partial,
    InvalidToken,
    TaskTimedOut,
    /// A trigger delivers a message or a batch of records again.
    Duplicate,
    /// A trigger delivers a batch in another order.
    Reorder,
    /// A trigger holds a batch back before delivering it.
    Late,
    /// A trigger drops an invocation after its first AWS write, then
    /// delivers the batch again.
    Abandon,
    /// The API answers 504 at once while the invocation runs on: the client
    /// (which gave up, as after the gateway's 30 s or its own timeout)
    /// sends its retry while the first invocation still runs.
    Replay,
    /// Step Functions' `sqs:sendMessage` of a callback task is throttled.
    IntegrationThrottled,
}

/// The "operation" of Step Functions' own `sqs:sendMessage` of a
/// `.waitForTaskToken` task (`states.sendMessage`): the dev host decides it
/// once per task message it receives with a token.
pub const INTEGRATION: (&str, &str) = ("states", "sendMessage");

impl Fault {
    fn parse(raw: &str) -> Option<Self> {
        Some(match raw {
            "conflict" => Fault::Conflict,
            "throttle" => Fault::Throttle,
            "server-error" => Fault::ServerError,
            "lost" => Fault::Lost,
            "partial" => Fault::Partial,
            "invalid-token" => Fault::InvalidToken,
            "task-timed-out" => Fault::TaskTimedOut,
            "duplicate" => Fault::Duplicate,
            "reorder" => Fault::Reorder,
            "late" => Fault::Late,
            "abandon" => Fault::Abandon,
            "replay" => Fault::Replay,
            "integration-throttled" => Fault::IntegrationThrottled,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Fault::Conflict => "conflict",
            Fault::Throttle => "throttle",
            Fault::ServerError => "server-error",
            Fault::Lost => "lost",
            Fault::Partial => "partial",
            Fault::InvalidToken => "invalid-token",
            Fault::TaskTimedOut => "task-timed-out",
            Fault::Duplicate => "duplicate",
            Fault::Reorder => "reorder",
            Fault::Late => "late",
            Fault::Abandon => "abandon",
            Fault::Replay => "replay",
            Fault::IntegrationThrottled => "integration-throttled",
        }
    }

    /// Whether this fault can happen to `service`'s `operation` at all.
    fn applies_to(self, service: &str, operation: &str) -> bool {
        let dynamodb_write = service == "dynamodb"
            && matches!(operation, "PutItem" | "UpdateItem" | "DeleteItem" | "TransactWriteItems");
        let integration = (service, operation) == INTEGRATION;
        match self {
            Fault::Conflict => dynamodb_write,
            Fault::Throttle => service == "dynamodb",
            // A trigger loses an answer only where there is a client to
            // lose it: the API (`trigger.http`). The state machine's own
            // call answers nobody of ours.
            Fault::ServerError | Fault::Lost => (service != TRIGGER || covers("http", operation)) && !integration,
            Fault::IntegrationThrottled => integration,
            Fault::Partial => service == "events" && operation == "PutEvents",
            Fault::InvalidToken | Fault::TaskTimedOut => service == "states" && operation.starts_with("SendTask"),
            Fault::Duplicate | Fault::Late | Fault::Abandon => service == TRIGGER,
            Fault::Reorder => service == TRIGGER && covers("sqs", operation),
            Fault::Replay => service == TRIGGER && covers("http", operation),
        }
    }
}

/// Whether a rule's operation `rule` covers `operation`: the same, or a
/// trigger's kind (`sqs`) covering each function's (`sqs.enqueue`).
fn covers(rule: &str, operation: &str) -> bool {
    operation == rule || operation.strip_prefix(rule).is_some_and(|rest| rest.starts_with('.'))
}

/// One `<service>[.<Operation>]:<fault>=<rate>` rule.
#[derive(Debug, Clone, PartialEq)]
struct Rule {
    service: Option<String>,
    operation: Option<String>,
    fault: Fault,
    rate: f64,
}

/// A bad `BATON_FAULTS`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{FAULTS_ENV}: {0}")]
pub struct FaultsError(String);

/// Which faults to inject, and what was injected so far.
pub struct FaultPlan {
    seed: u64,
    /// How long a `late` delivery is held.
    late: std::time::Duration,
    rules: Vec<Rule>,
    /// Requests seen, by `service.Operation`: the k of the k-th request.
    seen: Mutex<HashMap<String, u64>>,
    /// Faults injected, by kind and `service.Operation`.
    injected: Mutex<BTreeMap<(Fault, String), u64>>,
    /// `ClientRequestToken`s of transactions that were applied.
    applied_transactions: Arc<Mutex<std::collections::HashSet<String>>>,
    /// A test holds the faults back while it sets a scene up, and lets them
    /// loose for the moment it means to test (`pause`, `resume`).
    paused: std::sync::atomic::AtomicBool,
    /// Index reads lagging behind the writes (`index_lag_ms`), if asked.
    index_lag: Option<Arc<IndexLag>>,
}

impl fmt::Debug for FaultPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultPlan")
            .field("seed", &self.seed)
            .field("rules", &self.rules)
            .field("index_lag", &self.index_lag())
            .finish()
    }
}

impl FaultPlan {
    /// Parses a plan; `Ok(None)` for an empty one (no rule, no fault).
    pub fn parse(raw: &str) -> Result<Option<Self>, FaultsError> {
        let mut seed = 0;
        let mut late_ms = DEFAULT_LATE_MS;
        let mut index_lag_ms = 0;
        let mut rules = Vec::new();
        for part in raw.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part.split_once('=').ok_or_else(|| FaultsError(format!("`{part}` has no `=`")))?;
            if key == "seed" {
                seed = value.parse().map_err(|_| FaultsError(format!("seed `{value}` is not a number")))?;
                continue;
            }
            if key == "late_ms" {
                late_ms = value.parse().map_err(|_| FaultsError(format!("late_ms `{value}` is not a number")))?;
                continue;
            }
            if key == "index_lag_ms" {
                index_lag_ms =
                    value.parse().map_err(|_| FaultsError(format!("index_lag_ms `{value}` is not a number")))?;
                continue;
            }
            let (target, fault) = key
                .split_once(':')
                .ok_or_else(|| FaultsError(format!("`{key}` is not <service>[.<Operation>]:<fault>")))?;
            let fault = Fault::parse(fault).ok_or_else(|| FaultsError(format!("unknown fault `{fault}`")))?;
            let rate: f64 = value.parse().map_err(|_| FaultsError(format!("rate `{value}` is not a number")))?;
            if !(0.0..=1.0).contains(&rate) {
                return Err(FaultsError(format!("rate {rate} is not between 0 and 1")));
            }
            let (service, operation) = match target.split_once('.') {
                Some((service, operation)) => (service, Some(operation)),
                None => (target, None),
            };
            let named = |s: &str| (s != "*").then(|| s.to_string());
            rules.push(Rule { service: named(service), operation: operation.and_then(named), fault, rate });
        }
        if rules.is_empty() && index_lag_ms == 0 {
            return Ok(None);
        }
        let index_lag = (index_lag_ms > 0).then(|| {
            let lag = std::time::Duration::from_millis(index_lag_ms);
            Arc::new(IndexLag::new(lag, crate::resources::Resources::load().table))
        });
        Ok(Some(Self {
            seed,
            late: std::time::Duration::from_millis(late_ms),
            rules,
            seen: Mutex::default(),
            injected: Mutex::default(),
            applied_transactions: Arc::default(),
            paused: Default::default(),
            index_lag,
        }))
    }

    /// A plan that injects nothing: the local stack's HTTP client with only
    /// AWS's limits.
    pub fn none() -> Self {
        Self {
            seed: 0,
            late: std::time::Duration::from_millis(DEFAULT_LATE_MS),
            rules: Vec::new(),
            seen: Mutex::default(),
            injected: Mutex::default(),
            applied_transactions: Arc::default(),
            paused: Default::default(),
            index_lag: None,
        }
    }

    /// The plan `BATON_FAULTS` describes, if it is set and not empty.
    pub fn from_env() -> Result<Option<Self>, FaultsError> {
        match std::env::var(FAULTS_ENV) {
            Ok(raw) => Self::parse(&raw),
            Err(_) => Ok(None),
        }
    }

    /// Injects nothing until [`FaultPlan::resume`]: requests meanwhile are
    /// not counted either, so a plan's sequence starts where it left off.
    pub fn pause(&self) {
        self.paused.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Injects again after [`FaultPlan::pause`].
    pub fn resume(&self) {
        self.paused.store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// The fault the next request of `service`'s `operation` meets, if any.
    pub fn decide(&self, service: &str, operation: &str) -> Option<Fault> {
        if self.paused.load(std::sync::atomic::Ordering::SeqCst) {
            return None;
        }
        let name = format!("{service}.{operation}");
        let k = {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            let k = seen.entry(name.clone()).or_default();
            *k += 1;
            *k
        };
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (self.seed, &name, k).hash(&mut hasher);
        let mut rng = rand::rngs::StdRng::seed_from_u64(hasher.finish());
        let fault = self.rules.iter().find_map(|rule| {
            let matches = rule.service.as_deref().is_none_or(|s| s == service)
                && rule.operation.as_deref().is_none_or(|o| covers(o, operation))
                && rule.fault.applies_to(service, operation);
            // Draw for every rule that matches, so adding a rule for another
            // operation leaves this one's sequence unchanged.
            (matches && rng.random::<f64>() < rule.rate).then_some(rule.fault)
        })?;
        *self.injected.lock().unwrap_or_else(|e| e.into_inner()).entry((fault, name)).or_default() += 1;
        Some(fault)
    }

    /// How long a `late` delivery is held.
    pub fn late(&self) -> std::time::Duration {
        self.late
    }

    /// How far index reads lag behind the writes (zero: not at all).
    pub fn index_lag(&self) -> std::time::Duration {
        self.index_lag.as_ref().map_or_else(std::time::Duration::default, |lag| lag.lag())
    }

    /// Requests of `service`'s `operation` seen so far (those made while
    /// the plan was paused are not counted).
    pub fn requests(&self, service: &str, operation: &str) -> u64 {
        let name = format!("{service}.{operation}");
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).get(&name).copied().unwrap_or(0)
    }

    /// Faults injected so far, by kind, then by `service.Operation`.
    pub fn injected(&self) -> BTreeMap<(Fault, String), u64> {
        self.injected.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Faults injected so far, by kind (with the index lag on, the index
    /// reads it answered stale as `stale-index-read`).
    pub fn injected_by_kind(&self) -> BTreeMap<&'static str, u64> {
        let mut by_kind = BTreeMap::new();
        for ((fault, _), n) in self.injected() {
            *by_kind.entry(fault.as_str()).or_default() += n;
        }
        if let Some(lag) = &self.index_lag {
            by_kind.insert("stale-index-read", lag.stale_reads());
        }
        by_kind
    }
}

/// The service and operation of a request of the JSON protocols the local
/// stack speaks (`X-Amz-Target: DynamoDB_20120810.PutItem`).
fn target(request: &HttpRequest) -> Option<(&'static str, String)> {
    let target = request.headers().get("x-amz-target")?;
    let (prefix, operation) = target.split_once('.')?;
    let service = match prefix {
        p if p.starts_with("DynamoDBStreams") => "streams",
        p if p.starts_with("DynamoDB") => "dynamodb",
        "AmazonSQS" => "sqs",
        "AWSEvents" => "events",
        "AWSStepFunctions" => "states",
        _ => return None,
    };
    Some((service, operation.to_string()))
}

/// The service and operation of any request the SDK sends (the JSON
/// protocols by their target; S3 and the management API, which are REST,
/// by the SDK's user agent, method and query), and the resource a scoped
/// grant is checked against.
fn iam_action(request: &HttpRequest) -> Option<(String, String, Option<String>)> {
    if let Some((service, operation)) = target(request) {
        let body: Option<serde_json::Value> = request.body().bytes().and_then(|b| serde_json::from_slice(b).ok());
        let resource = body.and_then(|b| {
            ["QueueUrl", "stateMachineArn", "executionArn"]
                .iter()
                .find_map(|field| b.get(*field).and_then(|v| v.as_str()).map(str::to_string))
        });
        return Some((service.to_string(), operation, resource));
    }
    if let Some(action) = provisioner_action(request) {
        return Some(action);
    }
    let agent = request.headers().get("x-amz-user-agent").or_else(|| request.headers().get("user-agent"))?;
    let method = request.method();
    let query = request.uri().split_once('?').map(|(_, q)| q).unwrap_or("");
    let has = |key: &str| query.split('&').any(|pair| pair == key || pair.starts_with(&format!("{key}=")));
    if agent.contains("api/s3/") {
        let operation = match method {
            "GET" if has("list-type") => "ListObjectsV2",
            "GET" => "GetObject",
            "HEAD" => "HeadObject",
            "PUT" if has("uploadId") => "UploadPart",
            "PUT" => "PutObject",
            "POST" if has("uploads") => "CreateMultipartUpload",
            "POST" => "CompleteMultipartUpload",
            "DELETE" if has("uploadId") => "AbortMultipartUpload",
            "DELETE" => "DeleteObject",
            _ => return None,
        };
        return Some(("s3".into(), operation.into(), None));
    }
    if agent.contains("api/apigatewaymanagement") && method == "POST" {
        return Some(("apigatewaymanagement".into(), "PostToConnection".into(), None));
    }
    if agent.contains("api/scheduler") {
        // REST: `/schedules[/{Name}]` by method, `/schedule-groups/…`.
        let path = request.uri().split('?').next().unwrap_or("");
        let path = path.split_once("://").map_or(path, |(_, rest)| rest.find('/').map_or("", |at| &rest[at..]));
        let one = path.starts_with("/schedules/");
        let operation = match (method, path) {
            ("GET", "/schedules") => "ListSchedules",
            ("POST", _) if one => "CreateSchedule",
            ("GET", _) if one => "GetSchedule",
            ("PUT", _) if one => "UpdateSchedule",
            ("DELETE", _) if one => "DeleteSchedule",
            (_, p) if p.starts_with("/schedule-groups") => match method {
                "POST" => "CreateScheduleGroup",
                "GET" => "GetScheduleGroup",
                _ => "DeleteScheduleGroup",
            },
            _ => return None,
        };
        return Some(("scheduler".into(), operation.into(), None));
    }
    None
}

/// The IAM action of the AWS provisioner's requests (functions/aws-provisioner),
/// for its grants only: SSM (JSON, its parameter's `Name` or `Path` as the
/// resource) and EC2 (the Query protocol: `Action=…` in a form body). Apart
/// from `target`, so the fault plans of the other functions are unchanged.
fn provisioner_action(request: &HttpRequest) -> Option<(String, String, Option<String>)> {
    let body = request.body().bytes();
    if let Some(operation) = request.headers().get("x-amz-target").and_then(|t| t.strip_prefix("AmazonSSM.")) {
        let body: Option<serde_json::Value> = body.and_then(|b| serde_json::from_slice(b).ok());
        // GetParameters names several: the first stands for them (the
        // claim asks one workspace's secrets at a time).
        let resource = body.and_then(|b| {
            ["Name", "Path"]
                .iter()
                .find_map(|field| b.get(*field).and_then(|v| v.as_str()).map(str::to_string))
                .or_else(|| b.get("Names")?.get(0)?.as_str().map(str::to_string))
        });
        return Some(("ssm".into(), operation.to_string(), resource));
    }
    let (action, _) = ec2_action(request)?;
    Some(("ec2".into(), action.to_string(), None))
}

/// An EC2 request's action and form body (the Query protocol: `Action=…`
/// in a form body).
fn ec2_action(request: &HttpRequest) -> Option<(&str, &[u8])> {
    let agent = request.headers().get("x-amz-user-agent").or_else(|| request.headers().get("user-agent"))?;
    if !agent.contains("api/ec2") {
        return None;
    }
    let body = request.body().bytes()?;
    // Action names are plain ASCII words: no decoding needed.
    let action = std::str::from_utf8(body).ok()?.split('&').find_map(|pair| pair.strip_prefix("Action="))?;
    Some((action, body))
}

/// AWS's refusal of an EC2 request (the Query protocol: `Action=…` in a
/// form body) over a limit moto does not enforce.
fn ec2_limit(request: &HttpRequest) -> Option<crate::aws_limits::Refusal> {
    let (action, body) = ec2_action(request)?;
    crate::aws_limits::ec2_refusal(action, body)
}

/// An error as EC2 answers it: XML, the code and message under `Errors`.
fn ec2_error(refused: &crate::aws_limits::Refusal) -> HttpResponse {
    let escape = |text: &str| text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{}</Code><Message>{}</Message></Error></Errors><RequestID>local</RequestID></Response>",
        escape(refused.error),
        escape(&refused.message)
    );
    let status =
        StatusCode::try_from(refused.status).unwrap_or_else(|_| StatusCode::try_from(400).expect("400 is a status"));
    let mut response = HttpResponse::new(status, SdkBody::from(body));
    response.headers_mut().insert("content-type", "text/xml;charset=UTF-8");
    response
}

/// AWS's answer to a request `grants` do not allow, if they do not.
fn access_denied(grants: &Grants, request: &HttpRequest) -> Option<HttpResponse> {
    let (service, operation, resource) = iam_action(request)?;
    let action = Action { service: &service, operation: &operation, resource: resource.as_deref() };
    if grants.allows(&action) {
        return None;
    }
    let message = format!(
        "User: arn:aws:sts::123456789012:assumed-role/{0}/{0} is not authorized to perform: {service}:{operation} \
         (infra/resources.json grants function {0} no permission for it)",
        grants.function
    );
    tracing::error!(function = %grants.function, service, operation, "access denied as on AWS: a grant is missing");
    Some(match service.as_str() {
        // The REST services answer 403 with an XML error.
        "s3" | "apigatewaymanagement" => {
            let status = StatusCode::try_from(403).expect("403 is a status");
            let body = format!("<Error><Code>AccessDenied</Code><Message>{message}</Message></Error>");
            let mut response = HttpResponse::new(status, SdkBody::from(body));
            response.headers_mut().insert("content-type", "application/xml");
            response.headers_mut().insert("x-amzn-errortype", "AccessDeniedException");
            response
        }
        // EC2 (the Query protocol) answers 403 `UnauthorizedOperation` in its own XML.
        "ec2" => {
            let status = StatusCode::try_from(403).expect("403 is a status");
            let body = format!(
                "<Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>{message}</Message></Error>\
                 </Errors><RequestID>baton-local</RequestID></Response>"
            );
            let mut response = HttpResponse::new(status, SdkBody::from(body));
            response.headers_mut().insert("content-type", "text/xml");
            response
        }
        _ => aws_error(400, "AccessDeniedException", &message, None),
    })
}

/// The HTTP client of the local stack with faults: wraps the real one.
#[derive(Debug, Clone)]
pub struct FaultyHttpClient {
    inner: SharedHttpClient,
    plan: Arc<FaultPlan>,
    /// The function's IAM grants (`crate::grants`); `None`: every request
    /// is allowed, as the emulator allows it.
    grants: Option<Arc<Grants>>,
    latencies: Arc<Vec<Latency>>,
    describe_lag: Option<Arc<crate::ec2_lag::DescribeLag>>,
}

/// How long AWS takes to answer one operation, where the emulator answers
/// at once (`RunInstances` takes 0.5–2 s on AWS): a loop of such calls
/// meets its function's timeout locally as it would on AWS.
#[derive(Debug, Clone)]
struct Latency {
    service: String,
    operation: String,
    delay: std::time::Duration,
}

impl FaultyHttpClient {
    pub fn new(inner: SharedHttpClient, plan: Arc<FaultPlan>) -> Self {
        Self { inner, plan, grants: None, latencies: Arc::new(Vec::new()), describe_lag: None }
    }

    /// The same client, refusing what `grants` do not allow.
    pub fn with_grants(mut self, grants: Option<Arc<Grants>>) -> Self {
        self.grants = grants;
        self
    }

    /// The same client, its `DescribeInstances` missing the instances its
    /// `RunInstances` launched less than `window` ago (`crate::ec2_lag`).
    pub fn with_describe_lag(mut self, window: std::time::Duration) -> Self {
        self.describe_lag = Some(Arc::new(crate::ec2_lag::DescribeLag::new(window)));
        self
    }

    /// The same client, answering `service`'s `operation` (as IAM names
    /// them: `ec2`, `RunInstances`) only after `delay`.
    pub fn with_latency(mut self, service: &str, operation: &str, delay: std::time::Duration) -> Self {
        let mut latencies = self.latencies.as_ref().clone();
        latencies.push(Latency { service: service.into(), operation: operation.into(), delay });
        self.latencies = Arc::new(latencies);
        self
    }
}

impl HttpClient for FaultyHttpClient {
    fn http_connector(&self, settings: &HttpConnectorSettings, components: &RuntimeComponents) -> SharedHttpConnector {
        SharedHttpConnector::new(FaultyConnector {
            inner: self.inner.http_connector(settings, components),
            plan: self.plan.clone(),
            grants: self.grants.clone(),
            latencies: self.latencies.clone(),
            describe_lag: self.describe_lag.clone(),
        })
    }
}

#[derive(Debug)]
struct FaultyConnector {
    inner: SharedHttpConnector,
    plan: Arc<FaultPlan>,
    grants: Option<Arc<Grants>>,
    latencies: Arc<Vec<Latency>>,
    describe_lag: Option<Arc<crate::ec2_lag::DescribeLag>>,
}

tokio::task_local! {
    /// Set while the dev host runs an invocation it will abandon: told when
    /// the invocation's first AWS write has answered.
    static WROTE: Arc<tokio::sync::Notify>;
}

/// Runs one invocation as Lambda does when the function times out or
/// crashes right after its first AWS write: the write stands, the rest of
/// the invocation never happens. `None` if it was abandoned so (the caller
/// delivers the batch again); the invocation's output if it wrote nothing.
/// Only requests made by the invocation's own task are seen.
pub async fn abandoned_after_first_write<F: std::future::Future>(invocation: F) -> Option<F::Output> {
    let wrote = Arc::new(tokio::sync::Notify::new());
    // Boxed: an invocation's future is large.
    let invocation = Box::pin(WROTE.scope(wrote.clone(), invocation));
    tokio::select! {
        biased;
        _ = wrote.notified() => None,
        output = invocation => Some(output),
    }
}

/// Requests that change something (what an abandoned invocation leaves
/// behind).
fn is_write(service: &str, operation: &str) -> bool {
    match service {
        "dynamodb" => {
            matches!(operation, "PutItem" | "UpdateItem" | "DeleteItem" | "TransactWriteItems" | "BatchWriteItem")
        }
        "states" => operation.starts_with("SendTask") || matches!(operation, "StartExecution" | "StopExecution"),
        "events" => operation == "PutEvents",
        "sqs" => operation.starts_with("SendMessage"),
        _ => false,
    }
}

impl HttpConnector for FaultyConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        // IAM first: a request the function's role may not make never
        // reaches the service.
        if let Some(grants) = &self.grants {
            if let Some(denied) = access_denied(grants, &request) {
                return ready(denied);
            }
        }
        // AWS's limits next, faults or not: what AWS would refuse is
        // refused here, as AWS refuses it.
        // SSM's too: it is no service of the fault plans (`target`), but its
        // limits hold for whoever sends to it.
        let ssm = request.headers().get("x-amz-target").and_then(|t| t.strip_prefix("AmazonSSM."));
        let limited = target(&request).or_else(|| ssm.map(|operation| ("ssm", operation.to_string())));
        if let Some((service, operation)) = limited {
            let refused = request.body().bytes().and_then(|body| crate::aws_limits::refusal(service, &operation, body));
            if let Some(refused) = refused {
                tracing::warn!(service, operation, error = refused.error, message = %refused.message,
                    "refused as AWS would: a limit the emulator does not enforce");
                return ready(aws_error(refused.status, refused.error, &refused.message, None));
            }
        }
        let scheduler = iam_action(&request).filter(|(service, _, _)| service == "scheduler");
        if let Some((service, operation, _)) = scheduler {
            let refused =
                request.body().bytes().and_then(|body| crate::aws_limits::refusal(&service, &operation, body));
            if let Some(refused) = refused {
                tracing::warn!(service, operation, error = refused.error, message = %refused.message,
                    "refused as AWS would: a limit the emulator does not enforce");
                return ready(aws_error(refused.status, refused.error, &refused.message, None));
            }
        }
        if let Some(refused) = ec2_limit(&request) {
            tracing::warn!(service = "ec2", error = refused.error, message = %refused.message,
                "refused as AWS would: a limit the emulator does not enforce");
            return ready(ec2_error(&refused));
        }
        let delay = iam_action(&request).and_then(|(service, operation, _)| {
            self.latencies.iter().find(|l| l.service == service && l.operation == operation).map(|l| l.delay)
        });
        let lagged = self.describe_lag.clone().zip(
            ec2_action(&request)
                .map(|(action, _)| action.to_string())
                .filter(|a| a == "RunInstances" || a == "DescribeInstances"),
        );
        let watched = target(&request).filter(|(service, operation)| is_write(service, operation));
        let sent = self.call_with_faults(request);
        let sent = match lagged {
            Some((lag, action)) => HttpConnectorFuture::new(async move {
                let mut response = sent.await?;
                if !response.status().is_success() {
                    return Ok(response);
                }
                let read = ByteStream::new(response.take_body()).collect().await.map(|b| b.into_bytes());
                let Ok(read) = read else { return Ok(error_response(500, "InternalServerError", None)) };
                let answer = String::from_utf8_lossy(&read).into_owned();
                let now = std::time::Instant::now();
                let answer = if action == "RunInstances" {
                    lag.launched(&answer, now);
                    answer
                } else {
                    lag.describe(&answer, now)
                };
                response.headers_mut().insert("content-length", answer.len().to_string());
                *response.body_mut() = SdkBody::from(answer);
                Ok(response)
            }),
            None => sent,
        };
        let sent = match delay {
            Some(delay) => HttpConnectorFuture::new(async move {
                tokio::time::sleep(delay).await;
                sent.await
            }),
            None => sent,
        };
        match (watched, WROTE.try_with(Arc::clone).ok()) {
            (Some(_), Some(wrote)) => HttpConnectorFuture::new(async move {
                let answer = sent.await;
                wrote.notify_one();
                answer
            }),
            _ => sent,
        }
    }
}

impl FaultyConnector {
    /// Sends `request` to the emulator, through the index lag when the
    /// plan has one (`crate::index_lag`): a DynamoDB write first reads the
    /// items it changes and, once answered, records them as they were; an
    /// index query is answered as the lagging index would.
    fn forward(&self, request: HttpRequest) -> HttpConnectorFuture {
        let Some(lag) = self.plan.index_lag.clone() else { return self.inner.call(request) };
        let Some(("dynamodb", operation)) = target(&request) else { return self.inner.call(request) };
        let body: Option<serde_json::Value> = request.body().bytes().and_then(|b| serde_json::from_slice(b).ok());
        let Some(body) = body else { return self.inner.call(request) };
        if operation == "Query" && body.get("IndexName").is_some() {
            let sent = self.inner.call(request);
            return HttpConnectorFuture::new(async move {
                let mut response = sent.await?;
                if !response.status().is_success() {
                    return Ok(response);
                }
                let read = ByteStream::new(response.take_body()).collect().await.map(|b| b.into_bytes());
                // An answer that cannot be read whole is a lost one (the
                // SDK retries it).
                let Ok(read) = read else { return Ok(error_response(500, "InternalServerError", None)) };
                let page = match serde_json::from_slice::<serde_json::Value>(&read) {
                    Ok(answer) => lag.page(&body, answer, std::time::Instant::now()).to_string().into_bytes(),
                    Err(_) => read.to_vec(),
                };
                response.headers_mut().insert("content-length", page.len().to_string());
                *response.body_mut() = SdkBody::from(page);
                Ok(response)
            });
        }
        let written = lag.written(&operation, &body);
        if written.is_empty() {
            return self.inner.call(request);
        }
        let reads: Vec<Option<HttpRequest>> =
            written.iter().map(|w| (!w.known_absent).then(|| get_item(&request, &w.table, &w.key)).flatten()).collect();
        let inner = self.inner.clone();
        HttpConnectorFuture::new(async move {
            let before = futures::future::join_all(reads.into_iter().map(|read| {
                let inner = inner.clone();
                async move {
                    match read {
                        None => Some(None),
                        Some(read) => item_of(inner.call(read).await.ok()?).await,
                    }
                }
            }))
            .await;
            let response = inner.call(request).await?;
            if response.status().is_success() {
                // An item whose read failed is not recorded: it does not
                // lag, rather than lag with a made-up image.
                let writes: Vec<(Written, Option<Item>)> =
                    written.into_iter().zip(before).filter_map(|(w, before)| Some((w, before?))).collect();
                lag.record(writes, std::time::Instant::now());
            }
            Ok(response)
        })
    }

    fn call_with_faults(&self, mut request: HttpRequest) -> HttpConnectorFuture {
        let Some((service, operation)) = target(&request) else { return self.forward(request) };
        let token =
            (service == "dynamodb" && operation == "TransactWriteItems").then(|| request_token(&request)).flatten();
        if let Some(token) = &token {
            if self.plan.applied_transactions.lock().unwrap_or_else(|e| e.into_inner()).contains(token) {
                // AWS: a repeat of an applied transaction succeeds, changing
                // nothing; but the repeat is a request like any other, and
                // can be throttled or lose its answer too. (Always answering
                // it hid that a claim's transaction can fail every resend
                // after it applied: the outcome the caller cannot know.)
                return ready(match self.plan.decide(service, &operation) {
                    Some(Fault::Throttle) => error_response(400, "ProvisionedThroughputExceededException", None),
                    Some(Fault::ServerError | Fault::Lost) => error_response(500, "InternalServerError", None),
                    _ => success_response(),
                });
            }
        }
        let Some(fault) = self.plan.decide(service, &operation) else {
            return remember_applied(self.forward(request), token, self.plan.applied_transactions.clone());
        };
        tracing::debug!(service, operation, fault = fault.as_str(), "fault injected");
        let body = request.body().bytes().map(<[u8]>::to_vec).unwrap_or_default();
        match fault {
            Fault::Conflict if operation == "TransactWriteItems" => {
                ready(error_response(400, "TransactionCanceledException", Some(&cancellation_reasons(&body))))
            }
            Fault::Conflict => ready(error_response(400, "TransactionConflictException", None)),
            Fault::Throttle => ready(error_response(400, "ProvisionedThroughputExceededException", None)),
            Fault::ServerError => ready(error_response(500, "InternalServerError", None)),
            Fault::TaskTimedOut => ready(error_response(400, "TaskTimedOut", None)),
            // Trigger faults and the state machine's own call never apply to
            // a function's AWS request (`applies_to`).
            Fault::Duplicate
            | Fault::Reorder
            | Fault::Late
            | Fault::Abandon
            | Fault::Replay
            | Fault::IntegrationThrottled => self.forward(request),
            Fault::Lost | Fault::InvalidToken => {
                let sent = remember_applied(self.forward(request), token, self.plan.applied_transactions.clone());
                HttpConnectorFuture::new(async move {
                    // Applied: wait for the answer, then lose it.
                    let _applied = sent.await?;
                    Ok(if fault == Fault::Lost {
                        error_response(500, "InternalServerError", None)
                    } else {
                        error_response(400, "InvalidToken", None)
                    })
                })
            }
            Fault::Partial => {
                let Some((kept, failed)) = split_entries(&body) else { return self.forward(request) };
                let length = kept.len();
                *request.body_mut() = SdkBody::from(kept);
                request.headers_mut().insert("content-length", length.to_string());
                let sent = self.forward(request);
                HttpConnectorFuture::new(async move {
                    let mut response = sent.await?;
                    // The answer streams in: read it whole to rewrite it. A
                    // body that cannot be read is a lost answer (the SDK
                    // retries it), never an entry dropped in silence.
                    let body = ByteStream::new(response.take_body()).collect().await.map(|b| b.into_bytes());
                    let Ok(body) = body else { return Ok(error_response(500, "InternalServerError", None)) };
                    *response.body_mut() = SdkBody::from(body);
                    Ok(with_failed_entries(response, &failed))
                })
            }
        }
    }
}

/// A consistent `GetItem` of `key` in `table`, sent as `original` was
/// (its endpoint and credentials; the emulator checks no signature).
fn get_item(original: &HttpRequest, table: &str, key: &Item) -> Option<HttpRequest> {
    let mut read = original.try_clone()?;
    let body = serde_json::json!({ "TableName": table, "Key": key, "ConsistentRead": true }).to_string();
    read.headers_mut().insert("x-amz-target", "DynamoDB_20120810.GetItem");
    read.headers_mut().insert("content-length", body.len().to_string());
    *read.body_mut() = SdkBody::from(body);
    Some(read)
}

/// The item a `GetItem` answered (`Some(None)`: there is none); `None`
/// when it failed.
async fn item_of(mut response: HttpResponse) -> Option<Option<Item>> {
    if !response.status().is_success() {
        return None;
    }
    let read = ByteStream::new(response.take_body()).collect().await.ok()?.into_bytes();
    let answer: serde_json::Value = serde_json::from_slice(&read).ok()?;
    Some(answer.get("Item").and_then(serde_json::Value::as_object).cloned())
}

fn ready(response: HttpResponse) -> HttpConnectorFuture {
    HttpConnectorFuture::ready(Ok(response))
}

/// The `ClientRequestToken` of a `TransactWriteItems` request, if it has one.
fn request_token(request: &HttpRequest) -> Option<String> {
    let body: serde_json::Value = serde_json::from_slice(request.body().bytes()?).ok()?;
    body.get("ClientRequestToken")?.as_str().map(str::to_string)
}

/// Records `token` as applied once `sent` answered 200.
fn remember_applied(
    sent: HttpConnectorFuture,
    token: Option<String>,
    applied: Arc<Mutex<std::collections::HashSet<String>>>,
) -> HttpConnectorFuture {
    let Some(token) = token else { return sent };
    HttpConnectorFuture::new(async move {
        let response = sent.await?;
        if response.status().is_success() {
            applied.lock().unwrap_or_else(|e| e.into_inner()).insert(token);
        }
        Ok(response)
    })
}

/// What a JSON-protocol operation answers on success with nothing to say.
fn success_response() -> HttpResponse {
    let status = StatusCode::try_from(200).expect("200 is a status");
    let mut response = HttpResponse::new(status, SdkBody::from("{}"));
    response.headers_mut().insert("content-type", "application/x-amz-json-1.0");
    response
}

/// A JSON-protocol error response (`__type` names the error) for an
/// injected fault.
fn error_response(status: u16, error: &str, extra: Option<&serde_json::Value>) -> HttpResponse {
    aws_error(status, error, &format!("{error} (injected by {FAULTS_ENV})"), extra)
}

/// A JSON-protocol error response: `__type` names the error.
fn aws_error(status: u16, error: &str, message: &str, extra: Option<&serde_json::Value>) -> HttpResponse {
    let mut body = serde_json::json!({ "__type": error, "message": message });
    if let (Some(extra), Some(map)) = (extra, body.as_object_mut()) {
        if let Some(fields) = extra.as_object() {
            map.extend(fields.clone());
        }
    }
    let status = StatusCode::try_from(status).unwrap_or_else(|_| StatusCode::try_from(500).expect("500 is a status"));
    let mut response = HttpResponse::new(status, SdkBody::from(body.to_string()));
    response.headers_mut().insert("content-type", "application/x-amz-json-1.0");
    response.headers_mut().insert("x-amzn-errortype", error.to_string());
    response
}

/// `CancellationReasons` for a transaction: the first item conflicted.
fn cancellation_reasons(body: &[u8]) -> serde_json::Value {
    let items = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("TransactItems").and_then(|items| items.as_array()).map(Vec::len))
        .unwrap_or(1)
        .max(1);
    let reasons: Vec<serde_json::Value> = (0..items)
        .map(|i| {
            if i == 0 {
                serde_json::json!({"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"})
            } else {
                serde_json::json!({"Code": "None"})
            }
        })
        .collect();
    serde_json::json!({ "CancellationReasons": reasons })
}

/// Takes the last entry out of a `PutEvents` request: the body to send and
/// the indexes that will be answered as failed. `None` for a single entry.
fn split_entries(body: &[u8]) -> Option<(Vec<u8>, Vec<usize>)> {
    let mut request: serde_json::Value = serde_json::from_slice(body).ok()?;
    let entries = request.get_mut("Entries")?.as_array_mut()?;
    if entries.len() < 2 {
        return None;
    }
    let failed = entries.len() - 1;
    entries.truncate(failed);
    Some((serde_json::to_vec(&request).ok()?, vec![failed]))
}

/// The `PutEvents` answer (read whole) with `failed` entries added as
/// `InternalFailure`. An answer that is not the usual one (an error) is
/// turned into a lost answer: the entries taken out must never vanish.
fn with_failed_entries(mut response: HttpResponse, failed: &[usize]) -> HttpResponse {
    let lost = || error_response(500, "InternalServerError", None);
    let Some(bytes) = response.body().bytes() else { return lost() };
    let Ok(mut answer) = serde_json::from_slice::<serde_json::Value>(bytes) else { return lost() };
    let Some(entries) = answer.get_mut("Entries").and_then(|e| e.as_array_mut()) else { return lost() };
    for index in failed {
        let failure = serde_json::json!({"ErrorCode": "InternalFailure", "ErrorMessage": "injected"});
        if *index <= entries.len() {
            entries.insert(*index, failure);
        }
    }
    let failed_count = answer.get("FailedEntryCount").and_then(serde_json::Value::as_u64).unwrap_or(0);
    answer["FailedEntryCount"] = serde_json::json!(failed_count + failed.len() as u64);
    *response.body_mut() = SdkBody::from(answer.to_string());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sdk_request(body: &str, headers: &[(&'static str, &'static str)]) -> HttpRequest {
        let mut request = HttpRequest::new(SdkBody::from(body.to_string()));
        for (name, value) in headers {
            request.headers_mut().insert(*name, *value);
        }
        request
    }

    #[test]
    fn the_aws_provisioners_ec2_and_ssm_requests_are_checked_against_its_grants() {
        let ec2 = sdk_request(
            "Action=StopInstances&Version=2016-11-15",
            &[("x-amz-user-agent", "aws-sdk-rust/1 api/ec2/1.0")],
        );
        assert_eq!(iam_action(&ec2), Some(("ec2".into(), "StopInstances".into(), None)));
        let put = sdk_request(
            r#"{"Name":"/baton/prod/other/x","Value":"brt_x"}"#,
            &[("x-amz-target", "AmazonSSM.PutParameter")],
        );
        assert_eq!(iam_action(&put), Some(("ssm".into(), "PutParameter".into(), Some("/baton/prod/other/x".into()))));
        let resources = crate::resources::Resources::load();
        let function = &resources.aws_provisioner.as_ref().expect("in resources.json").function;
        let grants = Grants::of(function).expect("parses");
        let denied = access_denied(&grants, &ec2).expect("StopInstances is not granted");
        assert_eq!(denied.status().as_u16(), 403);
        assert!(denied.body().bytes().is_some_and(|b| String::from_utf8_lossy(b).contains("UnauthorizedOperation")));
        assert!(access_denied(&grants, &put).is_some(), "outside /baton/<stage>/runner-tokens");
    }

    #[test]
    fn a_plan_parses_its_seed_and_rules_and_refuses_nonsense() {
        let plan =
            FaultPlan::parse("seed=7; dynamodb:conflict=0.5; *.PutEvents:partial=1").expect("valid").expect("rules");
        assert_eq!(plan.seed, 7);
        assert_eq!(plan.rules.len(), 2);
        assert_eq!(plan.rules[1].service, None);
        assert_eq!(plan.rules[1].operation.as_deref(), Some("PutEvents"));
        assert!(FaultPlan::parse("").expect("empty is fine").is_none());
        assert!(FaultPlan::parse("seed=1").expect("no rule").is_none());
        for bad in ["dynamodb:conflict", "dynamodb:melt=0.1", "dynamodb:conflict=2", "dynamodb=0.1", "seed=x"] {
            assert!(FaultPlan::parse(bad).is_err(), "{bad} is refused");
        }
    }

    #[test]
    fn the_same_seed_injects_the_same_faults_and_only_where_they_can_happen() {
        let run = |seed: u64| {
            let plan = FaultPlan::parse(&format!("seed={seed};dynamodb:conflict=0.3")).expect("valid").expect("rules");
            let writes: Vec<_> = (0..200).map(|_| plan.decide("dynamodb", "TransactWriteItems")).collect();
            let reads: Vec<_> = (0..50).map(|_| plan.decide("dynamodb", "GetItem")).collect();
            (writes, reads)
        };
        let (a, reads) = run(1);
        assert_eq!(a, run(1).0, "replayable");
        assert_ne!(a, run(2).0, "another seed, other faults");
        let conflicts = a.iter().filter(|f| **f == Some(Fault::Conflict)).count();
        assert!((30..90).contains(&conflicts), "about 30% of 200: {conflicts}");
        assert!(reads.iter().all(Option::is_none), "a read cannot conflict");
    }

    #[test]
    fn a_trigger_rule_covers_each_function_and_a_function_rule_only_its_own() {
        let plan = FaultPlan::parse("seed=3;late_ms=50;trigger.sqs:duplicate=1;trigger.stream.relay:abandon=1")
            .expect("valid")
            .expect("rules");
        assert_eq!(plan.late(), std::time::Duration::from_millis(50));
        assert_eq!(plan.decide(TRIGGER, "sqs.enqueue"), Some(Fault::Duplicate));
        assert_eq!(plan.decide(TRIGGER, "stream.relay"), Some(Fault::Abandon));
        assert_eq!(plan.decide(TRIGGER, "stream.other"), None);
        assert_eq!(plan.decide(TRIGGER, "sqsx.enqueue"), None, "a prefix is not a kind");
    }

    #[tokio::test]
    async fn an_invocation_is_abandoned_at_its_first_write_and_one_without_writes_runs_to_its_end() {
        let finished = abandoned_after_first_write(async { 7 }).await;
        assert_eq!(finished, Some(7));
        let reached_second_write = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reached = reached_second_write.clone();
        let abandoned = abandoned_after_first_write(async move {
            // What the connector does when a write answers.
            WROTE.with(|wrote| wrote.notify_one());
            tokio::task::yield_now().await;
            reached.store(true, std::sync::atomic::Ordering::SeqCst);
        })
        .await;
        assert_eq!(abandoned, None);
        assert!(!reached_second_write.load(std::sync::atomic::Ordering::SeqCst), "nothing after the write ran");
    }

    #[test]
    fn a_throttled_integration_is_decided_only_for_the_state_machines_send_message() {
        let plan = FaultPlan::parse("seed=5;*:integration-throttled=1;*:lost=1").expect("valid").expect("rules");
        let (service, operation) = INTEGRATION;
        assert_eq!(plan.decide(service, operation), Some(Fault::IntegrationThrottled), "never `lost`");
        assert_eq!(plan.decide("states", "SendTaskFailure"), Some(Fault::Lost));
        assert_eq!(plan.decide(TRIGGER, "sqs.orchestrator"), None);
        assert_eq!(plan.decide("sqs", "SendMessage"), Some(Fault::Lost), "the functions' own sends are not it");
    }

    #[test]
    fn a_cancelled_transaction_names_one_reason_per_item() {
        let body = br#"{"TransactItems":[{"Put":{}},{"Update":{}},{"Delete":{}}]}"#;
        let reasons = cancellation_reasons(body);
        let codes: Vec<_> =
            reasons["CancellationReasons"].as_array().expect("array").iter().map(|r| r["Code"].clone()).collect();
        assert_eq!(codes, ["TransactionConflict", "None", "None"]);
    }

    #[test]
    fn a_partial_put_events_keeps_all_but_the_last_entry_and_answers_it_failed() {
        let (kept, failed) = split_entries(br#"{"Entries":[{"Detail":"a"},{"Detail":"b"}]}"#).expect("two entries");
        assert_eq!(failed, vec![1]);
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&kept).expect("json")["Entries"].as_array().map(Vec::len),
            Some(1)
        );
        let answer = HttpResponse::new(
            StatusCode::try_from(200).expect("status"),
            SdkBody::from(r#"{"FailedEntryCount":0,"Entries":[{"EventId":"e1"}]}"#),
        );
        let answer = with_failed_entries(answer, &failed);
        let json: serde_json::Value = serde_json::from_slice(answer.body().bytes().expect("bytes")).expect("json");
        assert_eq!(json["FailedEntryCount"], 1);
        assert_eq!(json["Entries"][1]["ErrorCode"], "InternalFailure");
        assert!(split_entries(br#"{"Entries":[{"Detail":"a"}]}"#).is_none(), "one entry is left alone");
    }
}
