//! The runners context: pure decisions (labels, leases, claim order). No I/O.
