//! Pieces of the benchmark that stand alone (no stack of their own): the
//! cost model, the cold-start proxy and the side-by-side with a baseline. The `bench` binary (`src/main.rs`)
//! drives the local stack and uses them.

pub mod baseline;
pub mod cold_start;
pub mod cost;
