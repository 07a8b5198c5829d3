//! The reference runner agent of Baton (`baton-runner`), the operator CLI
//! (`baton`) and the reference provisioners (`baton-provisioner`), as a
//! library so that the binaries stay thin.
//!
//! - [`client`]: the typed HTTP client and the classification of failures.
//! - [`agent`]: register, claim (long poll, backoff), run up to N jobs, stop.
//! - [`job`]: execute one claimed job, step by step, and report it.
//! - [`heartbeat`]: keep a lease alive; notice `cancel` and `lease-lost`.
//! - [`complete`]: deliver a finished job's result while its lease lives.
//! - [`artifacts`], [`caches`]: pack, send, fetch and unpack artifacts and
//!   cache entries (`baton-runner artifact …` / `cache …`, [`step_cli`]).
//! - [`process`]: process groups and signals.
//! - [`streams`]: read a step's stdout and stderr, masks in force across both.
//! - [`tools`]: the tools this machine has, advertised at registration.
//! - [`operator`]: the operator side (`baton token …`, `baton run …`,
//!   `baton provisioner …`).
//! - [`provisioner`]: elastic fleets: the `bpt_` client, `baton fleet`'s
//!   view and the local reference provisioner (`baton-provisioner local`).
//! - [`agent_cli`], [`operator_cli`], [`provisioner_cli`]: the three commands'
//!   arguments and start-up.
//!
//! It depends on the light `baton-api` crate for the contract, never on the
//! server crate: a runner install compiles no AWS SDK. Its end-to-end tests,
//! which need the server and the local stack, live in `tests/runner`.

pub mod agent;
pub mod agent_cli;
pub mod artifacts;
pub mod backoff;
pub mod caches;
pub mod client;
pub mod complete;
pub mod graph;
pub mod heartbeat;
pub mod job;
pub mod logs;
pub mod operator;
pub mod operator_cli;
pub mod outputs;
pub mod process;
pub mod provisioner;
pub mod provisioner_cli;
pub mod push;
pub mod step_cli;
pub mod streams;
pub mod tools;

/// Why a running job must stop early. Ordered by precedence: a later,
/// stronger reason replaces a weaker one, never the other way round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stop {
    /// Keep going.
    None,
    /// The server asked to cancel: stop the processes, complete as `failed`.
    Cancel,
    /// The lease is no longer ours: stop the processes, report nothing.
    LeaseLost,
    /// The runner is shutting down without draining: stop, report nothing.
    Abandon,
}

/// Raises the stop reason of a job to `stop` unless a stronger one is set.
pub fn escalate(sender: &tokio::sync::watch::Sender<Stop>, stop: Stop) {
    sender.send_if_modified(|current| {
        if stop > *current {
            *current = stop;
            true
        } else {
            false
        }
    });
}

/// The agent's shutdown state, driven by SIGINT / SIGTERM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Shutdown {
    Running,
    /// Stop claiming; let the running jobs finish and report.
    Drain,
    /// Stop claiming; kill the running jobs without reporting.
    Abandon,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_reason_only_ever_grows_stronger() {
        let (tx, rx) = tokio::sync::watch::channel(Stop::None);
        escalate(&tx, Stop::LeaseLost);
        escalate(&tx, Stop::Cancel);
        assert_eq!(*rx.borrow(), Stop::LeaseLost, "a late cancel does not turn a lost lease into a report");
        escalate(&tx, Stop::Abandon);
        assert_eq!(*rx.borrow(), Stop::Abandon);
    }
}
