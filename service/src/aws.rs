//! The AWS clients, built once per cold start and borrowed by handlers.
//!
//! `BATON_AWS_ENDPOINT` points every client at one endpoint (the local moto
//! server); on AWS it is unset and the SDK's normal resolution applies.

use aws_config::{BehaviorVersion, Region};
use aws_sdk_dynamodb::config::retry::{RetryPartition, TokenBucket};

/// Tokens a second a client's retry quota regains on its own (see
/// [`retry_partition`]).
pub const RETRY_QUOTA_REFILL_PER_S: f32 = 10.0;

/// The retry quota of one client, under `name`.
///
/// The SDK stops retrying once failures have spent its quota (500 tokens;
/// a throttled retry costs 5, any other 14), and by default the quota comes
/// back only through requests that succeed at their first try. That suits
/// a long-lived client shared by many requests at once; a Lambda instance
/// serves one request at a time, so after one bad minute its quota is spent
/// and, while failures go on, every fault reaches its caller unretried long
/// after the burst that spent it (at a 30 % fault rate, a claim then
/// succeeds in about one try of forty). So Baton's clients also regain
/// [`RETRY_QUOTA_REFILL_PER_S`] tokens a second: a storm still stops the
/// retries (an instance never retries faster than that on average, about one
/// failed request retried a second and a half, or two throttled ones a
/// second), and an instance retries again seconds after, not never.
pub fn retry_partition(name: impl Into<String>) -> RetryPartition {
    let quota = TokenBucket::builder()
        .capacity(500)
        .retry_cost(14)
        .timeout_retry_cost(14)
        .throttling_retry_cost(5)
        .refill_rate(RETRY_QUOTA_REFILL_PER_S)
        .build();
    RetryPartition::custom(name.into()).token_bucket(quota).build()
}

#[derive(Clone, Debug)]
pub struct AwsClients {
    pub dynamodb: aws_sdk_dynamodb::Client,
    pub dynamodb_streams: aws_sdk_dynamodbstreams::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub eventbridge: aws_sdk_eventbridge::Client,
    pub sfn: aws_sdk_sfn::Client,
    pub s3: aws_sdk_s3::Client,
    /// API Gateway's management API (posts to runners' sockets); its
    /// endpoint is the deployment's, set by `push::Pusher`.
    pub push: aws_sdk_apigatewaymanagement::Client,
    /// Workspace secrets (`crate::usecases::secrets`).
    pub ssm: aws_sdk_ssm::Client,
}

impl AwsClients {
    /// Clients configured from the environment, honouring `BATON_AWS_ENDPOINT`.
    pub async fn from_env() -> Self {
        let endpoint = std::env::var("BATON_AWS_ENDPOINT").ok().filter(|e| !e.is_empty());
        match endpoint {
            Some(endpoint) => Self::local(&endpoint).await,
            None => Self::from_sdk_config(&aws_config::defaults(BehaviorVersion::latest()).load().await),
        }
    }

    /// Clients for a local emulator: fixed region and dummy credentials, so a
    /// developer machine needs no AWS profile.
    pub async fn local(endpoint: &str) -> Self {
        Self::from_sdk_config(&Self::local_sdk_config(endpoint).await)
    }

    /// As [`AwsClients::local`], with `interceptor` on every client: it sees
    /// each request and response (the benchmark counts requests this way).
    pub async fn local_with_interceptor(
        endpoint: &str,
        interceptor: aws_sdk_dynamodb::config::SharedInterceptor,
    ) -> Self {
        let config = Self::local_sdk_config(endpoint).await;
        Self {
            dynamodb: aws_sdk_dynamodb::Client::from_conf(
                aws_sdk_dynamodb::config::Builder::from(&config).interceptor(interceptor.clone()).build(),
            ),
            dynamodb_streams: aws_sdk_dynamodbstreams::Client::from_conf(
                aws_sdk_dynamodbstreams::config::Builder::from(&config).interceptor(interceptor.clone()).build(),
            ),
            sqs: aws_sdk_sqs::Client::from_conf(
                aws_sdk_sqs::config::Builder::from(&config).interceptor(interceptor.clone()).build(),
            ),
            eventbridge: aws_sdk_eventbridge::Client::from_conf(
                aws_sdk_eventbridge::config::Builder::from(&config).interceptor(interceptor.clone()).build(),
            ),
            sfn: aws_sdk_sfn::Client::from_conf(
                aws_sdk_sfn::config::Builder::from(&config).interceptor(interceptor.clone()).build(),
            ),
            s3: aws_sdk_s3::Client::from_conf(
                aws_sdk_s3::config::Builder::from(&config)
                    .force_path_style(true)
                    .interceptor(interceptor.clone())
                    .build(),
            ),
            push: aws_sdk_apigatewaymanagement::Client::from_conf(
                aws_sdk_apigatewaymanagement::config::Builder::from(&config).interceptor(interceptor.clone()).build(),
            ),
            ssm: aws_sdk_ssm::Client::from_conf(
                aws_sdk_ssm::config::Builder::from(&config).interceptor(interceptor).build(),
            ),
        }
    }

    async fn local_sdk_config(endpoint: &str) -> aws_config::SdkConfig {
        aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .endpoint_url(endpoint)
            .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                "testing",
                "testing",
                None,
                None,
                "baton-local",
            ))
            .load()
            .await
    }

    pub fn from_sdk_config(config: &aws_config::SdkConfig) -> Self {
        Self {
            dynamodb: aws_sdk_dynamodb::Client::from_conf(
                aws_sdk_dynamodb::config::Builder::from(config).retry_partition(retry_partition("dynamodb")).build(),
            ),
            dynamodb_streams: aws_sdk_dynamodbstreams::Client::from_conf(
                aws_sdk_dynamodbstreams::config::Builder::from(config)
                    .retry_partition(retry_partition("dynamodbstreams"))
                    .build(),
            ),
            sqs: aws_sdk_sqs::Client::from_conf(
                aws_sdk_sqs::config::Builder::from(config).retry_partition(retry_partition("sqs")).build(),
            ),
            eventbridge: aws_sdk_eventbridge::Client::from_conf(
                aws_sdk_eventbridge::config::Builder::from(config)
                    .retry_partition(retry_partition("eventbridge"))
                    .build(),
            ),
            sfn: aws_sdk_sfn::Client::from_conf(
                aws_sdk_sfn::config::Builder::from(config).retry_partition(retry_partition("sfn")).build(),
            ),
            // An emulator on 127.0.0.1 has no bucket subdomains: path-style there.
            s3: aws_sdk_s3::Client::from_conf(
                aws_sdk_s3::config::Builder::from(config)
                    .force_path_style(config.endpoint_url().is_some())
                    .retry_partition(retry_partition("s3"))
                    .build(),
            ),
            push: aws_sdk_apigatewaymanagement::Client::from_conf(
                aws_sdk_apigatewaymanagement::config::Builder::from(config)
                    .retry_partition(retry_partition("push"))
                    .build(),
            ),
            ssm: aws_sdk_ssm::Client::from_conf(
                aws_sdk_ssm::config::Builder::from(config).retry_partition(retry_partition("ssm")).build(),
            ),
        }
    }
}
