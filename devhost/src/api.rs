//! API Gateway (HTTP API) in front of the functions: matches the route
//! templates of resources.json, fills path and query parameters the way API
//! Gateway does, and hands the very `lambda_http::Request` to the handler.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body as AxumBody;
use baton_domain::error::{ApiError, ErrorCode};
use baton_localstack::resources::Route;
use lambda_http::{Body, RequestExt};

use baton_localstack::faults::{abandoned_after_first_write, Fault, FaultPlan, TRIGGER};

use crate::contract::Contract;
use crate::functions::Functions;

/// API Gateway's own payload limit; the handlers enforce the API's 1 MiB.
const GATEWAY_MAX_BODY: usize = 10 * 1024 * 1024;

/// The most a Lambda function may answer a synchronous invocation with
/// (6 MB); a larger answer fails the invocation after its work was done.
pub const LAMBDA_MAX_RESPONSE: usize = 6 * 1024 * 1024;

/// API Gateway's integration timeout for an HTTP API (its maximum).
pub const INTEGRATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Finds the route for `method` and `path`, with its path parameters.
pub fn match_route<'a>(routes: &'a [Route], method: &str, path: &str) -> Option<(&'a Route, HashMap<String, String>)> {
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    routes.iter().filter(|r| r.method.eq_ignore_ascii_case(method)).find_map(|route| {
        let template: Vec<&str> = route.path.split('/').collect();
        if template.len() != segments.len() {
            return None;
        }
        let mut params = HashMap::new();
        for (t, s) in template.iter().zip(&segments) {
            if let Some(name) = t.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
                if s.is_empty() {
                    return None;
                }
                params.insert(name.to_string(), (*s).to_string());
            } else if t != s {
                return None;
            }
        }
        Some((route, params))
    })
}

pub struct Gateway {
    pub routes: Vec<Route>,
    pub functions: Arc<Functions>,
    /// Invocations as Lambda runs them on a bad day (`trigger.http` faults).
    pub faults: Option<Arc<FaultPlan>>,
    /// Every function answer is checked against the OpenAPI document.
    pub contract: Arc<Contract>,
    /// How long API Gateway waits for a function (an HTTP API's integration
    /// timeout: 30 s at most, the CDK stack's setting).
    pub integration_timeout: std::time::Duration,
    /// While set, every request is answered 503 (`HostOptions::outage`).
    pub outage: Arc<std::sync::atomic::AtomicBool>,
    /// Routes whose answers are lost while listed (`HostOptions::answers_lost`).
    pub answers_lost: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Gateway {
    pub async fn serve(self: Arc<Self>, req: axum::extract::Request) -> axum::response::Response {
        if self.outage.load(std::sync::atomic::Ordering::SeqCst) {
            return gateway_error(503, "Service Unavailable");
        }
        let (parts, body) = req.into_parts();
        // The body is read before the route is matched, as API Gateway
        // does: a 404 answered while the body is still on its way closes
        // the connection under a client still writing it (a broken pipe,
        // not an answer).
        let bytes = match axum::body::to_bytes(body, GATEWAY_MAX_BODY).await {
            Ok(bytes) => bytes,
            Err(_) => {
                return to_axum(baton_service::http::error_response(&ApiError::invalid_request("body too large")));
            }
        };
        let Some((route, params)) = match_route(&self.routes, parts.method.as_str(), parts.uri.path()) else {
            return to_axum(baton_service::http::error_response(&ApiError::new(ErrorCode::NotFound, "no such route")));
        };
        let query = parts.uri.query().map(query_parameters).unwrap_or_default();
        let method = parts.method.to_string();
        let body = if bytes.is_empty() { Body::Empty } else { Body::Binary(bytes.to_vec()) };
        let request =
            http::Request::from_parts(parts, body).with_path_parameters(params).with_query_string_parameters(query);
        let lost_here = self.answers_lost.lock().is_ok_and(|routes| routes.contains(&route.path));
        let fault = if lost_here {
            Some(Fault::Lost)
        } else {
            self.faults.as_ref().and_then(|plan| plan.decide(TRIGGER, &format!("http.{}", route.function)))
        };
        if fault == Some(Fault::Replay) {
            // The client gives up on this try at once (its own timeout, or
            // the gateway's 504) while the invocation runs on: the client's
            // retry, which it sends as a retry, runs beside it.
            let first = self.invoke(&route.function, request);
            tokio::spawn(async move {
                let _ = first.await;
            });
            return gateway_error(504, "Endpoint request timed out");
        }
        let invocation = self.invoke(&route.function, request);
        match fault {
            // What API Gateway answers when the function crashed or timed
            // out: the client cannot tell whether anything was applied.
            Some(Fault::Abandon) => match abandoned_after_first_write(invocation).await {
                Some(response) => self.answer(&method, &route.path, response),
                None => gateway_error(502, "Internal server error"),
            },
            // The function ran to its end; its answer never reached the client.
            Some(Fault::Lost) => {
                invocation.await;
                gateway_error(504, "Endpoint request timed out")
            }
            _ => {
                // API Gateway waits `integration_timeout` for the function
                // and then answers 504 while the invocation goes on to its
                // end (Lambda does not stop it): the client cannot tell
                // whether it was applied, and may run it again beside it.
                let mut invocation = tokio::spawn(invocation);
                match tokio::time::timeout(self.integration_timeout, &mut invocation).await {
                    Ok(Ok(response)) => self.answer(&method, &route.path, response),
                    Ok(Err(_)) => gateway_error(502, "Internal server error"),
                    Err(_) => {
                        tracing::warn!(function = %route.function, timeout_s = self.integration_timeout.as_secs(),
                            "the integration timed out: 504 while the invocation goes on");
                        gateway_error(504, "Endpoint request timed out")
                    }
                }
            }
        }
    }

    /// One invocation of `function`, owning what it needs (the gateway may
    /// leave it running after answering).
    fn invoke(
        &self,
        function: &str,
        request: lambda_http::Request,
    ) -> futures::future::BoxFuture<'static, lambda_http::Response<Body>> {
        let (functions, function) = (self.functions.clone(), function.to_string());
        Box::pin(async move { functions.http(&function, request).await })
    }

    /// The function's answer as the client gets it: checked against the
    /// contract, and refused as Lambda refuses an answer over its payload
    /// limit (API Gateway then answers 502; the work is done, the answer
    /// lost).
    fn answer(&self, method: &str, route: &str, response: lambda_http::Response<Body>) -> axum::response::Response {
        let size = match response.body() {
            Body::Text(text) => text.len(),
            Body::Binary(bytes) => bytes.len(),
            _ => 0,
        };
        if size > LAMBDA_MAX_RESPONSE {
            tracing::error!(
                route,
                size,
                limit = LAMBDA_MAX_RESPONSE,
                "an answer over Lambda's response payload limit: 502, as on AWS"
            );
            return gateway_error(502, "Internal server error");
        }
        to_axum(self.checked(method, route, response))
    }

    /// The function's answer if the contract declares it; otherwise a 500
    /// naming the breach (logged too), which no test expects.
    fn checked(&self, method: &str, route: &str, response: lambda_http::Response<Body>) -> lambda_http::Response<Body> {
        let content_type = response.headers().get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
        let body: &[u8] = match response.body() {
            Body::Text(text) => text.as_bytes(),
            Body::Binary(bytes) => bytes,
            _ => &[],
        };
        match self.contract.check(method, route, response.status().as_u16(), content_type, body) {
            Ok(()) => response,
            Err(breach) => {
                tracing::error!(%breach, "an answer breaks the OpenAPI document");
                baton_service::http::error_response(&ApiError::new(
                    ErrorCode::Internal,
                    format!("the answer breaks the OpenAPI document: {breach}"),
                ))
            }
        }
    }
}

/// An answer of API Gateway itself (not of a function), with its body.
fn gateway_error(status: u16, message: &str) -> axum::response::Response {
    let body = serde_json::json!({ "message": message }).to_string();
    axum::response::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(AxumBody::from(body))
        .unwrap_or_default()
}

/// The query string's parameters, decoded as a browser form encodes them
/// (`+` is a space, `%XX` a byte; a malformed escape is kept as is), each
/// name with its values in order.
fn query_parameters(query: &str) -> HashMap<String, Vec<String>> {
    let mut map: HashMap<String, Vec<String>> = HashMap::new();
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        map.entry(name.into_owned()).or_default().push(value.into_owned());
    }
    map
}

fn to_axum(response: lambda_http::Response<Body>) -> axum::response::Response {
    let (parts, body) = response.into_parts();
    let body = match body {
        Body::Empty => AxumBody::empty(),
        Body::Text(text) => AxumBody::from(text),
        Body::Binary(bytes) => AxumBody::from(bytes),
        _ => AxumBody::empty(),
    };
    axum::response::Response::from_parts(parts, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(method: &str, path: &str) -> Route {
        Route { method: method.into(), path: path.into(), function: path.into() }
    }

    #[test]
    fn templates_capture_path_parameters_and_methods_must_match() {
        let routes = vec![route("POST", "/v1/runners/leases/{execution_id}/heartbeat"), route("GET", "/v1/health")];
        let (r, params) = match_route(&routes, "POST", "/v1/runners/leases/abc/heartbeat").unwrap();
        assert_eq!(r.path, "/v1/runners/leases/{execution_id}/heartbeat");
        assert_eq!(params["execution_id"], "abc");
        assert!(match_route(&routes, "GET", "/v1/runners/leases/abc/heartbeat").is_none());
        assert!(match_route(&routes, "GET", "/v1/health/").is_some());
        assert!(match_route(&routes, "GET", "/v1/healthz").is_none());
    }

    #[test]
    fn query_values_are_percent_decoded() {
        let query = query_parameters("q=a%20b+c&share=100%&q=2&&flag&na%6De=x");
        assert_eq!(query["q"], ["a b c", "2"]);
        assert_eq!(query["share"], ["100%"]);
        assert_eq!(query["flag"], [""]);
        assert_eq!(query["name"], ["x"]);
        assert_eq!(query.len(), 4);
    }
}
