//! What a function tells CloudWatch, on stdout only (no AWS SDK, no call on
//! the request path): `logs`, one JSON object a line with a timestamp and
//! the request's ids; `metrics`, CloudWatch Embedded Metric Format lines.
//! Every function and the AWS reference provisioner use it; the latter
//! needs nothing else of the server.

pub mod logs;
pub mod metrics;
