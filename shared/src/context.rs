//! What every function holds from its cold start: configuration, the AWS
//! clients and the store. Built once, borrowed by each invocation.

use crate::aws::AwsClients;
use crate::config::Config;
use crate::store::Store;

#[derive(Clone, Debug)]
pub struct Context {
    pub config: Config,
    pub clients: AwsClients,
    pub store: Store,
}

impl Context {
    pub fn new(config: Config, clients: AwsClients) -> Self {
        let store = Store::new(clients.dynamodb.clone(), config.table_name.clone());
        Self { config, clients, store }
    }

    /// A function's start-up: JSON logs, configuration validated from the
    /// environment (a bad value stops the cold start with its reason), clients.
    pub async fn from_env() -> Result<Self, crate::config::ConfigError> {
        crate::telemetry::init();
        let config = crate::config::Config::from_env()?;
        Ok(Self::new(config, AwsClients::from_env().await))
    }
}
