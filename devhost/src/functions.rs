//! Every function's handler, mounted in one process. The handlers are the
//! very code that runs on Lambda; only the trigger around them differs.

use std::time::{Duration, SystemTime};

use aws_lambda_events::cloudwatch_events::CloudWatchEvent;
use aws_lambda_events::dynamodb::Event as StreamEvent;
use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use aws_lambda_events::streams::DynamoDbEventResponse;
use baton_domain::error::ApiError;
use baton_domain::schedules::ScheduledTick;
use baton_service::aws::AwsClients;
use baton_service::config::Config;
use baton_service::context::Scheduled;
use lambda_http::{Body, Request, Response};

use std::collections::HashMap;
use std::sync::Arc;

use baton_localstack::faults::FaultPlan;
use baton_localstack::grants::{Grants, Permission};
use baton_localstack::resources::Resources;

use crate::instances::{Instance, Instances};
use crate::invocations::Invocations;

/// The variable the CDK stack sets only on functions with `push:post`.
pub const PUSH_ENDPOINT_ENV: &str = "BATON_PUSH_ENDPOINT";

/// The functions could not be started as their cold starts would be.
#[derive(Debug, thiserror::Error)]
pub enum FunctionsError {
    #[error(transparent)]
    Config(#[from] baton_service::config::ConfigError),
    #[error("infra/resources.json: {0}")]
    Grants(String),
}

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
    /// Each function's instances, as Lambda starts them: the configuration
    /// the CDK stack gives it and clients limited to its grants, an instance
    /// (clients, retry quotas) for each invocation in flight at once.
    instances: HashMap<String, Instances>,
    /// For a name resources.json does not declare (none is routed here; the
    /// start-up check reports such a trigger).
    fallback: Instances,
    /// Every invocation, counted as Lambda would.
    pub invocations: Invocations,
}

impl Functions {
    /// The functions of resources.json. With `grants`, each gets only what
    /// its permissions allow, as on AWS: clients that refuse the rest with
    /// `AccessDenied`, and the push endpoint only with `push:post` (the CDK
    /// stack sets `BATON_PUSH_ENDPOINT` on those alone). Without, every
    /// function may do everything (the emulator's own kindness).
    pub fn new(
        env: &HashMap<String, String>,
        clients: &AwsClients,
        plan: Arc<FaultPlan>,
        grants: bool,
    ) -> Result<Self, FunctionsError> {
        let resources = Resources::load();
        let fallback = Instances::new(Config::from_map(env)?, clients.clone(), plan.clone(), None);
        let mut instances = HashMap::new();
        // Each instance gets clients of its own even without grants: their
        // retry quotas are its own, as a Lambda instance's are
        // (`function_clients`).
        for function in &resources.functions {
            let (env, granted) = if grants {
                let granted = Grants::of(function).map_err(FunctionsError::Grants)?;
                let mut env = env.clone();
                if !granted.has(&Permission::PushPost) {
                    env.remove(PUSH_ENDPOINT_ENV);
                }
                (env, Some(Arc::new(granted)))
            } else {
                (env.clone(), None)
            };
            let function_instances = Instances::new(Config::from_map(&env)?, clients.clone(), plan.clone(), granted);
            instances.insert(function.name.clone(), function_instances);
        }
        Ok(Self { instances, fallback, invocations: Invocations::default() })
    }

    /// An instance of `function` for one invocation.
    pub fn instance(&self, function: &str) -> Instance<'_> {
        self.instances.get(function).unwrap_or(&self.fallback).take()
    }

    pub async fn http(&self, function: &str, req: Request) -> Response<Body> {
        // Boxed: the match over every handler is as big as the biggest
        // handler's future, and an invocation nests in others (a replayed
        // request, a nudge): on the heap, not on a worker's stack.
        let request_bytes = req.body().len();
        let route = Box::pin(self.route_http(function, req));
        let answer = |r: &Response<Body>| (Some(r.status().as_u16()), r.body().len());
        self.invocations.invoke_counted(function, 0, request_bytes, route, answer).await
    }

    async fn route_http(&self, function: &str, req: Request) -> Response<Body> {
        let instance = self.instance(function);
        let context = &*instance;
        match function {
            "health" => baton_health::handle(context, req).await,
            "create-run" => baton_create_run::handle(context, req).await,
            "runs-read" => baton_runs_read::handle(context, req).await,
            "cancel" => baton_cancel::handle(context, req).await,
            "approval" => baton_approval::handle(context, req).await,
            "job-events" => baton_job_events::handle(context, req).await,
            "rerun" => baton_rerun::handle(context, req).await,
            "registration-tokens" => baton_registration_tokens::handle(context, req).await,
            "register" => baton_register::handle(context, req).await,
            "claim" => baton_claim::handle(context, req).await,
            "heartbeat" => baton_heartbeat::handle(context, req).await,
            "complete" => baton_complete::handle(context, req).await,
            "logs" => baton_logs::handle(context, req).await,
            "provisioners" => baton_provisioners::handle(context, req).await,
            "secrets" => baton_secrets::handle(context, req).await,
            "variables" => baton_variables::handle(context, req).await,
            "pipelines" => baton_pipelines::handle(context, req).await,
            "hooks" => baton_hooks::handle(context, req).await,
            "artifacts" => baton_artifacts::handle(context, req).await,
            "caches" => baton_caches::handle(context, req).await,
            "provisioner-demand" => baton_provisioner_demand::handle(context, req).await,
            "provisioner-reservations" => baton_provisioner_reservations::handle(context, req).await,
            "provisioner-instances" => baton_provisioner_instances::handle(context, req).await,
            other => {
                tracing::error!(function = other, "route names a function without an HTTP handler");
                baton_service::http::error_response(&ApiError::internal())
            }
        }
    }

    pub async fn sqs(&self, function: &str, event: SqsEvent) -> Result<SqsBatchResponse, UnknownFunction> {
        let records = event.records.len();
        let route = Box::pin(self.route_sqs(function, event));
        self.invocations.invoke(function, records, route, |_| None).await
    }

    async fn route_sqs(&self, function: &str, event: SqsEvent) -> Result<SqsBatchResponse, UnknownFunction> {
        let instance = self.instance(function);
        let context = &*instance;
        match function {
            "enqueue" => Ok(baton_enqueue::handle(context, event).await),
            "reconcile" => Ok(baton_reconcile::handle(context, event).await),
            "external-events" => Ok(baton_external_events::handle(context, event).await),
            "run-requests" => Ok(baton_run_requests::handle(context, event).await),
            "schedule-sync" => Ok(baton_schedule_sync::handle(context, event).await),
            "abandoned-uploads" => Ok(baton_abandoned_uploads::handle(context, event).await),
            "orchestrator" => Ok(baton_orchestrator::handle(context, event).await),
            "start-attempt" => Ok(baton_start_attempt::handle(context, event).await),
            "job-outcomes" => Ok(baton_job_outcomes::handle(context, event).await),
            other => Err(UnknownFunction { trigger: "sqs", function: other.to_string() }),
        }
    }

    /// A route of the push socket (`$connect`, `$disconnect`).
    pub async fn websocket(
        &self,
        function: &str,
        event: aws_lambda_events::apigw::ApiGatewayWebsocketProxyRequest,
    ) -> Result<aws_lambda_events::apigw::ApiGatewayProxyResponse, UnknownFunction> {
        let instance = self.instance(function);
        let handler = async move {
            let context = &*instance;
            match function {
                "push-connect" => Ok(baton_push_connect::handle(context, event).await),
                other => Err(UnknownFunction { trigger: "websocket", function: other.to_string() }),
            }
        };
        self.invocations.invoke(function, 0, handler, |r| r.as_ref().ok().map(|r| r.status_code as u16)).await
    }

    pub async fn stream(&self, function: &str, event: StreamEvent) -> Result<DynamoDbEventResponse, UnknownFunction> {
        let records = event.records.len();
        let instance = self.instance(function);
        let handler = async move {
            let context = &*instance;
            match function {
                "relay" => Ok(baton_relay::handle(context, event).await),
                other => Err(UnknownFunction { trigger: "stream", function: other.to_string() }),
            }
        };
        self.invocations.invoke(function, records, handler, |_| None).await
    }

    /// A tick of a pipeline's schedule, delivered to its target as
    /// EventBridge Scheduler delivers it: the schedule's input, its time in.
    /// `Err` with the handler's failure, which the scheduler would retry.
    pub async fn schedule_tick(
        &self,
        function: &str,
        tick: ScheduledTick,
    ) -> Result<Result<(), String>, UnknownFunction> {
        let instance = self.instance(function);
        let handler = async move {
            let context = &*instance;
            match function {
                "schedules" => Ok(baton_schedules::handle(context, tick).await.map(|_| ()).map_err(|e| e.to_string())),
                other => Err(UnknownFunction { trigger: "scheduler", function: other.to_string() }),
            }
        };
        self.invocations.invoke(function, 0, handler, |_| None).await
    }

    pub async fn scheduled(&self, function: &str, _event: CloudWatchEvent) -> Result<(), UnknownFunction> {
        self.invocations.invoke(function, 0, self.route_scheduled(function), |_| None).await
    }

    async fn route_scheduled(&self, function: &str) -> Result<(), UnknownFunction> {
        let instance = self.instance(function);
        let context = &*instance;
        match function {
            "lease-reaper" => {
                let invocation = Scheduled { deadline: SystemTime::now() + SCHEDULED_TIMEOUT };
                if let Err(err) = baton_lease_reaper::handle(context, invocation).await {
                    tracing::error!(error = %err, "lease reaper failed; the next tick retries");
                }
                Ok(())
            }
            "demand-metrics" => {
                let invocation = Scheduled { deadline: SystemTime::now() + SCHEDULED_TIMEOUT };
                if let Err(err) = baton_demand_metrics::handle(context, invocation).await {
                    tracing::error!(error = %err, "demand metrics failed; the next tick publishes again");
                }
                Ok(())
            }
            other => Err(UnknownFunction { trigger: "schedule", function: other.to_string() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What in a function's handler makes work claimable or flags a lease,
    /// and then nudges runners (`baton_service::usecases::push`): itself, or
    /// through a use case that does: the outcome adoption
    /// (`usecases::outcomes`), which queues the jobs an outcome makes ready,
    /// and the orchestration's step (`usecases::orchestration::step`), which
    /// queues the jobs an attempt starts; both nudge their runners.
    const NUDGING: [&str; 5] =
        ["nudge_work", "nudge_cancel", "outcomes::adopt", "outcomes::{adopt", "orchestration::step::"];

    /// Every function that can make a job claimable or cancel a lease has
    /// `push:post`: without it the CDK stack gives it no push endpoint, and
    /// the work it makes claimable waits for the runners' safety poll (300 s).
    #[test]
    fn every_function_that_nudges_may_post_to_the_push_socket() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut nudging = Vec::new();
        for function in &Resources::load().functions {
            let source = std::fs::read_to_string(root.join("functions").join(&function.name).join("src/lib.rs"))
                .unwrap_or_else(|e| panic!("functions/{}/src/lib.rs: {e}", function.name));
            if NUDGING.iter().any(|call| source.contains(call)) {
                nudging.push(function.name.clone());
                let grants = Grants::of(function).unwrap();
                assert!(
                    grants.has(&Permission::PushPost),
                    "function {} nudges runners but has no push:post in infra/resources.json",
                    function.name
                );
            }
        }
        // The check saw the functions it is about.
        for expected in ["complete", "job-outcomes", "orchestrator", "enqueue", "reconcile"] {
            assert!(nudging.iter().any(|n| n == expected), "{expected} nudges: {nudging:?}");
        }
    }
}
