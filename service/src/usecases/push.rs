//! Push to waiting runners. A runner holds a WebSocket (API Gateway's
//! WebSocket API on AWS, the dev host's locally); when work it fits becomes
//! claimable, or a lease it holds is flagged for cancellation, Baton posts it
//! a small [`PushMessage`]. A nudge is a hint: the runner then claims or
//! heartbeats over HTTP, which alone decides. So a nudge that is lost (a
//! post that fails, a crash between a commit and its nudge, a socket that
//! died silently) costs latency and never a job: the runner's safety poll
//! finds the work.
//!
//! Nudging never fails its caller: the state change it follows has
//! committed already, and repeating that change to repeat the nudge would be
//! wrong.

use std::collections::BTreeSet;

use aws_sdk_apigatewaymanagement::primitives::Blob;
use chrono::Utc;
use uuid::Uuid;

use crate::config::PushConfig;
use baton_api::runners::PushMessage;
use baton_domain::runners::labels::is_subset;
use baton_store::connections::PushConnection;
use baton_store::Store;

/// How long a nudge keeps trying to read the connections when DynamoDB is
/// busy (throttling, a conflict, an unavailable moment): the state change
/// it follows has committed, and a nudge given up costs the job a wait of
/// up to the runners' safety poll (300 s), which a second or two spent here
/// spares it. Well inside any function's timeout.
pub const CONNECTIONS_READ_BUDGET: std::time::Duration = std::time::Duration::from_secs(3);

/// The workspace's live connections, the read tried again while it fails
/// for a reason that may pass, within `budget`.
async fn connections_read_within(
    store: &Store,
    workspace_id: &str,
    budget: std::time::Duration,
) -> Result<Vec<PushConnection>, baton_store::StoreError> {
    let deadline = tokio::time::Instant::now() + budget;
    let mut pause = std::time::Duration::from_millis(100);
    loop {
        match store.push_connections(workspace_id, Utc::now()).await {
            Err(err) if err.is_retriable() && tokio::time::Instant::now() + pause < deadline => {
                tracing::info!(workspace_id, error = %err, retry_in_ms = pause.as_millis() as u64, "push connections read failed; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_secs(1));
            }
            read => return read,
        }
    }
}

/// Posts to runners' sockets through the API Gateway management API.
#[derive(Clone, Debug)]
pub struct Pusher {
    /// `None`: the deployment has no push endpoint; nudging is a no-op.
    client: Option<aws_sdk_apigatewaymanagement::Client>,
    /// How long a connection item lives (`BATON_PUSH_CONNECTION_TTL_S`).
    connection_ttl: chrono::Duration,
    /// A socket this young is not forgotten for a gone answer: it may still
    /// be in its `$connect` (`BATON_PUSH_CONNECTING_GRACE_S`).
    connecting_grace: chrono::Duration,
}

/// What one nudge did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Nudged {
    /// Posts that reached a socket.
    pub delivered: usize,
    /// Sockets that were gone (their items deleted).
    pub gone: usize,
    /// Posts that failed otherwise (the safety poll covers them).
    pub failed: usize,
}

impl Pusher {
    /// `base` carries the credentials, region and HTTP client (faults
    /// included locally); the endpoint is the deployment's.
    pub fn new(config: &PushConfig, base: &aws_sdk_apigatewaymanagement::Client) -> Self {
        let client = config.endpoint.as_ref().map(|endpoint| {
            aws_sdk_apigatewaymanagement::Client::from_conf(
                base.config().to_builder().endpoint_url(endpoint.trim_end_matches('/')).build(),
            )
        });
        let duration = |d: std::time::Duration| chrono::Duration::from_std(d).unwrap_or_default();
        Self {
            client,
            connection_ttl: duration(config.connection_ttl),
            connecting_grace: duration(config.connecting_grace),
        }
    }

    pub fn disabled() -> Self {
        Self { client: None, connection_ttl: chrono::Duration::zero(), connecting_grace: chrono::Duration::zero() }
    }

    pub fn is_enabled(&self) -> bool {
        self.client.is_some()
    }

    /// Nudges the workspace's connected runners that fit any of `label_sets`
    /// (canonical labels of the work that just became claimable).
    pub async fn nudge_work(&self, store: &Store, workspace_id: &str, label_sets: &[Vec<String>]) -> Nudged {
        if self.client.is_none() || label_sets.is_empty() {
            return Nudged::default();
        }
        let connections = match connections_read_within(store, workspace_id, CONNECTIONS_READ_BUDGET).await {
            Ok(connections) => connections,
            Err(err) => {
                tracing::warn!(workspace_id, error = %err, "push connections unreadable: no nudge (runners' safety polls cover it)");
                return Nudged { failed: 1, ..Nudged::default() };
            }
        };
        let fitting = fitting_connections(&connections, label_sets);
        let posts = fitting.iter().map(|c| self.post(store, workspace_id, c, &PushMessage::Work));
        let nudged = tally(futures::future::join_all(posts).await);
        tracing::info!(
            workspace_id,
            connections = connections.len(),
            delivered = nudged.delivered,
            gone = nudged.gone,
            failed = nudged.failed,
            "runners nudged for work"
        );
        baton_telemetry::metrics::emit(
            "push",
            &[
                ("nudges_delivered", nudged.delivered as f64, baton_telemetry::metrics::Unit::Count),
                ("nudges_gone", nudged.gone as f64, baton_telemetry::metrics::Unit::Count),
                ("nudges_failed", nudged.failed as f64, baton_telemetry::metrics::Unit::Count),
            ],
        );
        nudged
    }

    /// Tells the session holding a lease that it was flagged for
    /// cancellation, so the runner heartbeats now instead of at its interval.
    pub async fn nudge_cancel(
        &self,
        store: &Store,
        workspace_id: &str,
        session_id: Uuid,
        execution_id: Uuid,
    ) -> Nudged {
        if self.client.is_none() {
            return Nudged::default();
        }
        let connection = match store.push_connection(workspace_id, session_id).await {
            Ok(Some(connection)) => connection,
            Ok(None) => return Nudged::default(),
            Err(err) => {
                tracing::warn!(workspace_id, %session_id, error = %err, "push connection unreadable: no cancel nudge");
                return Nudged { failed: 1, ..Nudged::default() };
            }
        };
        let message = PushMessage::Cancel { job_execution_id: execution_id };
        let nudged = tally(vec![self.post(store, workspace_id, &connection, &message).await]);
        tracing::info!(workspace_id, %session_id, job_execution_id = %execution_id, delivered = nudged.delivered, "runner nudged to cancel");
        nudged
    }

    async fn post(
        &self,
        store: &Store,
        workspace_id: &str,
        connection: &PushConnection,
        message: &PushMessage,
    ) -> Post {
        let Some(client) = &self.client else { return Post::Failed };
        let data = match serde_json::to_vec(message) {
            Ok(data) => data,
            Err(_) => return Post::Failed,
        };
        let sent =
            client.post_to_connection().connection_id(&connection.connection_id).data(Blob::new(data)).send().await;
        match sent {
            Ok(_) => Post::Delivered,
            Err(err) if err.as_service_error().is_some_and(|e| e.is_gone_exception()) => {
                // The socket closed without us hearing of it: forget it,
                // unless the session has connected again meanwhile.
                let young_ttl = (Utc::now() + self.connection_ttl - self.connecting_grace).timestamp();
                let removed = store
                    .remove_push_connection(workspace_id, connection.session_id, &connection.connection_id, young_ttl)
                    .await;
                if let Err(err) = removed {
                    tracing::warn!(error = %err, "a gone push connection could not be forgotten; its TTL will");
                }
                Post::Gone
            }
            Err(err) => {
                tracing::warn!(session_id = %connection.session_id, error = %aws_sdk_apigatewaymanagement::error::DisplayErrorContext(&err), "nudge not delivered");
                Post::Failed
            }
        }
    }
}

enum Post {
    Delivered,
    Gone,
    Failed,
}

fn tally(posts: Vec<Post>) -> Nudged {
    let mut nudged = Nudged::default();
    for post in posts {
        match post {
            Post::Delivered => nudged.delivered += 1,
            Post::Gone => nudged.gone += 1,
            Post::Failed => nudged.failed += 1,
        }
    }
    nudged
}

/// The connections whose runner can serve at least one of `label_sets`
/// (its labels hold every label of the set), each once. Every fitting
/// runner is nudged, not one per job: Baton does not know which runners
/// are busy, and a runner with no free slot ignores the nudge; the claims
/// race as polls do, and the losers answer 204 at the cost of one request.
pub fn fitting_connections<'a>(
    connections: &'a [PushConnection],
    label_sets: &[Vec<String>],
) -> Vec<&'a PushConnection> {
    let mut seen = BTreeSet::new();
    connections
        .iter()
        .filter(|c| label_sets.iter().any(|set| is_subset(set, &c.labels)))
        .filter(|c| seen.insert(c.connection_id.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connection(session: u128, labels: &[&str]) -> PushConnection {
        let labels: Vec<String> = labels.iter().map(|l| l.to_string()).collect();
        PushConnection::new(
            "ws1",
            Uuid::from_u128(session),
            &format!("c{session}"),
            &labels,
            Utc::now(),
            chrono::Duration::hours(2),
        )
    }

    fn set(labels: &[&str]) -> Vec<String> {
        labels.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn only_runners_holding_every_label_of_a_claimable_set_are_nudged() {
        let connections =
            vec![connection(1, &["linux", "x64"]), connection(2, &["linux"]), connection(3, &["macos", "arm64"])];
        let ids = |sets: &[Vec<String>]| -> Vec<String> {
            fitting_connections(&connections, sets).iter().map(|c| c.connection_id.clone()).collect()
        };
        assert_eq!(ids(&[set(&["linux", "x64"])]), ["c1"]);
        assert_eq!(ids(&[set(&["linux"])]), ["c1", "c2"]);
        assert_eq!(ids(&[set(&["linux", "x64"]), set(&["arm64"])]), ["c1", "c3"], "each runner once");
        assert!(ids(&[set(&["gpu"])]).is_empty());
        assert!(ids(&[]).is_empty());
    }

    #[test]
    fn the_messages_are_small_tagged_json() {
        assert_eq!(serde_json::to_string(&PushMessage::Work).unwrap(), r#"{"type":"work"}"#);
        let cancel = PushMessage::Cancel { job_execution_id: Uuid::nil() };
        assert_eq!(
            serde_json::to_string(&cancel).unwrap(),
            r#"{"type":"cancel","job_execution_id":"00000000-0000-0000-0000-000000000000"}"#
        );
    }
}
