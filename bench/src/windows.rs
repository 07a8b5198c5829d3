//! Measurement windows: the AWS requests recorded while one operation ran,
//! summed into its figures (DynamoDB requests by operation, capacity units,
//! failed conditional writes, other services).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::recorder::{Recorder, Request};

pub(crate) fn dynamodb(requests: &[Request]) -> Vec<&Request> {
    requests.iter().filter(|r| r.is_dynamodb()).collect()
}

fn is_read(operation: &str) -> bool {
    matches!(operation, "GetItem" | "Query" | "Scan" | "BatchGetItem" | "TransactGetItems")
}

fn is_write(operation: &str) -> bool {
    matches!(operation, "PutItem" | "UpdateItem" | "DeleteItem" | "BatchWriteItem" | "TransactWriteItems")
}

/// Waits until no DynamoDB request was recorded for a while.
pub(crate) async fn settle(recorder: &Recorder) {
    settle_except(recorder, "").await
}

/// Waits until no DynamoDB request was recorded for a while, except those of
/// `function`'s invocations (idle runners long-poll the claim function all
/// the time; their polls never stop).
pub(crate) async fn settle_except(recorder: &Recorder, function: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = recorder.mark();
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = recorder.mark();
        let busy = dynamodb(&recorder.since(last))
            .iter()
            .filter(|r| function.is_empty() || r.function.as_deref() != Some(function))
            .count();
        if busy == 0 || Instant::now() > deadline {
            return;
        }
        last = now;
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct OperationFigures {
    pub(crate) name: String,
    pub(crate) requests: usize,
    pub(crate) by_operation: BTreeMap<String, usize>,
    pub(crate) read_requests: usize,
    pub(crate) write_requests: usize,
    pub(crate) transactions: usize,
    pub(crate) read_units: f64,
    pub(crate) write_units: f64,
    pub(crate) failed_conditional_writes: usize,
    pub(crate) other_services: BTreeMap<String, usize>,
    pub(crate) request_bytes: usize,
    pub(crate) target: Option<String>,
    pub(crate) meets_target: Option<bool>,
}

pub(crate) fn figures(name: &str, window: &[Request]) -> OperationFigures {
    let ddb = dynamodb(window);
    let mut by_operation = BTreeMap::new();
    for r in &ddb {
        *by_operation.entry(r.operation.clone()).or_insert(0) += 1;
    }
    let mut other_services = BTreeMap::new();
    for r in window.iter().filter(|r| !r.is_dynamodb()) {
        *other_services.entry(format!("{}:{}", r.service, r.operation)).or_insert(0) += 1;
    }
    OperationFigures {
        name: name.into(),
        requests: ddb.len(),
        by_operation,
        read_requests: ddb.iter().filter(|r| is_read(&r.operation)).count(),
        write_requests: ddb.iter().filter(|r| is_write(&r.operation)).count(),
        transactions: ddb.iter().filter(|r| r.operation == "TransactWriteItems").count(),
        read_units: ddb.iter().map(|r| r.read_units).sum(),
        write_units: ddb.iter().map(|r| r.write_units).sum(),
        failed_conditional_writes: ddb.iter().filter(|r| r.failed_condition).count(),
        other_services,
        request_bytes: ddb.iter().map(|r| r.request_bytes).sum(),
        target: None,
        meets_target: None,
    }
}

pub(crate) async fn measure<T>(
    recorder: &Recorder,
    name: &str,
    op: impl std::future::Future<Output = T>,
) -> (OperationFigures, T) {
    settle(recorder).await;
    let mark = recorder.mark();
    let out = op.await;
    (figures(name, &recorder.since(mark)), out)
}

pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}
