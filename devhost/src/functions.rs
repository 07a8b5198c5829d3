//! Every function's handler, mounted in one process. The handlers are the
//! very code that runs on Lambda; only the trigger around them differs.

use aws_lambda_events::cloudwatch_events::CloudWatchEvent;
use aws_lambda_events::dynamodb::Event as StreamEvent;
use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use aws_lambda_events::streams::DynamoDbEventResponse;
use baton_shared::aws::AwsClients;
use baton_shared::config::Config;
use baton_shared::error::ApiError;
use lambda_http::{Body, Request, Response};

/// A trigger named a function this host does not know (a resources.json
/// entry without a handler here is a bug the start-up check reports).
#[derive(Debug, thiserror::Error)]
#[error("no {trigger} handler for function {function}")]
pub struct UnknownFunction {
    pub trigger: &'static str,
    pub function: String,
}

pub struct Functions {
    health: baton_health::State,
    relay: baton_relay::State,
}

impl Functions {
    pub fn new(config: &Config, clients: &AwsClients) -> Self {
        Self {
            health: baton_health::State { config: config.clone(), clients: clients.clone() },
            relay: baton_relay::State { config: config.clone(), clients: clients.clone() },
        }
    }

    pub async fn http(&self, function: &str, req: Request) -> Response<Body> {
        match function {
            "health" => baton_health::handle(&self.health, req).await,
            other => {
                tracing::error!(function = other, "route names a function without an HTTP handler");
                baton_shared::http::error_response(&ApiError::internal())
            }
        }
    }

    pub async fn sqs(&self, function: &str, _event: SqsEvent) -> Result<SqsBatchResponse, UnknownFunction> {
        Err(UnknownFunction { trigger: "sqs", function: function.to_string() })
    }

    pub async fn stream(&self, function: &str, event: StreamEvent) -> Result<DynamoDbEventResponse, UnknownFunction> {
        match function {
            "relay" => Ok(baton_relay::handle(&self.relay, event).await),
            other => Err(UnknownFunction { trigger: "stream", function: other.to_string() }),
        }
    }

    pub async fn scheduled(&self, function: &str, _event: CloudWatchEvent) -> Result<(), UnknownFunction> {
        Err(UnknownFunction { trigger: "schedule", function: function.to_string() })
    }
}
