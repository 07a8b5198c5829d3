//! Creating a run (behaviour.md §8, §18), whatever asked for it: a whole
//! workflow file posted to `POST …/runs`, or a pipeline dispatched. The
//! definition is read and checked before anything is written (400 naming
//! the job and field); then, in one transaction, the run with the next
//! per-workflow number, attempt 1 with its jobs and executions, the frozen
//! snapshot of the parsed definition, the idempotency key and the
//! `workflows.run.attempt_created` fact.
//!
//! Idempotency: a repeated `idempotency_key` finds the key's item and
//! answers the existing run, writing nothing; two concurrent creates with
//! one key race on the key item's condition and the loser answers with the
//! winner's run. Numbers: the counter item is written conditioned on the
//! value read, so a create that lost the number to a concurrent one
//! re-reads and retries (`Store::create_run`).

use std::collections::{BTreeMap, BTreeSet};

use baton_api::pipelines::{PipelineVersion, RunTrigger};
use baton_api::runs::RunView;
use baton_domain::error::{ApiError, ErrorCode};
use baton_domain::limits;
use baton_domain::runners::labels::labelset_id;
use baton_domain::workflows::attempt::{AttemptState, NewAttempt};
use baton_domain::workflows::concurrency::{self, CreateScope};
use baton_domain::workflows::github::GithubData;
use baton_domain::workflows::view::RunRecords;
use baton_domain::workflows::WorkflowDefinition;
use baton_domain::workflows::{references, run_name};
use baton_store::runs::{NewRun, RunCreated};
use baton_telemetry::metrics::{emit, Unit};
use serde_json::{Map, Value};

use crate::context::Context;

/// The longest idempotency key accepted.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 200;
/// The name runs of a workflow without `name:` are numbered under.
pub const UNNAMED_WORKFLOW: &str = "unnamed";

/// A run to create, its definition read already.
pub struct RunRequest<'a> {
    pub workspace_id: &'a str,
    /// The id a run request reserved for it (`store::run_requests`); a new
    /// one otherwise.
    pub run_id: Option<uuid::Uuid>,
    pub definition: WorkflowDefinition,
    pub inputs: Option<Map<String, Value>>,
    pub idempotency_key: Option<String>,
    /// The operator token's identity, when an operator asked.
    pub creator: Option<String>,
    pub trigger: RunTrigger,
    pub pipeline: Option<PipelineVersion>,
    /// The `github` context's trigger fields (`workflows::github`).
    pub github: Map<String, Value>,
}

/// What creating did: a new run, or the one its idempotency key made.
pub enum Created {
    New(RunView),
    Existing(RunView),
}

pub async fn create_run(context: &Context, request: RunRequest<'_>) -> Result<Created, ApiError> {
    let RunRequest { workspace_id, run_id, definition, inputs, idempotency_key, creator, trigger, pipeline, github } =
        request;
    // Expressions read inputs by name: one the run is not given would
    // silently be empty in every job that reads it.
    for name in references::inputs_used(&definition) {
        if !inputs.as_ref().is_some_and(|inputs| inputs.contains_key(&name)) {
            return Err(ApiError::new(
                ErrorCode::InvalidDefinition,
                format!("`inputs.{name}` is read by the definition, but the run is created without input `{name}`"),
            ));
        }
    }
    // (A job whose matrix is decided when it is due has its legs' labels
    // only then: they are registered as they are queued.)
    let new_sets: BTreeSet<String> =
        definition.jobs.iter().filter(|job| job.runtime_matrix.is_none()).map(|job| labelset_id(&job.labels)).collect();
    let pending_sets = context.store.label_sets(workspace_id).await?.into_iter().map(|set| set.sk).collect();
    limits::pending_label_sets(&pending_sets, &new_sets)?;
    if let Some(inputs) = &inputs {
        limits::storable_json("inputs", &Value::Object(inputs.clone()), limits::MAX_INPUTS_BYTES)?;
    }
    // The workspace variables it reads, as they are now: a run under way
    // never changes when one is set again.
    let vars = context.store.variables_named(workspace_id, &references::vars_used(&definition)).await?;
    let vars_text = (!vars.is_empty()).then(|| Value::Object(vars.clone()).to_string());
    let github_text = Value::Object(github.clone());
    limits::storable_json("the trigger's event", &github_text, limits::MAX_EVENT_BYTES)?;
    if let Some(key) = idempotency_key.as_deref() {
        if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY_LEN {
            return Err(ApiError::invalid_request(format!(
                "idempotency_key must hold 1 to {MAX_IDEMPOTENCY_KEY_LEN} characters"
            )));
        }
        if let Some(existing) = context.store.run_for_idempotency_key(workspace_id, key).await? {
            return existing_run(context, workspace_id, existing).await.map(Created::Existing);
        }
    }
    let inputs_text = inputs
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| ApiError::invalid_request(format!("inputs: {e}")))?;
    let name = definition.name.clone().unwrap_or_else(|| UNNAMED_WORKFLOW.to_string());
    let github_data = GithubData {
        fields: github,
        workflow: name.clone(),
        run_number: None,
        trigger: baton_domain::workflows::github::trigger_name(trigger.kind),
    };
    let run_id = run_id.unwrap_or_else(baton_domain::ids::new_id);
    let now = chrono::Utc::now();
    // What the workflow's create-time expressions read (its title, its
    // group); a job's group reads its key and matrix leg besides.
    let scope = CreateScope {
        inputs: inputs.as_ref(),
        vars: Some(&vars),
        workspace_id,
        run_id,
        job: None,
        github: Some(&github_data),
    };
    let title = definition.run_name.as_deref().and_then(|run_name| run_name::title(run_name, &scope));
    let mut attempt = AttemptState::new(NewAttempt::first(run_id, workspace_id, &definition, now));
    if let Some(spec) = &definition.concurrency {
        let hold = concurrency::hold_of(spec, &scope)
            .map_err(|(field, why)| ApiError::new(ErrorCode::InvalidDefinition, format!("{field}: {why}")))?;
        attempt.concurrency = Some(hold);
    }
    // A job's group is expanded when the job is due, from what is known
    // now: a name that comes out bad is refused here, not then.
    for job in definition.jobs.iter().filter(|job| job.concurrency.is_some()) {
        let Some(spec) = &job.concurrency else { continue };
        let scope = CreateScope { job: Some((&job.key, job.matrix.as_ref())), ..scope };
        concurrency::hold_of(spec, &scope).map_err(|(field, why)| {
            ApiError::new(ErrorCode::InvalidDefinition, format!("jobs.{}.{field}: {why}", job.key))
        })?;
    }
    let created = context
        .store
        .create_run(NewRun {
            id: run_id,
            workspace_id,
            name: &name,
            inputs: inputs_text,
            title,
            vars: vars_text,
            created_by: creator,
            attempt: &attempt,
            definition: &definition,
            idempotency_key: idempotency_key.as_deref(),
            trigger: Some(trigger),
            pipeline,
            github: Some(github_text.to_string()),
            now,
            outbox_ttl_days: context.config.outbox_ttl_days,
        })
        .await?;
    match created {
        RunCreated::New { run, number_retries } => {
            tracing::info!(%run_id, workspace_id, number = run.number, jobs = attempt.jobs.len(), "run created");
            emit(
                "create-run",
                &[("runs_created", 1.0, Unit::Count), ("number_retries", f64::from(number_retries), Unit::Count)],
            );
            let records = RunRecords {
                run: *run,
                attempts: vec![attempt],
                definitions: BTreeMap::from([(1, definition)]),
                results: Default::default(),
                artifacts: Vec::new(),
            };
            Ok(Created::New(records.view()))
        }
        RunCreated::Existing(existing) => existing_run(context, workspace_id, existing).await.map(Created::Existing),
    }
}

async fn existing_run(context: &Context, workspace_id: &str, run_id: uuid::Uuid) -> Result<RunView, ApiError> {
    let view = context.store.run_records(workspace_id, run_id).await?.ok_or_else(|| ApiError::not_found("run"))?.view();
    tracing::info!(%run_id, workspace_id, "repeated idempotency key: existing run");
    Ok(view)
}
