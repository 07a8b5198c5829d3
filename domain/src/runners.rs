//! The runners context: pure decisions (labels, leases, claim order). No I/O.

pub mod claim;
pub mod labels;
pub mod lease;
pub mod provisioners;
pub mod schedulable;
pub mod settle;
pub mod tools;
