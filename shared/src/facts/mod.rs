//! Facts: past-tense domain events, written to the outbox in the same
//! DynamoDB transaction as the state change they describe, relayed to
//! EventBridge and consumed at least once by subscribers.
//!
//! The fact types are part of the contract and live in `baton_api::facts`;
//! this module holds the server's side: the relay, the subscriber plumbing
//! and the schema checks.

pub mod relay;
pub mod subscriber;

pub use baton_api::facts::*;
