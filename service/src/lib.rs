//! Baton's service layer: the use cases the functions call, and the
//! plumbing every function shares. A function is a trigger ↔ use case
//! adapter; what it decides is `baton-domain`'s, what it writes is
//! `baton-store`'s, what it answers is the contract's (`baton-api`).
//!
//! - `usecases/`: orchestration (an attempt's step loop, parking, waking),
//!   outcomes (adopting a job's result), job events, artifacts, logs,
//!   secrets, push to waiting runners, health.
//! - plumbing: `context` (what a function is handed at cold start),
//!   `config`, `aws` (the SDK clients), `http` (requests, answers, auth),
//!   `facts` (the relay and the subscriber loop), `sqs`; logs and EMF
//!   metrics are `baton-telemetry`'s.
//!
//! Layering reads top-down: functions → service → store → domain → api;
//! nothing here imports a function crate. The local stack's test equipment
//! (AWS's failures and limits, grants, provisioning, the resources of
//! `infra/resources.json`) is `baton-localstack`, which no function depends
//! on. Feature `operator-tools` keeps the operator's table-scanning tool
//! (republishing the outbox, for `baton-ops`) out of the functions.

pub mod aws;
pub mod config;
pub mod context;
pub mod facts;
pub mod http;
pub mod sqs;
pub mod usecases;
