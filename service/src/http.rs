//! Mapping between API Gateway (HTTP API) requests/responses and the domain:
//! body limits, JSON parsing, bearer tokens, path parameters and the error
//! document of api.md. Handlers use these and nothing else to speak HTTP.

use std::future::Future;

use http::Method;
use lambda_http::{Body, Request, RequestExt, Response};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::context::Context;

use baton_domain::error::{ApiError, ErrorBody, ErrorCode, ErrorDetail};
use baton_domain::tokens::{self, TokenKind};
use baton_store::Store;

/// Largest request body accepted (api.md: "> 1 MiB is 400 invalid-request").
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// A JSON response with `status`.
pub fn json_response<T: Serialize>(status: http::StatusCode, value: &T) -> Response<Body> {
    match serde_json::to_vec(value) {
        Ok(bytes) => Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(Body::Binary(bytes))
            .unwrap_or_else(|_| plain_internal_error()),
        Err(err) => {
            tracing::error!(error = %err, "response serialisation failed");
            error_response(&ApiError::internal())
        }
    }
}

/// An empty response (204, 202 …).
pub fn empty_response(status: http::StatusCode) -> Response<Body> {
    Response::builder().status(status).body(Body::Empty).unwrap_or_else(|_| plain_internal_error())
}

/// The error document for `err`, with its status.
pub fn error_response(err: &ApiError) -> Response<Body> {
    let body = ErrorBody { error: ErrorDetail { code: err.code.as_str().to_string(), message: err.message.clone() } };
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    let mut response = Response::builder().status(err.status()).header("content-type", "application/json");
    if err.code == ErrorCode::Unavailable {
        // Busy, not broken: the client retries after this many seconds.
        response = response.header(http::header::RETRY_AFTER, RETRY_AFTER_S.to_string());
    }
    response.body(Body::Binary(bytes)).unwrap_or_else(|_| plain_internal_error())
}

/// The `Retry-After` of a 503 `unavailable` (the store kept losing races or
/// was throttled): short, the contention passes in moments.
pub const RETRY_AFTER_S: u64 = 1;

fn plain_internal_error() -> Response<Body> {
    let mut response =
        Response::new(Body::Text(r#"{"error":{"code":"internal","message":"internal error"}}"#.to_string()));
    *response.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
    response
}

/// Turns a handler's result into the response API Gateway returns.
pub fn respond(result: Result<Response<Body>, ApiError>) -> Response<Body> {
    result.unwrap_or_else(|err| error_response(&err))
}

/// The raw bytes of the body, refusing one over [`MAX_BODY_BYTES`].
pub fn body_bytes(req: &Request) -> Result<&[u8], ApiError> {
    let bytes: &[u8] = match req.body() {
        Body::Empty => &[],
        Body::Text(text) => text.as_bytes(),
        Body::Binary(bytes) => bytes,
        _ => &[],
    };
    if bytes.len() > MAX_BODY_BYTES {
        return Err(ApiError::invalid_request(format!("body is larger than {MAX_BODY_BYTES} bytes")));
    }
    Ok(bytes)
}

/// Parses the JSON body into `T`. An empty body parses as `{}` so that routes
/// whose fields are all optional accept a bare POST. Unknown fields are
/// ignored. Anything but a JSON object (an array, `false`) is refused, even
/// where every field is optional.
pub fn parse_json<T: DeserializeOwned>(req: &Request) -> Result<T, ApiError> {
    let bytes = body_bytes(req)?;
    let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) { b"{}" } else { bytes };
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::invalid_request("the body must be a JSON object"));
    }
    serde_json::from_slice(bytes).map_err(|err| ApiError::invalid_request(format!("malformed JSON body: {err}")))
}

/// The bearer token of the `Authorization` header, if any.
pub fn bearer_token(req: &Request) -> Option<&str> {
    let value = req.headers().get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    (!token.is_empty()).then_some(token)
}

/// The request's bearer token if it is of `kind`; 401 otherwise (a token of
/// another kind is as good as none here).
pub fn require_token(req: &Request, kind: TokenKind) -> Result<&str, ApiError> {
    bearer_token(req).filter(|token| kind.is_kind_of(token)).ok_or_else(ApiError::unauthenticated)
}

/// The workspace of an operator route (`/v1/workspaces/{workspace}/…`),
/// once [`authorize_operator`] has let the request's token act on it.
pub async fn operator_workspace(store: &Store, req: &Request) -> Result<String, ApiError> {
    let workspace = path_workspace(req)?;
    authorize_operator(store, req, &workspace).await?;
    Ok(workspace)
}

/// What a route answers: its response, or the error [`respond`] answers
/// as the error document.
pub type Answer = Result<Response<Body>, ApiError>;

/// An operator route (`/v1/workspaces/{ws}/…`) as the methods it serves;
/// one it leaves out is a 405. Each is handed the workspace that
/// [`serve_operator`] has already let the request's token act on.
pub trait OperatorRoute {
    fn post(_: &Context, _: &Request, _: &str) -> impl Future<Output = Answer> + Send {
        async { Err(method_not_allowed()) }
    }
    fn put(_: &Context, _: &Request, _: &str) -> impl Future<Output = Answer> + Send {
        async { Err(method_not_allowed()) }
    }
    fn get(_: &Context, _: &Request, _: &str) -> impl Future<Output = Answer> + Send {
        async { Err(method_not_allowed()) }
    }
    fn delete(_: &Context, _: &Request, _: &str) -> impl Future<Output = Answer> + Send {
        async { Err(method_not_allowed()) }
    }
}

/// Serves an [`OperatorRoute`]: the token is checked against the workspace
/// before the method is looked at, so a caller who may not act on the
/// workspace learns nothing of what the route serves (401/404 before 405).
pub async fn serve_operator<R: OperatorRoute>(context: &Context, req: Request) -> Response<Body> {
    respond(operate::<R>(context, &req).await)
}

async fn operate<R: OperatorRoute>(context: &Context, req: &Request) -> Answer {
    let workspace = operator_workspace(&context.store, req).await?;
    match *req.method() {
        Method::POST => R::post(context, req, &workspace).await,
        Method::PUT => R::put(context, req, &workspace).await,
        Method::GET => R::get(context, req, &workspace).await,
        Method::DELETE => R::delete(context, req, &workspace).await,
        _ => Err(method_not_allowed()),
    }
}

/// Authorises an operator request on `workspace_id`: 401 without a valid
/// `bat_` token; 404 for a token scoped to another workspace (existence is
/// not revealed). The token's record: who is asking.
pub async fn authorize_operator(
    store: &Store,
    req: &Request,
    workspace_id: &str,
) -> Result<baton_store::operators::OperatorToken, ApiError> {
    let token = require_token(req, TokenKind::Operator)?;
    let record = store
        .operator_token(token)
        .await?
        .filter(|record| record.revoked_at.is_none())
        .ok_or_else(ApiError::unauthenticated)?;
    match &record.workspace_id {
        None => Ok(record),
        Some(scope) if scope == workspace_id => Ok(record),
        Some(_) => Err(ApiError::new(ErrorCode::NotFound, "workspace not found")),
    }
}

/// Authenticates a provisioner request (`bpt_`): the provisioner it belongs
/// to, which scopes everything the request may read or write; 401 for an
/// unknown, wrong or removed provisioner's token.
pub async fn authorize_provisioner(
    store: &Store,
    req: &Request,
) -> Result<baton_store::provisioners::Provisioner, ApiError> {
    let token = require_token(req, TokenKind::Provisioner)?;
    store.provisioner_for_token(token).await?.ok_or_else(ApiError::unauthenticated)
}

/// A path parameter that the route template names; 404 when it is missing.
pub fn path_param(req: &Request, name: &str) -> Result<String, ApiError> {
    req.path_parameters()
        .first(name)
        .map(str::to_string)
        .ok_or_else(|| ApiError::not_found(format!("path parameter {name}")))
}

/// The `{ws}` path parameter, a well-formed workspace id (`limits`); 400
/// otherwise, before anything is read or written.
pub fn path_workspace(req: &Request) -> Result<String, ApiError> {
    let raw = path_param(req, "ws")?;
    baton_domain::limits::workspace_id(&raw)?;
    Ok(raw)
}

/// A path parameter that must be a UUID; anything else is 404 (an id that
/// cannot exist is simply not found).
pub fn path_id(req: &Request, name: &str) -> Result<uuid::Uuid, ApiError> {
    let raw = path_param(req, name)?;
    baton_domain::ids::parse_id(&raw).ok_or_else(|| ApiError::not_found(name.to_string()))
}

/// A query-string parameter.
pub fn query_param(req: &Request, name: &str) -> Option<String> {
    req.query_string_parameters().first(name).map(str::to_string)
}

/// 405 for a method a route does not serve.
pub fn method_not_allowed() -> ApiError {
    ApiError::new(ErrorCode::MethodNotAllowed, "method not allowed on this route")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body: &str, auth: Option<&str>) -> Request {
        let mut builder = http::Request::builder().method("POST").uri("/v1/x");
        if let Some(auth) = auth {
            builder = builder.header("authorization", auth);
        }
        builder.body(Body::Text(body.to_string())).unwrap()
    }

    #[derive(serde::Deserialize, Debug)]
    struct Probe {
        #[allow(dead_code)]
        wait_s: Option<u32>,
    }

    #[test]
    fn oversized_body_is_invalid_request() {
        let big = format!("{{\"pad\":\"{}\"}}", "x".repeat(MAX_BODY_BYTES));
        let err = parse_json::<Probe>(&request(&big, None)).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidRequest);
    }

    #[test]
    fn malformed_json_is_invalid_request_and_empty_body_is_an_empty_object() {
        assert_eq!(parse_json::<Probe>(&request("{", None)).unwrap_err().code, ErrorCode::InvalidRequest);
        assert!(parse_json::<Probe>(&request("", None)).is_ok());
    }

    #[test]
    fn a_body_that_is_not_a_json_object_is_invalid_request() {
        for body in ["[]", " [1]", "false", "null", "\"{}\"", "7"] {
            let err = parse_json::<Probe>(&request(body, None)).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidRequest, "{body}");
        }
        assert!(parse_json::<Probe>(&request(" \n{\"wait_s\": 1}", None)).is_ok());
    }

    #[test]
    fn bearer_token_needs_the_bearer_scheme() {
        assert_eq!(bearer_token(&request("", Some("Bearer bst_abc"))), Some("bst_abc"));
        assert_eq!(bearer_token(&request("", Some("Basic abc"))), None);
        assert_eq!(bearer_token(&request("", None)), None);
    }
}

/// The lease a `blt_` token names, checked against the route's execution.
#[derive(Debug, Clone)]
pub struct LeaseCredentials {
    pub execution_id: uuid::Uuid,
    pub epoch: u64,
    pub token_hash: String,
}

/// Reads the lease token: 401 when missing or malformed, 404 when it names
/// another execution than the path (another lease's token is out of scope).
pub fn lease_credentials(req: &Request) -> Result<LeaseCredentials, ApiError> {
    let token = require_token(req, TokenKind::Lease)?;
    let (execution_id, epoch) = tokens::parse_lease_token(token).ok_or_else(ApiError::unauthenticated)?;
    if path_id(req, "execution_id")? != execution_id {
        return Err(ApiError::not_found("lease"));
    }
    Ok(LeaseCredentials { execution_id, epoch, token_hash: tokens::hash_token(token) })
}

/// 409 `lease-lost`: stop the job, do not report, claim again.
pub fn lease_lost() -> ApiError {
    ApiError::new(
        ErrorCode::LeaseLost,
        "the lease was lost (expired, reaped or superseded); stop the job and claim again",
    )
}
