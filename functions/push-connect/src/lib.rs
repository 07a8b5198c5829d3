//! The push socket's routes (API Gateway WebSocket API). `$connect` opens a
//! runner's socket: the upgrade request carries the session token as a
//! bearer token; a valid one records the connection with the session's
//! labels (`store::connections`), anything else refuses the upgrade with
//! 401 and writes nothing. `$disconnect` needs no write: a connection item
//! that outlives its socket is deleted by the first post that finds it gone,
//! or by its TTL.

use aws_lambda_events::apigw::{ApiGatewayProxyResponse, ApiGatewayWebsocketProxyRequest};
use aws_lambda_events::encodings::Body;
use baton_domain::tokens::TokenKind;
use baton_service::context::Context;
use baton_store::connections::PushConnection;

pub const CONNECT_ROUTE: &str = "$connect";
pub const DISCONNECT_ROUTE: &str = "$disconnect";

pub async fn handle(context: &Context, event: ApiGatewayWebsocketProxyRequest) -> ApiGatewayProxyResponse {
    let route = event.request_context.route_key.as_deref().unwrap_or_default();
    let connection_id = event.request_context.connection_id.as_deref().unwrap_or_default();
    match route {
        CONNECT_ROUTE => connect(context, &event, connection_id).await,
        DISCONNECT_ROUTE => answer(200, "bye"),
        other => {
            tracing::warn!(route = other, "push socket route without a handler");
            answer(404, "no such route")
        }
    }
}

async fn connect(
    context: &Context,
    event: &ApiGatewayWebsocketProxyRequest,
    connection_id: &str,
) -> ApiGatewayProxyResponse {
    let token = event
        .headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .filter(|token| TokenKind::Session.is_kind_of(token));
    let (Some(token), false) = (token, connection_id.is_empty()) else {
        return answer(401, "a runner session token is required");
    };
    let now = chrono::Utc::now();
    let session = match context.store.session_for_token(token, now).await {
        Ok(Some(session)) => session,
        Ok(None) => return answer(401, "the session token is unknown or expired"),
        Err(err) => {
            tracing::error!(error = %err, "push connect: the session could not be read");
            return answer(503, "try again");
        }
    };
    let ttl =
        chrono::Duration::from_std(context.config.push.connection_ttl).unwrap_or_else(|_| chrono::Duration::hours(2));
    let connection = PushConnection::new(&session.workspace_id, session.id, connection_id, &session.labels, now, ttl);
    match context.store.put_push_connection(&connection).await {
        Ok(()) => {
            tracing::info!(session_id = %session.id, workspace_id = %session.workspace_id, connection_id, "push socket connected");
            answer(200, "connected")
        }
        Err(err) => {
            tracing::error!(session_id = %session.id, error = %err, "push connect: the connection could not be recorded");
            answer(503, "try again")
        }
    }
}

fn answer(status: i64, message: &str) -> ApiGatewayProxyResponse {
    let mut response = ApiGatewayProxyResponse::default();
    response.status_code = status;
    response.body = Some(Body::Text(message.to_string()));
    response
}
