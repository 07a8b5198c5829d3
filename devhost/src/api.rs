//! API Gateway (HTTP API) in front of the functions: matches the route
//! templates of resources.json, fills path and query parameters the way API
//! Gateway does, and hands the very `lambda_http::Request` to the handler.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body as AxumBody;
use baton_shared::error::{ApiError, ErrorCode};
use baton_shared::resources::Route;
use lambda_http::{Body, RequestExt};

use crate::functions::Functions;

/// API Gateway's own payload limit; the handlers enforce the API's 1 MiB.
const GATEWAY_MAX_BODY: usize = 10 * 1024 * 1024;

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
}

impl Gateway {
    pub async fn serve(self: Arc<Self>, req: axum::extract::Request) -> axum::response::Response {
        let (parts, body) = req.into_parts();
        let Some((route, params)) = match_route(&self.routes, parts.method.as_str(), parts.uri.path()) else {
            return to_axum(baton_shared::http::error_response(&ApiError::new(ErrorCode::NotFound, "no such route")));
        };
        let bytes = match axum::body::to_bytes(body, GATEWAY_MAX_BODY).await {
            Ok(bytes) => bytes,
            Err(_) => {
                return to_axum(baton_shared::http::error_response(&ApiError::invalid_request("body too large")));
            }
        };
        let query: HashMap<String, Vec<String>> = parts
            .uri
            .query()
            .map(|q| {
                let mut map: HashMap<String, Vec<String>> = HashMap::new();
                for pair in q.split('&').filter(|p| !p.is_empty()) {
                    let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                    map.entry(percent_decode(k)).or_default().push(percent_decode(v));
                }
                map
            })
            .unwrap_or_default();
        let body = if bytes.is_empty() { Body::Empty } else { Body::Binary(bytes.to_vec()) };
        let request =
            http::Request::from_parts(parts, body).with_path_parameters(params).with_query_string_parameters(query);
        to_axum(self.functions.http(&route.function, request).await)
    }
}

fn percent_decode(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
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
        assert_eq!(percent_decode("a%20b+c"), "a b c");
        assert_eq!(percent_decode("100%"), "100%");
    }
}
