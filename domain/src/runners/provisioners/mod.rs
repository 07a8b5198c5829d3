//! Provisioners (behaviour.md §15): the pure decisions of elastic fleets.
//! No I/O: the store keeps the books, these functions decide.
//!
//! - `settings`: what an operator may register (validated, with defaults);
//! - `demand`: queued work per served label set, and how a reservation
//!   spreads over the job label sets it covers;
//! - `instances`: which report moves an instance forward;
//! - `intents`: which instance must go and why, and when a reservation is
//!   released (the seed's rule).

pub mod demand;
pub mod instances;
pub mod intents;
pub mod settings;
