//! Baton's pure core: every decision the service takes, as plain functions
//! over plain types. The workflows context (definitions, expressions,
//! matrices, the DAG, attempts, reruns, views) and the runners context
//! (labels, claims' choice, leases, demand, intents, tools), with the ids,
//! tokens, limits and time formats they share.
//!
//! No AWS and no I/O: this crate depends on the contract (`baton-api`) and
//! on small pure libraries only, so a decision is tested without a network
//! and the compiler keeps the store and the functions out. Errors a client
//! may be answered are `error::ApiError`; the store converts its own at the
//! edge.

pub mod error;
pub mod hooks;
pub mod ids;
pub mod limits;
pub mod pipelines;
pub mod runners;
pub mod schedules;
pub mod time;
pub mod tokens;
pub mod triggers;
pub mod workflows;

pub use error::{ApiError, ErrorCode};
