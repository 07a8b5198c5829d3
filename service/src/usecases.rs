//! The use cases: what a function does once its trigger is read. Each reads
//! through the store, decides with the domain's plain functions, and writes
//! its change and the change's facts in one conditional transaction.

pub mod artifacts;
pub mod called_workflows;
pub mod claims;
pub mod fleet;
pub mod health;
pub mod job_events;
pub mod logs;
pub mod orchestration;
pub mod outcomes;
pub mod push;
pub mod run_creation;
pub mod schedules;
pub mod secrets;
