//! Facts: past-tense domain events, written to the outbox in the same
//! DynamoDB transaction as the state change they describe, relayed to
//! EventBridge and consumed at least once by subscribers.
//!
//! The fact types are part of the contract and live in `baton_api::facts`;
//! the outbox write is the store's (`baton_store::outbox`). This module holds
//! the server's side of the way out: the relay and the subscriber plumbing.

pub mod relay;
pub mod subscriber;
