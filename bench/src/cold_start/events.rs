//! The first event each function gets, one per trigger kind, shaped as
//! that trigger delivers it, and the names Lambda would give the function.

use std::collections::HashMap;

use aws_lambda_events::apigw::{
    ApiGatewayV2httpRequest, ApiGatewayV2httpRequestContext, ApiGatewayV2httpRequestContextHttpDescription,
};
use aws_lambda_events::cloudwatch_events::CloudWatchEvent;
use aws_lambda_events::dynamodb::Event as StreamEvent;
use aws_lambda_events::sqs::SqsEvent;
use axum::http::{HeaderMap, HeaderValue, Method};
use baton_localstack::resources::{Function, Resources, Trigger};
use chrono::SubsecRound;
use serde::Serialize;

/// A placeholder account for ARNs; nothing resolves it.
const ACCOUNT: &str = "123456789012";

pub(super) fn function_name(function: &str) -> String {
    format!("baton-bench-{function}")
}

pub(super) fn function_arn(function: &str) -> String {
    format!("arn:aws:lambda:us-east-1:{ACCOUNT}:function:{}", function_name(function))
}

/// The first event a function gets, one per trigger kind, each one the
/// function handles fully (so the figure includes a real handler pass, not a
/// deserialization failure): an HTTP function gets an API Gateway HTTP API
/// (payload v2.0) request for its first route, without credentials (a 401 is
/// a handled request, and needs no data); queue and stream functions get an
/// empty batch; the scheduled function gets EventBridge's scheduled event.
/// Each is built from the `aws_lambda_events` type the runtime reads it into.
pub(super) fn first_event(resources: &Resources, function: &Function) -> serde_json::Value {
    let now = chrono::Utc::now();
    match function.trigger {
        Trigger::Http => {
            let (method, template) = resources
                .routes
                .iter()
                .find(|r| r.function == function.name)
                .map_or(("GET", "/"), |r| (r.method.as_str(), r.path.as_str()));
            http_event(method, template, now)
        }
        Trigger::Sqs => to_json(&SqsEvent::default()),
        Trigger::Stream => to_json(&StreamEvent::default()),
        // A `$connect` without a token: refused with 401, a handled request.
        Trigger::Websocket => {
            let mut event = aws_lambda_events::apigw::ApiGatewayWebsocketProxyRequest::default();
            event.request_context.route_key = Some("$connect".into());
            event.request_context.connection_id = Some("bench".into());
            to_json(&event)
        }
        // A tick of a pipeline that does not exist: read, dropped.
        Trigger::Scheduler => to_json(&baton_domain::schedules::ScheduledTick {
            workspace_id: "bench".into(),
            pipeline: "bench".into(),
            index: 0,
            cron: "* * * * *".into(),
            scheduled_time: baton_domain::time::format(now.trunc_subsecs(0)),
        }),
        Trigger::Schedule => {
            let mut event = CloudWatchEvent::<serde_json::Value>::default();
            event.version = Some("0".into());
            event.id = Some(uuid::Uuid::new_v4().to_string());
            event.detail_type = Some("Scheduled Event".into());
            event.source = Some("aws.events".into());
            event.account_id = Some(ACCOUNT.into());
            // EventBridge's times are to the second.
            event.time = now.trunc_subsecs(0);
            event.region = Some("us-east-1".into());
            event.resources =
                vec![format!("arn:aws:events:us-east-1:{ACCOUNT}:rule/{}", function_name(&function.name))];
            event.detail = Some(serde_json::json!({}));
            to_json(&event)
        }
    }
}

fn to_json(event: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(event).expect("a Lambda event serializes to JSON")
}

/// An API Gateway HTTP API (payload format 2.0) request for `method
/// template`, with every `{param}` filled in (`ws` with a workspace name,
/// the others with an id).
fn http_event(method: &str, template: &str, now: chrono::DateTime<chrono::Utc>) -> serde_json::Value {
    let method = Method::from_bytes(method.as_bytes()).expect("routes in resources.json have HTTP methods");
    let mut path_parameters = HashMap::new();
    let path = template
        .split('/')
        .map(|segment| match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some(name) => {
                let value = if name == "ws" { "bench".to_string() } else { uuid::Uuid::now_v7().to_string() };
                path_parameters.insert(name.to_string(), value.clone());
                value
            }
            None => segment.to_string(),
        })
        .collect::<Vec<_>>()
        .join("/");
    let route_key = format!("{method} {template}");
    let has_body = method != Method::GET && method != Method::DELETE;
    let mut headers = HeaderMap::new();
    for (name, value) in [
        ("accept", "application/json"),
        ("host", "bench.execute-api.us-east-1.amazonaws.com"),
        ("user-agent", "baton-bench"),
        ("x-amzn-trace-id", "Root=1-00000000-000000000000000000000000"),
        ("x-forwarded-for", "127.0.0.1"),
        ("x-forwarded-port", "443"),
        ("x-forwarded-proto", "https"),
        ("content-length", if has_body { "2" } else { "0" }),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    if has_body {
        headers.insert("content-type", HeaderValue::from_static("application/json"));
    }

    let mut http = ApiGatewayV2httpRequestContextHttpDescription::default();
    http.method = method;
    http.path = Some(path.clone());
    http.protocol = Some("HTTP/1.1".into());
    http.source_ip = Some("127.0.0.1".into());
    http.user_agent = Some("baton-bench".into());
    let mut context = ApiGatewayV2httpRequestContext::default();
    context.account_id = Some(ACCOUNT.into());
    context.apiid = Some("bench".into());
    context.domain_name = Some("bench.execute-api.us-east-1.amazonaws.com".into());
    context.domain_prefix = Some("bench".into());
    context.http = http;
    context.request_id = Some(uuid::Uuid::new_v4().to_string());
    context.route_key = Some(route_key.clone());
    context.stage = Some("$default".into());
    context.time = Some(now.format("%d/%b/%Y:%H:%M:%S +0000").to_string());
    context.time_epoch = now.timestamp_millis();

    let mut request = ApiGatewayV2httpRequest::default();
    request.version = Some("2.0".into());
    request.route_key = Some(route_key);
    request.raw_path = Some(path);
    request.raw_query_string = Some(String::new());
    request.headers = headers;
    request.path_parameters = path_parameters;
    request.request_context = context;
    request.body = has_body.then(|| "{}".to_string());
    request.is_base64_encoded = false;
    to_json(&request)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_first_event_has_the_shape_its_trigger_delivers() {
        let resources = Resources::load();
        for function in &resources.functions {
            let event = first_event(&resources, function);
            let parsed = match function.trigger {
                Trigger::Http => serde_json::from_value::<ApiGatewayV2httpRequest>(event.clone()).map(|r| {
                    assert_eq!(r.version.as_deref(), Some("2.0"));
                    assert!(r.raw_path.as_deref().is_some_and(|p| p.starts_with("/v1/")), "{event}");
                    assert!(!r.raw_path.as_deref().unwrap_or_default().contains('{'), "{event}");
                    let route = resources.routes.iter().find(|r| r.function == function.name).unwrap();
                    assert_eq!(r.request_context.http.method.as_str(), route.method, "{event}");
                }),
                Trigger::Sqs => serde_json::from_value::<SqsEvent>(event.clone()).map(|_| ()),
                Trigger::Stream => serde_json::from_value::<StreamEvent>(event.clone()).map(|_| ()),
                Trigger::Schedule => serde_json::from_value::<CloudWatchEvent>(event.clone()).map(|e| {
                    assert_eq!(e.detail_type.as_deref(), Some("Scheduled Event"));
                }),
                Trigger::Scheduler => {
                    serde_json::from_value::<baton_domain::schedules::ScheduledTick>(event.clone()).map(|_| ())
                }
                Trigger::Websocket => {
                    serde_json::from_value::<aws_lambda_events::apigw::ApiGatewayWebsocketProxyRequest>(event.clone())
                        .map(|e| assert_eq!(e.request_context.route_key.as_deref(), Some("$connect")))
                }
            };
            assert!(parsed.is_ok(), "{}: {parsed:?}\n{event:#}", function.name);
        }
    }

    #[test]
    fn http_events_fill_path_parameters() {
        let event = http_event("POST", "/v1/workspaces/{ws}/runs/{run_id}/cancel", chrono::Utc::now());
        let run_id = event["pathParameters"]["run_id"].as_str().unwrap();
        assert_eq!(event["pathParameters"]["ws"], "bench");
        assert_eq!(event["rawPath"], format!("/v1/workspaces/bench/runs/{run_id}/cancel"));
        assert_eq!(event["requestContext"]["http"]["method"], "POST");
        assert_eq!(event["routeKey"], "POST /v1/workspaces/{ws}/runs/{run_id}/cancel");
        assert_eq!(event["body"], "{}");
        let health = http_event("GET", "/v1/health", chrono::Utc::now());
        assert!(health.get("pathParameters").is_none() && health.get("body").is_none());
    }
}
