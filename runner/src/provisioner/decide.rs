//! The local provisioner's decisions, as plain functions over plain values
//! (the process shell in `local.rs` only acts on what they say): how many
//! instances to reserve for a label set (shared with every provisioner, from
//! `baton_api::provisioners`), and what state an instance ended in.

use baton_api::provisioners::InstanceState;

// How many instances to reserve is the same decision for every provisioner
// (the AWS one in functions/aws-provisioner too), so it lives with the
// contract, which both depend on.
pub use baton_api::provisioners::{headroom, instances_to_reserve, MAX_RESERVE_COUNT};

/// The state an instance ended in once its process exited with `code`
/// (`None`: no status could be read). A process the provisioner stopped
/// ended as asked, whatever its code (a runner killed mid-job exits
/// non-zero); one that exited on its own ended well only with 0 (an
/// exhausted ephemeral runner exits 0 after its job).
pub fn exit_state(code: Option<i32>, stop_requested: bool) -> InstanceState {
    match (stop_requested, code) {
        (true, _) | (false, Some(0)) => InstanceState::Terminated,
        (false, _) => InstanceState::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_stopped_on_purpose_is_terminated_whatever_its_exit_code() {
        assert_eq!(exit_state(Some(143), true), InstanceState::Terminated);
        assert_eq!(exit_state(None, true), InstanceState::Terminated);
    }

    #[test]
    fn an_instance_that_exited_on_its_own_failed_unless_it_exited_zero() {
        assert_eq!(exit_state(Some(0), false), InstanceState::Terminated, "an exhausted runner's clean exit");
        assert_eq!(exit_state(Some(1), false), InstanceState::Failed);
        assert_eq!(exit_state(None, false), InstanceState::Failed);
    }
}
