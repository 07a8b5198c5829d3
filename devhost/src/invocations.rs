//! A log of function invocations, kept by the dev host the way Lambda's own
//! metrics would (`Invocations`, `Duration`, batch sizes), so that the
//! benchmark can count what a workload costs in invocations.
//!
//! Each handler runs inside a task-local [`Invocation`] scope, so that code
//! running on its behalf (the benchmark's SDK interceptor) can tell which
//! invocation sent an AWS request.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The invocation a piece of code runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub id: u64,
    pub function: String,
}

tokio::task_local! {
    static CURRENT: Invocation;
}

/// The invocation the calling task runs in, if it runs in one.
pub fn current() -> Option<Invocation> {
    CURRENT.try_with(Invocation::clone).ok()
}

/// One finished invocation.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Record {
    pub id: u64,
    pub function: String,
    /// Records handed over in a batch (SQS messages, stream records).
    pub records: usize,
    /// Wall time in the handler (on the emulator: an upper bound).
    pub handler_ms: f64,
    /// The HTTP answer's status, for API functions.
    pub status: Option<u16>,
    /// Bytes of the HTTP request's and answer's bodies, for API functions:
    /// what passed through the function (artifacts' bytes must not).
    #[serde(default)]
    pub body_bytes: usize,
    #[serde(skip)]
    pub finished: Instant,
}

/// Shared by the dev host's triggers; clone it freely.
#[derive(Debug, Clone, Default)]
pub struct Invocations {
    next_id: Arc<AtomicU64>,
    log: Arc<Mutex<Vec<Record>>>,
}

impl Invocations {
    /// Runs `handler` as one invocation of `function` and logs it; `status`
    /// reads the HTTP status off the answer, if there is one.
    pub async fn invoke<T>(
        &self,
        function: &str,
        records: usize,
        handler: impl Future<Output = T>,
        status: impl FnOnce(&T) -> Option<u16>,
    ) -> T {
        self.invoke_counted(function, records, 0, handler, |out| (status(out), 0)).await
    }

    /// [`Invocations::invoke`] for an HTTP function: `request_bytes` of
    /// body in, `answer` reads the status and the body's bytes out.
    pub async fn invoke_counted<T>(
        &self,
        function: &str,
        records: usize,
        request_bytes: usize,
        handler: impl Future<Output = T>,
        answer: impl FnOnce(&T) -> (Option<u16>, usize),
    ) -> T {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let started = Instant::now();
        let out = CURRENT.scope(Invocation { id, function: function.to_string() }, handler).await;
        let (status, response_bytes) = answer(&out);
        self.push(Record {
            id,
            function: function.to_string(),
            records,
            handler_ms: started.elapsed().as_secs_f64() * 1000.0,
            status,
            body_bytes: request_bytes + response_bytes,
            finished: Instant::now(),
        });
        out
    }

    fn push(&self, record: Record) {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).push(record);
    }

    /// How many invocations finished so far (a mark for [`Invocations::since`]).
    pub fn mark(&self) -> usize {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// The invocations that finished after `mark`.
    pub fn since(&self, mark: usize) -> Vec<Record> {
        let log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        log.get(mark..).map(<[Record]>::to_vec).unwrap_or_default()
    }
}

/// Invocations and records per function.
pub fn per_function(records: &[Record]) -> BTreeMap<String, (usize, usize)> {
    let mut out: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for r in records {
        let entry = out.entry(r.function.clone()).or_default();
        entry.0 += 1;
        entry.1 += r.records;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn each_invocation_is_logged_and_visible_to_the_code_it_runs() {
        let log = Invocations::default();
        let seen = log.invoke("claim", 0, async { current() }, |_| Some(204)).await;
        assert_eq!(seen.map(|i| i.function), Some("claim".to_string()));
        assert_eq!(current(), None, "outside a handler there is no invocation");
        let mark = log.mark();
        log.invoke("enqueue", 3, async {}, |_| None).await;
        let after = log.since(mark);
        assert_eq!(after.len(), 1);
        assert_eq!((after[0].function.as_str(), after[0].records, after[0].status), ("enqueue", 3, None));
        assert_eq!(per_function(&log.since(0)), BTreeMap::from([("claim".into(), (1, 0)), ("enqueue".into(), (1, 3))]));
    }
}
