//! The functions' own log lines, kept in memory for a test to read: what
//! would reach CloudWatch on AWS. A test that must show a value is never
//! logged (a secret, a signature) reads them after the fact.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

static LINES: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();

/// Every log line written since [`capture`] was first called in this
/// process (by any test of it: a superset is as good for a scan).
pub struct CapturedLogs(Arc<Mutex<Vec<u8>>>);

/// Sends this process's log lines (the in-process functions', as JSON, as
/// on AWS) to memory. Call it before the stack starts: the first logger
/// installed in a process stays.
pub fn capture() -> CapturedLogs {
    let lines = LINES.get_or_init(|| {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        baton_telemetry::logs::init_writing_to(move || Sink(sink.clone()));
        lines
    });
    CapturedLogs(lines.clone())
}

impl CapturedLogs {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
