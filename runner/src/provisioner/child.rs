//! One local instance: a `baton-runner` child process, started with a
//! reservation's registration token, its output forwarded to this process's
//! logs (tagged with the instance), its registration noticed, and stopped
//! on request (SIGTERM, SIGKILL after a grace).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::process::{exit_code, terminate_group};

/// How to start one runner.
#[derive(Debug, Clone)]
pub struct ChildSpec {
    pub provider_runner_id: String,
    pub reservation_id: Uuid,
    pub runner_bin: PathBuf,
    pub api: String,
    pub registration_token: String,
    pub labels: Vec<String>,
    pub work_dir: PathBuf,
    pub extra_args: Vec<String>,
    /// Between SIGTERM and SIGKILL when the instance is stopped.
    pub kill_grace: Duration,
}

/// How long an exited child's output may still be read before its exit is told.
const READERS_GRACE: Duration = Duration::from_secs(1);

/// What a child tells the provisioner's loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildEvent {
    /// Its runner registered: this is its session.
    Registered { provider_runner_id: String, session: Uuid },
    /// Its process ended (`code` as a shell shows it; `None`: unknown).
    Exited { provider_runner_id: String, code: Option<i32> },
}

/// A running child. [`Running::stop`] stops it; so does dropping it, so
/// that no path out of the provisioner's loop leaves a runner behind.
#[derive(Debug)]
pub struct Running {
    stop: Option<oneshot::Sender<()>>,
}

impl Running {
    /// Asks the child to stop (SIGTERM, then SIGKILL after the grace); its
    /// `Exited` event follows. A second call does nothing.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Starts the runner of `spec`; its events go to `events`.
pub fn start(spec: ChildSpec, events: mpsc::UnboundedSender<ChildEvent>) -> std::io::Result<Running> {
    std::fs::create_dir_all(&spec.work_dir)?;
    let mut command = tokio::process::Command::new(&spec.runner_bin);
    command
        .arg("--api")
        .arg(&spec.api)
        .arg("--labels")
        .arg(spec.labels.join(","))
        .arg("--name")
        .arg(&spec.provider_runner_id)
        .arg("--work-dir")
        .arg(&spec.work_dir)
        // Its session's labels are its reservation's (the provisioner's
        // label set, tools included): detecting this machine's is wasted.
        .arg("--tools")
        .arg("none")
        // JSON lines, so this process can read the session it registered
        // and re-log its lines with the instance's fields.
        .arg("--json-logs")
        .args(&spec.extra_args)
        // The token goes in the environment, not the arguments: any local
        // user can read a process's arguments (ps), not its environment.
        .env("BATON_REGISTRATION_TOKEN", &spec.registration_token)
        // The runner hands its environment to the jobs it runs (less its own
        // token and the admin's): a job must not get the fleet's token.
        .env_remove("BATON_PROVISIONER_TOKEN")
        .env_remove("BATON_ADMIN_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so a terminal's Ctrl-C reaches this provisioner
        // only, which then stops its children in order.
        .process_group(0);
    die_with_parent(&mut command);
    let mut child = command.spawn()?;
    let pgid = child.id().map_or(0, |pid| pid as i32);
    let id = spec.provider_runner_id.clone();
    let reservation = spec.reservation_id;
    let mut readers = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        readers.push(tokio::spawn(forward(stdout, id.clone(), reservation, events.clone())));
    }
    if let Some(stderr) = child.stderr.take() {
        readers.push(tokio::spawn(forward(stderr, id.clone(), reservation, events.clone())));
    }
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let grace = spec.kill_grace;
    tokio::spawn(async move {
        let status = tokio::select! {
            status = child.wait() => status.ok(),
            // A dropped sender (the loop is gone) stops the child too.
            _ = stop_rx => terminate_group(&mut child, pgid, grace).await,
        };
        let code = status.as_ref().and_then(exit_code);
        // Its last lines (the registration of a runner that ended at once)
        // come before its exit; a step process that kept the pipe open does
        // not hold the exit back for long.
        let _ = tokio::time::timeout(READERS_GRACE, futures::future::join_all(readers)).await;
        let _ = events.send(ChildEvent::Exited { provider_runner_id: id, code });
    });
    Ok(Running { stop: Some(stop_tx) })
}

/// On Linux, the child gets SIGTERM when this process dies, even by
/// SIGKILL: a local instance never outlives its provisioner unnoticed.
#[cfg(target_os = "linux")]
fn die_with_parent(command: &mut tokio::process::Command) {
    // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe and touches no
    // memory of the parent; it is all the closure does between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_command: &mut tokio::process::Command) {}

/// Re-logs each line of a child's output with the instance's fields, and
/// reports its registration.
async fn forward(
    stream: impl AsyncRead + Unpin,
    id: String,
    reservation: Uuid,
    events: mpsc::UnboundedSender<ChildEvent>,
) {
    let mut lines = BufReader::new(stream).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let read = read_line(&line);
        let text = read.text.as_str();
        match read.level {
            Level::Error => tracing::error!(provider_runner_id = %id, %reservation, "runner: {text}"),
            Level::Warn => tracing::warn!(provider_runner_id = %id, %reservation, "runner: {text}"),
            Level::Info => tracing::info!(provider_runner_id = %id, %reservation, "runner: {text}"),
            Level::Debug => tracing::debug!(provider_runner_id = %id, %reservation, "runner: {text}"),
        }
        if let Some(session) = read.session {
            let _ = events.send(ChildEvent::Registered { provider_runner_id: id.clone(), session });
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Error,
    Warn,
    Info,
    Debug,
}

/// One line of a runner's output, as this process logs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildLine {
    pub level: Level,
    /// The message and its fields (`message k=v …`), or the raw line.
    pub text: String,
    /// Set on the runner's `registered` line: the session it opened.
    pub session: Option<Uuid>,
}

/// Reads a line of `baton-runner --json-logs` (a tracing JSON event); any
/// other line is kept as it is, at info.
pub fn read_line(line: &str) -> ChildLine {
    let raw = || ChildLine { level: Level::Info, text: line.to_string(), session: None };
    let Ok(Value::Object(event)) = serde_json::from_str::<Value>(line) else { return raw() };
    let Some(Value::Object(fields)) = event.get("fields") else { return raw() };
    let level = match event.get("level").and_then(Value::as_str) {
        Some("ERROR") => Level::Error,
        Some("WARN") => Level::Warn,
        Some("DEBUG") | Some("TRACE") => Level::Debug,
        _ => Level::Info,
    };
    let message = fields.get("message").and_then(Value::as_str).unwrap_or_default();
    let mut text = message.to_string();
    for (key, value) in fields.iter().filter(|(k, _)| k.as_str() != "message") {
        let value = value.as_str().map_or_else(|| value.to_string(), str::to_string);
        text.push_str(&format!(" {key}={value}"));
    }
    // The agent logs `registered` with the session id once it has one.
    let session = (message == "registered")
        .then(|| fields.get("session").and_then(Value::as_str).and_then(|s| Uuid::parse_str(s).ok()))
        .flatten();
    ChildLine { level, text, session }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registered_line_names_the_session() {
        let session = Uuid::now_v7();
        let line = serde_json::json!({"timestamp": "2026-01-01T00:00:00Z", "level": "INFO",
            "fields": {"message": "registered", "session": session.to_string(), "workspace": "demo"},
            "target": "baton_runner::agent"})
        .to_string();
        let read = read_line(&line);
        assert_eq!(read.session, Some(session));
        assert_eq!(read.level, Level::Info);
        assert_eq!(read.text, format!("registered session={session} workspace=demo"));
    }

    #[test]
    fn other_lines_keep_their_level_and_name_no_session() {
        let line = r#"{"level":"WARN","fields":{"message":"claim failed","retry_in_ms":500},"target":"x"}"#;
        let read = read_line(line);
        assert_eq!((read.level, read.text.as_str(), read.session), (Level::Warn, "claim failed retry_in_ms=500", None));
        let output = r#"{"level":"INFO","fields":{"message":"output","session":"not-a-uuid"}}"#;
        assert_eq!(read_line(output).session, None, "only the registered line counts");
    }

    #[test]
    fn a_line_that_is_not_a_json_event_is_kept_as_it_is() {
        let read = read_line("thread 'main' panicked at …");
        assert_eq!((read.level, read.text.as_str(), read.session), (Level::Info, "thread 'main' panicked at …", None));
        assert_eq!(read_line("[1,2]").text, "[1,2]");
    }

    #[tokio::test]
    async fn a_child_gets_its_token_reports_its_exit_and_a_stopped_one_is_stopped() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let spec = |id: &str, script: &str| {
            ChildSpec {
                provider_runner_id: id.into(),
                reservation_id: Uuid::nil(),
                runner_bin: PathBuf::from("/bin/sh"),
                api: String::new(),
                registration_token: "brt_x".into(),
                labels: vec![],
                work_dir: std::env::temp_dir().join("baton-provisioner-child-test"),
                extra_args: vec![],
                kill_grace: Duration::from_secs(5),
            }
            .with_script(script)
        };
        let _quick =
            start_retrying(spec("quick", r#"[ "$BATON_REGISTRATION_TOKEN" = brt_x ] && exit 3; exit 1"#), &tx).await;
        let exited = rx.recv().await.expect("an event");
        assert_eq!(exited, ChildEvent::Exited { provider_runner_id: "quick".into(), code: Some(3) });
        let mut slow = start_retrying(spec("slow", "sleep 600"), &tx).await;
        slow.stop();
        let exited = rx.recv().await.expect("an event");
        assert_eq!(exited, ChildEvent::Exited { provider_runner_id: "slow".into(), code: Some(128 + libc::SIGTERM) });
    }

    /// Starts a freshly written script: another test's fork may hold it open
    /// for writing an instant (ETXTBSY), which a retry outlives.
    async fn start_retrying(spec: ChildSpec, tx: &mpsc::UnboundedSender<ChildEvent>) -> Running {
        for _ in 0..50 {
            match start(spec.clone(), tx.clone()) {
                Ok(running) => return running,
                Err(err) if err.raw_os_error() == Some(libc::ETXTBSY) => {
                    tokio::time::sleep(Duration::from_millis(20)).await
                }
                Err(err) => panic!("cannot start {}: {err}", spec.runner_bin.display()),
            }
        }
        panic!("{} stayed busy", spec.runner_bin.display())
    }

    impl ChildSpec {
        /// A spec whose "runner" is a shell script (the flags become `$0…`).
        fn with_script(self, script: &str) -> Self {
            let bin = std::env::temp_dir().join(format!("baton-provisioner-test-{}.sh", Uuid::now_v7().simple()));
            std::fs::write(&bin, format!("#!/bin/sh\n{script}\n")).expect("a script");
            std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("executable");
            Self { runner_bin: bin, ..self }
        }
    }
}
