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
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::attempts::{AttemptItem, SnapshotItem, StepsItem};
use super::keys::{self, run_pk, RUN_SK};
use super::{build, contention, from_item, n, s, serialize, Item, Store, TxOutcome};
use crate::error::StoreError;
use crate::ItemHead;
use baton_api::facts::{Fact, RunAttemptCreated};
use baton_domain::workflows::attempt::{AttemptState, RunState};
use baton_domain::workflows::status::RunStatus;
use baton_domain::workflows::view::{ExecutionResult, RunRecords};
use baton_domain::workflows::{ExecutionEvent, RerunMode, WorkflowDefinition};

/// Runs a filtered list query evaluates a page.
const FILTERED_PAGE: usize = 100;
/// Pages one list request reads at most before answering a cursor.
const MAX_PAGES: usize = 10;

/// A run item as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunItem {
    #[serde(flatten)]
    pub head: ItemHead,
    pub rw_pk: String,
    pub rw_sk: String,
    pub state: RunState,
}

impl RunItem {
    pub fn new(state: RunState) -> Self {
        Self {
            head: ItemHead::new(run_pk(state.id), RUN_SK, "run"),
            rw_pk: keys::workspace_runs_pk(&state.workspace_id),
            rw_sk: state.id.to_string(),
            state,
        }
    }
}

/// What one create transaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
enum CreateOutcome {
    Created,
    /// The idempotency key already names this run.
    Existing(Uuid),
    /// Another create took the number: read the counter again and retry.
    NumberTaken,
}

/// A run to create: its first attempt and the definition it freezes.
pub struct NewRun<'a> {
    pub id: Uuid,
    pub workspace_id: &'a str,
    /// The workflow's name: runs are numbered per name.
    pub name: &'a str,
    /// The create request's `inputs`, as JSON text.
    pub inputs: Option<String>,
    /// Its `run-name` as expanded (`workflows::run_name`).
    pub title: Option<String>,
    /// The workspace variables it reads, as JSON object text.
    pub vars: Option<String>,
    /// Who created it (`OperatorToken::identity`).
    pub created_by: Option<String>,
    pub attempt: &'a AttemptState,
    pub definition: &'a WorkflowDefinition,
    pub idempotency_key: Option<&'a str>,
    /// What started it, and the pipeline version it runs.
    pub trigger: Option<baton_api::pipelines::RunTrigger>,
    pub pipeline: Option<baton_api::pipelines::PipelineVersion>,
    /// The `github` context's trigger fields, as JSON text.
    pub github: Option<String>,
    pub now: DateTime<Utc>,
    pub outbox_ttl_days: u32,
}

/// What creating a run did.
#[derive(Debug, Clone, PartialEq)]
pub enum RunCreated {
    /// The run as written, and how many times its number was lost to a
    /// concurrent create first.
    New { run: Box<RunState>, number_retries: u32 },
    /// The idempotency key already names this run: nothing was written.
    Existing(Uuid),
}

impl Store {
    /// The last run number given for a workflow of the workspace (0: none yet).
    pub async fn last_run_number(&self, workspace_id: &str, workflow: &str) -> Result<u64, StoreError> {
        let item = self.get(&keys::run_counter_pk(workspace_id, workflow), keys::COUNTER_SK).await?;
        match item.as_ref().and_then(|item| item.get("last")) {
            Some(AttributeValue::N(raw)) => raw.parse().map_err(|_| StoreError::Malformed(format!("counter {raw}"))),
            Some(_) => Err(StoreError::Malformed("counter is not a number".into())),
            None => Ok(0),
        }
    }

    /// The run an idempotency key created, if any.
    pub async fn run_for_idempotency_key(&self, workspace_id: &str, key: &str) -> Result<Option<Uuid>, StoreError> {
        let item = self.get(&keys::idempotency_pk(workspace_id, key), keys::IDEMPOTENCY_SK).await?;
        match item.as_ref().and_then(|item| item.get("run_id")) {
            Some(AttributeValue::S(raw)) => {
                Uuid::parse_str(raw).map(Some).map_err(|_| StoreError::Malformed(format!("run id {raw}")))
            }
            _ => Ok(None),
        }
    }

    /// Creates a run (behaviour.md §8): the next number of its workflow, the
    /// run, attempt 1, the frozen snapshot, the idempotency key and the
    /// `run.attempt_created` fact, in one transaction. The counter is written
    /// conditioned on the number read, so a create that lost the number to a
    /// concurrent one reads again and retries (numbers stay consecutive); a
    /// create that lost the idempotency key answers with the winner's run.
    pub async fn create_run(&self, new: NewRun<'_>) -> Result<RunCreated, StoreError> {
        let _serialised = serialize::lock(serialize::counter_key(new.workspace_id, new.name)).await;
        for number_retries in 0..=contention::MAX_LOST_RACES {
            let previous_number = self.last_run_number(new.workspace_id, new.name).await?;
            let run = RunState {
                id: new.id,
                workspace_id: new.workspace_id.to_string(),
                name: new.name.to_string(),
                number: previous_number + 1,
                status: RunStatus::Pending,
                current_attempt: 1,
                created_at: new.now,
                started_at: None,
                finished_at: None,
                inputs: new.inputs.clone(),
                title: new.title.clone(),
                vars: new.vars.clone(),
                created_by: new.created_by.clone(),
                trigger: new.trigger.clone(),
                pipeline: new.pipeline.clone(),
                github: new.github.clone(),
            };
            match self.create_numbered_run(&new, &run, previous_number).await? {
                CreateOutcome::Created => return Ok(RunCreated::New { run: Box::new(run), number_retries }),
                CreateOutcome::Existing(existing) => return Ok(RunCreated::Existing(existing)),
                CreateOutcome::NumberTaken => contention::pause_after_lost_race().await,
            }
        }
        Err(contention::too_contended(format!("the run numbers of {}/{}", new.workspace_id, new.name)))
    }

    async fn create_numbered_run(
        &self,
        new: &NewRun<'_>,
        run: &RunState,
        previous_number: u64,
    ) -> Result<CreateOutcome, StoreError> {
        let fact = Fact::new(
            new.workspace_id,
            new.now,
            RunAttemptCreated {
                run_id: run.id,
                attempt: 1,
                workflow_name: run.name.clone(),
                run_number: run.number,
                rerun_mode: None,
                trigger: Some(run.trigger_name()),
                delivery: run.trigger.as_ref().and_then(|t| t.delivery.clone()),
                pipeline: run.pipeline.as_ref().map(|p| p.name.clone()),
            },
        );
        let counter = Put::builder()
            .table_name(&self.table)
            .item("pk", s(keys::run_counter_pk(&run.workspace_id, &run.name)))
            .item("sk", s(keys::COUNTER_SK))
            .item("type", s("run_counter"))
            .item("last", n(run.number));
        let counter = if previous_number == 0 {
            counter.condition_expression("attribute_not_exists(pk)")
        } else {
            counter
                .condition_expression("#last = :prev")
                .expression_attribute_names("#last", "last")
                .expression_attribute_values(":prev", n(previous_number))
        };
        let mut items = vec![
            TransactWriteItem::builder().put(build(counter.build())?).build(),
            self.new_item_put(&RunItem::new(run.clone()))?,
            self.new_item_put(&AttemptItem::new(new.attempt.clone()))?,
            self.snapshot_put(run.id, new.attempt.attempt, new.definition)?,
            self.outbox_put(&fact, new.outbox_ttl_days)?,
        ];
        let idempotency_index = items.len();
        if let Some(key) = new.idempotency_key {
            let put = build(
                Put::builder()
                    .table_name(&self.table)
                    .item("pk", s(keys::idempotency_pk(&run.workspace_id, key)))
                    .item("sk", s(keys::IDEMPOTENCY_SK))
                    .item("type", s("run_idempotency"))
                    .item("run_id", s(run.id.to_string()))
                    .condition_expression("attribute_not_exists(pk)")
                    .build(),
            )?;
            items.push(TransactWriteItem::builder().put(put).build());
        }
        match self.transact(items).await {
            Ok(TxOutcome::Committed) => Ok(CreateOutcome::Created),
            // Nothing was applied: read the counter again. (A 5xx is not
            // retried here: the create may have been applied, and the client
            // retries it with its idempotency key.)
            Err(err) if err.is_conflict_or_throttling() => Ok(CreateOutcome::NumberTaken),
            Err(err) => Err(err),
            Ok(TxOutcome::ConditionFailed { reasons }) => {
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

    /// Everything stored about run `run_id`, if it exists in
    /// `workspace_id` (a run of another workspace is not found: existence is
    /// not revealed). One paginated `Query` of the run's partition.
    pub async fn run_records(&self, workspace_id: &str, run_id: Uuid) -> Result<Option<RunRecords>, StoreError> {
        let mut run = None;
        let mut attempts = Vec::new();
        let mut definitions = BTreeMap::new();
        let mut results = HashMap::new();
        let mut artifacts = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let out = self
                .query_partition(run_pk(run_id))
                .consistent_read(true)
                .set_exclusive_start_key(start.take())
                .send()
                .await?;
            for item in out.items.unwrap_or_default() {
                let kind = match item.get("type") {
                    Some(AttributeValue::S(kind)) => kind.clone(),
                    _ => continue,
                };
                match kind.as_str() {
                    "run" => run = Some(from_item::<RunItem>(item)?.state),
                    "attempt" => attempts.push(from_item::<AttemptItem>(item)?.state),
                    "snapshot" => {
                        let Some(attempt) =
                            item.get("sk").and_then(|sk| sk.as_s().ok()).and_then(|sk| keys::snapshot_attempt(sk))
                        else {
                            continue;
                        };
                        let snapshot: SnapshotItem = from_item(item)?;
                        let definition = serde_json::from_str(&snapshot.definition)
                            .map_err(|e| StoreError::Malformed(e.to_string()))?;
                        definitions.insert(attempt, definition);
                    }
                    "steps" => {
                        let result: StepsItem = from_item(item)?;
                        results.insert(
                            result.execution_id,
                            ExecutionResult { steps: result.steps, outputs: result.outputs },
                        );
                    }
                    "artifact" => artifacts.push(from_item::<super::artifacts::ArtifactItem>(item)?.view()),
                    _ => {}
                }
            }
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
        let Some(run) = run.filter(|run: &RunState| run.workspace_id == workspace_id) else {
            return Ok(None);
        };
        Ok(Some(RunRecords { run, attempts, definitions, results, artifacts }))
    }

    /// [`Store::run_records`] with what the runners' side knows of every
    /// execution that has not finished: what the run view shows. Only the
    /// view route reads it; the routes that answer a view after a change
    /// do not need it.
    pub async fn run_records_live(&self, workspace_id: &str, run_id: Uuid) -> Result<Option<RunRecords>, StoreError> {
        let Some(mut records) = self.run_records(workspace_id, run_id).await? else { return Ok(None) };
        self.add_live_runners(&mut records.attempts, &mut records.results).await?;
        Ok(Some(records))
    }

    /// A claim does not rewrite the attempt (`outcomes::RunnerFact`): the
    /// runner record says whether an execution the attempt holds as queued
    /// was claimed, when and by whom, and holds the step reports so far (a
    /// report is one small update there, not a rewrite of the run's items).
    /// The view reads the records of unfinished executions, 100 to a
    /// request, and applies the claim as the attempt would have.
    async fn add_live_runners(
        &self,
        attempts: &mut [AttemptState],
        results: &mut HashMap<Uuid, ExecutionResult>,
    ) -> Result<(), StoreError> {
        let mut unfinished: HashMap<Uuid, (usize, Uuid)> = HashMap::new();
        for (index, attempt) in attempts.iter().enumerate() {
            for job in &attempt.jobs {
                if let Some(execution) = job.execution.as_ref() {
                    if !execution.status.is_terminal() && !results.contains_key(&execution.id) {
                        unfinished.insert(execution.id, (index, job.id));
                    }
                }
            }
        }
        let ids: Vec<Uuid> = unfinished.keys().copied().collect();
        for live in self.live_runners(&ids).await? {
            let Some(&(index, job_id)) = unfinished.get(&live.execution_id) else { continue };
            if let Some((at, session)) = live.claimed {
                let claimed = ExecutionEvent::Claimed { at };
                attempts[index].apply_runner_event(job_id, live.execution_id, &claimed, Some(session), at);
            }
            let steps = live.steps.into_values().collect();
            results.insert(live.execution_id, ExecutionResult { steps, outputs: BTreeMap::new() });
        }
        Ok(())
    }

    /// The outputs (as text) that `executions` of run `run_id` reported, for
    /// the expressions of jobs that need them. One query of the run's
    /// result items, keys and outputs only; executions without a result
    /// are absent.
    pub async fn execution_outputs(
        &self,
        run_id: Uuid,
        executions: &[Uuid],
    ) -> Result<HashMap<Uuid, BTreeMap<String, String>>, StoreError> {
        #[derive(Deserialize)]
        struct Outputs {
            execution_id: Uuid,
            #[serde(default)]
            outputs: BTreeMap<String, serde_json::Value>,
        }
        let mut found = HashMap::new();
        let mut pages = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND begins_with(sk, :steps)")
            .expression_attribute_values(":pk", s(run_pk(run_id)))
            .expression_attribute_values(":steps", s(keys::STEPS_PREFIX))
            .projection_expression("execution_id, outputs")
            .consistent_read(true)
            .into_paginator()
            .items()
            .send();
        while let Some(item) = pages.next().await {
            let result: Outputs = from_item(item?)?;
            if executions.contains(&result.execution_id) {
                found.insert(result.execution_id, output_texts(&result.outputs));
            }
        }
        Ok(found)
    }

    /// The run item alone, if the run exists in `workspace_id` (a run of
    /// another workspace is not found: existence is not revealed).
    pub async fn get_run(&self, workspace_id: &str, run_id: Uuid) -> Result<Option<RunState>, StoreError> {
        let item = self.get(&run_pk(run_id), RUN_SK).await?;
        let run = item.map(from_item::<RunItem>).transpose()?.map(|item| item.state);
        Ok(run.filter(|run| run.workspace_id == workspace_id))
    }

    /// The runs of a workspace, newest first, optionally of one status and
    /// of workflows whose name holds `workflow` (as written, case
    /// included): at most `limit`, after the run `cursor` (the last id of
    /// the previous page). Returns the runs and the next cursor.
    pub async fn list_runs(
        &self,
        workspace_id: &str,
        status: Option<RunStatus>,
        workflow: Option<&str>,
        limit: usize,
        cursor: Option<Uuid>,
    ) -> Result<(Vec<RunState>, Option<Uuid>), StoreError> {
        let mut runs: Vec<RunState> = Vec::new();
        let mut start: Option<Item> = cursor.map(|id| {
            HashMap::from([
                ("pk".to_string(), s(run_pk(id))),
                ("sk".to_string(), s(RUN_SK)),
                ("rw_pk".to_string(), s(keys::workspace_runs_pk(workspace_id))),
                ("rw_sk".to_string(), s(id.to_string())),
            ])
        });
        // Without a filter a page of `limit` is exact; with one, each query
        // evaluates a bounded page and the scan stops after a bounded number
        // of pages, answering a cursor where it stopped (a cursor is a run
        // id: the index keys of any run are derived from it).
        let filtered = status.is_some() || workflow.is_some();
        let page = if filtered { FILTERED_PAGE.max(limit) } else { limit };
        let mut conditions = Vec::new();
        if status.is_some() {
            conditions.push("#state.#status = :status");
        }
        if workflow.is_some() {
            conditions.push("contains(#state.#name, :workflow)");
        }
        for _ in 0..MAX_PAGES {
            let mut query = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(keys::RUNS_BY_WORKSPACE)
                .key_condition_expression("rw_pk = :ws")
                .expression_attribute_values(":ws", s(keys::workspace_runs_pk(workspace_id)))
                .scan_index_forward(false)
                .limit(page as i32)
                .set_exclusive_start_key(start.take());
            if filtered {
                query = query.filter_expression(conditions.join(" AND ")).expression_attribute_names("#state", "state");
            }
            if let Some(status) = status {
                query = query
                    .expression_attribute_names("#status", "status")
                    .expression_attribute_values(":status", s(status.as_str()));
            }
            if let Some(workflow) = workflow {
                query = query
                    .expression_attribute_names("#name", "name")
                    .expression_attribute_values(":workflow", s(workflow));
            }
            let out = query.send().await?;
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

    /// Creates attempt `attempt` of `run` as a rerun of its attempt `from`
    /// (behaviour.md §11), in one transaction: the run points at the new
    /// attempt provided its current attempt is still `from`, the attempt
    /// item, and the `run.attempt_created` fact. `false`: another rerun won.
    pub async fn create_rerun(
        &self,
        run: &RunState,
        from: u32,
        attempt: &AttemptState,
        mode: RerunMode,
        now: DateTime<Utc>,
        outbox_ttl_days: u32,
    ) -> Result<bool, StoreError> {
        // Reruns of one run in this process queue here instead of losing
        // the run's condition to each other.
        let _serialised = serialize::lock(serialize::run_key(run.id)).await;
        let mode = match mode {
            RerunMode::All => "all",
            RerunMode::Failed => "failed",
        };
        let fact = Fact::new(
            &run.workspace_id,
            now,
            RunAttemptCreated {
                run_id: run.id,
                attempt: attempt.attempt,
                workflow_name: run.name.clone(),
                run_number: run.number,
                rerun_mode: Some(mode.to_string()),
                trigger: Some(run.trigger_name()),
                delivery: run.trigger.as_ref().and_then(|t| t.delivery.clone()),
                pipeline: run.pipeline.as_ref().map(|p| p.name.clone()),
            },
        );
        let items = vec![
            self.rerun_update(run.id, from, attempt.attempt)?,
            self.new_item_put(&AttemptItem::new(attempt.clone()))?,
            self.outbox_put(&fact, outbox_ttl_days)?,
        ];
        Ok(matches!(self.transact(items).await?, TxOutcome::Committed))
    }

    /// Points the run at a new attempt `to`, provided its current attempt
    /// is still `from`: of two concurrent reruns exactly one passes.
    fn rerun_update(&self, run_id: Uuid, from: u32, to: u32) -> Result<TransactWriteItem, StoreError> {
        let update = build(
            Update::builder()
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
                .build(),
        )?;
        Ok(TransactWriteItem::builder().update(update).build())
    }
}

/// Outputs as expressions read them: strings as they are, other JSON as its
/// text.
pub fn output_texts(outputs: &BTreeMap<String, serde_json::Value>) -> BTreeMap<String, String> {
    outputs
        .iter()
        .map(|(name, value)| {
            let text = match value {
                serde_json::Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            (name.clone(), text)
        })
        .collect()
}
