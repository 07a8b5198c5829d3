//! Which pending job a claim goes for (behaviour.md §4).
//!
//! Candidates come from the heads of the label-set partitions the runner can
//! serve, merged by when they are dispatched (ties by id): `queued_at`, moved
//! earlier by a job's `priority` (`facts::dispatch_at`), so a higher priority
//! goes first and a lower one ages past it. The partitions are sorted the
//! same way, so the heads read are the ones to dispatch.
//!
//! Herd avoidance: when few jobs are pending, a claim takes them strictly
//! oldest first (there is little to race for, and FIFO is what users see).
//! When a backlog is pending, every runner aiming at the single oldest item
//! would make all but one fail their conditional write; so each claim picks
//! uniformly among the oldest items it read, and after a lost race picks
//! another at random. With R racing runners and W candidates the expected
//! failed writes per claim are about R / (W·(1 − e^(−R/W))) − 1: 0.28 for
//! 32 runners on 64 candidates, 0.13 on 128. FIFO is then approximate
//! within that window; it is strict again once the backlog is below
//! `STRICT_FIFO_BELOW`.
//!
//! The window's width: a claim first reads `FIRST_READ` items, and only a
//! claim that lost a race on a full window reads again `HEAD_READ` wide
//! (`next_read`). Every item read costs read units (and, on the emulator,
//! serialization time): a lone runner draining a backlog never loses, so it
//! should not pay for a 128-item window on every claim; a herd finds out it
//! is one by losing, once, and then stays wide: the process remembers the
//! loss for `HERD_MEMORY` (`first_read`).
//!
//! The drain's tail: once fewer jobs are left than the window, a claim's
//! read is the whole queue, every racing runner read the same few items, and
//! after a lost race the rest of that read is stale. So a claim that lost on
//! a short window reads it again (at most `MAX_REREADS` times) and picks at
//! random among what is left, instead of walking down a list the winners
//! are emptying; a claim that never lost keeps strict FIFO.

use chrono::{DateTime, Utc};
use rand::Rng;
use uuid::Uuid;

/// Whether a claim by `session_id` at `now` passes over a job queued at
/// `queued_at`: a `runner_lost` retry is left to the other runners for
/// `LOST_RUNNER_GRACE_S` (the session that lost it may be the cause: a
/// machine that stalls or loses its network), then anyone may take it, so
/// it never waits for a runner that does not exist.
pub fn passes_over(
    job: &baton_api::facts::QueuedJob,
    queued_at: DateTime<Utc>,
    session_id: Uuid,
    now: DateTime<Utc>,
) -> bool {
    job.avoid_session == Some(session_id)
        && now < queued_at + chrono::Duration::seconds(baton_api::facts::LOST_RUNNER_GRACE_S)
}

/// Below this many candidates, claims go strictly oldest first.
pub const STRICT_FIFO_BELOW: usize = 8;

/// How many pending items of each fitting label set a claim reads first.
pub const FIRST_READ: usize = 32;

/// How many pending items of each fitting label set a claim reads after it
/// lost a race on a full window (the widest window it spreads over under a
/// backlog).
pub const HEAD_READ: usize = 128;
const _: () = assert!(FIRST_READ < HEAD_READ, "a window only widens");

/// How long a lost race on a full window makes this process's later claims
/// read `HEAD_READ` wide from the start (`first_read`).
pub const HERD_MEMORY: std::time::Duration = std::time::Duration::from_secs(60);

/// The width a claim reads first: `HEAD_READ` while this process lost a race
/// on a full window less than `HERD_MEMORY` ago, `FIRST_READ` otherwise. A
/// herd stays a herd from one claim to the next: with every claim starting
/// narrow again, 32 runners picking among the same 32 items lost a race on
/// about one claim in five (0.188 failed writes a claim, against 0.085 with
/// 128-item windows), and a lost claim transaction is billed like a won one.
pub fn first_read(herd_seen_at: Option<std::time::Instant>, now: std::time::Instant) -> usize {
    match herd_seen_at {
        Some(at) if now.saturating_duration_since(at) < HERD_MEMORY => HEAD_READ,
        _ => FIRST_READ,
    }
}

/// How many candidates one claim tries in all before it answers 204.
pub const MAX_ATTEMPTS: usize = 8;

/// How many times a claim that lost a race on a short window reads it again.
pub const MAX_REREADS: usize = 3;

/// How often a long-polling claim looks at the queue again.
pub const LONG_POLL_RECHECK: std::time::Duration = std::time::Duration::from_millis(500);

/// A session's `last_seen_at` is written at most this often (behaviour.md §2),
/// so idle polling does not turn into a write per poll.
pub const SESSION_TOUCH_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// What the claim needs to know of a pending item to order it.
pub trait Candidate {
    /// `queued_at` moved by the job's priority (`facts::dispatch_at`).
    fn dispatch_at(&self) -> DateTime<Utc>;
    fn execution_id(&self) -> Uuid;
}

/// Orders candidates by dispatch time, first first (ties by execution id).
pub fn oldest_first<C: Candidate>(candidates: &mut [C]) {
    candidates.sort_by(|a, b| a.dispatch_at().cmp(&b.dispatch_at()).then(a.execution_id().cmp(&b.execution_id())));
}

/// The order in which to try `len` candidates sorted oldest first: in order
/// when there are few and this claim has not lost a race yet, otherwise a
/// random sample of the whole window.
pub fn attempt_order(len: usize, lost_a_race: bool, rng: &mut impl Rng) -> Vec<usize> {
    if len < STRICT_FIFO_BELOW && !lost_a_race {
        return (0..len).take(MAX_ATTEMPTS).collect();
    }
    rand::seq::index::sample(rng, len, MAX_ATTEMPTS.min(len)).into_vec()
}

/// After a lost race on a window `window` wide that held `len` candidates,
/// having read the queue again `rereads` times for a short window: the width
/// to read again at, or `None` to go on picking from what was read.
pub fn next_read(len: usize, window: usize, rereads: usize) -> Option<usize> {
    if len < window {
        // The whole queue was read and the winners are emptying it.
        return (rereads < MAX_REREADS).then_some(window);
    }
    // A full window lost: a herd is draining a backlog, spread it wider.
    (window < HEAD_READ).then_some(HEAD_READ)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runner_lost_retry_is_left_to_the_other_runners_for_the_grace_then_to_anyone() {
        let lost_by = Uuid::now_v7();
        let other = Uuid::now_v7();
        let queued_at = Utc::now();
        let job = baton_api::facts::QueuedJob {
            key: "build".into(),
            labels: vec!["linux".into()],
            timeout_s: 60,
            priority: 0,
            avoid_session: Some(lost_by),
            step_count: 1,
        };
        let grace = chrono::Duration::seconds(baton_api::facts::LOST_RUNNER_GRACE_S);
        assert!(passes_over(&job, queued_at, lost_by, queued_at));
        assert!(passes_over(&job, queued_at, lost_by, queued_at + grace - chrono::Duration::seconds(1)));
        assert!(!passes_over(&job, queued_at, lost_by, queued_at + grace), "then it may take it back");
        assert!(!passes_over(&job, queued_at, other, queued_at), "any other runner takes it at once");
        let anyone = baton_api::facts::QueuedJob { avoid_session: None, ..job };
        assert!(!passes_over(&anyone, queued_at, lost_by, queued_at));
    }
    use chrono::Duration;

    #[derive(Debug, Clone, PartialEq)]
    struct C(DateTime<Utc>, Uuid);
    impl Candidate for C {
        fn dispatch_at(&self) -> DateTime<Utc> {
            self.0
        }
        fn execution_id(&self) -> Uuid {
            self.1
        }
    }

    #[test]
    fn a_higher_priority_goes_first_and_a_lower_one_ages_past_it() {
        use baton_api::facts::dispatch_at;
        let now = Utc::now();
        let minutes = |m: i64| now - Duration::minutes(m);
        let job = |queued_at, priority, id| C(dispatch_at(queued_at, priority), Uuid::from_u128(id));
        // Priority 10 queued now, priority 0 queued 5 minutes ago: 10 first.
        let mut candidates = vec![job(minutes(5), 0, 1), job(now, 10, 2)];
        oldest_first(&mut candidates);
        assert_eq!(candidates[0].1, Uuid::from_u128(2));
        // 11 minutes of waiting outrank 10 points: the low one cannot starve.
        let mut candidates = vec![job(now, 10, 2), job(minutes(11), 0, 1)];
        oldest_first(&mut candidates);
        assert_eq!(candidates[0].1, Uuid::from_u128(1));
        // A negative priority waits behind younger jobs; bounds clamp.
        let mut candidates = vec![job(minutes(1), -5, 3), job(now, 0, 4)];
        oldest_first(&mut candidates);
        assert_eq!(candidates[0].1, Uuid::from_u128(4));
        assert_eq!(dispatch_at(now, 1000), dispatch_at(now, 100));
        assert_eq!(dispatch_at(now, 0), now);
    }

    #[test]
    fn a_process_that_lost_on_a_full_window_starts_wide_for_a_while() {
        let now = std::time::Instant::now();
        assert_eq!(first_read(None, now), FIRST_READ, "a lone runner never lost: narrow");
        assert_eq!(first_read(Some(now), now), HEAD_READ);
        let recent = now - std::time::Duration::from_secs(59);
        assert_eq!(first_read(Some(recent), now), HEAD_READ, "still a herd");
        let old = now - HERD_MEMORY;
        assert_eq!(first_read(Some(old), now), FIRST_READ, "the herd is gone: narrow again");
    }

    #[test]
    fn candidates_are_ordered_oldest_first_with_ties_broken_by_id() {
        let now = Utc::now();
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let mut cs = vec![C(now, b), C(now - Duration::seconds(5), b), C(now, a)];
        oldest_first(&mut cs);
        assert_eq!(cs, vec![C(now - Duration::seconds(5), b), C(now, a), C(now, b)]);
    }

    #[test]
    fn a_claim_reads_wider_only_after_losing_on_a_full_window_and_rereads_a_short_one_a_few_times() {
        // A lone runner never loses, so it only ever reads FIRST_READ.
        assert_eq!(next_read(FIRST_READ, FIRST_READ, 0), Some(HEAD_READ), "a herd on a backlog widens");
        assert_eq!(next_read(HEAD_READ, HEAD_READ, 0), None, "already as wide as it goes: pick another");
        assert_eq!(next_read(5, FIRST_READ, 0), Some(FIRST_READ), "a short window is read again");
        assert_eq!(next_read(5, HEAD_READ, MAX_REREADS - 1), Some(HEAD_READ));
        assert_eq!(next_read(5, FIRST_READ, MAX_REREADS), None, "but not forever");
    }

    #[test]
    fn few_candidates_are_tried_strictly_oldest_first() {
        let mut rng = rand::rng();
        assert_eq!(attempt_order(3, false, &mut rng), vec![0, 1, 2]);
        assert_eq!(
            attempt_order(STRICT_FIFO_BELOW - 1, false, &mut rng),
            (0..STRICT_FIFO_BELOW - 1).collect::<Vec<_>>()
        );
        assert!(attempt_order(0, false, &mut rng).is_empty());
    }

    #[test]
    fn after_a_lost_race_few_candidates_are_tried_in_random_order_not_head_first() {
        let mut rng = rand::rng();
        let mut firsts = std::collections::HashSet::new();
        for _ in 0..100 {
            let order = attempt_order(5, true, &mut rng);
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, vec![0, 1, 2, 3, 4], "every candidate once");
            firsts.insert(order[0]);
        }
        assert!(firsts.len() > 1, "the losers do not all go for the head again");
    }

    #[test]
    fn a_backlog_is_sampled_across_the_window_without_repeats() {
        let mut rng = rand::rng();
        let mut starts = std::collections::HashSet::new();
        for _ in 0..200 {
            let order = attempt_order(HEAD_READ, false, &mut rng);
            assert_eq!(order.len(), MAX_ATTEMPTS);
            let distinct: std::collections::HashSet<_> = order.iter().collect();
            assert_eq!(distinct.len(), order.len());
            assert!(order.iter().all(|&i| i < HEAD_READ));
            starts.insert(order[0]);
        }
        assert!(starts.len() > 32, "starts spread over the window, not the head: {}", starts.len());
    }
}
