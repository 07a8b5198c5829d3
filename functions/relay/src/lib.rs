//! The outbox relay, fed by the table's stream. Replay-safe: a record relayed
//! twice publishes a fact with the same `event_id`, which consumers dedupe.

use aws_lambda_events::dynamodb::Event;
use aws_lambda_events::streams::DynamoDbEventResponse;
use baton_shared::aws::AwsClients;
use baton_shared::config::Config;
use baton_shared::facts::relay::{outbox_records, publish};

pub struct State {
    pub config: Config,
    pub clients: AwsClients,
}

pub async fn handle(state: &State, event: Event) -> DynamoDbEventResponse {
    let facts = outbox_records(&event);
    publish(&state.clients.eventbridge, &state.config.bus_name, &facts).await
}
