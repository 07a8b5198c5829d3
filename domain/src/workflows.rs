//! The workflows context: pure decisions (definitions, DAG scheduling, status
//! derivation, reruns). No I/O: every function here takes a snapshot and
//! returns a decision, so the store and the orchestrator stay thin and the
//! rules are tested without AWS.

pub mod approval;
pub mod attempt;
pub mod concurrency;
pub mod condition;
pub mod dag;
pub mod definition;
mod definition_reader;
pub mod execution;
pub mod expressions;
pub mod github;
pub mod graph;
pub mod listening;
pub mod matrix;
mod parse;
pub mod references;
pub mod rerun;
pub mod retry;
pub mod reusable;
pub mod run_name;
pub mod runtime_matrix;
pub mod spec;
pub mod status;
pub mod vars;
pub mod view;
pub(crate) mod yaml;

pub use condition::JobCondition;
pub use dag::{plan_advance, AdvancePlan, JobSnapshot};
pub use definition::{DefinitionError, JobDefinition, StepDefinition, WorkflowDefinition};
pub use execution::{apply_execution_event, apply_execution_events, ExecutionEvent, ExecutionState, ExecutionUpdate};
pub use parse::{parse_definition, parse_definition_with};
pub use rerun::{plan_rerun, PlannedJob, PreviousJob, RerunAction, RerunError, RerunMode};
pub use status::{
    derive_attempt_status, transition, AttemptStatus, ExecutionStatus, JobStatus, Lifecycle, RunStatus, StatusReason,
    StepStatus, Transition,
};
