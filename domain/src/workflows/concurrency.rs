//! Concurrency groups (behaviour.md §17): `concurrency:` on a workflow puts
//! each run's attempt in a named group of its workspace, and at most
//! `limit` attempts of a group (one by default) run at a time.
//!
//! The group is one item (`store::concurrency`) holding the attempts that
//! run (`holders`) and the attempts that wait (`queue`, oldest first),
//! changed only by compare-and-set on its version. An attempt starts no job
//! before it has seen itself as the holder, and it stops holding only when
//! it is done (every job terminal, `always()` jobs after a cancel too), so
//! two attempts of a group never have jobs going at once, whatever the
//! order of creates, completions and cancels.
//!
//! The policy, GitHub's with its gaps closed: by default one runs and one
//! waits, and a newer waiting run replaces the older (which ends
//! `cancelled`, reason `concurrency_replaced`); `queue: N` (or `max`, 100)
//! keeps up to N waiting in order; `cancel-in-progress` cancels the
//! running attempt and every waiting one when a new one joins (the new one
//! still waits for the cancelled one's `always()` jobs to end).
//!
//! `concurrency:` on a job puts that job (each matrix leg on its own) in a
//! group the same way: the job is not queued before it holds the group, it
//! leaves when it ends, and a replaced job ends `cancelled` (reason
//! `concurrency_replaced`) while the rest of its run goes on as after any
//! cancelled job. Jobs and runs share the workspace's group names, as on
//! GitHub, so a run-level `deploy` and a job-level `deploy` take turns.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::expressions::{self, BatonField, Reference, Scope};

/// The most attempts a group keeps waiting (`queue: max`).
pub const MAX_QUEUE: u32 = 100;
/// The most attempts of a group that may run at once (`limit`).
pub const MAX_LIMIT: u32 = 100;

fn one() -> u32 {
    1
}
/// The longest group name, once expanded.
pub const MAX_GROUP_LEN: usize = 200;

/// A workflow's `concurrency:`, as written (expressions unexpanded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConcurrencySpec {
    /// The group's name, may read `inputs`, `baton.workspace_id` and
    /// `baton.run_id`.
    pub group: String,
    /// `cancel-in-progress`: `true`, `false` or an expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_in_progress: Option<String>,
    /// How many attempts may wait (1 to [`MAX_QUEUE`]).
    pub queue: u32,
    /// How many attempts may run at once (1 to [`MAX_LIMIT`]; Buildkite's
    /// `concurrency: N`).
    #[serde(default = "one")]
    pub limit: u32,
}

/// An attempt's place in its group, as the attempt item keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupHold {
    /// The group's name, expanded when the run was created.
    pub group: String,
    pub cancel_in_progress: bool,
    pub queue: u32,
    #[serde(default = "one")]
    pub limit: u32,
    pub status: HoldStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HoldStatus {
    /// Not yet the holder: no job starts.
    Waiting,
    /// The group's holder: the attempt runs.
    Holding,
    /// A job's hold only: the job ended and has left the group (the
    /// attempt's own hold needs no such mark: a done attempt leaves).
    Left,
}

/// One attempt, or one job of an attempt, as a group lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub run_id: Uuid,
    pub attempt: u32,
    /// The job's id when a job-level `concurrency:` joined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<Uuid>,
}

/// A group's holders and waiting attempts, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupState {
    /// The attempts that run, at most `limit`.
    #[serde(default)]
    pub holders: Vec<Member>,
    /// How many may run at once: the last joiner's `limit` (runs of one
    /// group share a definition, so they agree).
    #[serde(default = "one")]
    pub limit: u32,
    #[serde(default)]
    pub queue: Vec<Member>,
    /// The holder that left last: a leave tried again after its write was
    /// applied but its answer lost is told the same holder again (else the
    /// attempt it promoted would never be woken).
    #[serde(default)]
    pub last_left: Option<Member>,
}

impl Default for GroupState {
    fn default() -> Self {
        Self { holders: Vec::new(), limit: 1, queue: Vec::new(), last_left: None }
    }
}

/// What joining a group decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    /// The joiner holds the group: it may start its jobs.
    pub holding: bool,
    /// Attempts to cancel: the holder and the waiting ones under
    /// `cancel-in-progress`, the oldest waiting ones past the queue's
    /// length otherwise. They stay listed until they are done, so the
    /// order of who runs next is kept.
    pub to_cancel: Vec<Member>,
    /// Whether the group changed (a write is due).
    pub changed: bool,
}

impl GroupState {
    /// `me` joins (idempotent: a member that joins again changes nothing
    /// and is told the same, but its cancels are asked again, which are
    /// no-ops on attempts already cancelled).
    pub fn join(&mut self, me: Member, cancel_in_progress: bool, queue: u32, limit: u32) -> Joined {
        let mut changed = false;
        if self.limit != limit.max(1) {
            self.limit = limit.max(1);
            changed = true;
        }
        if self.holders.contains(&me) {
            return Joined { holding: true, to_cancel: Vec::new(), changed };
        }
        // Room to run: the oldest waiting attempts go first (a leave that
        // promoted nobody, or a queue left by a crash), then this one.
        changed |= !self.promote().is_empty();
        if self.holders.len() < self.limit as usize && !self.queue.contains(&me) {
            self.holders.push(me);
            return Joined { holding: true, to_cancel: Vec::new(), changed: true };
        }
        if self.holders.contains(&me) {
            return Joined { holding: true, to_cancel: Vec::new(), changed };
        }
        if !self.queue.contains(&me) {
            self.queue.push(me);
            changed = true;
        }
        let mine = self.queue.iter().position(|m| *m == me).unwrap_or(self.queue.len());
        let to_cancel = if cancel_in_progress {
            self.holders.iter().chain(self.queue[..mine].iter()).copied().collect()
        } else {
            // Keep the newest `queue` waiting, this one among them.
            let over = (mine + 1).saturating_sub(queue.max(1) as usize);
            self.queue[..over].to_vec()
        };
        Joined { holding: false, to_cancel, changed }
    }

    /// `me` leaves, done: if it held the group, the oldest waiting attempt
    /// holds it now and is returned (to be woken). Empty when `me` held
    /// nothing (a waiting attempt leaves the queue); a leave tried again is
    /// told the holders again (to be woken again: waking a running attempt
    /// changes nothing).
    pub fn leave(&mut self, me: Member) -> (Vec<Member>, bool) {
        if let Some(at) = self.holders.iter().position(|m| *m == me) {
            self.holders.remove(at);
            self.last_left = Some(me);
            return (self.promote(), true);
        }
        if self.last_left == Some(me) {
            return (self.holders.clone(), false);
        }
        let before = self.queue.len();
        self.queue.retain(|m| *m != me);
        (Vec::new(), self.queue.len() != before)
    }

    /// Fills the room under `limit` with the oldest waiting attempts; those
    /// that now hold the group.
    fn promote(&mut self) -> Vec<Member> {
        let room = (self.limit.max(1) as usize).saturating_sub(self.holders.len()).min(self.queue.len());
        let promoted: Vec<Member> = self.queue.drain(..room).collect();
        self.holders.extend(promoted.iter().copied());
        promoted
    }
}

/// What a group's expressions may read when the run is created: a job's
/// group also its job key and matrix values.
pub struct CreateScope<'a> {
    pub inputs: Option<&'a serde_json::Map<String, serde_json::Value>>,
    /// The workspace variables the run is created with.
    pub vars: Option<&'a serde_json::Map<String, serde_json::Value>>,
    pub workspace_id: &'a str,
    pub run_id: Uuid,
    /// For a job's group: its key and, for a matrix leg, its values.
    pub job: Option<(&'a str, Option<&'a super::matrix::MatrixLeg>)>,
    /// The run's `github` context (its number not taken yet).
    pub github: Option<&'a super::github::GithubData>,
}

impl CreateScope<'_> {
    fn github_value(&self, path: &[String]) -> Option<serde_json::Value> {
        let place = super::github::RunPlace { run_id: self.run_id, attempt: 1, job: self.job.map(|(key, _)| key) };
        self.github?.value(path, place)
    }
}

impl Scope for CreateScope<'_> {
    fn resolve(&self, reference: &Reference) -> Option<String> {
        match reference {
            Reference::Input(name) => self.inputs?.get(name).map(|value| match value {
                serde_json::Value::String(text) => text.clone(),
                other => other.to_string(),
            }),
            Reference::Var(name) => Some(super::vars::value(self.vars, name)),
            Reference::Baton(BatonField::WorkspaceId) => Some(self.workspace_id.to_string()),
            Reference::Baton(BatonField::RunId) => Some(self.run_id.to_string()),
            Reference::Baton(BatonField::Job) => self.job.map(|(key, _)| key.to_string()),
            Reference::Baton(BatonField::Trigger) => self.github.map(|github| github.trigger.clone()),
            // As a job's scope reads it (`references::JobScope`).
            Reference::Matrix(name) => Some(self.job?.1?.value(name).unwrap_or_default().to_string()),
            Reference::Github(path) => self.github_value(path).map(|value| super::github::as_text(&value)),
            _ => None,
        }
    }

    fn resolve_value(&self, reference: &Reference) -> Option<super::expressions::Value> {
        match reference {
            Reference::Github(path) => self.github_value(path).map(|v| super::expressions::Value::from_serde(&v)),
            other => self.resolve(other).map(super::expressions::Value::String),
        }
    }
}

/// Whether `reference` may be read by a workflow's `concurrency:` (the rest
/// is not known when the run is created).
pub fn readable(reference: &Reference) -> bool {
    match reference {
        // The number is taken as the run is written, after its group.
        Reference::Github(path) => !matches!(path.first().map(String::as_str), Some("run_number" | "job")),
        other => matches!(
            other,
            Reference::Input(_)
                | Reference::Var(_)
                | Reference::Baton(BatonField::WorkspaceId | BatonField::RunId | BatonField::Trigger)
        ),
    }
}

/// Whether `reference` may be read by a job's `concurrency:`: what a
/// workflow's may, and the job's key and matrix values, all known when the
/// run is created (so a bad name is refused then, not when the job is due).
pub fn readable_by_job(reference: &Reference) -> bool {
    readable(reference)
        || matches!(reference, Reference::Baton(BatonField::Job) | Reference::Matrix(_))
        || matches!(reference, Reference::Github(path) if path.first().is_some_and(|f| f == "job"))
}

/// The hold of `spec` as `scope` expands it: the group name and
/// `cancel-in-progress` expanded, waiting. Errs with the field and why
/// when the name comes out empty or too long.
pub fn hold_of(spec: &ConcurrencySpec, scope: &impl Scope) -> Result<GroupHold, (&'static str, String)> {
    let group = expressions::interpolate(&spec.group, scope).trim().to_string();
    if group.is_empty() {
        return Err(("concurrency.group", "the group's name comes out empty for this run's inputs".into()));
    }
    if group.len() > MAX_GROUP_LEN {
        return Err(("concurrency.group", format!("the group's name is longer than {MAX_GROUP_LEN} characters")));
    }
    let cancel_in_progress = match spec.cancel_in_progress.as_deref() {
        None => false,
        Some(text) => {
            let value = expressions::interpolate(text, scope);
            match value.trim() {
                "true" => true,
                "false" | "" => false,
                other => {
                    return Err((
                        "concurrency.cancel-in-progress",
                        format!("comes out `{other}` for this run's inputs: true or false"),
                    ))
                }
            }
        }
    };
    Ok(GroupHold { group, cancel_in_progress, queue: spec.queue, limit: spec.limit, status: HoldStatus::Waiting })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(n: u128) -> Member {
        Member { run_id: Uuid::from_u128(n), attempt: 1, job: None }
    }

    #[test]
    fn the_first_to_join_holds_and_the_next_waits() {
        let mut group = GroupState::default();
        let first = group.join(member(1), false, 1, 1);
        assert!(first.holding && first.changed && first.to_cancel.is_empty());
        let second = group.join(member(2), false, 1, 1);
        assert!(!second.holding && second.changed && second.to_cancel.is_empty());
        assert_eq!(group.holders, [member(1)]);
        assert_eq!(group.queue, [member(2)]);
    }

    #[test]
    fn joining_again_changes_nothing() {
        let mut group = GroupState::default();
        group.join(member(1), false, 1, 1);
        group.join(member(2), false, 1, 1);
        let before = group.clone();
        let again = group.join(member(1), false, 1, 1);
        assert!(again.holding && !again.changed);
        let again = group.join(member(2), false, 1, 1);
        assert!(!again.holding && !again.changed && again.to_cancel.is_empty());
        assert_eq!(group, before);
    }

    #[test]
    fn by_default_a_newer_waiting_attempt_replaces_the_older() {
        let mut group = GroupState::default();
        group.join(member(1), false, 1, 1);
        group.join(member(2), false, 1, 1);
        let third = group.join(member(3), false, 1, 1);
        assert!(!third.holding);
        assert_eq!(third.to_cancel, [member(2)], "the older waiting one is replaced, the running one kept");
        // Until it is done, the replaced one stays listed; a replay of the
        // join asks for the same cancel.
        assert_eq!(group.join(member(3), false, 1, 1).to_cancel, [member(2)]);
        // It leaves when done; then nothing more is cancelled.
        assert_eq!(group.leave(member(2)), (vec![], true));
        assert!(group.join(member(3), false, 1, 1).to_cancel.is_empty());
    }

    #[test]
    fn a_queue_keeps_that_many_waiting_in_order() {
        let mut group = GroupState::default();
        group.join(member(1), false, 3, 1);
        for n in 2..=4 {
            assert!(group.join(member(n), false, 3, 1).to_cancel.is_empty(), "{n} fits");
        }
        assert_eq!(group.join(member(5), false, 3, 1).to_cancel, [member(2)], "the oldest waiting one makes room");
        group.leave(member(2));
        assert_eq!(group.leave(member(1)), (vec![member(3)], true), "the oldest waiting one runs next");
        assert_eq!(group.leave(member(3)), (vec![member(4)], true));
        assert_eq!(group.leave(member(4)), (vec![member(5)], true));
        assert_eq!(group.leave(member(5)), (vec![], true));
        assert_eq!((group.holders.len(), group.queue.len()), (0, 0));
    }

    #[test]
    fn cancel_in_progress_cancels_the_holder_and_every_older_waiting_one() {
        let mut group = GroupState::default();
        group.join(member(1), false, 5, 1);
        group.join(member(2), false, 5, 1);
        let third = group.join(member(3), true, 5, 1);
        assert!(!third.holding, "it waits for the cancelled holder to be done");
        assert_eq!(third.to_cancel, [member(1), member(2)]);
        group.leave(member(2));
        assert_eq!(group.leave(member(1)), (vec![member(3)], true));
    }

    #[test]
    fn leaving_twice_or_without_joining_changes_nothing_and_tells_the_same_holder() {
        let mut group = GroupState::default();
        group.join(member(1), false, 1, 1);
        group.join(member(2), false, 1, 1);
        assert_eq!(group.leave(member(1)), (vec![member(2)], true));
        // A leave tried again (its answer lost): the same attempt to wake.
        assert_eq!(group.leave(member(1)), (vec![member(2)], false));
        assert_eq!(group.leave(member(9)), (vec![], false));
        assert_eq!(group.leave(member(2)), (vec![], true));
        assert_eq!(group.leave(member(2)), (vec![], false));
    }

    #[test]
    fn an_unheld_group_with_waiting_attempts_goes_to_the_oldest_first() {
        let mut group = GroupState { queue: vec![member(1)], ..GroupState::default() };
        let joined = group.join(member(2), false, 1, 1);
        assert!(!joined.holding);
        assert_eq!(group.holders, [member(1)]);
    }

    /// Every interleaving of `attempts` attempts joining (with `queue`
    /// and `limit`) and, once holding, leaving (a holder leaves only when
    /// done): never more than `limit` holders, and each attempt holds the
    /// group in some order. Which held, in the orders explored.
    fn explore_every_order(attempts: usize, queue: u32, limit: u32) -> Vec<Member> {
        fn explore(group: &GroupState, joined: &[bool], left: &[bool], queue: u32, limit: u32, ran: &mut Vec<Member>) {
            assert!(group.holders.len() <= limit as usize, "{group:?}");
            for i in 0..joined.len() {
                let me = member(i as u128 + 1);
                if !joined[i] {
                    let mut next = group.clone();
                    let j = next.join(me, false, queue, limit);
                    assert_eq!(j.holding, next.holders.contains(&me));
                    let mut joined = joined.to_vec();
                    joined[i] = true;
                    explore(&next, &joined, left, queue, limit, ran);
                } else if !left[i] && group.holders.contains(&me) {
                    let mut next = group.clone();
                    ran.push(me);
                    next.leave(me);
                    let mut left = left.to_vec();
                    left[i] = true;
                    explore(&next, joined, &left, queue, limit, ran);
                }
            }
        }
        let mut ran = Vec::new();
        explore(&GroupState::default(), &vec![false; attempts], &vec![false; attempts], queue, limit, &mut ran);
        ran
    }

    #[test]
    fn at_most_one_holds_whatever_the_order_of_joins_and_leaves() {
        // 3 attempts: never two holders, and each waiting one that is not
        // replaced runs eventually.
        let held_by = explore_every_order(3, 2, 1);
        for i in 1..=3 {
            assert!(held_by.contains(&member(i)), "{i} held the group in some order");
        }
    }

    #[test]
    fn a_limit_of_two_runs_two_at_once_and_a_leave_promotes_the_oldest_waiting() {
        let mut group = GroupState::default();
        assert!(group.join(member(1), false, 5, 2).holding);
        assert!(group.join(member(2), false, 5, 2).holding, "room for a second");
        assert!(!group.join(member(3), false, 5, 2).holding);
        assert!(!group.join(member(4), false, 5, 2).holding);
        assert_eq!(group.leave(member(2)), (vec![member(3)], true), "the oldest waiting one runs next");
        assert_eq!(group.holders, [member(1), member(3)]);
        assert_eq!(group.leave(member(2)), (vec![member(1), member(3)], false), "a retried leave wakes again");
        assert_eq!(group.leave(member(1)), (vec![member(4)], true));
        // With cancel-in-progress, a new one cancels every holder.
        assert_eq!(group.join(member(5), true, 5, 2).to_cancel, [member(3), member(4)]);
    }

    #[test]
    fn at_most_limit_hold_whatever_the_order_of_joins_and_leaves() {
        // 4 attempts joining and leaving a group of 2.
        let ran = explore_every_order(4, 4, 2);
        for i in 1..=4 {
            assert!(ran.contains(&member(i)), "{i} ran in some order");
        }
    }

    #[test]
    fn a_group_name_is_expanded_from_inputs_and_baton_when_the_run_is_created() {
        let inputs = serde_json::json!({"env": "prod"});
        let scope = CreateScope {
            inputs: inputs.as_object(),
            vars: None,
            workspace_id: "ws",
            run_id: Uuid::nil(),
            job: None,
            github: None,
        };
        let spec = ConcurrencySpec {
            group: "deploy-${{ inputs.env }}".into(),
            cancel_in_progress: Some("${{ inputs.env == 'prod' }}".into()),
            queue: 1,
            limit: 1,
        };
        let hold = hold_of(&spec, &scope).unwrap();
        assert_eq!(hold.group, "deploy-prod");
        assert!(hold.cancel_in_progress);
        assert_eq!(hold.status, HoldStatus::Waiting);
        let empty =
            ConcurrencySpec { group: "${{ inputs.missing }}".into(), cancel_in_progress: None, queue: 1, limit: 1 };
        assert_eq!(hold_of(&empty, &scope).unwrap_err().0, "concurrency.group");
        let odd = ConcurrencySpec { cancel_in_progress: Some("${{ inputs.env }}".into()), ..spec };
        assert_eq!(hold_of(&odd, &scope).unwrap_err().0, "concurrency.cancel-in-progress");
    }
}
