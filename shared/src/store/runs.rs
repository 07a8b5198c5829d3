//! Run items, per-workflow run counters and idempotency keys.
//!
//! - run `pk = RUN#<run_id>, sk = RUN`: the [`RunState`] and the keys of
//!   the `runs-by-workspace` index (`rw_pk = WS#<workspace>`, `rw_sk` = the
//!   run id, a UUID v7, so the index sorts runs by creation; newest first is
//!   a backwards query, never a Scan).
//! - counter `pk = RUNNUM#<workspace>#<workflow name>`: the last number
//!   given. Creating a run writes `last + 1` conditioned on `last` still
//!   being what was read, in the creation transaction, so numbers are
//!   consecutive under concurrent creates (a loser re-reads and retries).
//! - idempotency `pk = RUNIDEM#<workspace>#<key>`: the run a key created,
//!   written in the same transaction, so a repeated create finds it and a
//!   concurrent one fails its condition.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem, Update};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::attempts::{run_pk, AttemptItem, SnapshotItem, StepsItem};
use super::{from_item, n, s, to_item, Item, Store, TxOutcome};
use crate::error::StoreError;
use crate::workflows::attempt::{AttemptState, RunState};
use crate::workflows::status::RunStatus;
use crate::workflows::view::{build_run_view, ExecutionResult, RunView};
use crate::workflows::WorkflowDefinition;

pub const RUN_SK: &str = "RUN";

/// Runs a filtered list query evaluates a page.
const FILTERED_PAGE: usize = 100;
/// Pages one list request reads at most before answering a cursor.
const MAX_PAGES: usize = 10;

/// A run item as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunItem {
    pub pk: String,
    pub sk: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub rw_pk: String,
    pub rw_sk: String,
    pub state: RunState,
}

impl RunItem {
    pub fn new(state: RunState) -> Self {
        Self {
            pk: run_pk(state.id),
            sk: RUN_SK.into(),
            kind: "run".into(),
            rw_pk: workspace_runs_key(&state.workspace_id),
            rw_sk: state.id.to_string(),
            state,
        }
    }
}

fn workspace_runs_key(workspace_id: &str) -> String {
    format!("WS#{workspace_id}")
}

fn counter_pk(workspace_id: &str, workflow: &str) -> String {
    format!("RUNNUM#{workspace_id}#{workflow}")
}

fn idempotency_pk(workspace_id: &str, key: &str) -> String {
    format!("RUNIDEM#{workspace_id}#{key}")
}

/// Everything stored about one run.
#[derive(Debug, Clone, Default)]
pub struct RunRecords {
    pub run: Option<RunState>,
    pub attempts: Vec<AttemptItem>,
    /// Snapshot attempt → definition.
    pub definitions: BTreeMap<u32, WorkflowDefinition>,
    /// Execution id → reported steps and outputs.
    pub results: HashMap<Uuid, ExecutionResult>,
}

/// What a create transaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateOutcome {
    Created,
    /// The idempotency key already names this run.
    Existing(Uuid),
    /// Another create took the number: read the counter again and retry.
    NumberTaken,
}

/// A run to create: the first attempt, its snapshot and the fact.
pub struct NewRun<'a> {
    pub run: &'a RunState,
    pub attempt: &'a AttemptState,
    pub definition: &'a WorkflowDefinition,
    pub idempotency_key: Option<&'a str>,
    /// The number read from the counter before (`run.number - 1`).
    pub previous_number: u64,
    /// The `run.attempt_created` fact's outbox item.
    pub fact: TransactWriteItem,
}

fn build_err(e: impl std::fmt::Display) -> StoreError {
    StoreError::Other(e.to_string())
}

impl Store {
    /// The last run number given for a workflow of the workspace (0: none yet).
    pub async fn last_run_number(&self, workspace_id: &str, workflow: &str) -> Result<u64, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(counter_pk(workspace_id, workflow)))
            .key("sk", s("COUNTER"))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::DynamoDb(super::display_sdk_error(&e)))?;
        match out.item.as_ref().and_then(|item| item.get("last")) {
            Some(AttributeValue::N(raw)) => raw.parse().map_err(|_| StoreError::Malformed(format!("counter {raw}"))),
            Some(_) => Err(StoreError::Malformed("counter is not a number".into())),
            None => Ok(0),
        }
    }

    /// The run an idempotency key created, if any.
    pub async fn run_for_idempotency_key(&self, workspace_id: &str, key: &str) -> Result<Option<Uuid>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(idempotency_pk(workspace_id, key)))
            .key("sk", s("IDEM"))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::DynamoDb(super::display_sdk_error(&e)))?;
        match out.item.as_ref().and_then(|item| item.get("run_id")) {
            Some(AttributeValue::S(raw)) => {
                Uuid::parse_str(raw).map(Some).map_err(|_| StoreError::Malformed(format!("run id {raw}")))
            }
            _ => Ok(None),
        }
    }

    /// Creates a run in one transaction: counter, run, attempt 1, snapshot,
    /// idempotency key and the fact.
    pub async fn create_run(&self, new: NewRun<'_>) -> Result<CreateOutcome, StoreError> {
        let run = new.run;
        let counter = Put::builder()
            .table_name(&self.table)
            .item("pk", s(counter_pk(&run.workspace_id, &run.name)))
            .item("sk", s("COUNTER"))
            .item("type", s("run_counter"))
            .item("last", n(run.number));
        let counter = if new.previous_number == 0 {
            counter.condition_expression("attribute_not_exists(pk)")
        } else {
            counter
                .condition_expression("#last = :prev")
                .expression_attribute_names("#last", "last")
                .expression_attribute_values(":prev", n(new.previous_number))
        };
        let run_put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(to_item(&RunItem::new(run.clone()))?))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .map_err(build_err)?;
        let mut items = vec![
            TransactWriteItem::builder().put(counter.build().map_err(build_err)?).build(),
            TransactWriteItem::builder().put(run_put).build(),
            self.attempt_put(&AttemptItem::new(new.attempt.clone()), None)?,
            self.snapshot_put(run.id, new.attempt.attempt, new.definition)?,
            new.fact,
        ];
        let idempotency_index = items.len();
        if let Some(key) = new.idempotency_key {
            let put = Put::builder()
                .table_name(&self.table)
                .item("pk", s(idempotency_pk(&run.workspace_id, key)))
                .item("sk", s("IDEM"))
                .item("type", s("run_idempotency"))
                .item("run_id", s(run.id.to_string()))
                .condition_expression("attribute_not_exists(pk)")
                .build()
                .map_err(build_err)?;
            items.push(TransactWriteItem::builder().put(put).build());
        }
        match self.transact(items).await? {
            TxOutcome::Committed => Ok(CreateOutcome::Created),
            TxOutcome::ConditionFailed { reasons } => {
                if reasons.get(idempotency_index).is_some_and(Option::is_some) {
                    if let Some(key) = new.idempotency_key {
                        if let Some(existing) = self.run_for_idempotency_key(&run.workspace_id, key).await? {
                            return Ok(CreateOutcome::Existing(existing));
                        }
                    }
                }
                Ok(CreateOutcome::NumberTaken)
            }
        }
    }

    /// Reads every item of a run (one paginated `Query` of its partition).
    pub async fn get_run_records(&self, run_id: Uuid) -> Result<RunRecords, StoreError> {
        let mut records = RunRecords::default();
        let mut start: Option<Item> = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk")
                .expression_attribute_values(":pk", s(run_pk(run_id)))
                .consistent_read(true)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| StoreError::DynamoDb(super::display_sdk_error(&e)))?;
            for item in out.items.unwrap_or_default() {
                let kind = match item.get("type") {
                    Some(AttributeValue::S(kind)) => kind.clone(),
                    _ => continue,
                };
                match kind.as_str() {
                    "run" => records.run = Some(from_item::<RunItem>(item)?.state),
                    "attempt" => records.attempts.push(from_item(item)?),
                    "snapshot" => {
                        let sk = match item.get("sk") {
                            Some(AttributeValue::S(sk)) => sk.clone(),
                            _ => continue,
                        };
                        let attempt: u32 = sk.trim_start_matches("SNAPSHOT#").parse().unwrap_or_default();
                        let snapshot: SnapshotItem = from_item(item)?;
                        let definition = serde_json::from_str(&snapshot.definition)
                            .map_err(|e| StoreError::Malformed(e.to_string()))?;
                        records.definitions.insert(attempt, definition);
                    }
                    "steps" => {
                        let result: StepsItem = from_item(item)?;
                        records.results.insert(
                            result.execution_id,
                            ExecutionResult { steps: result.steps, outputs: result.outputs },
                        );
                    }
                    _ => {}
                }
            }
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
        Ok(records)
    }

    /// The run item alone.
    pub async fn get_run(&self, run_id: Uuid) -> Result<Option<RunState>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(run_pk(run_id)))
            .key("sk", s(RUN_SK))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::DynamoDb(super::display_sdk_error(&e)))?;
        Ok(out.item.map(from_item::<RunItem>).transpose()?.map(|item| item.state))
    }

    /// The runs of a workspace, newest first, optionally of one status:
    /// at most `limit`, after the run `cursor` (the last id of the previous
    /// page). Returns the runs and the next cursor.
    pub async fn list_runs(
        &self,
        workspace_id: &str,
        status: Option<RunStatus>,
        limit: usize,
        cursor: Option<Uuid>,
    ) -> Result<(Vec<RunState>, Option<Uuid>), StoreError> {
        let mut runs: Vec<RunState> = Vec::new();
        let mut start: Option<Item> = cursor.map(|id| {
            HashMap::from([
                ("pk".to_string(), s(run_pk(id))),
                ("sk".to_string(), s(RUN_SK)),
                ("rw_pk".to_string(), s(workspace_runs_key(workspace_id))),
                ("rw_sk".to_string(), s(id.to_string())),
            ])
        });
        // Without a filter a page of `limit` is exact; with one, each query
        // evaluates a bounded page and the scan stops after a bounded number
        // of pages, answering a cursor where it stopped (a cursor is a run
        // id: the index keys of any run are derived from it).
        let page = if status.is_some() { FILTERED_PAGE.max(limit) } else { limit };
        for _ in 0..MAX_PAGES {
            let mut query = self
                .client
                .query()
                .table_name(&self.table)
                .index_name("runs-by-workspace")
                .key_condition_expression("rw_pk = :ws")
                .expression_attribute_values(":ws", s(workspace_runs_key(workspace_id)))
                .scan_index_forward(false)
                .limit(page as i32)
                .set_exclusive_start_key(start.take());
            if let Some(status) = status {
                query = query
                    .filter_expression("#state.#status = :status")
                    .expression_attribute_names("#state", "state")
                    .expression_attribute_names("#status", "status")
                    .expression_attribute_values(":status", s(status.as_str()));
            }
            let out = query.send().await.map_err(|e| StoreError::DynamoDb(super::display_sdk_error(&e)))?;
            let more = out.last_evaluated_key.filter(|key| !key.is_empty());
            let items = out.items.unwrap_or_default();
            let count = items.len();
            for (index, item) in items.into_iter().enumerate() {
                runs.push(from_item::<RunItem>(item)?.state);
                if runs.len() == limit {
                    let rest = index + 1 < count || more.is_some();
                    let next = if rest { runs.last().map(|run| run.id) } else { None };
                    return Ok((runs, next));
                }
            }
            match more {
                Some(key) => start = Some(key),
                None => return Ok((runs, None)),
            }
        }
        let stopped_at = start.as_ref().and_then(|key| match key.get("rw_sk") {
            Some(AttributeValue::S(id)) => Uuid::parse_str(id).ok(),
            _ => None,
        });
        Ok((runs, stopped_at))
    }

    /// The run view of `run_id`, if the run exists in `workspace_id` (a
    /// run of another workspace is not found: existence is not revealed).
    pub async fn run_view(&self, workspace_id: &str, run_id: Uuid) -> Result<Option<RunView>, StoreError> {
        let records = self.get_run_records(run_id).await?;
        let Some(run) = records.run else { return Ok(None) };
        if run.workspace_id != workspace_id {
            return Ok(None);
        }
        let attempts: Vec<AttemptState> = records.attempts.into_iter().map(|item| item.state).collect();
        Ok(Some(build_run_view(&run, &attempts, &records.definitions, &records.results)))
    }

    /// Points the run at a new attempt `to`, provided its current attempt
    /// is still `from`: of two concurrent reruns exactly one passes.
    pub fn rerun_update(&self, run_id: Uuid, from: u32, to: u32) -> Result<TransactWriteItem, StoreError> {
        let update = Update::builder()
            .table_name(&self.table)
            .key("pk", s(run_pk(run_id)))
            .key("sk", s(RUN_SK))
            .update_expression(
                "SET #state.current_attempt = :to, #state.#status = :pending, #state.finished_at = :null",
            )
            .condition_expression("#state.current_attempt = :from")
            .expression_attribute_names("#state", "state")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":to", n(to))
            .expression_attribute_values(":from", n(from))
            .expression_attribute_values(":pending", s(RunStatus::Pending.as_str()))
            .expression_attribute_values(":null", AttributeValue::Null(true))
            .build()
            .map_err(build_err)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }
}
