//! Pieces of the benchmark that stand alone (no stack of their own): the
//! cost model and the cold-start proxy. The `bench` binary (`src/main.rs`)
//! drives the local stack and uses them.

pub mod cold_start;
pub mod cost;
