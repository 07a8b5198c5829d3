//! API Gateway's WebSocket API in front of the push-connect function, and
//! its management API (`POST`/`DELETE /@connections/{id}`) that functions
//! post nudges through with the real `aws-sdk-apigatewaymanagement` client.
//! As on AWS: the `$connect` route's function decides whether the upgrade
//! is accepted (its status is the answer), a message whose `action` is the
//! keep-alive one is answered by the gateway itself, and a post to a
//! connection the gateway does not hold fails with `GoneException` (410).
//!
//! [`PushGateway::sever_silently`] makes every socket a dead one without the
//! runner hearing of it (a NAT that dropped the flow): posts fail as gone
//! while the runner still believes it is connected.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use aws_lambda_events::apigw::ApiGatewayWebsocketProxyRequest;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;

use crate::functions::Functions;

/// Where the dev host serves the socket; the management endpoint is the
/// same path (posts go to `<endpoint>/@connections/{id}`).
pub const PUSH_PATH: &str = "/_push";

pub struct PushGateway {
    pub functions: Arc<Functions>,
    /// The function of `$connect` and `$disconnect`.
    pub function: String,
    pub keepalive_action: String,
    connections: Mutex<HashMap<String, mpsc::UnboundedSender<Outgoing>>>,
    /// Posts that reached a socket, and those answered gone.
    pub delivered: AtomicU64,
    pub gone: AtomicU64,
    /// When each delivered post reached its socket, with its body.
    deliveries: Mutex<Vec<(std::time::Instant, String)>>,
}

enum Outgoing {
    Text(String),
    Close,
}

impl PushGateway {
    pub fn new(functions: Arc<Functions>, function: String, keepalive_action: String) -> Self {
        Self {
            functions,
            function,
            keepalive_action,
            connections: Mutex::default(),
            delivered: AtomicU64::new(0),
            gone: AtomicU64::new(0),
            deliveries: Mutex::default(),
        }
    }

    /// Every post delivered so far: when, and what.
    pub fn deliveries(&self) -> Vec<(std::time::Instant, String)> {
        self.deliveries.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn router(self: Arc<Self>) -> axum::Router {
        axum::Router::new()
            .route(PUSH_PATH, axum::routing::get(upgrade))
            .route(&format!("{PUSH_PATH}/@connections/{{id}}"), axum::routing::post(post).delete(disconnect))
            .with_state(self)
    }

    /// How many sockets the gateway holds.
    pub fn connected(&self) -> usize {
        self.lock().len()
    }

    /// Forgets every socket without closing it: the runners keep a socket
    /// that will never carry a nudge, and posts to it fail as gone.
    pub fn sever_silently(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, mpsc::UnboundedSender<Outgoing>>> {
        self.connections.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn route(&self, route_key: &str, connection_id: &str, headers: http::HeaderMap) -> i64 {
        let mut event = ApiGatewayWebsocketProxyRequest::default();
        event.headers = headers;
        event.request_context.route_key = Some(route_key.to_string());
        event.request_context.connection_id = Some(connection_id.to_string());
        event.request_context.event_type = Some(route_key.trim_start_matches('$').to_uppercase());
        self.functions.websocket(&self.function, event).await.map(|r| r.status_code).unwrap_or(500)
    }
}

async fn upgrade(State(gateway): State<Arc<PushGateway>>, headers: http::HeaderMap, ws: WebSocketUpgrade) -> Response {
    let connection_id = uuid::Uuid::now_v7().simple().to_string();
    let status = gateway.route("$connect", &connection_id, headers).await;
    if !(200..300).contains(&status) {
        let code = http::StatusCode::from_u16(status as u16).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
        return (code, "the $connect route refused the socket").into_response();
    }
    let (tx, rx) = mpsc::unbounded_channel();
    gateway.lock().insert(connection_id.clone(), tx);
    ws.on_upgrade(move |socket| serve_socket(gateway, socket, connection_id, rx))
}

async fn serve_socket(
    gateway: Arc<PushGateway>,
    mut socket: WebSocket,
    connection_id: String,
    mut outgoing: mpsc::UnboundedReceiver<Outgoing>,
) {
    let mut severed = false;
    loop {
        tokio::select! {
            out = outgoing.recv(), if !severed => match out {
                Some(Outgoing::Text(text)) => {
                    if socket.send(Message::Text(text.into())).await.is_err() {
                        break;
                    }
                }
                Some(Outgoing::Close) => {
                    let _ = socket.send(Message::Close(None)).await;
                    break;
                }
                // Severed: the socket stays open and silent.
                None => severed = true,
            },
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Text(text))) => {
                    let action = serde_json::from_str::<serde_json::Value>(&text)
                        .ok()
                        .and_then(|v| v["action"].as_str().map(str::to_string));
                    if action.as_deref() != Some(gateway.keepalive_action.as_str()) {
                        tracing::debug!(%connection_id, "push socket message without a route; dropped");
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
        }
    }
    gateway.lock().remove(&connection_id);
    gateway.route("$disconnect", &connection_id, http::HeaderMap::new()).await;
}

async fn post(State(gateway): State<Arc<PushGateway>>, Path(id): Path<String>, body: axum::body::Bytes) -> Response {
    let text = String::from_utf8_lossy(&body).into_owned();
    let sent = gateway.lock().get(&id).map(|tx| tx.send(Outgoing::Text(text.clone())).is_ok());
    match sent {
        Some(true) => {
            gateway.delivered.fetch_add(1, Ordering::Relaxed);
            gateway.deliveries.lock().unwrap_or_else(|e| e.into_inner()).push((std::time::Instant::now(), text));
            http::StatusCode::OK.into_response()
        }
        _ => {
            gateway.gone.fetch_add(1, Ordering::Relaxed);
            gone()
        }
    }
}

async fn disconnect(State(gateway): State<Arc<PushGateway>>, Path(id): Path<String>) -> Response {
    match gateway.lock().remove(&id) {
        Some(tx) => {
            let _ = tx.send(Outgoing::Close);
            http::StatusCode::NO_CONTENT.into_response()
        }
        None => gone(),
    }
}

/// API Gateway's answer for a connection it does not hold; the SDK reads
/// the error type from the header.
fn gone() -> Response {
    (
        http::StatusCode::GONE,
        [("x-amzn-errortype", "GoneException"), ("content-type", "application/json")],
        r#"{"message":"Gone"}"#,
    )
        .into_response()
}
