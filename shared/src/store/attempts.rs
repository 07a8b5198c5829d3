//! Attempt items and what hangs off them: the frozen definition snapshot
//! and the reported steps of finished executions. All live in the run's
//! partition (`pk = RUN#<run_id>`), so one `Query` reads a whole run.
//!
//! - attempt `sk = ATTEMPT#<n>`: the [`AttemptState`] (every job and its
//!   execution, see `workflows::attempt` for why one item), a `version`
//!   that every write compares and bumps, and the orchestration's parked
//!   wait: `progress` counts job outcomes (claims do not count, so they do
//!   not wake the orchestrator), `wait_token` is the task token of the
//!   parked `WaitForProgress` state and `wait_progress` the progress it
//!   waits to see move.
//! - snapshot `sk = SNAPSHOT#<n>`: the parsed definition as JSON, written
//!   once at creation (a rerun points at its predecessor's).
//! - result `sk = STEPS#<n>#<execution_id>`: the step results and outputs a
//!   runner reported, written with the execution's terminal state (kept out
//!   of the attempt item so that outputs cannot grow it).

use std::collections::{BTreeMap, HashMap};
use std::sync::{LazyLock, Mutex};

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem, Update};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{from_item, n, s, to_item, Store};
use crate::error::StoreError;
use crate::facts::{Fact, StepResult};
use crate::workflows::attempt::{AttemptState, Emitted};
use crate::workflows::status::RunStatus;
use crate::workflows::WorkflowDefinition;

/// The partition of a run and everything it holds.
pub fn run_pk(run_id: Uuid) -> String {
    format!("RUN#{run_id}")
}

pub fn attempt_sk(attempt: u32) -> String {
    format!("ATTEMPT#{attempt:010}")
}

pub fn snapshot_sk(attempt: u32) -> String {
    format!("SNAPSHOT#{attempt:010}")
}

pub fn steps_sk(attempt: u32, execution_id: Uuid) -> String {
    format!("STEPS#{attempt:010}#{execution_id}")
}

/// An attempt item as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptItem {
    pub pk: String,
    pub sk: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub version: u64,
    pub progress: u64,
    pub wait_token: Option<String>,
    pub wait_progress: Option<u64>,
    #[serde(with = "deflated")]
    pub state: AttemptState,
}

/// The attempt state is stored as deflated JSON (a binary attribute). It
/// holds every job of the run and is written whole on every job outcome and
/// every orchestration step; DynamoDB bills a write unit per started KB of
/// the item (twice inside a transaction), and as a map its field names
/// repeat for every job. Deflated it is several times smaller, which both
/// cuts the write units per job and pushes the 400 KB item limit out to runs
/// several times larger. Nothing reads or updates it by attribute path.
mod deflated {
    use std::io::{Read, Write};

    use flate2::read::DeflateDecoder;
    use flate2::write::DeflateEncoder;
    use flate2::Compression;
    use serde::de::Error as _;
    use serde::ser::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::workflows::attempt::AttemptState;

    pub fn serialize<S: Serializer>(state: &AttemptState, serializer: S) -> Result<S::Ok, S::Error> {
        let json = serde_json::to_vec(state).map_err(S::Error::custom)?;
        let mut encoder = DeflateEncoder::new(Vec::with_capacity(json.len() / 4), Compression::default());
        encoder.write_all(&json).map_err(S::Error::custom)?;
        let packed = encoder.finish().map_err(S::Error::custom)?;
        serializer.serialize_bytes(&packed)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<AttemptState, D::Error> {
        let packed = serde_bytes::ByteBuf::deserialize(deserializer)?;
        let mut json = Vec::new();
        DeflateDecoder::new(packed.as_slice()).read_to_end(&mut json).map_err(D::Error::custom)?;
        serde_json::from_slice(&json).map_err(D::Error::custom)
    }
}

impl AttemptItem {
    pub fn new(state: AttemptState) -> Self {
        Self {
            pk: run_pk(state.run_id),
            sk: attempt_sk(state.attempt),
            kind: "attempt".into(),
            version: 0,
            progress: 0,
            wait_token: None,
            wait_progress: None,
            state,
        }
    }

    /// The parked task token, if the orchestration waits for progress that
    /// has since happened: whoever sees this completes the token (again, if
    /// need be: completing a used token is harmless).
    pub fn token_to_wake(&self) -> Option<&str> {
        match (&self.wait_token, self.wait_progress) {
            (Some(token), Some(waited)) if waited < self.progress => Some(token.as_str()),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotItem {
    pub pk: String,
    pub sk: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// The parsed definition as JSON text.
    pub definition: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepsItem {
    pub pk: String,
    pub sk: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub execution_id: Uuid,
    pub steps: Vec<StepResult>,
    #[serde(default)]
    pub outputs: BTreeMap<String, serde_json::Value>,
}

/// Snapshots cached per process, by (table, run, snapshot attempt).
type SnapshotCache = Mutex<HashMap<(String, Uuid, u32), WorkflowDefinition>>;
static SNAPSHOTS: LazyLock<SnapshotCache> = LazyLock::new(SnapshotCache::default);
/// The cache is simply emptied when it holds this many snapshots.
const SNAPSHOT_CACHE_SIZE: usize = 256;

fn build_err(e: impl std::fmt::Display) -> StoreError {
    StoreError::Other(e.to_string())
}

impl Store {
    /// The attempt item, read consistently.
    pub async fn get_attempt(&self, run_id: Uuid, attempt: u32) -> Result<Option<AttemptItem>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(run_pk(run_id)))
            .key("sk", s(attempt_sk(attempt)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::DynamoDb(super::display_sdk_error(&e)))?;
        out.item.map(from_item).transpose()
    }

    /// The frozen definition of snapshot `attempt`. Snapshots never change,
    /// so they are cached in the process (the orchestrator reads one on
    /// every wake-up).
    pub async fn get_snapshot(&self, run_id: Uuid, attempt: u32) -> Result<Option<WorkflowDefinition>, StoreError> {
        let key = (self.table.clone(), run_id, attempt);
        if let Some(cached) = SNAPSHOTS.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok(Some(cached.clone()));
        }
        let definition = self.read_snapshot(run_id, attempt).await?;
        if let Some(definition) = &definition {
            let mut cache = SNAPSHOTS.lock().unwrap_or_else(|e| e.into_inner());
            if cache.len() >= SNAPSHOT_CACHE_SIZE {
                cache.clear();
            }
            cache.insert(key, definition.clone());
        }
        Ok(definition)
    }

    async fn read_snapshot(&self, run_id: Uuid, attempt: u32) -> Result<Option<WorkflowDefinition>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(run_pk(run_id)))
            .key("sk", s(snapshot_sk(attempt)))
            .send()
            .await
            .map_err(|e| StoreError::DynamoDb(super::display_sdk_error(&e)))?;
        let Some(item) = out.item else { return Ok(None) };
        let snapshot: SnapshotItem = from_item(item)?;
        serde_json::from_str(&snapshot.definition).map(Some).map_err(|e| StoreError::Malformed(e.to_string()))
    }

    /// Writes the attempt item: a new one (`expected_version: None`, must not
    /// exist) or a compare-and-set on the version that was read.
    pub fn attempt_put(
        &self,
        item: &AttemptItem,
        expected_version: Option<u64>,
    ) -> Result<TransactWriteItem, StoreError> {
        let put = Put::builder().table_name(&self.table).set_item(Some(to_item(item)?));
        let put = match expected_version {
            None => put.condition_expression("attribute_not_exists(pk)"),
            Some(version) => put.condition_expression("version = :v").expression_attribute_values(":v", n(version)),
        };
        Ok(TransactWriteItem::builder().put(put.build().map_err(build_err)?).build())
    }

    /// Writes the frozen snapshot of a new attempt.
    pub fn snapshot_put(
        &self,
        run_id: Uuid,
        attempt: u32,
        definition: &WorkflowDefinition,
    ) -> Result<TransactWriteItem, StoreError> {
        let item = SnapshotItem {
            pk: run_pk(run_id),
            sk: snapshot_sk(attempt),
            kind: "snapshot".into(),
            definition: serde_json::to_string(definition).map_err(|e| StoreError::Malformed(e.to_string()))?,
        };
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(to_item(&item)?))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .map_err(build_err)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// Writes the result of a finished execution: the steps and outputs its
    /// runner reported.
    pub fn result_put(
        &self,
        run_id: Uuid,
        attempt: u32,
        execution_id: Uuid,
        steps: &[StepResult],
        outputs: &BTreeMap<String, serde_json::Value>,
    ) -> Result<TransactWriteItem, StoreError> {
        let item = StepsItem {
            pk: run_pk(run_id),
            sk: steps_sk(attempt, execution_id),
            kind: "steps".into(),
            execution_id,
            steps: steps.to_vec(),
            outputs: outputs.clone(),
        };
        let put = Put::builder().table_name(&self.table).set_item(Some(to_item(&item)?)).build().map_err(build_err)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// Records the steps a runner reported for an execution the server had
    /// already ended (timed out, cancelled): the status stands, but the view
    /// should show what the steps did. Only the first report is kept (the put
    /// is conditioned on absence), so a redelivered fact changes nothing.
    pub async fn record_late_results(
        &self,
        run_id: Uuid,
        attempt: u32,
        execution_id: Uuid,
        steps: &[StepResult],
        outputs: &BTreeMap<String, serde_json::Value>,
    ) -> Result<(), StoreError> {
        let mut put = self.result_put(run_id, attempt, execution_id, steps, outputs)?;
        if let Some(p) = put.put.as_mut() {
            p.condition_expression = Some("attribute_not_exists(pk)".into());
        }
        self.transact(vec![put]).await.map(|_| ())
    }

    /// Mirrors attempt `attempt`'s status onto its run, provided it is
    /// still the run's current attempt.
    pub fn run_mirror_update(
        &self,
        run_id: Uuid,
        attempt: u32,
        status: RunStatus,
        started_at: Option<DateTime<Utc>>,
        finished_at: Option<DateTime<Utc>>,
    ) -> Result<TransactWriteItem, StoreError> {
        let timestamp = |t: Option<DateTime<Utc>>| match t {
            Some(t) => s(t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)),
            None => AttributeValue::Null(true),
        };
        let mut expression = "SET #state.#status = :status, #state.finished_at = :finished".to_string();
        let mut update = Update::builder()
            .table_name(&self.table)
            .key("pk", s(run_pk(run_id)))
            .key("sk", s(super::runs::RUN_SK))
            .condition_expression("#state.current_attempt = :attempt")
            .expression_attribute_names("#state", "state")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":status", s(status.as_str()))
            .expression_attribute_values(":finished", timestamp(finished_at))
            .expression_attribute_values(":attempt", n(attempt));
        if let Some(started_at) = started_at {
            expression.push_str(", #state.started_at = :started");
            update = update.expression_attribute_values(":started", timestamp(Some(started_at)));
        }
        let update = update.update_expression(expression).build().map_err(build_err)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// The outbox items of `emitted`, facts about `workspace_id` at `now`.
    pub fn emitted_puts(
        &self,
        workspace_id: &str,
        now: DateTime<Utc>,
        emitted: &[Emitted],
        ttl_days: u32,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        emitted
            .iter()
            .map(|e| match e {
                Emitted::Queued(d) => self.outbox_put(&Fact::new(workspace_id, now, d.clone()), ttl_days),
                Emitted::ExecutionTerminated(d) => self.outbox_put(&Fact::new(workspace_id, now, d.clone()), ttl_days),
                Emitted::JobTerminated(d) => self.outbox_put(&Fact::new(workspace_id, now, d.clone()), ttl_days),
                Emitted::RunTerminated(d) => self.outbox_put(&Fact::new(workspace_id, now, d.clone()), ttl_days),
                Emitted::RunCancelled(d) => self.outbox_put(&Fact::new(workspace_id, now, d.clone()), ttl_days),
            })
            .collect()
    }

    /// Parks the orchestration's task token on the attempt, provided no
    /// outcome happened since the orchestrator looked (`progress` is still
    /// `seen_progress`). `false`: progress moved, complete the token now.
    /// Bumps the version so that a writer holding an older read cannot
    /// overwrite the token without seeing it.
    pub async fn park_wait_token(
        &self,
        run_id: Uuid,
        attempt: u32,
        token: &str,
        seen_progress: u64,
    ) -> Result<bool, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(run_pk(run_id)))
            .key("sk", s(attempt_sk(attempt)))
            .update_expression("SET wait_token = :token, wait_progress = :p, version = version + :one")
            .condition_expression("progress = :p")
            .expression_attribute_values(":token", s(token))
            .expression_attribute_values(":p", n(seen_progress))
            .expression_attribute_values(":one", n(1))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(err) if err.as_service_error().is_some_and(|e| e.is_conditional_check_failed_exception()) => Ok(false),
            Err(err) => Err(StoreError::DynamoDb(super::display_sdk_error(&err))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflows::attempt::NewAttempt;
    use crate::workflows::definition::parse_definition;

    fn fifty_job_attempt() -> AttemptState {
        let mut yaml = String::from("name: wide\njobs:\n");
        for i in 0..50 {
            yaml.push_str(&format!("  job{i:02}:\n    runs-on: [linux]\n    steps:\n      - run: \"true\"\n"));
        }
        let definition = parse_definition(&yaml).expect("a valid workflow");
        AttemptState::new(NewAttempt {
            run_id: Uuid::new_v4(),
            workspace_id: "ws",
            attempt: 1,
            definition: &definition,
            snapshot_attempt: 1,
            rerun_mode: None,
            carried: &BTreeMap::new(),
            now: Utc::now(),
        })
    }

    #[test]
    fn the_attempt_state_survives_the_round_trip_through_a_deflated_binary_attribute() {
        let item = AttemptItem::new(fifty_job_attempt());
        let stored = to_item(&item).expect("serialises");
        assert!(matches!(stored.get("state"), Some(AttributeValue::B(_))), "{:?}", stored.get("state"));
        assert_eq!(from_item::<AttemptItem>(stored).expect("deserialises"), item);
    }

    #[test]
    fn deflating_makes_a_fifty_job_attempt_several_times_smaller_than_its_json() {
        let state = fifty_job_attempt();
        let json = serde_json::to_vec(&state).expect("JSON").len();
        let Some(AttributeValue::B(packed)) = to_item(&AttemptItem::new(state)).expect("item").remove("state") else {
            panic!("the state is a binary attribute");
        };
        assert!(packed.as_ref().len() * 3 < json, "{} bytes deflated from {json}", packed.as_ref().len());
    }
}
