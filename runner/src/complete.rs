//! Delivers a finished job's complete. The result is retried, with backoff,
//! for as long as the lease lives: the job's heartbeat keeps it alive
//! meanwhile, so an API outage of any length costs a late report, not a
//! finished job turned `runner_lost` by a retry budget running out.
//!
//! The retries end on an answer, on a refusal retrying cannot change, when
//! the lease is gone (the complete's answer or the heartbeat's say so), or
//! when the runner abandons its jobs. A cancel does not end them: the
//! server expects the complete of a cancelled job, and a result never
//! downgrades a terminal execution.

use std::time::Duration;

use baton_api::runners::CompleteResponse;
use baton_client::backoff::Backoff;
use baton_client::error::ClientError;
use tokio::sync::watch;

use crate::{JobEnd, Stop};

/// What follows a failed complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Retry {
    /// Send it again after this delay.
    After(Duration),
    /// Stop: the job ends so.
    GiveUp(JobEnd),
}

/// Attempts of a complete that go unanswered after the lease was found
/// gone, before the job is counted lost. Unanswered is not refused: the
/// complete may be what ended the lease (an earlier attempt landed, its
/// answer lost), and a repeat then gets the recorded outcome back, while a
/// lease the reaper took answers `lease-lost` at once. A few more attempts
/// tell the two apart in a bad minute; only the runner's own count of the
/// job depends on it, so they are few.
pub const ATTEMPTS_AFTER_LEASE_GONE: u32 = 4;

/// The retry policy of one job's complete (pure: the caller sends and waits).
#[derive(Debug, Clone)]
pub struct CompleteRetries {
    backoff: Backoff,
    /// Attempts that failed unanswered after the lease was found gone.
    unanswered_after_lease_gone: u32,
}

impl Default for CompleteRetries {
    fn default() -> Self {
        // Well under the lease's duration, so a recovered API hears from
        // the runner long before anyone would give up on it.
        Self::new(Backoff::new(Duration::from_millis(500), Duration::from_secs(30)))
    }
}

impl CompleteRetries {
    pub fn new(backoff: Backoff) -> Self {
        Self { backoff, unanswered_after_lease_gone: 0 }
    }

    /// Decides after the complete failed with `err`. `sent_under` is the
    /// job's stop reason when that attempt was sent (the heartbeat raises it
    /// to [`Stop::LeaseLost`] when the lease is gone, the agent to
    /// [`Stop::Abandon`]): news that came later still deserves an attempt.
    pub fn after_failure(&mut self, err: &ClientError, sent_under: Stop) -> Retry {
        if err.means_lease_gone() {
            return Retry::GiveUp(JobEnd::LeaseLost);
        }
        if !err.is_transient() {
            return Retry::GiveUp(JobEnd::ReportFailed(err.to_string()));
        }
        match sent_under {
            Stop::None | Stop::Cancel => Retry::After(self.backoff.next_delay()),
            // Only an answer can tell whether this complete ended the lease.
            Stop::LeaseLost => {
                self.unanswered_after_lease_gone += 1;
                if self.unanswered_after_lease_gone < ATTEMPTS_AFTER_LEASE_GONE {
                    Retry::After(self.backoff.next_delay())
                } else {
                    Retry::GiveUp(JobEnd::LeaseLost)
                }
            }
            Stop::Abandon => Retry::GiveUp(JobEnd::Abandoned),
        }
    }
}

/// Sends the complete (`send`) until [`CompleteRetries`] says it is over.
/// News of the lease (`stop`) cuts a wait short: one more attempt goes at
/// once, and its answer decides (the complete may have landed, its answer
/// lost, and ended the lease the heartbeat then found gone; a repeated
/// complete returns the recorded outcome). If that one goes unanswered too,
/// a few more follow ([`ATTEMPTS_AFTER_LEASE_GONE`]).
pub async fn deliver<F, Fut>(send: F, stop: &mut watch::Receiver<Stop>) -> JobEnd
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<CompleteResponse, ClientError>>,
{
    deliver_with(CompleteRetries::default(), send, stop).await
}

async fn deliver_with<F, Fut>(mut retries: CompleteRetries, mut send: F, stop: &mut watch::Receiver<Stop>) -> JobEnd
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<CompleteResponse, ClientError>>,
{
    loop {
        let sent_under = *stop.borrow();
        let err = match send().await {
            Ok(answer) => return JobEnd::Reported(answer.status),
            Err(err) => err,
        };
        match retries.after_failure(&err, sent_under) {
            Retry::GiveUp(end) => return end,
            Retry::After(delay) => {
                tracing::warn!(error = %err, retry_in_ms = delay.as_millis() as u64, "complete failed, retrying");
                if sent_under >= Stop::LeaseLost {
                    // The news is in already: waiting for it would not wait.
                    tokio::time::sleep(delay).await;
                } else {
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        Ok(_) = stop.wait_for(|s| *s >= Stop::LeaseLost) => {}
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use baton_api::facts::JobOutcome;

    use super::*;
    use baton_client::error::classify;

    fn unavailable() -> ClientError {
        classify(503, r#"{"error":{"code":"unavailable","message":"down"}}"#)
    }

    #[test]
    fn the_complete_is_retried_through_an_outage_longer_than_any_budget_while_the_lease_lives() {
        let mut retries = CompleteRetries::default();
        let mut waited = Duration::ZERO;
        for attempt in 0..200 {
            // A cancel arriving meanwhile changes nothing: the server expects this complete.
            let stop = if attempt % 2 == 0 { Stop::None } else { Stop::Cancel };
            match retries.after_failure(&unavailable(), stop) {
                Retry::After(delay) => {
                    assert!(delay <= Duration::from_secs(30), "attempt {attempt}: {delay:?}");
                    waited += delay;
                }
                Retry::GiveUp(end) => panic!("gave up after {waited:?} with the lease alive: {end:?}"),
            }
        }
        assert!(waited > Duration::from_secs(30 * 60), "half an hour of outage and still retrying: {waited:?}");
    }

    #[test]
    fn the_retries_end_when_the_lease_is_gone_the_refusal_is_permanent_or_the_job_is_abandoned() {
        let mut retries = CompleteRetries::default();
        let lease_lost = classify(409, r#"{"error":{"code":"lease-lost","message":"gone"}}"#);
        assert_eq!(retries.after_failure(&lease_lost, Stop::None), Retry::GiveUp(JobEnd::LeaseLost));
        let not_found = classify(404, r#"{"error":{"code":"not-found","message":"no such lease"}}"#);
        assert_eq!(retries.after_failure(&not_found, Stop::None), Retry::GiveUp(JobEnd::LeaseLost));
        for attempt in 1..ATTEMPTS_AFTER_LEASE_GONE {
            assert!(
                matches!(retries.after_failure(&unavailable(), Stop::LeaseLost), Retry::After(_)),
                "attempt {attempt} after the lease was found gone went unanswered: it may have ended it, ask again"
            );
        }
        assert_eq!(
            retries.after_failure(&unavailable(), Stop::LeaseLost),
            Retry::GiveUp(JobEnd::LeaseLost),
            "unanswered {ATTEMPTS_AFTER_LEASE_GONE} times after the heartbeat had found the lease gone"
        );
        assert_eq!(retries.after_failure(&unavailable(), Stop::Abandon), Retry::GiveUp(JobEnd::Abandoned));
        let refused = classify(400, r#"{"error":{"code":"invalid-request","message":"bad steps"}}"#);
        assert!(
            matches!(retries.after_failure(&refused, Stop::None), Retry::GiveUp(JobEnd::ReportFailed(m)) if m.contains("bad steps"))
        );
    }

    #[tokio::test]
    async fn news_of_a_lost_lease_gets_one_more_attempt_at_once_whose_answer_decides() {
        let (stop_tx, mut stop_rx) = watch::channel(Stop::None);
        let mut calls = 0;
        let end = deliver(
            || {
                calls += 1;
                // The heartbeat finds the lease gone while the first attempt is in flight.
                if calls == 1 {
                    let _ = stop_tx.send(Stop::LeaseLost);
                    std::future::ready(Err(unavailable()))
                } else {
                    std::future::ready(Ok(CompleteResponse { status: JobOutcome::Succeeded }))
                }
            },
            &mut stop_rx,
        )
        .await;
        assert_eq!(end, JobEnd::Reported(JobOutcome::Succeeded), "the complete had landed: its answer says so");
        assert_eq!(calls, 2);
    }

    fn quick() -> CompleteRetries {
        CompleteRetries::new(Backoff::new(Duration::from_millis(1), Duration::from_millis(2)))
    }

    #[tokio::test]
    async fn a_complete_that_ended_the_lease_is_counted_reported_though_the_attempts_after_the_news_went_unanswered_too(
    ) {
        // The complete landed (its answer lost), the heartbeat found the
        // lease it ended, and the next attempt's answer was lost as well.
        let (_stop_tx, mut stop_rx) = watch::channel(Stop::LeaseLost);
        let mut calls = 0;
        let end = deliver_with(
            quick(),
            || {
                calls += 1;
                if calls < ATTEMPTS_AFTER_LEASE_GONE {
                    std::future::ready(Err(unavailable()))
                } else {
                    std::future::ready(Ok(CompleteResponse { status: JobOutcome::Succeeded }))
                }
            },
            &mut stop_rx,
        )
        .await;
        assert_eq!(end, JobEnd::Reported(JobOutcome::Succeeded), "the recorded outcome came back");
        assert_eq!(calls, ATTEMPTS_AFTER_LEASE_GONE);

        // Never answered: the job is counted lost after those few attempts.
        let mut calls = 0;
        let end = deliver_with(
            quick(),
            || {
                calls += 1;
                std::future::ready(Err(unavailable()))
            },
            &mut stop_rx,
        )
        .await;
        assert_eq!(end, JobEnd::LeaseLost);
        assert_eq!(calls, ATTEMPTS_AFTER_LEASE_GONE);
    }
}
