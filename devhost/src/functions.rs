//! Every function's handler, mounted in one process. The handlers are the
//! very code that runs on Lambda; only the trigger around them differs.

use std::time::{Duration, SystemTime};

use aws_lambda_events::cloudwatch_events::CloudWatchEvent;
use aws_lambda_events::dynamodb::Event as StreamEvent;
use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use aws_lambda_events::streams::DynamoDbEventResponse;
use baton_shared::aws::AwsClients;
use baton_shared::config::Config;
use baton_shared::context::{Context, Scheduled};
use baton_shared::error::ApiError;
use lambda_http::{Body, Request, Response};

use crate::invocations::Invocations;

/// A trigger named a function this host does not know (a resources.json
/// entry without a handler here is a bug the start-up check reports).
#[derive(Debug, thiserror::Error)]
#[error("no {trigger} handler for function {function}")]
pub struct UnknownFunction {
    pub trigger: &'static str,
    pub function: String,
}

/// How long the dev host lets a scheduled invocation run, as Lambda would
/// (the CDK stack's default function timeout, `functionTimeoutS`).
const SCHEDULED_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Functions {
    /// The one context every function is started with (config, clients, store).
    context: Context,
    /// Every invocation, counted as Lambda would.
    pub invocations: Invocations,
}

impl Functions {
    pub fn new(config: &Config, clients: &AwsClients) -> Self {
        Self { context: Context::new(config.clone(), clients.clone()), invocations: Invocations::default() }
    }

    pub async fn http(&self, function: &str, req: Request) -> Response<Body> {
        self.invocations.invoke(function, 0, self.route_http(function, req), |r| Some(r.status().as_u16())).await
    }

    async fn route_http(&self, function: &str, req: Request) -> Response<Body> {
        match function {
            "health" => baton_health::handle(&self.context, req).await,
            "create-run" => baton_create_run::handle(&self.context, req).await,
            "runs-read" => baton_runs_read::handle(&self.context, req).await,
            "cancel" => baton_cancel::handle(&self.context, req).await,
            "rerun" => baton_rerun::handle(&self.context, req).await,
            "registration-tokens" => baton_registration_tokens::handle(&self.context, req).await,
            "register" => baton_register::handle(&self.context, req).await,
            "claim" => baton_claim::handle(&self.context, req).await,
            "heartbeat" => baton_heartbeat::handle(&self.context, req).await,
            "complete" => baton_complete::handle(&self.context, req).await,
            "logs" => baton_logs::handle(&self.context, req).await,
            other => {
                tracing::error!(function = other, "route names a function without an HTTP handler");
                baton_shared::http::error_response(&ApiError::internal())
            }
        }
    }

    pub async fn sqs(&self, function: &str, event: SqsEvent) -> Result<SqsBatchResponse, UnknownFunction> {
        let records = event.records.len();
        self.invocations.invoke(function, records, self.route_sqs(function, event), |_| None).await
    }

    async fn route_sqs(&self, function: &str, event: SqsEvent) -> Result<SqsBatchResponse, UnknownFunction> {
        match function {
            "enqueue" => Ok(baton_enqueue::handle(&self.context, event).await),
            "reconcile" => Ok(baton_reconcile::handle(&self.context, event).await),
            "orchestrator" => Ok(baton_orchestrator::handle(&self.context, event).await),
            "start-attempt" => Ok(baton_start_attempt::handle(&self.context, event).await),
            "job-outcomes" => Ok(baton_job_outcomes::handle(&self.context, event).await),
            other => Err(UnknownFunction { trigger: "sqs", function: other.to_string() }),
        }
    }

    /// A route of the push socket (`$connect`, `$disconnect`).
    pub async fn websocket(
        &self,
        function: &str,
        event: aws_lambda_events::apigw::ApiGatewayWebsocketProxyRequest,
    ) -> Result<aws_lambda_events::apigw::ApiGatewayProxyResponse, UnknownFunction> {
        let handler = async move {
            match function {
                "push-connect" => Ok(baton_push_connect::handle(&self.context, event).await),
                other => Err(UnknownFunction { trigger: "websocket", function: other.to_string() }),
            }
        };
        self.invocations.invoke(function, 0, handler, |r| r.as_ref().ok().map(|r| r.status_code as u16)).await
    }

    pub async fn stream(&self, function: &str, event: StreamEvent) -> Result<DynamoDbEventResponse, UnknownFunction> {
        let records = event.records.len();
        let handler = async move {
            match function {
                "relay" => Ok(baton_relay::handle(&self.context, event).await),
                other => Err(UnknownFunction { trigger: "stream", function: other.to_string() }),
            }
        };
        self.invocations.invoke(function, records, handler, |_| None).await
    }

    pub async fn scheduled(&self, function: &str, _event: CloudWatchEvent) -> Result<(), UnknownFunction> {
        self.invocations.invoke(function, 0, self.route_scheduled(function), |_| None).await
    }

    async fn route_scheduled(&self, function: &str) -> Result<(), UnknownFunction> {
        match function {
            "lease-reaper" => {
                let invocation = Scheduled { deadline: SystemTime::now() + SCHEDULED_TIMEOUT };
                if let Err(err) = baton_lease_reaper::handle(&self.context, invocation).await {
                    tracing::error!(error = %err, "lease reaper failed; the next tick retries");
                }
                Ok(())
            }
            other => Err(UnknownFunction { trigger: "schedule", function: other.to_string() }),
        }
    }
}
