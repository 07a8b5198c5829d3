//! The AWS clients, each built on its first use by a function instance and
//! then kept for the life of the process, borrowed by handlers.
//!
//! A function builds only the clients its code asks for: the heartbeat
//! never builds (nor links) Step Functions, S3 or SSM, because nothing it
//! calls reaches their accessor. The configuration they are built from is
//! loaded once, at the cold start.
//!
//! `BATON_AWS_ENDPOINT` points every client at one endpoint (the local moto
//! server); on AWS it is unset and the SDK's normal resolution applies.

use std::sync::{Arc, OnceLock};

use aws_config::{BehaviorVersion, Region};
use aws_sdk_dynamodb::config::retry::{RetryPartition, TokenBucket};
use aws_sdk_dynamodb::config::{SharedHttpClient, SharedInterceptor};

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

/// How every client of one [`AwsClients`] is built: the SDK configuration
/// (region, credentials, endpoint, and the HTTP client, which the local
/// stack's fault layer replaces) and an interceptor seeing every request
/// (the benchmark counts requests with it).
#[derive(Debug)]
struct Recipe {
    sdk: aws_config::SdkConfig,
    interceptor: Option<SharedInterceptor>,
}

/// Builds one SDK's client from the recipe: the SDK's config builder from
/// the shared configuration, a retry quota of its own, the interceptor.
macro_rules! build_client {
    ($recipe:expr, $sdk:ident, $partition:literal $(, $extra:ident($arg:expr))*) => {{
        let recipe: &Recipe = $recipe;
        let mut builder = $sdk::config::Builder::from(&recipe.sdk).retry_partition(retry_partition($partition));
        if let Some(interceptor) = &recipe.interceptor {
            builder = builder.interceptor(interceptor.clone());
        }
        $sdk::Client::from_conf(builder $(.$extra($arg))* .build())
    }};
}

/// The AWS clients of one function instance (or, on the local stack, of one
/// simulated instance). Clones share the clients.
#[derive(Clone, Debug)]
pub struct AwsClients {
    recipe: Arc<Recipe>,
    clients: Arc<Clients>,
}

/// Each client, built from the recipe the first time it is asked for.
#[derive(Debug, Default)]
struct Clients {
    dynamodb: OnceLock<aws_sdk_dynamodb::Client>,
    dynamodb_streams: OnceLock<aws_sdk_dynamodbstreams::Client>,
    sqs: OnceLock<aws_sdk_sqs::Client>,
    eventbridge: OnceLock<aws_sdk_eventbridge::Client>,
    sfn: OnceLock<aws_sdk_sfn::Client>,
    s3: OnceLock<aws_sdk_s3::Client>,
    push: OnceLock<aws_sdk_apigatewaymanagement::Client>,
    ssm: OnceLock<aws_sdk_ssm::Client>,
    scheduler: OnceLock<aws_sdk_scheduler::Client>,
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
    pub async fn local_with_interceptor(endpoint: &str, interceptor: SharedInterceptor) -> Self {
        Self::with_recipe(Recipe { sdk: Self::local_sdk_config(endpoint).await, interceptor: Some(interceptor) })
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
        Self::with_recipe(Recipe { sdk: config.clone(), interceptor: None })
    }

    fn with_recipe(recipe: Recipe) -> Self {
        Self { recipe: Arc::new(recipe), clients: Arc::default() }
    }

    /// Clients of a new instance, as these but sending through `http` (the
    /// local stack's fault layer): built afresh, with retry quotas of their
    /// own.
    pub fn with_http_client(&self, http: SharedHttpClient) -> Self {
        Self::with_recipe(Recipe {
            sdk: self.recipe.sdk.to_builder().http_client(http).build(),
            interceptor: self.recipe.interceptor.clone(),
        })
    }

    pub fn dynamodb(&self) -> &aws_sdk_dynamodb::Client {
        self.clients.dynamodb.get_or_init(|| build_client!(&self.recipe, aws_sdk_dynamodb, "dynamodb"))
    }

    pub fn dynamodb_streams(&self) -> &aws_sdk_dynamodbstreams::Client {
        let recipe = &self.recipe;
        self.clients.dynamodb_streams.get_or_init(|| build_client!(recipe, aws_sdk_dynamodbstreams, "dynamodbstreams"))
    }

    pub fn sqs(&self) -> &aws_sdk_sqs::Client {
        self.clients.sqs.get_or_init(|| build_client!(&self.recipe, aws_sdk_sqs, "sqs"))
    }

    pub fn eventbridge(&self) -> &aws_sdk_eventbridge::Client {
        self.clients.eventbridge.get_or_init(|| build_client!(&self.recipe, aws_sdk_eventbridge, "eventbridge"))
    }

    pub fn sfn(&self) -> &aws_sdk_sfn::Client {
        self.clients.sfn.get_or_init(|| build_client!(&self.recipe, aws_sdk_sfn, "sfn"))
    }

    pub fn s3(&self) -> &aws_sdk_s3::Client {
        // An emulator on 127.0.0.1 has no bucket subdomains: path-style there.
        let path_style = self.recipe.sdk.endpoint_url().is_some();
        self.clients.s3.get_or_init(|| build_client!(&self.recipe, aws_sdk_s3, "s3", force_path_style(path_style)))
    }

    /// API Gateway's management API (posts to runners' sockets); its
    /// endpoint is the deployment's, set by `push::Pusher`.
    pub fn push(&self) -> &aws_sdk_apigatewaymanagement::Client {
        self.clients.push.get_or_init(|| build_client!(&self.recipe, aws_sdk_apigatewaymanagement, "push"))
    }

    /// Workspace secrets (`crate::usecases::secrets`).
    pub fn ssm(&self) -> &aws_sdk_ssm::Client {
        self.clients.ssm.get_or_init(|| build_client!(&self.recipe, aws_sdk_ssm, "ssm"))
    }

    /// Pipelines' schedules on EventBridge Scheduler (`crate::usecases::schedules`).
    pub fn scheduler(&self) -> &aws_sdk_scheduler::Client {
        self.clients.scheduler.get_or_init(|| build_client!(&self.recipe, aws_sdk_scheduler, "scheduler"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clients() -> AwsClients {
        let sdk = aws_config::SdkConfig::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .build();
        AwsClients::from_sdk_config(&sdk)
    }

    /// A function builds only what it asks for: the heartbeat's instance
    /// holds a DynamoDB client and nothing else.
    #[test]
    fn a_client_is_built_on_its_first_use_and_shared_by_the_clones() {
        let clients = clients();
        let handed_out = clients.clone();
        assert!(clients.clients.dynamodb.get().is_none());
        handed_out.dynamodb();
        assert!(clients.clients.dynamodb.get().is_some(), "a clone builds the client for all");
        let built = [
            clients.clients.dynamodb_streams.get().is_some(),
            clients.clients.sqs.get().is_some(),
            clients.clients.eventbridge.get().is_some(),
            clients.clients.sfn.get().is_some(),
            clients.clients.s3.get().is_some(),
            clients.clients.push.get().is_some(),
            clients.clients.ssm.get().is_some(),
            clients.clients.scheduler.get().is_some(),
        ];
        assert_eq!(built, [false; 8], "no other client is built");
    }

    /// The local stack's fault layer gives each simulated instance clients
    /// of its own: they are built afresh, not shared with the original.
    #[test]
    fn clients_with_another_http_client_share_nothing_built() {
        let clients = clients();
        clients.sqs();
        let http = aws_smithy_http_client::Builder::new().build_http();
        let instance = clients.with_http_client(http);
        assert!(instance.clients.sqs.get().is_none());
        assert!(instance.sqs().config().http_client().is_some());
    }
}
