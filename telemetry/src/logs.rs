//! Structured JSON logs. Every function calls [`init`] once at start-up; spans
//! opened by handlers carry the run, job, execution and session ids so that
//! every line under them names them.

use tracing_subscriber::EnvFilter;

/// JSON logs to stdout (CloudWatch reads them), filtered by `RUST_LOG`
/// (default `info`). Safe to call twice: the second call is a no-op.
///
/// Each line carries its own `timestamp` (RFC 3339, UTC): CloudWatch stamps
/// the line when it ingests it, but the dev host's output, a soak's
/// evidence and a log exported elsewhere have only the line's own time.
pub fn init() {
    init_writing_to(std::io::stdout);
}

/// The same lines, written to `writer` instead of stdout: a test that runs
/// the functions in its own process (the chaos soak) keeps them beside its
/// evidence.
pub fn init_writing_to<W>(writer: W)
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(true)
        .with_span_list(false)
        .with_target(false)
        .with_writer(writer)
        .try_init();
}
