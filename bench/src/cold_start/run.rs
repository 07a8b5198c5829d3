//! One timed run: a function's binary spawned as Lambda runs it, against
//! the Runtime API emulator, from spawn to the answer to its first event.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::cold_start::events::{function_arn, function_name};
use crate::cold_start::runtime_api::{Outcome, RuntimeApi};

/// The memory size the stack gives functions (infra `functionMemoryMb` default);
/// the runtime only reports it, but it must be a number.
const MEMORY_MB: &str = "256";

/// A run that reached the first answer.
#[derive(Debug)]
pub(super) struct Run {
    pub(super) elapsed: Duration,
    /// Set when the answer was an invocation error or an HTTP 5xx.
    pub(super) problem: Option<String>,
}

/// Spawns `binary` as Lambda would, feeds it `event`, and times spawn → the
/// answer. Errors (spawn failure, init error, exit, timeout) come back as
/// text for the report, with the tail of the function's log.
pub(super) async fn run_once(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cold_start::runtime_api::API_PREFIX;

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
}
