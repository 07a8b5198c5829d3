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

mod events;
mod run;
mod runtime_api;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use baton_localstack::resources::{Resources, Trigger};
use serde::Serialize;

use events::first_event;
use run::run_once;

/// The size target the issue sets for a function's `bootstrap`: 10 MB,
/// decimal (10,000,000 bytes) — the stricter reading of "10 MB".
pub const SIZE_LIMIT_BYTES: u64 = 10_000_000;

/// How long one run may take from spawn to the first answer. Far above any
/// healthy cold start (tens of ms); a run that takes this long is stuck
/// (an endpoint that never answers, a runtime that never polls).
const RUN_TIMEOUT: Duration = Duration::from_secs(30);

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
        Trigger::Scheduler => "scheduler",
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

#[cfg(test)]
mod tests {
    use super::*;

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
