//! The integration tests of the functions against the local stack (moto), one
//! test binary: each linked binary carries the whole SDK (about 120 MB), and
//! fifteen of them took CI's disk. nextest still runs every test in its own
//! process, so a test sees no other test's state.

mod artifacts;
mod caches;
mod fact_schemas;
mod facts_pipeline;
mod faults;
mod fuzz;
mod health;
mod hooks;
mod limits;
mod logs;
mod pipelines;
mod provisioners;
mod reusable_workflows;
mod runners_auth;
mod runners_leases;
mod runners_queue;
mod schedules;
mod secrets;
mod unschedulable;
mod variables;
mod workflows_approvals;
mod workflows_end_to_end;
mod workflows_listening;
mod workflows_orchestration;
mod workflows_rerun;
mod workflows_runs;
mod workflows_support;
