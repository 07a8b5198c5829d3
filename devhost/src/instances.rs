//! The instances of one function, as Lambda runs them: an instance serves
//! one invocation at a time, so an invocation that comes while every
//! instance is busy starts a new one (a cold start: its own context, its own
//! clients), and an instance that finished serves the next.
//!
//! What this buys the local stack is AWS's retry quotas. The SDK's quota
//! (`baton_service::aws::retry_partition`) belongs to a client, and on Lambda
//! a client to one instance: seven runners long-polling the claim function
//! at once are seven instances, each retrying its own faults. With one
//! context a function, the dev host made them share one quota, which a 30 %
//! fault rate kept empty, so nearly every claim answered `503 store busy`
//! unretried, which AWS never does.

use std::ops::Deref;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use baton_localstack::faults::FaultPlan;
use baton_localstack::grants::Grants;
use baton_service::aws::AwsClients;
use baton_service::config::Config;
use baton_service::context::Context;

/// One function's instances: the idle ones, and what a cold start builds
/// a new one from.
pub struct Instances {
    config: Config,
    clients: AwsClients,
    plan: Arc<FaultPlan>,
    granted: Option<Arc<Grants>>,
    idle: Mutex<Vec<Context>>,
    started: AtomicUsize,
}

impl Instances {
    /// No instance yet: the first invocation starts one.
    pub fn new(config: Config, clients: AwsClients, plan: Arc<FaultPlan>, granted: Option<Arc<Grants>>) -> Self {
        Self { config, clients, plan, granted, idle: Mutex::default(), started: AtomicUsize::new(0) }
    }

    /// An instance for one invocation: the one that finished last, or a new
    /// one if every instance is busy. It is idle again when dropped, also
    /// when its invocation is abandoned (a dropped future), as Lambda reuses
    /// an instance whose invocation timed out.
    pub fn take(&self) -> Instance<'_> {
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let context = idle.unwrap_or_else(|| {
            self.started.fetch_add(1, Ordering::Relaxed);
            // Fresh clients: a retry quota and connections of its own.
            let clients = baton_localstack::function_clients(&self.clients, self.plan.clone(), self.granted.clone());
            Context::new(self.config.clone(), clients)
        });
        Instance { context: Some(context), home: self }
    }

    /// Instances started so far (Lambda's cold starts).
    pub fn started(&self) -> usize {
        self.started.load(Ordering::Relaxed)
    }
}

/// An instance serving one invocation; idle again when dropped.
pub struct Instance<'a> {
    context: Option<Context>,
    home: &'a Instances,
}

impl Deref for Instance<'_> {
    type Target = Context;

    fn deref(&self) -> &Context {
        // Taken out only in `drop`.
        self.context.as_ref().unwrap_or_else(|| unreachable!("an instance's context is there until it is dropped"))
    }
}

impl Drop for Instance<'_> {
    fn drop(&mut self) {
        if let Some(context) = self.context.take() {
            self.home.idle.lock().unwrap_or_else(|e| e.into_inner()).push(context);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Requests that every try of which is throttled: the tries one
    /// request made tell whether its client still had retries to spend.
    async fn tries_of_one_request(instance: &Context, plan: &FaultPlan) -> u64 {
        let before: u64 = plan.injected().values().sum();
        let answer = instance.clients.dynamodb().describe_table().table_name("baton").send().await;
        assert!(answer.is_err(), "every try is throttled");
        plan.injected().values().sum::<u64>() - before
    }

    async fn instances(plan: Arc<FaultPlan>) -> Instances {
        // Nothing listens there: every try is answered by the fault layer.
        let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new("us-east-1"))
            .endpoint_url("http://127.0.0.1:9")
            .credentials_provider(aws_sdk_dynamodb::config::Credentials::new("t", "t", None, None, "test"))
            // Retries without the seconds of backoff between them.
            .retry_config(
                aws_config::retry::RetryConfig::standard()
                    .with_initial_backoff(std::time::Duration::from_millis(1))
                    .with_max_backoff(std::time::Duration::from_millis(2)),
            )
            .load()
            .await;
        let env = HashMap::from(
            [("BATON_TABLE", "baton"), ("BATON_BUS", "baton")].map(|(k, v)| (k.to_string(), v.to_string())),
        );
        Instances::new(Config::from_map(&env).unwrap(), AwsClients::from_sdk_config(&sdk), plan, None)
    }

    use std::collections::HashMap;

    /// An invocation that comes while another is in flight runs in an
    /// instance of its own, whose retries the other's failures did not
    /// spend; one that comes after reuses the idle instance.
    #[tokio::test]
    async fn an_invocation_beside_a_busy_one_gets_an_instance_whose_retry_quota_is_its_own() {
        let plan = Arc::new(FaultPlan::parse("dynamodb:throttle=1").unwrap().unwrap());
        let instances = instances(plan.clone()).await;

        let busy = instances.take();
        let fresh_tries = tries_of_one_request(&busy, &plan).await;
        assert!(fresh_tries > 1, "a fresh instance retries a throttled request: {fresh_tries} tries");
        // A storm on the busy instance spends its quota: its requests stop
        // being retried.
        let mut spent = false;
        for _ in 0..500 {
            if tries_of_one_request(&busy, &plan).await == 1 {
                spent = true;
                break;
            }
        }
        assert!(spent, "the storm spent the busy instance's retry quota");

        let beside = instances.take();
        assert_eq!(
            tries_of_one_request(&beside, &plan).await,
            fresh_tries,
            "the instance beside retries as a fresh one does"
        );
        assert_eq!(instances.started(), 2, "an invocation beside a busy one starts an instance");

        drop(beside);
        drop(busy);
        let _next = instances.take();
        let _and_next = instances.take();
        assert_eq!(instances.started(), 2, "invocations after reuse the idle instances");
    }
}
