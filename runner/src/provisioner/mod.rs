//! Elastic fleets, the provisioner's side (behaviour.md §15, api.md
//! "Provisioners"): the view `baton fleet` prints, and the local reference
//! provisioner, whose instances are `baton-runner` processes on this
//! machine. Both talk to the `bpt_` routes through
//! `baton_client::provisioners`.
//!
//! - [`decide`]: pure decisions: how many to reserve, how an instance ended.
//! - [`ledger`]: the instances' books and the events not yet reported.
//! - [`child`]: one runner process: start, forward its logs, stop.
//! - [`local`]: the local provisioner's loop (the thin shell).
//! - [`view`]: demand and instances as `baton fleet` prints them.

pub mod child;
pub mod decide;
pub mod ledger;
pub mod local;
pub mod view;
