//! A request tried again on transient failures ([`ClientError::is_transient`])
//! until it succeeds, fails for good, or its budget is spent.

use std::time::Duration;

use crate::backoff::Backoff;
use crate::error::ClientError;

/// Runs `op` until it succeeds, fails for good, or `budget` is spent on
/// transient failures (each retry after a jittered exponential delay).
pub async fn with_retries<T, F, Fut>(what: &str, budget: Duration, mut op: F) -> Result<T, ClientError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ClientError>>,
{
    let deadline = tokio::time::Instant::now() + budget;
    let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(15));
    loop {
        match op().await {
            Err(err) if err.is_transient() => {
                let delay = backoff.next_delay();
                if tokio::time::Instant::now() + delay > deadline {
                    return Err(err);
                }
                tracing::warn!(error = %err, retry_in_ms = delay.as_millis() as u64, "{what} failed, retrying");
                tokio::time::sleep(delay).await;
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::classify;

    #[tokio::test]
    async fn retries_stop_at_a_permanent_error() {
        let mut calls = 0;
        let result: Result<(), _> = with_retries("test", Duration::from_secs(10), || {
            calls += 1;
            let answer = if calls < 2 { classify(503, "") } else { classify(400, "") };
            async move { Err(answer) }
        })
        .await;
        assert!(matches!(result, Err(ClientError::Permanent { status: 400, .. })));
        assert_eq!(calls, 2);
    }

    #[tokio::test]
    async fn retries_give_up_when_the_budget_is_spent() {
        let mut calls = 0;
        let result: Result<(), _> = with_retries("test", Duration::from_secs(2), || {
            calls += 1;
            async { Err(ClientError::Transient("down".into())) }
        })
        .await;
        assert!(result.is_err());
        assert!((2..6).contains(&calls), "{calls} calls");
    }
}
