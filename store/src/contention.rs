//! What the store does when it loses a race: the one place that decides
//! what counts as a lost race, how long to pause before trying again and
//! when to give up.
//!
//! A lost race is a failed condition of a compare-and-set (someone wrote the
//! item since it was read), and, on AWS, a `TransactionConflict` (another
//! transaction held one of the items) or throttling of a hot item: all three
//! say "read again and retry", never "this request is wrong".

use std::time::Duration;

use rand::Rng;

use super::TxOutcome;
use crate::error::StoreError;

/// How many lost races one read-decide-write use case tolerates before it
/// gives up (the caller answers 503 or lets the message be redelivered).
pub const MAX_LOST_RACES: u32 = 50;

/// The shortest and longest pause after a lost race, in milliseconds: short
/// enough to cost a request little, jittered so that writers that collided
/// do not collide again in lockstep.
const PAUSE_MS: std::ops::Range<u64> = 5..40;

/// How many times one request is sent again after a transaction conflict or
/// throttling (neither applied anything) before its caller hears of it.
pub const REQUEST_RETRIES: u32 = 3;

/// Sends a request (`send`) again, after a jittered pause, while it meets a
/// transaction conflict or throttling, at most [`REQUEST_RETRIES`] times.
pub async fn retry_conflicts<T, F, Fut>(mut send: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let mut retries = 0;
    loop {
        match send().await {
            Err(err) if err.is_conflict_or_throttling() && retries < REQUEST_RETRIES => {
                retries += 1;
                pause_after_lost_race().await;
            }
            outcome => return outcome,
        }
    }
}

/// Waits a jittered moment before the next try.
pub async fn pause_after_lost_race() {
    let pause = rand::rng().random_range(PAUSE_MS);
    tokio::time::sleep(Duration::from_millis(pause)).await;
}

/// Whether a transaction's result is a lost race (retry after reading
/// again), `Ok(true)`; committed, `Ok(false)`; or a failure for the caller.
pub fn lost_race(result: Result<TxOutcome, StoreError>) -> Result<bool, StoreError> {
    match result {
        Ok(TxOutcome::Committed) => Ok(false),
        Ok(TxOutcome::ConditionFailed { .. }) => Ok(true),
        // Nothing was applied. A 5xx is not a lost race: the write may have
        // been applied, so it goes back to the caller (a 503, a redelivery).
        Err(err) if err.is_conflict_or_throttling() => Ok(true),
        Err(err) => Err(err),
    }
}

/// The error a use case gives up with after [`MAX_LOST_RACES`].
pub fn too_contended(what: impl std::fmt::Display) -> StoreError {
    StoreError::Contended(format!("{what} lost {MAX_LOST_RACES} races in a row"))
}
