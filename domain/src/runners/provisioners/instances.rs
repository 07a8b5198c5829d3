//! Runner instances as a provisioner reports them: states only move
//! forward (`InstanceState::rank`), so a late, repeated or out-of-order
//! report changes nothing and the store's condition is one comparison.

use baton_api::provisioners::InstanceState;

/// Whether a report of `reported` moves an instance now at `current`
/// (`None`: not seen yet) forward. Equal is a repeat: not a move.
pub fn moves_forward(current: Option<InstanceState>, reported: InstanceState) -> bool {
    current.is_none_or(|now| reported.rank() > now.rank())
}

/// Whether a report stops the machine (the moment an intent counts as honoured).
pub fn stops(state: InstanceState) -> bool {
    state.rank() >= InstanceState::Terminating.rank()
}

#[cfg(test)]
mod tests {
    use super::*;
    use InstanceState::*;

    #[test]
    fn states_never_move_backwards_and_a_repeat_is_no_move() {
        assert!(moves_forward(None, Running));
        assert!(moves_forward(Some(Requested), Booting));
        assert!(moves_forward(Some(Booting), Terminated));
        assert!(!moves_forward(Some(Running), Running));
        assert!(!moves_forward(Some(Terminated), Running));
        assert!(!moves_forward(Some(Failed), Terminated));
        assert!(stops(Terminating) && stops(Failed) && !stops(Running));
    }
}
