//! The dev host: every Baton function in one process against the local
//! stack. It replaces only the triggers (API Gateway, SQS and DynamoDB Streams
//! event-source mappings, EventBridge schedules); the handlers are the ones
//! that run on Lambda.

pub mod api;
pub mod console;
pub mod contract;
pub mod functions;
pub mod instances;
pub mod invocations;
pub mod push;
pub mod schedule;
pub mod sqs;
pub mod stream;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use baton_localstack::faults::FaultPlan;
use baton_localstack::provision::Provisioned;
use baton_localstack::resources::{Resources, Trigger};
use baton_service::aws::AwsClients;
use baton_service::config::Config;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::functions::Functions;

/// Receives the stop signal.
pub type Shutdown = watch::Receiver<()>;

/// How the dev host drives its triggers.
#[derive(Clone)]
pub struct HostOptions {
    /// Where the API listens (port 0: any free port).
    pub api_addr: SocketAddr,
    /// How soon a message a function failed becomes visible again
    /// (`BATON_DEV_RETRY_DELAY_S`, default 1 s; AWS waits the visibility timeout).
    pub sqs_retry_delay: Duration,
    /// Pause between stream reads when the stream is idle (default 100 ms).
    pub stream_idle_delay: Duration,
    /// SQS handlers mounted in addition to Baton's functions, by function
    /// name (tests mount probe subscribers this way).
    pub extra_sqs_functions: HashMap<String, sqs::SqsHandler>,
    /// AWS's failures, injected into every AWS request the functions make
    /// (`baton_localstack::faults`); `None`: the emulator as it is.
    pub faults: Option<Arc<FaultPlan>>,
    /// Serve the runners' push socket (default on; `BATON_DEV_PUSH=0` turns
    /// it off, and runners long-poll as before push existed).
    pub push: bool,
    /// Give each function only what its grants in resources.json allow, as
    /// IAM does on AWS (default on; `BATON_DEV_GRANTS=0` hands every
    /// function every capability, as the emulator alone would).
    pub grants: bool,
    /// How long the gateway waits for a function before answering 504 while
    /// the invocation goes on (default 30 s, API Gateway's).
    pub integration_timeout: Duration,
    /// While set, the API is down: every request is answered API Gateway's
    /// 503 without reaching a function, as in a regional outage (a test
    /// holds the switch; nothing sets it otherwise).
    pub outage: Arc<std::sync::atomic::AtomicBool>,
    /// Routes (their paths as in resources.json) whose every answer is lost
    /// while listed: the function runs to its end, the client gets API
    /// Gateway's 504 (`lost` on one route rather than a whole function's;
    /// a test holds the list, nothing sets it otherwise).
    pub answers_lost: Arc<std::sync::Mutex<Vec<String>>>,
    /// The built web console (`web/dist`), served at `/` beside the API as
    /// CloudFront serves it on AWS: same origin, so the console needs no
    /// CORS. `None`: the API alone.
    pub console_dir: Option<std::path::PathBuf>,
}

impl Default for HostOptions {
    fn default() -> Self {
        Self {
            api_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            sqs_retry_delay: Duration::from_secs(1),
            stream_idle_delay: Duration::from_millis(100),
            extra_sqs_functions: HashMap::new(),
            faults: None,
            push: true,
            grants: true,
            integration_timeout: api::INTEGRATION_TIMEOUT,
            outage: Arc::default(),
            answers_lost: Arc::default(),
            console_dir: None,
        }
    }
}

/// The configuration variables a function gets on Lambda, for this stack:
/// the resource names, then `overrides` (timings, the admin token, …).
pub fn function_env(provisioned: &Provisioned, overrides: &HashMap<String, String>) -> HashMap<String, String> {
    let mut env = HashMap::from([
        ("BATON_TABLE".to_string(), provisioned.table.clone()),
        ("BATON_BUS".to_string(), provisioned.bus.clone()),
    ]);
    env.extend(provisioned.buckets.iter().map(|(var, name)| (var.clone(), name.clone())));
    env.extend(provisioned.scheduler.iter().map(|(var, value)| (var.clone(), value.clone())));
    if let Some(arn) = provisioned.state_machines.get("run-attempt") {
        env.insert("BATON_RUN_STATE_MACHINE_ARN".into(), arn.clone());
    }
    env.extend(overrides.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

/// A running dev host; dropping it stops every trigger.
pub struct DevHost {
    pub api_url: String,
    pub config: Config,
    /// What each function was invoked for so far.
    pub invocations: invocations::Invocations,
    /// The runners' push socket, when served.
    pub push: Option<Arc<push::PushGateway>>,
    stop: watch::Sender<()>,
    tasks: Vec<JoinHandle<()>>,
}

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Config(#[from] baton_service::config::ConfigError),
    #[error("{0}")]
    Start(String),
}

impl DevHost {
    pub async fn start(
        clients: &AwsClients,
        provisioned: &Provisioned,
        env: &HashMap<String, String>,
        options: HostOptions,
    ) -> Result<Self, HostError> {
        // The listener comes first: the push socket's addresses are its.
        let listener = tokio::net::TcpListener::bind(options.api_addr)
            .await
            .map_err(|e| HostError::Start(format!("binding {}: {e}", options.api_addr)))?;
        let addr = listener.local_addr().map_err(|e| HostError::Start(e.to_string()))?;
        let mut env = env.clone();
        if options.push {
            env.entry("BATON_PUSH_URL".into()).or_insert_with(|| format!("ws://{addr}{}", push::PUSH_PATH));
            env.entry(functions::PUSH_ENDPOINT_ENV.into())
                .or_insert_with(|| format!("http://{addr}{}", push::PUSH_PATH));
        }
        let config = Config::from_map(&env)?;
        if let Some(token) = &config.bootstrap_admin_token {
            // As an operator would with a first deploy: the admin token's hash
            // is stored like any other operator token; the secret never is.
            let store = baton_store::Store::new(clients.dynamodb().clone(), config.table_name.clone());
            // A stack whose table is unreachable still starts (its health
            // check says what is wrong); the token is simply not usable yet.
            if let Err(err) = store.put_operator_token(token, None, Some("bootstrap admin")).await {
                tracing::warn!(error = %err, "the admin token could not be stored");
            }
        }
        let resources = Resources::load();
        // The functions' requests meet AWS's limits always, and faults when
        // planned (moto enforces neither).
        let plan = options.faults.clone().unwrap_or_else(|| Arc::new(FaultPlan::none()));
        let functions =
            Arc::new(Functions::new(&env, clients, plan, options.grants).map_err(|e| HostError::Start(e.to_string()))?);
        let (stop, shutdown) = watch::channel(());
        let mut tasks = Vec::new();

        let gateway = Arc::new(api::Gateway {
            routes: provisioned.plan.routes.clone(),
            functions: functions.clone(),
            faults: options.faults.clone(),
            contract: Arc::new(
                contract::Contract::from_document()
                    .map_err(|e| HostError::Start(format!("the OpenAPI document: {e}")))?,
            ),
            integration_timeout: options.integration_timeout,
            outage: options.outage.clone(),
            answers_lost: options.answers_lost.clone(),
        });
        let push_gateway = options.push.then(|| {
            Arc::new(push::PushGateway::new(
                functions.clone(),
                resources.push.function.clone(),
                resources.push.keepalive_action.clone(),
            ))
        });
        let console = options.console_dir.as_ref().map(|dir| console::service(dir));
        let mut app = axum::Router::new().fallback(move |req: axum::extract::Request| {
            let (gateway, console) = (gateway.clone(), console.clone());
            async move {
                match console {
                    Some(console) if console::serves(&req) => console::serve(console, req).await,
                    _ => gateway.serve(req).await,
                }
            }
        });
        if let Some(push_gateway) = &push_gateway {
            app = app.merge(push_gateway.clone().router());
        }
        let mut api_shutdown = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = api_shutdown.changed().await;
                })
                .await;
            if let Err(err) = served {
                tracing::error!(error = %err, "API server stopped");
            }
        }));

        for queue in &provisioned.plan.queues {
            let Some(addresses) = provisioned.queues.get(&queue.logical) else {
                return Err(HostError::Start(format!("queue {} was not provisioned", queue.logical)));
            };
            let function = queue.function.clone();
            let mounted = functions.clone();
            let handler: sqs::SqsHandler = match options.extra_sqs_functions.get(&queue.function) {
                Some(extra) => extra.clone(),
                None => Arc::new(move |event| {
                    let function = function.clone();
                    let mounted = mounted.clone();
                    Box::pin(async move { mounted.sqs(&function, event).await.map_err(|e| e.to_string()) })
                }),
            };
            let poller = Arc::new(sqs::QueuePoller {
                function: queue.function.clone(),
                handler,
                queue_url: addresses.url.clone(),
                queue_arn: addresses.arn.clone(),
                batch_size: queue.batch_size as i32,
                retry_delay: options.sqs_retry_delay,
                sqs: clients.sqs().clone(),
                faults: options.faults.clone(),
                sent: std::sync::Mutex::default(),
            });
            tasks.push(tokio::spawn(poller.run(shutdown.clone())));
        }

        for function in resources.functions.iter().filter(|f| f.trigger == Trigger::Stream) {
            let poller = stream::StreamPoller {
                function: function.name.clone(),
                stream_arn: provisioned.stream_arn.clone(),
                batch_size: function.batch_size.unwrap_or(100) as i32,
                idle_delay: options.stream_idle_delay,
                retry_delay: options.sqs_retry_delay,
                streams: clients.dynamodb_streams().clone(),
                functions: functions.clone(),
                faults: options.faults.clone(),
            };
            tasks.push(tokio::spawn(poller.run(shutdown.clone())));
        }

        for schedule in &provisioned.plan.schedules {
            let period = config.schedule_period(&schedule.period_config).ok_or_else(|| {
                HostError::Start(format!(
                    "schedule {}: {} is not a period of the configuration",
                    schedule.name, schedule.period_config
                ))
            })?;
            let ticker = schedule::Ticker { function: schedule.function.clone(), period, functions: functions.clone() };
            tasks.push(tokio::spawn(ticker.run(shutdown.clone())));
        }
        // Pipelines' schedules: the emulator keeps them, the host fires them.
        let firer = schedule::SchedulerFirer {
            group: provisioned.plan.scheduler.group.clone(),
            target: resources.scheduler.target.clone(),
            period: config.schedules_period,
            scheduler: clients.scheduler().clone(),
            functions: functions.clone(),
        };
        tasks.push(tokio::spawn(firer.run(shutdown.clone())));

        Ok(Self {
            api_url: format!("http://{addr}"),
            config,
            invocations: functions.invocations.clone(),
            push: push_gateway,
            stop,
            tasks,
        })
    }

    /// Stops every trigger and waits for in-flight work to finish.
    pub async fn stop(mut self) {
        let _ = self.stop.send(());
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
    }
}

impl DevHost {
    /// Stops every task where it stands, as a crash would: invocations in
    /// flight are dropped, nothing is drained.
    pub fn abort(&mut self) {
        let _ = self.stop.send(());
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Drop for DevHost {
    fn drop(&mut self) {
        self.abort();
    }
}
