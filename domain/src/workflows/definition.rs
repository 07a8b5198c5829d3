//! Workflow definitions (behaviour.md §8): the typed, fully validated form
//! of a GitHub-Actions-style YAML file, and the limits it is held to (the
//! YAML is read and checked into it by `parse_definition`).
//!
//! The typed result is what gets frozen into an attempt's snapshot (as
//! JSON): a rerun uses the snapshot, never the YAML again, so defaults are
//! resolved once, when the YAML is parsed (a job without `timeout-minutes`
//! stores 360), and a later change of a default cannot alter an old run.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::concurrency::ConcurrencySpec;
use super::condition::JobCondition;
use super::graph::NeedsGraph;
use super::matrix::{MatrixGroup, MatrixLeg};
use super::runtime_matrix::RuntimeMatrix;
use crate::error::{ApiError, ErrorCode};

/// The largest definition accepted, in bytes of YAML.
pub const MAX_DEFINITION_BYTES: usize = 256 * 1024;
/// The most jobs a definition may hold.
pub const MAX_JOBS: usize = 256;
/// The most steps a job may hold.
pub const MAX_STEPS_PER_JOB: usize = 100;
/// The longest job id accepted.
pub const MAX_JOB_ID_LEN: usize = 100;
/// The most outputs a job may declare.
pub const MAX_OUTPUTS_PER_JOB: usize = 50;
/// The longest output name.
pub const MAX_OUTPUT_NAME_LEN: usize = 100;
/// The longest workflow `name` (it is part of the run counter's key).
pub const MAX_WORKFLOW_NAME_LEN: usize = 200;
/// The most a job's spec (its steps, and its env with the workflow's merged
/// in) may weigh as JSON: what the runner receives and the table keeps for
/// it. Forty of them fit one 4 MB transaction with room to spare.
pub const MAX_JOB_SPEC_BYTES: usize = 64 * 1024;
/// The most the frozen snapshot of a definition may weigh as JSON: it is
/// one item (DynamoDB's limit is 400 KB).
pub const MAX_SNAPSHOT_BYTES: usize = 300 * 1024;
/// A run's timeout when the definition sets none: 30 days.
pub const DEFAULT_RUN_TIMEOUT_MINUTES: u32 = 30 * 24 * 60;
/// A job's timeout when it sets none: 6 hours.
pub const DEFAULT_JOB_TIMEOUT_MINUTES: u32 = 6 * 60;
/// The longest timeout accepted anywhere (run, job or step): 30 days.
pub const MAX_TIMEOUT_MINUTES: u32 = 30 * 24 * 60;

/// A validated workflow definition: what an attempt freezes as its snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkflowDefinition {
    /// The workflow's `name`, if it has one.
    #[serde(default)]
    pub name: Option<String>,
    /// `run-name`: the title a run is shown under, expanded when it is
    /// created (`workflows::run_name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_name: Option<String>,
    /// Variables given to every job (a job's own `env` overrides them).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// `mask-env`: variables whose values every job masks (secrets).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mask_env: Vec<String>,
    /// The run timeout: the attempt fails as `timed_out` past it.
    pub timeout_minutes: u32,
    /// `concurrency:`: the group runs of this workflow take turns in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<ConcurrencySpec>,
    /// The jobs, in the order the YAML lists them; a matrix job is its
    /// legs, in combination order.
    pub jobs: Vec<JobDefinition>,
    /// The matrix jobs: their legs, `fail-fast` and `max-parallel`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matrices: Vec<MatrixGroup>,
}

/// One job of a definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobDefinition {
    /// The job id (the key under `jobs:`), unique in the definition.
    pub key: String,
    /// The job's display `name`, if it has one.
    #[serde(default)]
    pub name: Option<String>,
    /// `runs-on`, in canonical form: the labels a runner must offer.
    pub labels: Vec<String>,
    /// Keys of the jobs this job waits for, in the order written, no
    /// repeats; a matrix job written here is all of its legs.
    #[serde(default)]
    pub needs: Vec<String>,
    /// A leg of a matrix job: which, and its values (`${{ matrix.<name> }}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix: Option<MatrixLeg>,
    /// A matrix decided when the job is due (its expressions read earlier
    /// jobs' outputs): until then the job is one job, then its legs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_matrix: Option<RuntimeMatrix>,
    /// `if:`; `success()` when absent.
    #[serde(default)]
    pub condition: JobCondition,
    /// The rest of `if:` beyond its status function (e.g.
    /// `needs.build.outputs.deploy == 'true'`), decided when the job would
    /// start; false skips the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    /// `outputs:`: the values the job hands to the jobs that need it, each
    /// taken from what its steps wrote to `$BATON_OUTPUT`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub outputs: BTreeMap<String, OutputSource>,
    /// `mask-env`: variables whose values this job masks, besides the
    /// workflow's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mask_env: Vec<String>,
    /// Counted from queueing; a claim does not reset it.
    pub timeout_minutes: u32,
    /// `continue-on-error`: `true`, or a `${{ … }}` decided when the job is
    /// queued (it holds when it comes to `true`). A job that fails with it
    /// ends `succeeded`, marked `soft_failed`, and does not fail its run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continue_on_error: Option<String>,
    /// `priority`: an integer in `PRIORITY_RANGE`, or a `${{ … }}` decided
    /// when the job is queued (a run's inputs can set it per run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    /// `retry:`: which failures are tried again, as new executions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<super::retry::RetryPolicy>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub steps: Vec<StepDefinition>,
    /// `approval:`: the job waits for people instead of running on a
    /// runner (it has no steps then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<super::approval::ApprovalSpec>,
    /// `listen:`: the job runs its steps once for each event delivered to
    /// it, until one resolves it or its listening times out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<super::listening::ListenSpec>,
    /// `concurrency:` on the job: the group the job (each leg on its own)
    /// takes turns in across the workspace's runs (`workflows::concurrency`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<super::concurrency::ConcurrencySpec>,
    /// `environment:` as written (GitHub's deployment target), shown in the
    /// run view; nothing is enforced by it (an `approval:` job gates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<baton_api::runs::JobEnvironment>,
}

/// One step of a job: a shell command the runner executes, or an action
/// (`uses:`) the runner fetches and runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepDefinition {
    /// `id:`, by which the job's `outputs` name the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    /// The shell command; empty for a step that runs an action (`uses`).
    #[serde(default)]
    pub run: String,
    /// `uses:`: the action the step runs (`owner/repo[/path]@ref`, a git
    /// URL with `@ref`, or `./path` in the job's directory), as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uses: Option<String>,
    /// `with:`: the action's inputs, as text (expressions resolved when the
    /// job is queued, as in `env`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub with: BTreeMap<String, String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The step's own limit, within the job's; `None` when it sets none.
    #[serde(default)]
    pub timeout_minutes: Option<u32>,
    /// `continue-on-error`, as for a job: a failing step with it is marked
    /// `soft_failed` and the next steps run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continue_on_error: Option<String>,
    /// A `run` step's `shell:` (one of GitHub's names, or a command with
    /// `{0}`), its job's or the workflow's `defaults.run.shell` already
    /// applied; `None` runs the step as before shells existed (`sh -c`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<String>,
    /// A `run` step's `working-directory:`, relative to the job's
    /// directory, defaults applied as for `shell`; it may hold expressions
    /// (resolved when the job is queued, as `env`'s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_directory: Option<String>,
    /// `if:`, as written (`${{ }}` optional): decided by the runner just
    /// before the step would run ([`expressions::Dialect::Step`]); `None`
    /// is GitHub's default, `success()`.
    ///
    /// [`expressions::Dialect::Step`]: super::expressions::Dialect::Step
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
}

/// Where a job output's value comes from: the key a step wrote to
/// `$BATON_OUTPUT` (the named step's, or the last step's that wrote it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    pub key: String,
}

impl WorkflowDefinition {
    /// The job with id `key`.
    pub fn job(&self, key: &str) -> Option<&JobDefinition> {
        self.jobs.iter().find(|job| job.key == key)
    }

    /// The matrix job written as `name`, if it is one.
    pub fn matrix_group(&self, name: &str) -> Option<&MatrixGroup> {
        self.matrices.iter().find(|group| group.job == name)
    }

    /// The matrix job leg `key` belongs to, if it is a leg.
    pub fn group_of_leg(&self, key: &str) -> Option<&MatrixGroup> {
        self.job(key).and_then(|job| job.matrix.as_ref()).and_then(|leg| self.matrix_group(&leg.job))
    }

    /// Whether `job` may read `need` in its expressions: a job it needs, or
    /// a matrix job all of whose legs it needs.
    pub fn reads_need(&self, job: &JobDefinition, need: &str) -> bool {
        job.needs.iter().any(|n| n == need)
            || self.matrix_group(need).is_some_and(|group| group.legs.iter().all(|leg| job.needs.contains(leg)))
    }

    /// The `needs` graph of the jobs, in definition order.
    pub fn needs_graph(&self) -> NeedsGraph {
        NeedsGraph::new(self.jobs.iter().map(|job| (job.key.as_str(), &job.needs)))
    }

    /// The run timeout in seconds.
    pub fn timeout_seconds(&self) -> u64 {
        u64::from(self.timeout_minutes) * 60
    }
}

impl JobDefinition {
    /// The job timeout in seconds (`timeout_s` in the claim body).
    pub fn timeout_seconds(&self) -> u64 {
        u64::from(self.timeout_minutes) * 60
    }
}

impl StepDefinition {
    /// The step timeout in seconds, if it has one.
    pub fn timeout_seconds(&self) -> Option<u64> {
        self.timeout_minutes.map(|minutes| u64::from(minutes) * 60)
    }
}

/// Why a definition was refused: where (job and field, when known) and
/// what. Answered as 400 `invalid-definition`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DefinitionError {
    pub job: Option<String>,
    pub field: Option<String>,
    pub message: String,
}

impl DefinitionError {
    /// An error about the document as a whole.
    pub fn document(message: impl Into<String>) -> Self {
        Self { job: None, field: None, message: message.into() }
    }

    /// An error about a job, or about one of its fields.
    pub fn in_job(job: impl Into<String>, field: Option<&str>, message: impl Into<String>) -> Self {
        Self { job: Some(job.into()), field: field.map(str::to_string), message: message.into() }
    }
}

impl fmt::Display for DefinitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.job, &self.field) {
            (Some(job), Some(field)) => write!(f, "job `{job}`, field `{field}`: {}", self.message),
            (Some(job), None) => write!(f, "job `{job}`: {}", self.message),
            (None, Some(field)) => write!(f, "field `{field}`: {}", self.message),
            (None, None) => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for DefinitionError {}

impl From<DefinitionError> for ApiError {
    fn from(err: DefinitionError) -> Self {
        ApiError::new(ErrorCode::InvalidDefinition, err.to_string())
    }
}
