//! Baton's server crate: the pure domain, typed configuration, errors, the
//! facts' server side (outbox, relay, subscribers), the DynamoDB store and
//! the AWS adapters. The contract (API bodies, views, statuses, fact types,
//! error codes) is the light `baton-api` crate, re-exported as `api`.
//! Layering reads top-down: functions → store → pure decisions; nothing
//! here imports a function crate.
//!
//! The local stack's test equipment (AWS's failures and limits, grants,
//! provisioning, schema checks) is the `baton-localstack` crate, which no
//! function depends on. Feature `operator-tools` keeps the operator's
//! table-scanning tool (republishing the outbox, for `baton-ops`) out of the
//! functions.

pub mod artifacts;
pub mod aws;
pub mod config;
pub mod context;
pub mod facts;
pub mod health;
pub mod http;
pub mod job_events;
pub mod logs;
pub mod metrics;
pub mod orchestration;
pub mod outcomes;
pub mod push;
pub mod resources;
pub mod secrets;
pub mod sqs;
pub mod telemetry;

pub use baton_api as api;
