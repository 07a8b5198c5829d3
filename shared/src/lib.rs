//! Baton's server crate: the pure domain, typed configuration, errors, the
//! facts' server side (outbox, relay, subscribers), the DynamoDB store and
//! the AWS adapters. The contract (API bodies, views, statuses, fact types,
//! error codes) is the light `baton-api` crate, re-exported as `api`.
//! Layering reads top-down: functions → store → pure decisions; nothing
//! here imports a function crate.
//!
//! Feature `local-stack`: what only the local stack, the tests and the
//! benchmark need (provisioning the emulator, checking facts against their
//! JSON Schemas, injecting AWS's failures); a deployed function is built
//! without it.

pub mod aws;
#[cfg(feature = "local-stack")]
pub mod aws_limits;
pub mod config;
pub mod context;
pub mod error;
pub mod facts;
#[cfg(feature = "local-stack")]
pub mod faults;
#[cfg(feature = "local-stack")]
pub mod grants;
pub mod health;
pub mod http;
pub mod ids;
pub mod limits;
pub mod logs;
pub mod metrics;
pub mod orchestration;
pub mod outcomes;
#[cfg(feature = "local-stack")]
pub mod provision;
pub mod push;
pub mod resources;
pub mod runners;
pub mod secrets;
pub mod sqs;
pub mod store;
pub mod telemetry;
pub mod time;
pub mod tokens;
pub mod workflows;

pub use baton_api as api;
pub use error::{ApiError, ErrorCode};
