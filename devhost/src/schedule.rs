//! EventBridge schedules (which moto accepts but never fires): the dev host
//! fires each scheduled function at its configured period.

use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::cloudwatch_events::CloudWatchEvent;

use crate::functions::Functions;
use crate::Shutdown;

pub struct Ticker {
    pub function: String,
    pub period: Duration,
    pub functions: Arc<Functions>,
}

impl Ticker {
    pub async fn run(self, mut shutdown: Shutdown) {
        let mut interval = tokio::time::interval(self.period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = interval.tick() => {
                    let mut event = CloudWatchEvent::default();
                    event.detail_type = Some("Scheduled Event".into());
                    event.source = Some("aws.events".into());
                    event.time = chrono::Utc::now();
                    if let Err(err) = self.functions.scheduled(&self.function, event).await {
                        tracing::error!(error = %err, "scheduled function failed");
                    }
                }
            }
        }
    }
}
