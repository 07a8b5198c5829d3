//! Cold-start proxy: how big each function's `bootstrap` is, and how long a
//! fresh process takes from spawn to answering its first event.
//!
//! A Rust `provided.al2023` function's cold start grows with the code Lambda
//! fetches and maps (its size) and with its INIT phase (config, AWS clients,
//! the runtime's first poll). Neither can be observed on Lambda from here, so
//! this module measures the closest local equivalents:
//!
//! - **size**: the bytes of `baton-<function>` in `bin_dir` (built with the
//!   workspace's release profile, as the deploy builds them; the report's
//!   note quotes the profile);
//! - **time to first event**: each binary is run as Lambda runs it, against a
//!   minimal emulator of the [Lambda Runtime API] served on `127.0.0.1`, and
//!   fed one realistic event of its trigger. The clock starts just before
//!   `spawn` and stops when the emulator receives the answer (response or
//!   error) to that first event; then the process is killed. What Lambda adds
//!   on top (sandbox creation, code download, its own INIT accounting) is not
//!   in the figure.
//!
//! Functions run one at a time and each run is a fresh process: the machines
//! this runs on are small, and concurrent runs would measure CPU contention.
//!
//! [Lambda Runtime API]: https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_lambda_events::apigw::{
    ApiGatewayV2httpRequest, ApiGatewayV2httpRequestContext, ApiGatewayV2httpRequestContextHttpDescription,
};
use aws_lambda_events::cloudwatch_events::CloudWatchEvent;
use aws_lambda_events::dynamodb::Event as StreamEvent;
use aws_lambda_events::sqs::SqsEvent;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use baton_localstack::resources::{Function, Resources, Trigger};
use chrono::SubsecRound;
use serde::Serialize;
use tokio::sync::{mpsc, watch};

/// The size target the issue sets for a function's `bootstrap`: 10 MB,
/// decimal (10,000,000 bytes) — the stricter reading of "10 MB".
pub const SIZE_LIMIT_BYTES: u64 = 10_000_000;

/// How long one run may take from spawn to the first answer. Far above any
/// healthy cold start (tens of ms); a run that takes this long is stuck
/// (an endpoint that never answers, a runtime that never polls).
const RUN_TIMEOUT: Duration = Duration::from_secs(30);

/// The deadline the emulator gives an invocation, as Lambda's function timeout.
const INVOCATION_DEADLINE: Duration = Duration::from_secs(30);

/// The memory size the stack gives functions (infra `functionMemoryMb` default);
/// the runtime only reports it, but it must be a number.
const MEMORY_MB: &str = "256";

/// A placeholder account for ARNs; nothing resolves it.
const ACCOUNT: &str = "123456789012";

/// The figures of one function.
#[derive(Debug, Clone, Serialize)]
pub struct FunctionColdStart {
    pub function: String,
    /// `http`, `sqs`, `stream` or `schedule`, as in `infra/resources.json`.
    pub trigger: String,
    /// The binary measured.
    pub binary: String,
    /// Its size in bytes; `None` if it is missing (not built).
    pub binary_bytes: Option<u64>,
    /// One per run: process spawn → the Runtime API received the answer
    /// (response or invocation error) to the first event, in milliseconds.
    pub first_event_ms: Vec<f64>,
    pub median_ms: Option<f64>,
    /// Why the figures are missing or suspect: the binary is missing, the
    /// function reported `/init/error`, exited, timed out, or answered its
    /// first event with an invocation error or an HTTP 5xx (those runs are
    /// still timed: the runtime was up, but the event took an unusual path).
    pub init_error: Option<String>,
}

/// The figures of every function of `infra/resources.json`.
#[derive(Debug, Clone, Serialize)]
pub struct ColdStartReport {
    /// The target triple the binaries were built for.
    pub target: String,
    /// The Cargo profile (the name of the binaries' directory).
    pub profile: String,
    pub size_limit_bytes: u64,
    pub functions: Vec<FunctionColdStart>,
    /// What the figures stand for and what they leave out.
    pub note: String,
}

/// Measures every function of `infra/resources.json`.
///
/// `bin_dir`: the directory with the `baton-<function>` binaries; `env`: the
/// environment every function gets (the `BATON_*` configuration and
/// `BATON_AWS_ENDPOINT` of a provisioned local stack), on top of the variables
/// Lambda itself sets; `repeats`: runs per function (a function that fails a
/// run is not run again: the next runs would fail the same way, maybe after
/// a full timeout each).
pub async fn measure(bin_dir: &Path, env: &HashMap<String, String>, repeats: usize) -> ColdStartReport {
    let resources = Resources::load();
    let log_dir = std::env::temp_dir().join("baton-cold-start");
    let mut functions = Vec::new();
    let mut arch = None;
    for function in &resources.functions {
        let binary = bin_dir.join(format!("baton-{}", function.name));
        let binary_bytes = std::fs::metadata(&binary).ok().filter(|m| m.is_file()).map(|m| m.len());
        let mut figures = FunctionColdStart {
            function: function.name.clone(),
            trigger: trigger_name(function.trigger).to_string(),
            binary: binary.display().to_string(),
            binary_bytes,
            first_event_ms: Vec::new(),
            median_ms: None,
            init_error: None,
        };
        if binary_bytes.is_none() {
            figures.init_error = Some(format!("{} is missing (not built)", binary.display()));
            functions.push(figures);
            continue;
        }
        arch = arch.or_else(|| elf_arch(&binary));
        let event = first_event(&resources, function);
        let log = log_dir.join(format!("{}.log", function.name));
        for _ in 0..repeats {
            match run_once(&binary, &function.name, env, &event, &log, RUN_TIMEOUT).await {
                Ok(run) => {
                    figures.first_event_ms.push(run.elapsed.as_secs_f64() * 1e3);
                    if let (None, Some(problem)) = (&figures.init_error, run.problem) {
                        figures.init_error = Some(problem);
                    }
                }
                Err(err) => {
                    figures.init_error = Some(err);
                    break;
                }
            }
        }
        figures.median_ms = median(&figures.first_event_ms);
        functions.push(figures);
    }
    let arch = arch.unwrap_or(std::env::consts::ARCH);
    let profile = bin_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let target = bin_dir
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| n.starts_with(arch) && n.contains("-linux"))
        .unwrap_or_else(|| format!("{arch}-unknown-linux-gnu"));
    let note = note(arch, &profile, &log_dir);
    ColdStartReport { target, profile, size_limit_bytes: SIZE_LIMIT_BYTES, functions, note }
}

fn note(arch: &str, profile: &str, log_dir: &Path) -> String {
    let mut note = String::new();
    if arch != "aarch64" {
        note.push_str(&format!(
            "Sizes are of the {arch} {profile} binaries, standing in for the arm64 `bootstrap`s Lambda runs: \
             only the {arch} Rust target could be built here. "
        ));
        note.push_str("arm64 code will differ somewhat in size. ");
    }
    if profile == "release" {
        note.push_str(&format!("The deploy builds with the same profile: [profile.release] {}. ", release_profile()));
    }
    note.push_str(&format!(
        "Times are local, on this machine: process spawn → an emulated Lambda Runtime API received the answer to \
         one realistic event (HTTP: an API Gateway v2 request to one of the function's routes, unauthenticated; \
         SQS and stream: an empty batch; schedule: an EventBridge scheduled event), with AWS calls going to the \
         local stack. Lambda's sandbox creation and code download are not included. Function logs: {}.",
        log_dir.display()
    ));
    note
}

/// The workspace's `[profile.release]` settings (`key = value; …`), read
/// from the `Cargo.toml` this bench was built with, so the note says what the
/// measured binaries were built with without repeating it by hand.
fn release_profile() -> String {
    profile_settings(include_str!("../../Cargo.toml"), "profile.release")
}

fn profile_settings(manifest: &str, table: &str) -> String {
    manifest
        .lines()
        .map(str::trim)
        .skip_while(|line| *line != format!("[{table}]"))
        .skip(1)
        .take_while(|line| !line.starts_with('['))
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A human-readable table: one line per function with its size in MB, its
/// verdict against the size target, and the median and fastest run.
pub fn render(report: &ColdStartReport) -> String {
    let limit_mb = report.size_limit_bytes as f64 / 1e6;
    let mut out =
        format!("Cold-start proxy ({}, {} profile; size target {limit_mb:.1} MB)\n", report.target, report.profile);
    out.push_str(&format!(
        "{:<22} {:<9} {:>8}  {:<7} {:>10} {:>8} {:>5}\n",
        "function", "trigger", "size MB", "size", "median ms", "min ms", "runs"
    ));
    let mut problems = Vec::new();
    for f in &report.functions {
        let (size, verdict) = match f.binary_bytes {
            Some(bytes) if bytes <= report.size_limit_bytes => (format!("{:.2}", bytes as f64 / 1e6), "ok"),
            Some(bytes) => (format!("{:.2}", bytes as f64 / 1e6), "OVER"),
            None => ("-".to_string(), "missing"),
        };
        let median = f.median_ms.map_or("-".to_string(), |ms| format!("{ms:.1}"));
        let min = f.first_event_ms.iter().copied().reduce(f64::min).map_or("-".to_string(), |ms| format!("{ms:.1}"));
        let flag = if f.init_error.is_some() { " !" } else { "" };
        out.push_str(&format!(
            "{:<22} {:<9} {:>8}  {:<7} {:>10} {:>8} {:>5}{flag}\n",
            f.function,
            f.trigger,
            size,
            verdict,
            median,
            min,
            f.first_event_ms.len()
        ));
        if let Some(err) = &f.init_error {
            problems.push(format!("! {}: {err}", f.function));
        }
    }
    let sized: Vec<u64> = report.functions.iter().filter_map(|f| f.binary_bytes).collect();
    let over = sized.iter().filter(|&&b| b > report.size_limit_bytes).count();
    out.push_str(&format!(
        "{} of {} binaries meet the {limit_mb:.1} MB target ({over} over, {} missing)\n",
        sized.len() - over,
        report.functions.len(),
        report.functions.len() - sized.len()
    ));
    for problem in problems {
        out.push_str(&problem);
        out.push('\n');
    }
    out.push_str(&format!("note: {}\n", report.note));
    out
}

fn trigger_name(trigger: Trigger) -> &'static str {
    match trigger {
        Trigger::Http => "http",
        Trigger::Stream => "stream",
        Trigger::Sqs => "sqs",
        Trigger::Schedule => "schedule",
        Trigger::Websocket => "websocket",
    }
}

fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// The architecture an ELF binary was built for (its `e_machine`), so the
/// report names what was measured rather than what the bench runs on.
fn elf_arch(binary: &Path) -> Option<&'static str> {
    use std::io::Read;
    let mut header = [0u8; 20];
    std::fs::File::open(binary).ok()?.read_exact(&mut header).ok()?;
    if &header[..4] != b"\x7fELF" {
        return None;
    }
    match u16::from_le_bytes([header[18], header[19]]) {
        0x3e => Some("x86_64"),
        0xb7 => Some("aarch64"),
        _ => None,
    }
}

// ------------------------------------------------------------------ events

fn function_name(function: &str) -> String {
    format!("baton-bench-{function}")
}

fn function_arn(function: &str) -> String {
    format!("arn:aws:lambda:us-east-1:{ACCOUNT}:function:{}", function_name(function))
}

/// The first event a function gets, one per trigger kind, each one the
/// function handles fully (so the figure includes a real handler pass, not a
/// deserialization failure): an HTTP function gets an API Gateway HTTP API
/// (payload v2.0) request for its first route, without credentials (a 401 is
/// a handled request, and needs no data); queue and stream functions get an
/// empty batch; the scheduled function gets EventBridge's scheduled event.
/// Each is built from the `aws_lambda_events` type the runtime reads it into.
fn first_event(resources: &Resources, function: &Function) -> serde_json::Value {
    let now = chrono::Utc::now();
    match function.trigger {
        Trigger::Http => {
            let (method, template) = resources
                .routes
                .iter()
                .find(|r| r.function == function.name)
                .map_or(("GET", "/"), |r| (r.method.as_str(), r.path.as_str()));
            http_event(method, template, now)
        }
        Trigger::Sqs => to_json(&SqsEvent::default()),
        Trigger::Stream => to_json(&StreamEvent::default()),
        // A `$connect` without a token: refused with 401, a handled request.
        Trigger::Websocket => {
            let mut event = aws_lambda_events::apigw::ApiGatewayWebsocketProxyRequest::default();
            event.request_context.route_key = Some("$connect".into());
            event.request_context.connection_id = Some("bench".into());
            to_json(&event)
        }
        Trigger::Schedule => {
            let mut event = CloudWatchEvent::<serde_json::Value>::default();
            event.version = Some("0".into());
            event.id = Some(uuid::Uuid::new_v4().to_string());
            event.detail_type = Some("Scheduled Event".into());
            event.source = Some("aws.events".into());
            event.account_id = Some(ACCOUNT.into());
            // EventBridge's times are to the second.
            event.time = now.trunc_subsecs(0);
            event.region = Some("us-east-1".into());
            event.resources =
                vec![format!("arn:aws:events:us-east-1:{ACCOUNT}:rule/{}", function_name(&function.name))];
            event.detail = Some(serde_json::json!({}));
            to_json(&event)
        }
    }
}

fn to_json(event: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(event).expect("a Lambda event serializes to JSON")
}

/// An API Gateway HTTP API (payload format 2.0) request for `method
/// template`, with every `{param}` filled in (`ws` with a workspace name,
/// the others with an id).
fn http_event(method: &str, template: &str, now: chrono::DateTime<chrono::Utc>) -> serde_json::Value {
    let method = Method::from_bytes(method.as_bytes()).expect("routes in resources.json have HTTP methods");
    let mut path_parameters = HashMap::new();
    let path = template
        .split('/')
        .map(|segment| match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some(name) => {
                let value = if name == "ws" { "bench".to_string() } else { uuid::Uuid::now_v7().to_string() };
                path_parameters.insert(name.to_string(), value.clone());
                value
            }
            None => segment.to_string(),
        })
        .collect::<Vec<_>>()
        .join("/");
    let route_key = format!("{method} {template}");
    let has_body = method != Method::GET && method != Method::DELETE;
    let mut headers = HeaderMap::new();
    for (name, value) in [
        ("accept", "application/json"),
        ("host", "bench.execute-api.us-east-1.amazonaws.com"),
        ("user-agent", "baton-bench"),
        ("x-amzn-trace-id", "Root=1-00000000-000000000000000000000000"),
        ("x-forwarded-for", "127.0.0.1"),
        ("x-forwarded-port", "443"),
        ("x-forwarded-proto", "https"),
        ("content-length", if has_body { "2" } else { "0" }),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    if has_body {
        headers.insert("content-type", HeaderValue::from_static("application/json"));
    }

    let mut http = ApiGatewayV2httpRequestContextHttpDescription::default();
    http.method = method;
    http.path = Some(path.clone());
    http.protocol = Some("HTTP/1.1".into());
    http.source_ip = Some("127.0.0.1".into());
    http.user_agent = Some("baton-bench".into());
    let mut context = ApiGatewayV2httpRequestContext::default();
    context.account_id = Some(ACCOUNT.into());
    context.apiid = Some("bench".into());
    context.domain_name = Some("bench.execute-api.us-east-1.amazonaws.com".into());
    context.domain_prefix = Some("bench".into());
    context.http = http;
    context.request_id = Some(uuid::Uuid::new_v4().to_string());
    context.route_key = Some(route_key.clone());
    context.stage = Some("$default".into());
    context.time = Some(now.format("%d/%b/%Y:%H:%M:%S +0000").to_string());
    context.time_epoch = now.timestamp_millis();

    let mut request = ApiGatewayV2httpRequest::default();
    request.version = Some("2.0".into());
    request.route_key = Some(route_key);
    request.raw_path = Some(path);
    request.raw_query_string = Some(String::new());
    request.headers = headers;
    request.path_parameters = path_parameters;
    request.request_context = context;
    request.body = has_body.then(|| "{}".to_string());
    request.is_base64_encoded = false;
    to_json(&request)
}

// ------------------------------------------------------------------ one run

/// A run that reached the first answer.
#[derive(Debug)]
struct Run {
    elapsed: Duration,
    /// Set when the answer was an invocation error or an HTTP 5xx.
    problem: Option<String>,
}

/// Spawns `binary` as Lambda would, feeds it `event`, and times spawn → the
/// answer. Errors (spawn failure, init error, exit, timeout) come back as
/// text for the report, with the tail of the function's log.
async fn run_once(
    binary: &Path,
    function: &str,
    env: &HashMap<String, String>,
    event: &serde_json::Value,
    log: &Path,
    timeout: Duration,
) -> Result<Run, String> {
    let mut api = RuntimeApi::start(event.clone(), function_arn(function))
        .await
        .map_err(|e| format!("the Runtime API emulator did not start: {e}"))?;
    let mut command = tokio::process::Command::new(binary);
    command
        .env_clear()
        .envs(lambda_env(function))
        .envs(env)
        .env("AWS_LAMBDA_RUNTIME_API", api.addr.to_string())
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let log_file = open_log(log);
    match &log_file {
        Some(file) => {
            let stdout = file.try_clone().map(Stdio::from).unwrap_or_else(|_| Stdio::null());
            let stderr = file.try_clone().map(Stdio::from).unwrap_or_else(|_| Stdio::null());
            command.stdout(stdout).stderr(stderr);
        }
        None => {
            command.stdout(Stdio::null()).stderr(Stdio::null());
        }
    }
    let started = Instant::now();
    let mut child = command.spawn().map_err(|e| format!("spawning {}: {e}", binary.display()))?;
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let result = loop {
        tokio::select! {
            biased;
            outcome = api.outcomes.recv() => match outcome {
                Some(outcome) => match judge(outcome, started) {
                    Some(result) => break result,
                    None => continue,
                },
                None => break Err("the Runtime API emulator stopped".to_string()),
            },
            status = child.wait() => {
                // An answer posted just before exiting still counts: the
                // emulator records it before replying, so before the exit.
                let mut answered = None;
                while let Ok(outcome) = api.outcomes.try_recv() {
                    if let Some(result) = judge(outcome, started) {
                        answered = Some(result);
                        break;
                    }
                }
                break answered.unwrap_or_else(|| Err(match status {
                    Ok(status) => format!("exited ({status}) before answering its first event"),
                    Err(e) => format!("waiting for the process: {e}"),
                }));
            }
            _ = &mut deadline => break Err(format!("no answer to its first event within {}s", timeout.as_secs())),
        }
    };
    // Lambda would freeze the sandbox here; the next run must start cold.
    let _ = child.start_kill();
    let _ = child.wait().await;
    api.stop().await;
    result.map_err(|err| match log_tail(log) {
        Some(tail) => format!("{err}; log ({}) ends: {tail}", log.display()),
        None => err,
    })
}

/// What an outcome means for the run: `None` to keep waiting.
fn judge(outcome: Outcome, started: Instant) -> Option<Result<Run, String>> {
    match outcome {
        Outcome::Next => None,
        Outcome::Response { body, at } => {
            let status = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v.get("statusCode").and_then(serde_json::Value::as_u64));
            let problem = status.filter(|s| *s >= 500).map(|s| {
                format!(
                    "first event answered HTTP {s}: {}",
                    String::from_utf8_lossy(&body).chars().take(300).collect::<String>()
                )
            });
            Some(Ok(Run { elapsed: at.saturating_duration_since(started), problem }))
        }
        Outcome::InvocationError { error_type, body, at } => Some(Ok(Run {
            elapsed: at.saturating_duration_since(started),
            problem: Some(format!("first event answered with an invocation error {error_type}: {body}")),
        })),
        Outcome::InitError { error_type, body } => Some(Err(format!("init error {error_type}: {body}"))),
        Outcome::Unexpected(request) => Some(Err(format!("unexpected Runtime API request {request}"))),
    }
}

/// The variables Lambda sets for a `provided.al2023` function (those the
/// runtime reads, and the region and credentials the AWS SDK reads; the
/// credentials are the local stack's dummies and `env` may override them).
fn lambda_env(function: &str) -> Vec<(String, String)> {
    let name = function_name(function);
    [
        ("AWS_LAMBDA_FUNCTION_NAME", name.clone()),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".to_string()),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", MEMORY_MB.to_string()),
        ("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{name}")),
        ("AWS_LAMBDA_LOG_STREAM_NAME", format!("bench/[$LATEST]{}", uuid::Uuid::new_v4().simple())),
        ("AWS_EXECUTION_ENV", "AWS_Lambda_provided.al2023".to_string()),
        ("_HANDLER", "bootstrap".to_string()),
        ("AWS_REGION", "us-east-1".to_string()),
        ("AWS_DEFAULT_REGION", "us-east-1".to_string()),
        ("AWS_ACCESS_KEY_ID", "test".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "test".to_string()),
        ("TZ", ":UTC".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The function's log file (truncated: it keeps the last run), or `None`
/// when it cannot be created (the run then goes on without a log).
fn open_log(log: &Path) -> Option<std::fs::File> {
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir).ok()?;
    }
    std::fs::File::create(log).ok()
}

fn log_tail(log: &Path) -> Option<String> {
    let bytes = std::fs::read(log).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let start = text.char_indices().rev().nth(499).map_or(0, |(i, _)| i);
    Some(text[start..].to_string())
}

// ------------------------------------------------------------------ Runtime API emulator

/// What the function did on the Runtime API.
#[derive(Debug)]
enum Outcome {
    /// It polled `next` and got the event (init is over).
    Next,
    Response {
        body: Bytes,
        at: Instant,
    },
    InvocationError {
        error_type: String,
        body: String,
        at: Instant,
    },
    InitError {
        error_type: String,
        body: String,
    },
    /// A request this emulator does not serve (e.g. SnapStart's `restore/next`).
    Unexpected(String),
}

/// A one-invocation Lambda Runtime API (version 2018-06-01): the first
/// `next` gets the event; later polls wait, as in a frozen sandbox, until the
/// emulator stops.
struct RuntimeApi {
    addr: SocketAddr,
    outcomes: mpsc::UnboundedReceiver<Outcome>,
    stop: watch::Sender<bool>,
    server: tokio::task::JoinHandle<()>,
}

struct Invocation {
    request_id: String,
    event: serde_json::Value,
    function_arn: String,
}

#[derive(Clone)]
struct Shared {
    pending: Arc<Mutex<Option<Invocation>>>,
    outcomes: mpsc::UnboundedSender<Outcome>,
    stop: watch::Receiver<bool>,
}

impl Shared {
    fn record(&self, outcome: Outcome) {
        // The receiver only goes away with the run; nothing to record then.
        let _ = self.outcomes.send(outcome);
    }
}

const API_PREFIX: &str = "/2018-06-01/runtime";

impl RuntimeApi {
    async fn start(event: serde_json::Value, function_arn: String) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let (outcomes_tx, outcomes) = mpsc::unbounded_channel();
        let (stop, stop_rx) = watch::channel(false);
        let invocation = Invocation { request_id: uuid::Uuid::new_v4().to_string(), event, function_arn };
        let shared = Shared { pending: Arc::new(Mutex::new(Some(invocation))), outcomes: outcomes_tx, stop: stop_rx };
        let app = Router::new()
            .route(&format!("{API_PREFIX}/invocation/next"), get(next))
            .route(&format!("{API_PREFIX}/invocation/{{id}}/response"), post(response))
            .route(&format!("{API_PREFIX}/invocation/{{id}}/error"), post(invocation_error))
            .route(&format!("{API_PREFIX}/init/error"), post(init_error))
            .fallback(unexpected)
            .with_state(shared.clone());
        let mut shutdown = shared.stop.clone();
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = shutdown.wait_for(|stopped| *stopped).await;
                })
                .await;
        });
        Ok(Self { addr, outcomes, stop, server })
    }

    /// Releases waiting polls and stops serving.
    async fn stop(self) {
        let _ = self.stop.send(true);
        let mut server = self.server;
        // A connection that does not close must not hold the bench up.
        if tokio::time::timeout(Duration::from_secs(2), &mut server).await.is_err() {
            server.abort();
        }
    }
}

async fn next(State(shared): State<Shared>) -> Response {
    let invocation = shared.pending.lock().unwrap_or_else(|e| e.into_inner()).take();
    let Some(invocation) = invocation else {
        let mut stop = shared.stop.clone();
        let _ = stop.wait_for(|stopped| *stopped).await;
        return (StatusCode::SERVICE_UNAVAILABLE, "the emulator stopped").into_response();
    };
    shared.record(Outcome::Next);
    let deadline = SystemTime::now()
        .checked_add(INVOCATION_DEADLINE)
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis());
    let trace = format!(
        "Root=1-{:08x}-{};Parent={};Sampled=0",
        chrono::Utc::now().timestamp(),
        &uuid::Uuid::new_v4().simple().to_string()[..24],
        &uuid::Uuid::new_v4().simple().to_string()[..16]
    );
    let mut headers = HeaderMap::new();
    for (name, value) in [
        ("lambda-runtime-aws-request-id", invocation.request_id),
        ("lambda-runtime-deadline-ms", deadline.to_string()),
        ("lambda-runtime-invoked-function-arn", invocation.function_arn),
        ("lambda-runtime-trace-id", trace),
        ("content-type", "application/json".to_string()),
    ] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    (StatusCode::OK, headers, invocation.event.to_string()).into_response()
}

/// The runtime's error posts carry the type in a header and a JSON body.
fn error_type(headers: &HeaderMap) -> String {
    headers
        .get("lambda-runtime-function-error-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("(no Lambda-Runtime-Function-Error-Type)")
        .to_string()
}

fn accepted() -> Response {
    (StatusCode::ACCEPTED, axum::Json(serde_json::json!({ "status": "OK" }))).into_response()
}

async fn response(State(shared): State<Shared>, body: Bytes) -> Response {
    shared.record(Outcome::Response { body, at: Instant::now() });
    accepted()
}

async fn invocation_error(State(shared): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let at = Instant::now();
    let body = String::from_utf8_lossy(&body).into_owned();
    shared.record(Outcome::InvocationError { error_type: error_type(&headers), body, at });
    accepted()
}

async fn init_error(State(shared): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let body = String::from_utf8_lossy(&body).into_owned();
    shared.record(Outcome::InitError { error_type: error_type(&headers), body });
    accepted()
}

async fn unexpected(State(shared): State<Shared>, method: Method, uri: Uri) -> Response {
    shared.record(Outcome::Unexpected(format!("{method} {uri}")));
    (StatusCode::NOT_FOUND, "not served by the bench's Runtime API emulator").into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_emulator_serves_next_and_records_the_response() {
        let event = serde_json::json!({ "Records": [] });
        let mut api = RuntimeApi::start(event.clone(), function_arn("claim")).await.unwrap();
        let base = format!("http://{}{API_PREFIX}", api.addr);
        let http = reqwest::Client::new();

        let next = http.get(format!("{base}/invocation/next")).send().await.unwrap();
        assert_eq!(next.status(), 200);
        let header = |name: &str| next.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
        let request_id = header("lambda-runtime-aws-request-id").unwrap();
        let deadline: u128 = header("lambda-runtime-deadline-ms").unwrap().parse().unwrap();
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis();
        assert!(deadline > now && deadline <= now + INVOCATION_DEADLINE.as_millis());
        assert_eq!(header("lambda-runtime-invoked-function-arn").unwrap(), function_arn("claim"));
        assert!(header("lambda-runtime-trace-id").unwrap().starts_with("Root=1-"));
        assert_eq!(next.json::<serde_json::Value>().await.unwrap(), event);
        assert!(matches!(api.outcomes.recv().await, Some(Outcome::Next)));

        let posted = http
            .post(format!("{base}/invocation/{request_id}/response"))
            .body(r#"{"batchItemFailures":[]}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(posted.status(), 202);
        match api.outcomes.recv().await {
            Some(Outcome::Response { body, .. }) => assert_eq!(&body[..], br#"{"batchItemFailures":[]}"#),
            other => panic!("expected the response, got {other:?}"),
        }

        // The second poll waits (a frozen sandbox) until the emulator stops.
        let second = tokio::spawn({
            let http = http.clone();
            let url = format!("{base}/invocation/next");
            async move { http.get(url).send().await.map(|r| r.status()) }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!second.is_finished());
        api.stop().await;
        let status = second.await.unwrap();
        assert!(status.as_ref().map_or(true, |s| *s == 503), "{status:?}");
    }

    #[tokio::test]
    async fn the_emulator_records_init_and_invocation_errors() {
        let mut api = RuntimeApi::start(serde_json::json!({}), function_arn("health")).await.unwrap();
        let base = format!("http://{}{API_PREFIX}", api.addr);
        let http = reqwest::Client::new();
        let posted = http
            .post(format!("{base}/init/error"))
            .header("Lambda-Runtime-Function-Error-Type", "Runtime.ConfigError")
            .body(r#"{"errorMessage":"BATON_TABLE is required"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(posted.status(), 202);
        match judge(api.outcomes.recv().await.unwrap(), Instant::now()) {
            Some(Err(err)) => assert!(err.contains("Runtime.ConfigError") && err.contains("BATON_TABLE"), "{err}"),
            other => panic!("expected an init error, got {other:?}"),
        }
        http.post(format!("{base}/invocation/abc/error"))
            .header("Lambda-Runtime-Function-Error-Type", "Boom")
            .body("{}")
            .send()
            .await
            .unwrap();
        match judge(api.outcomes.recv().await.unwrap(), Instant::now()) {
            Some(Ok(Run { problem: Some(problem), .. })) => assert!(problem.contains("Boom"), "{problem}"),
            other => panic!("expected a timed invocation error, got {other:?}"),
        }
        http.get(format!("{base}/restore/next")).send().await.unwrap();
        assert!(matches!(api.outcomes.recv().await, Some(Outcome::Unexpected(r)) if r.contains("restore/next")));
        api.stop().await;
    }

    #[tokio::test]
    async fn a_process_that_exits_is_reported_not_timed() {
        let Some(exits) = ["/bin/false", "/usr/bin/false"].into_iter().map(Path::new).find(|p| p.exists()) else {
            return;
        };
        let log = std::env::temp_dir().join(format!("baton-cold-start-test-{}.log", uuid::Uuid::new_v4()));
        let err = run_once(exits, "health", &HashMap::new(), &serde_json::json!({}), &log, Duration::from_secs(10))
            .await
            .unwrap_err();
        assert!(err.contains("exited"), "{err}");
        let _ = std::fs::remove_file(&log);
    }

    #[test]
    fn every_first_event_has_the_shape_its_trigger_delivers() {
        let resources = Resources::load();
        for function in &resources.functions {
            let event = first_event(&resources, function);
            let parsed = match function.trigger {
                Trigger::Http => serde_json::from_value::<ApiGatewayV2httpRequest>(event.clone()).map(|r| {
                    assert_eq!(r.version.as_deref(), Some("2.0"));
                    assert!(r.raw_path.as_deref().is_some_and(|p| p.starts_with("/v1/")), "{event}");
                    assert!(!r.raw_path.as_deref().unwrap_or_default().contains('{'), "{event}");
                    let route = resources.routes.iter().find(|r| r.function == function.name).unwrap();
                    assert_eq!(r.request_context.http.method.as_str(), route.method, "{event}");
                }),
                Trigger::Sqs => serde_json::from_value::<SqsEvent>(event.clone()).map(|_| ()),
                Trigger::Stream => serde_json::from_value::<StreamEvent>(event.clone()).map(|_| ()),
                Trigger::Schedule => serde_json::from_value::<CloudWatchEvent>(event.clone()).map(|e| {
                    assert_eq!(e.detail_type.as_deref(), Some("Scheduled Event"));
                }),
                Trigger::Websocket => {
                    serde_json::from_value::<aws_lambda_events::apigw::ApiGatewayWebsocketProxyRequest>(event.clone())
                        .map(|e| assert_eq!(e.request_context.route_key.as_deref(), Some("$connect")))
                }
            };
            assert!(parsed.is_ok(), "{}: {parsed:?}\n{event:#}", function.name);
        }
    }

    #[test]
    fn http_events_fill_path_parameters() {
        let event = http_event("POST", "/v1/workspaces/{ws}/runs/{run_id}/cancel", chrono::Utc::now());
        let run_id = event["pathParameters"]["run_id"].as_str().unwrap();
        assert_eq!(event["pathParameters"]["ws"], "bench");
        assert_eq!(event["rawPath"], format!("/v1/workspaces/bench/runs/{run_id}/cancel"));
        assert_eq!(event["requestContext"]["http"]["method"], "POST");
        assert_eq!(event["routeKey"], "POST /v1/workspaces/{ws}/runs/{run_id}/cancel");
        assert_eq!(event["body"], "{}");
        let health = http_event("GET", "/v1/health", chrono::Utc::now());
        assert!(health.get("pathParameters").is_none() && health.get("body").is_none());
    }

    fn figures(function: &str, bytes: Option<u64>, ms: &[f64]) -> FunctionColdStart {
        FunctionColdStart {
            function: function.into(),
            trigger: "http".into(),
            binary: format!("target/release/baton-{function}"),
            binary_bytes: bytes,
            first_event_ms: ms.to_vec(),
            median_ms: median(ms),
            init_error: None,
        }
    }

    #[test]
    fn render_marks_binaries_over_the_target() {
        let mut crashed = figures("claim", Some(4_000_000), &[]);
        crashed.init_error = Some("exited (exit status: 1) before answering its first event".into());
        let report = ColdStartReport {
            target: "x86_64-unknown-linux-gnu".into(),
            profile: "release".into(),
            size_limit_bytes: SIZE_LIMIT_BYTES,
            functions: vec![
                figures("health", Some(5_250_000), &[20.0, 12.5, 14.0]),
                figures("relay", Some(12_300_000), &[30.0, 31.0]),
                figures("enqueue", None, &[]),
                crashed,
            ],
            note: "a proxy".into(),
        };
        let table = render(&report);
        let line = |name: &str| table.lines().find(|l| l.starts_with(name)).unwrap().to_string();
        let health = line("health ");
        assert!(health.contains("5.25") && health.contains(" ok ") && health.contains("14.0"), "{health}");
        assert!(health.contains("12.5"), "the fastest run: {health}");
        let relay = line("relay ");
        assert!(relay.contains("12.30") && relay.contains("OVER") && relay.contains("30.5"), "{relay}");
        assert!(line("enqueue ").contains("missing"));
        assert!(line("claim ").ends_with('!'));
        assert!(table.contains("! claim: exited"), "{table}");
        assert!(table.contains("2 of 4 binaries meet the 10.0 MB target (1 over, 1 missing)"), "{table}");
        assert!(table.contains("note: a proxy"));
    }

    #[test]
    fn the_release_profile_is_read_from_the_manifest() {
        let manifest = "[workspace]\n[profile.release]\n# why\nstrip = true\nlto = \"fat\"\n\n[profile.dev]\nx = 1\n";
        assert_eq!(profile_settings(manifest, "profile.release"), "strip = true; lto = \"fat\"");
        assert!(release_profile().contains("strip"), "{}", release_profile());
    }

    #[test]
    fn median_of_odd_even_and_no_runs() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }
}
