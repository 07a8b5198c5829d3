//! Jittered exponential backoff: the delay ceiling doubles per failed attempt
//! from `base` up to `max`, and each delay is drawn uniformly from the upper
//! half of the ceiling, so many runners that failed together do not retry in
//! lock-step (and a delay never collapses to zero).

use std::time::Duration;

use rand::Rng;

#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    pub fn new(base: Duration, max: Duration) -> Self {
        Self { base, max: max.max(base), attempt: 0 }
    }

    /// For API errors (5xx, 429, timeouts) of registration and demand
    /// reads: 1 s doubling up to 20 s, the AWS SDKs' own longest backoff.
    /// A runner or provisioner that backs off is what notices an outage
    /// ended, so its ceiling is dispatch latency: at 60 s a runner that met
    /// a few errors in a row (a bad minute fails most requests) sat idle up
    /// to a minute with jobs queued. At 20 s, a thousand runners in an
    /// outage still ask about 70 times a second in all.
    pub fn for_errors() -> Self {
        Self::new(Duration::from_secs(1), Duration::from_secs(20))
    }

    /// The ceiling of the `attempt`-th delay (0-based): `base · 2^attempt`, at most `max`.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.base.checked_mul(factor).unwrap_or(self.max).min(self.max)
    }

    /// The next delay, in `[ceiling / 2, ceiling]`; the ceiling grows.
    pub fn next_delay(&mut self) -> Duration {
        let ceiling = self.ceiling(self.attempt);
        self.attempt = self.attempt.saturating_add(1);
        jitter(ceiling)
    }

    /// How many delays were handed out since the last reset.
    pub fn attempts(&self) -> u32 {
        self.attempt
    }

    /// Back to the first delay (after a success).
    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    /// Changes the longest delay (the server's suggested poll interval).
    pub fn set_max(&mut self, max: Duration) {
        self.max = max.max(self.base);
    }
}

/// A delay drawn uniformly from `[d / 2, d]`.
pub fn jitter(d: Duration) -> Duration {
    let half = d / 2;
    let spread = (d - half).as_millis() as u64;
    if spread == 0 {
        return d;
    }
    half + Duration::from_millis(rand::rng().random_range(0..=spread))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ceiling_doubles_from_the_base_and_stops_at_the_max() {
        let b = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        let ceilings: Vec<u64> = (0..8).map(|a| b.ceiling(a).as_secs()).collect();
        assert_eq!(ceilings, vec![1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(b.ceiling(200), Duration::from_secs(60), "no overflow on a long outage");
    }

    #[test]
    fn every_delay_lies_in_the_upper_half_of_its_ceiling() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
        for attempt in 0..20 {
            let ceiling = b.ceiling(attempt);
            let delay = b.next_delay();
            assert!(delay >= ceiling / 2 && delay <= ceiling, "attempt {attempt}: {delay:?} vs {ceiling:?}");
        }
        assert_eq!(b.attempts(), 20);
    }

    #[test]
    fn jitter_spreads_runners_that_failed_together() {
        let delays: std::collections::HashSet<Duration> = (0..50).map(|_| jitter(Duration::from_secs(10))).collect();
        assert!(delays.len() > 1, "fifty runners do not all pick the same delay");
    }

    #[test]
    fn api_errors_back_off_from_one_second_to_twenty() {
        let b = Backoff::for_errors();
        assert_eq!(b.ceiling(0), Duration::from_secs(1));
        assert_eq!(b.ceiling(4), Duration::from_secs(16));
        assert_eq!(b.ceiling(10), Duration::from_secs(20), "a long outage is retried every 10-20 s");
    }

    #[test]
    fn a_reset_starts_again_from_the_base() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        for _ in 0..5 {
            b.next_delay();
        }
        b.reset();
        assert!(b.next_delay() <= Duration::from_secs(1));
    }

    #[test]
    fn a_lower_max_caps_the_delays_at_once() {
        let mut b = Backoff::new(Duration::from_millis(250), Duration::from_secs(60));
        for _ in 0..10 {
            b.next_delay();
        }
        b.set_max(Duration::from_secs(2));
        assert!(b.next_delay() <= Duration::from_secs(2), "the server's poll interval wins");
    }
}
