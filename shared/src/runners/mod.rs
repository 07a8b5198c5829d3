//! The runners context: pure decisions (labels, leases, claim order). No I/O.

pub mod labels;
