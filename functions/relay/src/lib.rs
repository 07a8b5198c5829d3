//! The outbox relay, fed by the table's stream. Replay-safe: a record relayed
//! twice publishes a fact with the same `event_id`, which consumers dedupe.

use aws_lambda_events::dynamodb::Event;
use aws_lambda_events::streams::DynamoDbEventResponse;
use baton_service::context::Context;
use baton_service::facts::relay::{outbox_records, publish};

pub async fn handle(context: &Context, event: Event) -> DynamoDbEventResponse {
    let facts = outbox_records(&event);
    publish(context.clients.eventbridge(), &context.config.bus_name, &facts).await
}
