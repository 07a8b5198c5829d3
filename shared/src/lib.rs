//! Baton's shared crate: the pure domain, typed configuration, errors with
//! stable codes, the facts (outbox, relay, subscribers), the DynamoDB store and
//! the AWS adapters. Layering reads top-down: functions → store → pure
//! decisions; nothing here imports a function crate.

pub mod api;
pub mod auth;
pub mod aws;
pub mod config;
pub mod context;
pub mod error;
pub mod facts;
pub mod health;
pub mod http;
pub mod ids;
pub mod metrics;
pub mod orchestration;
pub mod provision;
pub mod resources;
pub mod runners;
pub mod store;
pub mod telemetry;
pub mod workflows;

pub use error::{ApiError, ErrorCode};
