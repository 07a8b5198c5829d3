//! The reference runner agent of Baton (`baton-runner`), the operator CLI
//! (`baton`) and the reference provisioners (`baton-provisioner`), as a
//! library so that the binaries stay thin.
//!
//! - [`agent`]: register, claim (long poll, backoff), run up to N jobs, stop.
//! - [`job`]: execute one claimed job, step by step, and report it.
//! - [`conditions`]: decide a step's `if:` just before it would run.
//! - [`step`]: run one step's processes with the env GitHub's runner gives
//!   a step, and carry `$GITHUB_ENV` and `$GITHUB_PATH` to the next.
//! - [`actions`]: fetch and run a step's action (`uses:`), as GitHub's
//!   runner does.
//! - [`heartbeat`]: keep a lease alive; notice `cancel` and `lease-lost`.
//! - [`complete`]: deliver a finished job's result while its lease lives.
//! - [`artifacts`], [`caches`]: pack, send, fetch and unpack artifacts and
//!   cache entries (`baton-runner artifact …` / `cache …`, [`step_cli`]).
//! - [`process`]: process groups and signals.
//! - [`streams`]: read a step's stdout and stderr, masks in force across both.
//! - [`tools`]: the tools this machine has, advertised at registration.
//! - [`provisioner`]: elastic fleets: the demand and instances view and the
//!   local reference provisioner (`baton-provisioner local`).
//! - [`agent_cli`], [`operator_cli`], [`provisioner_cli`]: the three commands'
//!   arguments and start-up (`baton token …`, `baton run …`, `baton
//!   provisioner …` and `baton fleet` are the operator CLI's).
//!
//! It talks to Baton through `baton-client` over the light `baton-api`
//! contract, never through the server crates: a runner install compiles no
//! AWS SDK. Its end-to-end tests, which need the server and the local stack,
//! live in `tests/runner`.

pub mod actions;
pub mod agent;
pub mod agent_cli;
pub mod artifacts;
pub mod caches;
pub mod complete;
pub mod conditions;
pub mod graph;
pub mod hash_files;
pub mod heartbeat;
pub mod job;
pub mod logs;
pub mod operator_cli;
pub mod outputs;
pub mod process;
pub mod provisioner;
pub mod provisioner_cli;
pub mod push;
pub mod shell;
pub mod step;
pub mod step_cli;
pub mod streams;
pub mod tools;

/// How a job ended, from the runner's point of view: what running it
/// ([`job`]) and delivering its complete ([`complete`]) come to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobEnd {
    /// Completed and accepted; the outcome the server recorded.
    Reported(baton_api::facts::JobOutcome),
    /// The lease was lost: stopped, nothing reported.
    LeaseLost,
    /// The runner shut down without draining: stopped, nothing reported.
    Abandoned,
    /// The complete could not be delivered.
    ReportFailed(String),
}

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
