//! The runner's push socket. While it is open, the agent claims only when
//! nudged (plus a slow safety poll), instead of holding long polls open, so
//! an idle runner costs almost nothing; a job's heartbeat runs at once when
//! its lease is cancelled. The socket is never the truth: a nudge only
//! makes the agent ask over HTTP, and while the socket is down the agent
//! long-polls as it did before push.
//!
//! The socket is opened with the session token (a new session reconnects),
//! kept open with a small `ping` message (API Gateway closes a socket idle
//! for 10 minutes, and any socket after 2 hours), and reopened with backoff
//! whenever it closes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_api::runners::{PushMessage, PushPing};
use baton_client::backoff::Backoff;
use futures::{SinkExt, StreamExt};
use tokio::sync::{watch, Notify};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use uuid::Uuid;

use crate::Shutdown;

/// Where to connect, and as whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub url: String,
    pub session_token: String,
}

/// What the socket tells the agent and the jobs.
#[derive(Debug)]
pub struct Nudges {
    work: Notify,
    leases: Mutex<HashMap<Uuid, Arc<Notify>>>,
    connected: watch::Sender<bool>,
}

impl Default for Nudges {
    fn default() -> Self {
        Self { work: Notify::new(), leases: Mutex::default(), connected: watch::Sender::new(false) }
    }
}

impl Nudges {
    /// Whether the socket is open (the agent claims on nudges, not by polling).
    pub fn is_connected(&self) -> bool {
        *self.connected.borrow()
    }

    /// Resolves on the next work nudge, or at once if one came since the
    /// last wait (a nudge that lands during a claim is not lost).
    pub async fn work(&self) {
        self.work.notified().await
    }

    /// Waits at most `grace` for the socket to open; whether it did.
    pub async fn connected_within(&self, grace: Duration) -> bool {
        let mut connected = self.connected.subscribe();
        let opened = async move { connected.wait_for(|c| *c).await.is_ok() };
        matches!(tokio::time::timeout(grace, opened).await, Ok(true))
    }

    /// Resolves when the socket closes.
    pub async fn disconnected(&self) {
        let mut connected = self.connected.subscribe();
        let _ = connected.wait_for(|c| !*c).await;
    }

    /// What wakes a job's heartbeat early: a cancel nudge for its lease.
    /// Dropping the watch forgets the lease.
    pub fn watch_lease(self: &Arc<Self>, execution: Uuid) -> LeaseWatch {
        let notify = Arc::new(Notify::new());
        self.lock().insert(execution, notify.clone());
        LeaseWatch { nudges: self.clone(), execution, notify }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Arc<Notify>>> {
        self.leases.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn deliver(&self, message: PushMessage) {
        match message {
            PushMessage::Work => {
                tracing::info!("nudged: work is claimable");
                self.work.notify_one();
            }
            PushMessage::Cancel { job_execution_id } => {
                tracing::info!(execution = %job_execution_id, "nudged: a lease was cancelled");
                if let Some(notify) = self.lock().get(&job_execution_id) {
                    notify.notify_one();
                }
            }
        }
    }

    fn set_connected(&self, connected: bool) {
        self.connected.send_replace(connected);
        if connected {
            // Work queued while the socket was down was nudged to nobody.
            self.work.notify_one();
        }
    }
}

/// A running job's interest in cancel nudges.
pub struct LeaseWatch {
    nudges: Arc<Nudges>,
    execution: Uuid,
    pub notify: Arc<Notify>,
}

impl Drop for LeaseWatch {
    fn drop(&mut self) {
        self.nudges.lock().remove(&self.execution);
    }
}

/// Holds the socket of the current session until shutdown: connects,
/// delivers nudges, pings every `ping_every`, reconnects with backoff, and
/// reconnects when the session (its token) changes.
pub async fn hold(
    mut endpoint: watch::Receiver<Option<Endpoint>>,
    nudges: Arc<Nudges>,
    ping_every: Duration,
    mut shutdown: watch::Receiver<Shutdown>,
) {
    let mut errors = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
    loop {
        if *shutdown.borrow() != Shutdown::Running {
            return;
        }
        let current = endpoint.borrow_and_update().clone();
        let Some(current) = current else {
            tokio::select! {
                changed = endpoint.changed() => if changed.is_err() { return },
                _ = stopping(&mut shutdown) => return,
            }
            continue;
        };
        let opened = tokio::select! {
            opened = connect(&current) => opened,
            _ = stopping(&mut shutdown) => return,
        };
        match opened {
            Ok(socket) => {
                tracing::info!(url = %current.url, "push socket connected");
                errors.reset();
                nudges.set_connected(true);
                let why = serve(socket, &nudges, ping_every, &mut endpoint, &mut shutdown).await;
                nudges.set_connected(false);
                tracing::info!(reason = ?why, "push socket closed: polling until it is back");
                if why == Closed::NewSession {
                    continue;
                }
            }
            Err(err) => tracing::warn!(url = %current.url, error = %err, "push socket not opened: polling meanwhile"),
        }
        let delay = errors.next_delay();
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stopping(&mut shutdown) => return,
        }
    }
}

/// Resolves once the agent stops (its guard is not held across awaits).
async fn stopping(shutdown: &mut watch::Receiver<Shutdown>) {
    let _ = shutdown.wait_for(|s| *s != Shutdown::Running).await;
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn connect(endpoint: &Endpoint) -> Result<Socket, String> {
    let mut request = endpoint.url.as_str().into_client_request().map_err(|e| e.to_string())?;
    let bearer = format!("Bearer {}", endpoint.session_token);
    request.headers_mut().insert(
        http::header::AUTHORIZATION,
        http::HeaderValue::from_str(&bearer).map_err(|_| "the session token is not a header value".to_string())?,
    );
    let connecting = tokio_tungstenite::connect_async(request);
    match tokio::time::timeout(Duration::from_secs(20), connecting).await {
        Ok(Ok((socket, _))) => Ok(socket),
        Ok(Err(err)) => Err(err.to_string()),
        Err(_) => Err("timed out".into()),
    }
}

/// Why a socket was closed; a new session reconnects at once, anything
/// else after a backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closed {
    ByServer,
    Broken,
    NewSession,
    ShuttingDown,
}

/// Serves one open socket until it closes; says why it ended.
async fn serve(
    mut socket: Socket,
    nudges: &Nudges,
    ping_every: Duration,
    endpoint: &mut watch::Receiver<Option<Endpoint>>,
    shutdown: &mut watch::Receiver<Shutdown>,
) -> Closed {
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + ping_every, ping_every);
    loop {
        tokio::select! {
            incoming = socket.next() => match incoming {
                Some(Ok(Message::Text(text))) => match serde_json::from_str::<PushMessage>(&text) {
                    Ok(message) => nudges.deliver(message),
                    // A newer server's message, or a gateway's reply to a ping.
                    Err(_) => tracing::debug!(message = %text, "push message not understood; ignored"),
                },
                Some(Ok(Message::Close(_))) | None => return Closed::ByServer,
                Some(Err(_)) => return Closed::Broken,
                Some(Ok(_)) => {}
            },
            _ = ping.tick() => {
                let ping = serde_json::to_string(&PushPing::default()).unwrap_or_default();
                if socket.send(Message::Text(ping.into())).await.is_err() {
                    return Closed::Broken;
                }
            }
            _ = endpoint.changed() => {
                let _ = socket.close(None).await;
                return Closed::NewSession;
            }
            _ = stopping(shutdown) => {
                let _ = socket.close(None).await;
                return Closed::ShuttingDown;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_work_nudge_that_lands_between_waits_is_kept_for_the_next_wait() {
        let nudges = Nudges::default();
        nudges.deliver(PushMessage::Work);
        tokio::time::timeout(Duration::from_secs(1), nudges.work()).await.expect("the stored nudge wakes the wait");
    }

    #[tokio::test]
    async fn a_cancel_nudge_wakes_only_the_watch_of_its_lease() {
        let nudges = Arc::new(Nudges::default());
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let watch_a = nudges.watch_lease(a);
        let watch_b = nudges.watch_lease(b);
        nudges.deliver(PushMessage::Cancel { job_execution_id: a });
        tokio::time::timeout(Duration::from_secs(1), watch_a.notify.notified()).await.expect("a is woken");
        assert!(tokio::time::timeout(Duration::from_millis(50), watch_b.notify.notified()).await.is_err());
        drop(watch_a);
        assert!(!nudges.lock().contains_key(&a), "a finished job's watch is forgotten");
    }

    #[test]
    fn connecting_counts_as_a_nudge_for_work_queued_while_the_socket_was_down() {
        let nudges = Nudges::default();
        nudges.set_connected(true);
        assert!(nudges.is_connected());
        assert!(futures::FutureExt::now_or_never(nudges.work()).is_some());
    }
}
