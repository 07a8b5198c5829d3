//! Baton's contract with the world, in one light crate: the HTTP API's
//! request and response bodies (`runners`, `runs`), the statuses they carry
//! (`status`), the facts published on the bus (`facts`) and the stable error
//! codes (`error`). The server, the runner agent and the operator CLI share
//! these very types, so the contract cannot drift; the crate depends on
//! serde, uuid and chrono only, so a client built on it compiles no AWS SDK;
//! the `openapi` feature adds the OpenAPI document generated from the types.

pub mod artifacts;
pub mod caches;
pub mod error;
pub mod facts;
pub mod health;
pub mod hooks;
pub mod logs;
#[cfg(feature = "openapi")]
pub mod openapi;
pub mod pipelines;
pub mod provisioners;
pub mod runners;
pub mod runs;
pub mod secrets;
pub mod status;
pub mod variables;
