//! Elastic fleets, the provisioner's side (behaviour.md §15, api.md
//! "Provisioners"): a client of the `bpt_` routes, the `baton fleet` view,
//! and the local reference provisioner, whose instances are `baton-runner`
//! processes on this machine.
//!
//! - [`client`]: the `bpt_` routes (demand, reservations, reports, intents).
//! - [`decide`]: pure decisions: how many to reserve, how an instance ended.
//! - [`ledger`]: the instances' books and the events not yet reported.
//! - [`child`]: one runner process: start, forward its logs, stop.
//! - [`local`]: the local provisioner's loop (the thin shell).
//! - [`view`]: demand and instances as `baton fleet` prints them.
//! - [`fleet`]: `baton fleet`: read them, print them, redraw them.

pub mod child;
pub mod client;
pub mod decide;
pub mod fleet;
pub mod ledger;
pub mod local;
pub mod view;
