//! The local provisioner's decisions, as plain functions over plain values
//! (the process shell in `local.rs` only acts on what they say): how many
//! instances to reserve for a label set, and what state an instance ended
//! in.

use baton_api::provisioners::InstanceState;

/// The most instances one reservation request may ask for (api.md).
pub const MAX_RESERVE_COUNT: u32 = 1_000;

/// How many instances to reserve for one label set, from its demand.
///
/// `queued` is the server's figure of claimable jobs **no reservation
/// covers yet** (reserved instances, booting or not, are already taken off
/// it), so reservations are not subtracted again; idle sessions of this
/// provisioner are about to claim queued jobs, so they cover that many.
/// `headroom` is what a local cap on live instances still allows (`None`:
/// no local cap). Asking for more than the server allows is safe: it
/// answers with fewer (capped by demand and `max_instances`), so there is no
/// need to mirror its rules here.
pub fn instances_to_reserve(queued: u64, idle_sessions: u64, headroom: Option<u64>) -> u32 {
    let uncovered = queued.saturating_sub(idle_sessions);
    let allowed = headroom.map_or(uncovered, |room| uncovered.min(room));
    u32::try_from(allowed).unwrap_or(u32::MAX).min(MAX_RESERVE_COUNT)
}

/// What a local cap of `limit` live instances still allows with `live`
/// running (`None`: no cap).
pub fn headroom(limit: Option<u32>, live: usize) -> Option<u64> {
    limit.map(|limit| u64::from(limit).saturating_sub(live as u64))
}

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
    fn queued_demand_that_no_idle_session_covers_is_reserved() {
        assert_eq!(instances_to_reserve(5, 0, None), 5);
        assert_eq!(instances_to_reserve(5, 2, None), 3, "two idle runners will take two of them");
        assert_eq!(instances_to_reserve(2, 5, None), 0, "more idle runners than jobs: nothing to start");
        assert_eq!(instances_to_reserve(0, 0, None), 0);
    }

    #[test]
    fn a_local_cap_bounds_what_is_reserved() {
        assert_eq!(instances_to_reserve(10, 0, headroom(Some(4), 1)), 3);
        assert_eq!(instances_to_reserve(10, 0, headroom(Some(4), 6)), 0, "over the cap already: none");
        assert_eq!(headroom(None, 1_000), None);
    }

    #[test]
    fn one_request_never_asks_for_more_than_the_api_takes() {
        assert_eq!(instances_to_reserve(u64::MAX, 0, None), MAX_RESERVE_COUNT);
        assert_eq!(instances_to_reserve(2_500, 100, None), MAX_RESERVE_COUNT);
    }

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
