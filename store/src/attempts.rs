//! Attempt items and what hangs off them: the frozen definition snapshot
//! and the reported steps of finished executions. All live in the run's
//! partition (`pk = RUN#<run_id>`), so one `Query` reads a whole run.
//!
//! - attempt `sk = ATTEMPT#<n>`: the [`AttemptState`] (every job and its
//!   execution, see `workflows::attempt` for why one item), a `version`
//!   that every write compares and bumps, and the orchestration's parked
//!   wait: `progress` counts the wake-ups due (an outcome whose adoption
//!   could not do all that follows from it, the attempt's end, a cancel;
//!   claims never), `wait_token` is the task token of the parked `Step`,
//!   `wait_progress` the progress it waits to see move and `wait_until`
//!   when its task times out.
//! - snapshot `sk = SNAPSHOT#<n>`: the parsed definition as JSON, written
//!   once at creation (a rerun points at its predecessor's).
//! - result `sk = STEPS#<n>#<execution_id>`: the step results and outputs a
//!   runner reported, written with the execution's terminal state (kept out
//!   of the attempt item so that outputs cannot grow it).

use std::collections::{BTreeMap, HashMap};
use std::sync::{LazyLock, Mutex};

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::keys::{self, attempt_sk, run_pk, snapshot_sk, steps_sk};
use super::outbox::ChangeFacts;
use super::{build, from_item, n, s, Store};
use super::{contention, serialize};
use crate::error::StoreError;
use crate::ItemHead;
use baton_api::facts::StepResult;
use baton_domain::workflows::attempt::{withdrawn_executions, AttemptState, Emitted};
use baton_domain::workflows::status::RunStatus;
use baton_domain::workflows::WorkflowDefinition;

pub mod format;

/// An attempt item. Its stored form, with the state in a versioned format
/// of its own, is [`format`]'s.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "format::StoredAttemptItem")]
pub struct AttemptItem {
    pub head: ItemHead,
    pub version: u64,
    pub progress: u64,
    pub wait_token: Option<String>,
    pub wait_progress: Option<u64>,
    /// When the `Wait` task message that parked the newest token was sent
    /// (SQS `SentTimestamp`, ms): a redelivered older message must not
    /// overwrite a newer token.
    pub wait_sent_at: Option<i64>,
    /// When the parked `Step` task times out (ms since the epoch): a writer
    /// that brings a deadline before it wakes the task
    /// (`orchestration::parked_past_deadline`).
    pub wait_until: Option<i64>,
    pub state: AttemptState,
}

impl AttemptItem {
    pub fn new(state: AttemptState) -> Self {
        Self {
            head: ItemHead::new(run_pk(state.run_id), attempt_sk(state.attempt), "attempt"),
            version: 0,
            progress: 0,
            wait_token: None,
            wait_progress: None,
            wait_sent_at: None,
            wait_until: None,
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
    #[serde(flatten)]
    pub head: ItemHead,
    /// The parsed definition as JSON text.
    pub definition: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepsItem {
    #[serde(flatten)]
    pub head: ItemHead,
    pub execution_id: Uuid,
    pub steps: Vec<StepResult>,
    #[serde(default)]
    pub outputs: BTreeMap<String, serde_json::Value>,
}

impl StepsItem {
    /// The result of execution `execution_id` of attempt `attempt` of run
    /// `run_id`: the steps and outputs its runner reported.
    pub fn new(
        run_id: Uuid,
        attempt: u32,
        execution_id: Uuid,
        steps: Vec<StepResult>,
        outputs: BTreeMap<String, serde_json::Value>,
    ) -> Self {
        Self {
            head: ItemHead::new(run_pk(run_id), steps_sk(attempt, execution_id), "steps"),
            execution_id,
            steps,
            outputs,
        }
    }
}

/// Snapshots cached per process, by (table, run, snapshot attempt).
type SnapshotCache = Mutex<HashMap<(String, Uuid, u32), WorkflowDefinition>>;
static SNAPSHOTS: LazyLock<SnapshotCache> = LazyLock::new(SnapshotCache::default);
/// The cache is simply emptied when it holds this many snapshots.
const SNAPSHOT_CACHE_SIZE: usize = 256;

impl Store {
    /// The attempt item, read consistently.
    pub async fn get_attempt(&self, run_id: Uuid, attempt: u32) -> Result<Option<AttemptItem>, StoreError> {
        self.get(&run_pk(run_id), &attempt_sk(attempt)).await?.map(from_item).transpose()
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
        let Some(item) = self.get_eventually(&run_pk(run_id), &snapshot_sk(attempt)).await? else { return Ok(None) };
        let snapshot: SnapshotItem = from_item(item)?;
        serde_json::from_str(&snapshot.definition).map(Some).map_err(|e| StoreError::Malformed(e.to_string()))
    }

    /// Writes the frozen snapshot of a new attempt.
    pub fn snapshot_put(
        &self,
        run_id: Uuid,
        attempt: u32,
        definition: &WorkflowDefinition,
    ) -> Result<TransactWriteItem, StoreError> {
        let item = SnapshotItem {
            head: ItemHead::new(run_pk(run_id), snapshot_sk(attempt), "snapshot"),
            definition: serde_json::to_string(definition).map_err(|e| StoreError::Malformed(e.to_string()))?,
        };
        self.new_item_put(&item)
    }

    /// Writes the result of a finished execution (`StepsItem::new`).
    pub fn result_put(&self, result: &StepsItem) -> Result<TransactWriteItem, StoreError> {
        self.item_put(result)
    }

    /// Records the steps a runner reported for an execution the server had
    /// already ended (timed out, cancelled): the status stands, but the view
    /// should show what the steps did. Only the first report is kept (the put
    /// is conditioned on absence), so a redelivered fact changes nothing.
    /// An eventually consistent read goes first: when the results are there
    /// (the usual case: the complete adopted them itself), half a read unit
    /// replaces a refused write, which DynamoDB bills as a write.
    pub async fn record_late_results(&self, result: &StepsItem) -> Result<(), StoreError> {
        if self.get_eventually(&result.head.pk, &result.head.sk).await?.is_some() {
            return Ok(());
        }
        let mut put = self.result_put(result)?;
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
            Some(t) => s(keys::timestamp(t)),
            None => AttributeValue::Null(true),
        };
        let mut expression = "SET #state.#status = :status, #state.finished_at = :finished".to_string();
        let mut update = Update::builder()
            .table_name(&self.table)
            .key("pk", s(run_pk(run_id)))
            .key("sk", s(keys::RUN_SK))
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
        let update = build(update.update_expression(expression).build())?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// The outbox items of `emitted`, facts about `workspace_id` at `now`.
    pub fn emitted_puts(
        &self,
        workspace_id: &str,
        now: DateTime<Utc>,
        emitted: &[Emitted],
        ttl_days: u32,
        attempt_jobs: usize,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let direct_adoption = attempt_jobs <= baton_domain::workflows::execution::DIRECT_ADOPTION_MAX_JOBS;
        let mut puts = Vec::with_capacity(emitted.len());
        // The change's facts, written together (`outbox`).
        let mut facts = ChangeFacts::new(workspace_id, now, ttl_days);
        // Label sets of the jobs queued here, registered once each.
        let mut label_sets: BTreeMap<String, (Vec<String>, usize)> = BTreeMap::new();
        for e in emitted {
            match e {
                Emitted::Queued { fact, spec } => {
                    puts.push(self.job_spec_put(fact.job_execution_id, workspace_id, spec)?);
                    facts.push(fact.clone())?;
                    // Claimable in this very transaction: the definition's
                    // labels are canonical already.
                    let labelset = baton_domain::runners::labels::labelset_id(&spec.work.labels);
                    puts.extend(self.claimable_puts(
                        workspace_id,
                        fact,
                        &spec.work.labels,
                        &labelset,
                        direct_adoption,
                    )?);
                    label_sets.entry(labelset).or_insert_with(|| (spec.work.labels.clone(), 0)).1 += 1;
                }
                Emitted::ExecutionTerminated(d) => facts.push(d.clone())?,
                Emitted::JobTerminated(d) => facts.push(d.clone())?,
                Emitted::RunTerminated(d) => facts.push(d.clone())?,
                Emitted::RunCancelled(d) => facts.push(d.clone())?,
                Emitted::ApprovalDecided(d) => facts.push(d.clone())?,
                Emitted::JobWaiting(d) => facts.push(d.clone())?,
                Emitted::Results { run_id, attempt, execution_id, outputs } => puts.push(
                    self.result_put(&StepsItem::new(*run_id, *attempt, *execution_id, Vec::new(), outputs.clone()))?,
                ),
            }
        }
        puts.extend(self.outbox_puts(facts)?);
        for (labelset, (labels, queued)) in &label_sets {
            puts.push(self.label_set_registration(workspace_id, labels, labelset, *queued)?);
        }
        Ok(puts)
    }

    /// Flags the runners' record of an execution the workflow ended (a
    /// timeout, a cancel) in the write that ends it: a claim of its pending
    /// item, still in the queue until the terminated fact is reconciled,
    /// then fails (`withdrawn_at` is a condition of the claim). No condition
    /// here: a record that is leased keeps its lease (reconciliation flags
    /// it for cancellation), and a flag written twice is the same flag.
    fn withdrawn_update(&self, execution_id: Uuid, now: DateTime<Utc>) -> Result<TransactWriteItem, StoreError> {
        let update = build(
            Update::builder()
                .table_name(&self.table)
                .key("pk", s(keys::execution_pk(execution_id)))
                .key("sk", s(keys::RUNNER_SK))
                .update_expression("SET withdrawn_at = if_not_exists(withdrawn_at, :at)")
                .expression_attribute_values(":at", s(keys::timestamp(now)))
                .build(),
        )?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// Parks the orchestration's task token on the attempt, provided no
    /// outcome happened since the orchestrator looked (`progress` is still
    /// `seen_progress`) and no newer `Wait` message parked a token already
    /// (`sent_at`, the message's SQS `SentTimestamp`: a redelivered message
    /// keeps its own, and the state machine sends a new `Wait` only after
    /// the previous one ended). Bumps the version so that a writer holding
    /// an older read cannot overwrite the token without seeing it. A repeat
    /// of the same message parks the same token again.
    pub async fn park_wait_token(
        &self,
        run_id: Uuid,
        attempt: u32,
        token: &str,
        seen_progress: u64,
        sent_at: i64,
    ) -> Result<Parked, StoreError> {
        let _serialised = serialize::lock(serialize::attempt_key(run_id, attempt)).await;
        let request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(run_pk(run_id)))
            .key("sk", s(attempt_sk(attempt)))
            .update_expression(
                "SET wait_token = :token, wait_progress = :p, wait_sent_at = :sent, version = version + :one",
            )
            .condition_expression("progress = :p AND (attribute_not_exists(wait_sent_at) OR wait_sent_at <= :sent)")
            .expression_attribute_values(":token", s(token))
            .expression_attribute_values(":p", n(seen_progress))
            .expression_attribute_values(":sent", n(sent_at))
            .expression_attribute_values(":one", n(1))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        let sent = contention::retry_conflicts(|| async {
            match request.clone().send().await {
                Ok(_) => Ok(None),
                Err(err) => match err.as_service_error() {
                    Some(UpdateItemError::ConditionalCheckFailedException(failed)) => Ok(Some(failed.item.clone())),
                    _ => Err(StoreError::from(err)),
                },
            }
        })
        .await?;
        Ok(match sent {
            None => Parked::Parked,
            Some(old) => {
                let progress = old.as_ref().and_then(|item| item.get("progress")).and_then(|p| p.as_n().ok());
                if progress.and_then(|p| p.parse::<u64>().ok()) == Some(seen_progress) {
                    Parked::Superseded
                } else {
                    Parked::ProgressMoved
                }
            }
        })
    }
}

/// What parking a `Wait` task's token did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parked {
    /// The token waits for the next outcome.
    Parked,
    /// An outcome happened since `Advance` looked: complete the token now.
    ProgressMoved,
    /// A newer `Wait` parked its token already; this message is a stale
    /// redelivery whose task ended long ago: nothing to do.
    Superseded,
}

/// What one step of an attempt's compare-and-set decided.
#[derive(Debug)]
pub enum AttemptStep {
    /// Nothing (more) to write.
    Done,
    /// Write the mutated attempt, with its facts and any other items, in one
    /// transaction conditioned on the version that was read.
    Write(AttemptWrite),
}

/// The rest of a write of the attempt item.
#[derive(Debug, Default)]
pub struct AttemptWrite {
    /// Facts the change publishes (outbox items in the same transaction).
    pub emitted: Vec<Emitted>,
    /// Other items of the same transaction (a finished execution's result).
    pub items: Vec<TransactWriteItem>,
    /// A job outcome or a cancel happened: bump `progress`, which is what a
    /// parked orchestration waits to see move.
    pub progressed: bool,
    /// After the commit, decide again on the state just written (the
    /// orchestrator advances in bounded steps until nothing changes).
    pub again: bool,
}

/// How an attempt update went.
#[derive(Debug)]
pub struct AttemptUpdated {
    /// The attempt as last read or written.
    pub item: AttemptItem,
    /// Transactions committed.
    pub writes: u32,
    /// Races lost on the way (each one re-read the attempt).
    pub lost_races: u32,
    /// The label sets of the jobs the committed writes made claimable, each
    /// once (whom to nudge).
    pub queued_label_sets: Vec<Vec<String>>,
}

impl Store {
    /// The one compare-and-set of the attempt aggregate: read the attempt
    /// (and its frozen definition), let `decide` mutate a copy, write it
    /// conditioned on the version read, with the facts it emits and the run
    /// mirroring a changed status, all in one transaction. A lost race
    /// (another writer moved the version, a transaction conflict, throttling)
    /// re-reads and decides again after a jittered pause, at most
    /// [`contention::MAX_LOST_RACES`] times. Writers of the attempt in this
    /// process queue on its in-process lock first (`serialize`), so they do
    /// not lose races to each other.
    ///
    /// `decide` must be a pure function of the state it is given: it may run
    /// again on a fresher state after a lost race, so a replay is safe.
    /// `Ok(None)`: the attempt does not exist.
    pub async fn update_attempt<E>(
        &self,
        run_id: Uuid,
        attempt: u32,
        outbox_ttl_days: u32,
        mut decide: impl FnMut(&mut AttemptItem, &WorkflowDefinition) -> Result<AttemptStep, E>,
    ) -> Result<Option<AttemptUpdated>, E>
    where
        E: From<StoreError>,
    {
        let _serialised = serialize::lock(serialize::attempt_key(run_id, attempt)).await;
        let Some(mut item) = self.get_attempt(run_id, attempt).await? else { return Ok(None) };
        let definition = self.get_snapshot(run_id, item.state.snapshot_attempt).await?.ok_or_else(|| {
            StoreError::Malformed(format!("attempt {run_id}/{attempt} has no snapshot {}", item.state.snapshot_attempt))
        })?;
        let mut updated =
            AttemptUpdated { item: item.clone(), writes: 0, lost_races: 0, queued_label_sets: Vec::new() };
        loop {
            let mut next = item.clone();
            // The definition this attempt runs: its decided matrices as legs.
            let runs = item.state.definition(&definition);
            let write = match decide(&mut next, &runs)? {
                AttemptStep::Done => {
                    updated.item = item;
                    return Ok(Some(updated));
                }
                AttemptStep::Write(write) => write,
            };
            next.version = item.version + 1;
            if write.progressed {
                next.progress += 1;
            }
            let now = Utc::now();
            let mut items = vec![self.versioned_put(&next, Some(item.version))?];
            for execution_id in withdrawn_executions(&item.state, &next.state) {
                // A timeout's write withdraws with its check of the record
                // already (an item may be touched once a transaction).
                if !write.items.iter().any(|i| touches_record(i, execution_id)) {
                    items.push(self.withdrawn_update(execution_id, now)?);
                }
            }
            if next.state.status != item.state.status {
                // Only the first attempt's start is the run's start; a rerun
                // keeps the run's `started_at`.
                let started_at = if attempt == 1 { next.state.started_at } else { None };
                items.push(self.run_mirror_update(
                    run_id,
                    attempt,
                    next.state.status,
                    started_at,
                    next.state.finished_at,
                )?);
            }
            items.extend(write.items);
            items.extend(self.emitted_puts(
                &next.state.workspace_id,
                now,
                &write.emitted,
                outbox_ttl_days,
                next.state.jobs.len(),
            )?);
            if contention::lost_race(self.transact(items).await)? {
                updated.lost_races += 1;
                if updated.lost_races > contention::MAX_LOST_RACES {
                    return Err(contention::too_contended(format!("attempt {run_id}/{attempt}")).into());
                }
                contention::pause_after_lost_race().await;
                item = self
                    .get_attempt(run_id, attempt)
                    .await?
                    .ok_or_else(|| StoreError::Malformed(format!("attempt {run_id}/{attempt} disappeared")))?;
                continue;
            }
            updated.writes += 1;
            for emitted in &write.emitted {
                if let Emitted::Queued { spec, .. } = emitted {
                    if !updated.queued_label_sets.contains(&spec.work.labels) {
                        updated.queued_label_sets.push(spec.work.labels.clone());
                    }
                }
            }
            item = next;
            if !write.again {
                updated.item = item;
                return Ok(Some(updated));
            }
        }
    }
}

/// Whether `item` writes the runners' record of `execution_id`.
fn touches_record(item: &TransactWriteItem, execution_id: Uuid) -> bool {
    let pk = keys::execution_pk(execution_id);
    let key = item
        .update()
        .map(|u| u.key())
        .or_else(|| item.condition_check().map(|c| c.key()))
        .or_else(|| item.delete().map(|d| d.key()));
    key.is_some_and(|key| {
        key.get("pk").and_then(|v| v.as_s().ok()) == Some(&pk)
            && key.get("sk").and_then(|v| v.as_s().ok()).map(String::as_str) == Some(keys::RUNNER_SK)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{to_item, Item};
    use baton_domain::workflows::attempt::NewAttempt;
    use baton_domain::workflows::parse_definition;
    use baton_domain::workflows::status::{ExecutionStatus, JobStatus, StatusReason};

    fn fifty_job_attempt() -> AttemptState {
        let mut yaml = String::from("name: wide\njobs:\n");
        for i in 0..50 {
            yaml.push_str(&format!("  job{i:02}:\n    runs-on: [linux]\n    steps:\n      - run: \"true\"\n"));
        }
        let definition = parse_definition(&yaml).expect("a valid workflow");
        AttemptState::new(NewAttempt::first(Uuid::new_v4(), "ws", &definition, Utc::now()))
    }

    /// An attempt item exactly as the store wrote it before the stored
    /// format had a type of its own (`attempts/fixtures`): a rename
    /// of a domain field must not stop it from loading.
    #[test]
    fn an_attempt_stored_in_format_1_still_loads() {
        let fixture: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(include_str!("attempts/fixtures/attempt-v1.json")).expect("the fixture is JSON");
        let stored: Item = fixture
            .into_iter()
            .map(|(name, value)| {
                let value = match (value.get("S"), value.get("N"), value.get("B")) {
                    (Some(text), _, _) => AttributeValue::S(text.as_str().expect("S").into()),
                    (_, Some(number), _) => AttributeValue::N(number.as_str().expect("N").into()),
                    (_, _, Some(bytes)) => AttributeValue::B(aws_smithy_types::Blob::new(
                        aws_smithy_types::base64::decode(bytes.as_str().expect("B")).expect("base64"),
                    )),
                    _ => panic!("unexpected attribute {name}: {value}"),
                };
                (name, value)
            })
            .collect();
        assert!(!stored.contains_key("state_format"), "written before the format was named");
        let item: AttemptItem = from_item(stored).expect("format 1 loads");
        assert_eq!((item.version, item.progress, item.wait_progress), (7, 2, Some(2)));
        assert_eq!(item.wait_token.as_deref(), Some("token-abc"));
        let state = &item.state;
        assert_eq!(state.run_id.to_string(), "01938a5e-0000-7000-8000-000000000001");
        assert_eq!((state.workspace_id.as_str(), state.attempt, state.snapshot_attempt), ("acme", 2, 1));
        assert_eq!(state.status, RunStatus::Running);
        assert_eq!(state.rerun_mode, Some(baton_domain::workflows::RerunMode::Failed));
        assert_eq!(state.started_at.map(|t| t.to_rfc3339()), Some("2026-12-02T10:00:01.250+00:00".into()));
        let keys: Vec<&str> = state.jobs.iter().map(|job| job.key.as_str()).collect();
        assert_eq!(keys, ["build", "test", "report"]);
        let (build, test, report) = (&state.jobs[0], &state.jobs[1], &state.jobs[2]);
        assert!(build.carried_over && build.execution.is_none());
        assert_eq!(build.status, JobStatus::Succeeded);
        assert_eq!(
            build.carried_from.map(|id| id.to_string()).as_deref(),
            Some("01938a5e-0000-7000-8000-0000000000c1")
        );
        let execution = test.execution.as_ref().expect("test ran");
        assert_eq!((test.status, test.reason), (JobStatus::Failed, Some(StatusReason::RunnerLost)));
        assert_eq!((execution.status, execution.reason), (ExecutionStatus::Failed, Some(StatusReason::RunnerLost)));
        assert_eq!(execution.started_at.map(|t| t.to_rfc3339()), Some("2026-12-02T10:00:03.500+00:00".into()));
        assert_eq!(
            execution.runner_session_id.map(|id| id.to_string()).as_deref(),
            Some("01938a5e-0000-7000-8000-0000000000d1")
        );
        let running = report.execution.as_ref().expect("report runs");
        assert_eq!(
            (report.status, running.status, running.finished_at),
            (JobStatus::Running, ExecutionStatus::Running, None)
        );
        // Written again, it is written in the current format and reads back the same.
        let rewritten = to_item(&item).expect("serialises");
        assert_eq!(rewritten.get("state_format"), Some(&AttributeValue::N("1".into())));
        assert_eq!(from_item::<AttemptItem>(rewritten).expect("reads back"), item);
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
