//! What every function holds from its cold start, and the one start-up path
//! of every function: JSON logs, configuration validated from the
//! environment (a bad value stops the cold start with its reason), the AWS
//! clients and the store, built once and borrowed by each invocation. One
//! helper per trigger kind hands the handler to the Lambda runtime; a
//! function's `main` is one call.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use aws_lambda_events::cloudwatch_events::CloudWatchEvent;
use aws_lambda_events::dynamodb::Event as StreamEvent;
use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use aws_lambda_events::streams::DynamoDbEventResponse;
pub use lambda_runtime::Error;
use lambda_runtime::{service_fn, LambdaEvent};

use crate::aws::AwsClients;
use crate::config::Config;
use baton_store::Store;

#[derive(Clone, Debug)]
pub struct Context {
    pub config: Config,
    pub clients: AwsClients,
    pub store: Store,
    /// Built on first use, as the clients are: most functions never nudge
    /// a runner or read a secret.
    push: Arc<OnceLock<crate::usecases::push::Pusher>>,
    secrets: Arc<OnceLock<crate::usecases::secrets::SecretStore>>,
}

impl Context {
    pub fn new(config: Config, clients: AwsClients) -> Self {
        let store = Store::new(clients.dynamodb().clone(), config.table_name.clone());
        Self { config, clients, store, push: Arc::default(), secrets: Arc::default() }
    }

    /// Nudges connected runners (a no-op without a push endpoint).
    pub fn push(&self) -> &crate::usecases::push::Pusher {
        self.push.get_or_init(|| crate::usecases::push::Pusher::new(&self.config.push, self.clients.push()))
    }

    /// Workspace and hook secrets (the secrets and hooks routes and the
    /// claim use them).
    pub fn secrets(&self) -> &crate::usecases::secrets::SecretStore {
        self.secrets.get_or_init(|| {
            crate::usecases::secrets::SecretStore::new(
                self.clients.ssm().clone(),
                &self.config.stage,
                self.config.secrets_kms_key_id.clone(),
            )
        })
    }

    /// A function's start-up: JSON logs, configuration validated from the
    /// environment (a bad value stops the cold start with its reason), clients.
    pub async fn from_env() -> Result<Self, crate::config::ConfigError> {
        baton_telemetry::logs::init();
        let config = crate::config::Config::from_env()?;
        Ok(Self::new(config, AwsClients::from_env().await))
    }

    /// The context of a cold start, for the life of the process.
    async fn for_process() -> Result<&'static Self, Error> {
        Ok(Box::leak(Box::new(Self::from_env().await?)))
    }
}

/// A scheduled invocation: when Lambda will stop it.
#[derive(Debug, Clone, Copy)]
pub struct Scheduled {
    pub deadline: SystemTime,
}

/// Serves an HTTP API function (API Gateway HTTP API, payload 2.0).
pub async fn serve_http<F, Fut>(handler: F) -> Result<(), Error>
where
    F: Fn(&'static Context, lambda_http::Request) -> Fut,
    Fut: Future<Output = lambda_http::Response<lambda_http::Body>> + Send,
{
    let context = Context::for_process().await?;
    let handler = &handler;
    lambda_http::run(lambda_http::service_fn(move |req| {
        let answered = handler(context, req);
        async move { Ok::<_, Error>(answered.await) }
    }))
    .await
}

/// Serves a WebSocket API route function (`$connect`, `$disconnect`).
pub async fn serve_websocket<F, Fut>(handler: F) -> Result<(), Error>
where
    F: Fn(&'static Context, aws_lambda_events::apigw::ApiGatewayWebsocketProxyRequest) -> Fut,
    Fut: Future<Output = aws_lambda_events::apigw::ApiGatewayProxyResponse>,
{
    let context = Context::for_process().await?;
    let handler = &handler;
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<aws_lambda_events::apigw::ApiGatewayWebsocketProxyRequest>| {
            let handled = handler(context, event.payload);
            async move { Ok::<_, Error>(handled.await) }
        },
    ))
    .await
}

/// Serves an SQS-triggered function that reports partial batch failures.
pub async fn serve_sqs<F, Fut>(handler: F) -> Result<(), Error>
where
    F: Fn(&'static Context, SqsEvent) -> Fut,
    Fut: Future<Output = SqsBatchResponse>,
{
    let context = Context::for_process().await?;
    let handler = &handler;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| {
        let handled = handler(context, event.payload);
        async move { Ok::<_, Error>(handled.await) }
    }))
    .await
}

/// Serves a function fed by the table's stream, reporting batch item failures.
pub async fn serve_stream<F, Fut>(handler: F) -> Result<(), Error>
where
    F: Fn(&'static Context, StreamEvent) -> Fut,
    Fut: Future<Output = DynamoDbEventResponse>,
{
    let context = Context::for_process().await?;
    let handler = &handler;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<StreamEvent>| {
        let handled = handler(context, event.payload);
        async move { Ok::<_, Error>(handled.await) }
    }))
    .await
}

/// Serves a function invoked with a JSON event of its own (the input an
/// EventBridge Scheduler schedule gives its target).
pub async fn serve_event<F, Fut, I, T, E>(handler: F) -> Result<(), Error>
where
    F: Fn(&'static Context, I) -> Fut,
    Fut: Future<Output = Result<T, E>>,
    I: serde::de::DeserializeOwned,
    T: serde::Serialize,
    E: std::error::Error + Send + Sync + 'static,
{
    let context = Context::for_process().await?;
    let handler = &handler;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<I>| {
        let handled = handler(context, event.payload);
        async move { handled.await.map_err(Error::from) }
    }))
    .await
}

/// Serves a scheduled function (an EventBridge schedule); the handler is
/// told the invocation's deadline so it can stop in time.
pub async fn serve_schedule<F, Fut, T, E>(handler: F) -> Result<(), Error>
where
    F: Fn(&'static Context, Scheduled) -> Fut,
    Fut: Future<Output = Result<T, E>>,
    T: serde::Serialize,
    E: std::error::Error + Send + Sync + 'static,
{
    let context = Context::for_process().await?;
    let handler = &handler;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<CloudWatchEvent>| {
        let handled = handler(context, Scheduled { deadline: event.context.deadline() });
        async move { handled.await.map_err(Error::from) }
    }))
    .await
}
