//! In-process serialisation of writers to one item family (a workflow's run
//! counter, an attempt, a run's current attempt).
//!
//! Correctness never depends on it: every such write is a compare-and-set
//! that tolerates other processes. But writers in one process (a batch of
//! facts handled concurrently, the dev host running every function) would
//! otherwise race each other and lose conditions they need not lose: a
//! subscriber handles a batch of up to ten facts concurrently, and ten job
//! outcomes of one attempt would contend for its version; each lost
//! transaction costs a round trip and a retry. Taking the key's lock first
//! removes those self-inflicted conflicts.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use tokio::sync::OwnedMutexGuard;

type Locks = Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>;

static LOCKS: LazyLock<Locks> = LazyLock::new(Locks::default);

/// Locks left unused are forgotten once the map holds more than this.
const PRUNE_ABOVE: usize = 1024;

/// Waits for the in-process lock of `key`; it is held until the guard drops.
pub async fn lock(key: String) -> OwnedMutexGuard<()> {
    let mutex = {
        let mut locks = LOCKS.lock().unwrap_or_else(|e| e.into_inner());
        if locks.len() > PRUNE_ABOVE {
            locks.retain(|_, m| Arc::strong_count(m) > 1);
        }
        locks.entry(key).or_default().clone()
    };
    mutex.lock_owned().await
}

/// The lock key of an attempt's item.
pub fn attempt_key(run_id: uuid::Uuid, attempt: u32) -> String {
    format!("attempt#{run_id}#{attempt}")
}

/// The lock key of a run's item (reruns move its current attempt).
pub fn run_key(run_id: uuid::Uuid) -> String {
    format!("run#{run_id}")
}

/// The lock key of a workflow's run counter.
pub fn counter_key(workspace_id: &str, workflow: &str) -> String {
    format!("counter#{workspace_id}#{workflow}")
}
