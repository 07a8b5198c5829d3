//! Runners' push connections: one small item per session in its
//! workspace's partition (`PUSH#<ws>`, sort key the session id), holding the
//! API Gateway connection id and the runner's labels. A nudge reads the
//! partition once and picks the runners that fit; a cancel reads one item.
//!
//! Nothing here is a source of truth: a connection item that outlived its
//! socket costs one failed post (`GoneException`, then the item is deleted),
//! and items expire by TTL if nobody ever posts to them.

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::keys::push_connections_pk;
use super::{from_item, n, s, to_item, Store};
use crate::error::StoreError;
use crate::ItemHead;

const ITEM_TYPE: &str = "push_connection";

/// Items read a page (DynamoDB stops a page at 1 MB anyway; a connection
/// item is about 200 bytes).
pub const CONNECTIONS_PAGE: i32 = 1_000;

/// At most this many pages are read for one nudge: 10,000 connection items,
/// live or not yet pruned. A workspace with more nudges those; the others'
/// safety polls find the work.
pub const MAX_CONNECTION_PAGES: usize = 10;

/// At most this many expired items are deleted by one read (the next read
/// goes on): pruning is a clean-up, never what holds a nudge up.
pub const MAX_PRUNED_PER_READ: usize = 25;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PushConnection {
    #[serde(flatten)]
    pub head: ItemHead,
    pub session_id: Uuid,
    pub connection_id: String,
    pub labels: Vec<String>,
    #[serde(with = "baton_domain::time::stored")]
    pub connected_at: DateTime<Utc>,
    /// Epoch seconds: DynamoDB deletes the item some time after.
    pub ttl: i64,
}

impl PushConnection {
    pub fn new(
        workspace_id: &str,
        session_id: Uuid,
        connection_id: &str,
        labels: &[String],
        now: DateTime<Utc>,
        ttl: chrono::Duration,
    ) -> Self {
        Self {
            head: ItemHead::new(push_connections_pk(workspace_id), session_id.to_string(), ITEM_TYPE),
            session_id,
            connection_id: connection_id.into(),
            labels: labels.to_vec(),
            connected_at: now,
            ttl: (now + ttl).timestamp(),
        }
    }
}

impl Store {
    /// Records a session's socket; a reconnect replaces the session's
    /// earlier one (a runner holds one socket).
    pub async fn put_push_connection(&self, connection: &PushConnection) -> Result<(), StoreError> {
        self.client.put_item().table_name(&self.table).set_item(Some(to_item(connection)?)).send().await?;
        Ok(())
    }

    /// The workspace's connections that have not expired, every page of
    /// them. TTL deletion lags (days on AWS; never on the emulator), so the
    /// partition holds expired items too: they are read, skipped and
    /// deleted as they are met (a few a read), instead of being filtered
    /// out after the page's limit was spent on them, which left live
    /// runners past the first 1,000 items of a partition full of dead ones
    /// never nudged.
    pub async fn push_connections(
        &self,
        workspace_id: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<PushConnection>, StoreError> {
        let mut live = Vec::new();
        let mut expired = Vec::new();
        let mut start = None;
        for _ in 0..MAX_CONNECTION_PAGES {
            let out = self
                .query_partition(push_connections_pk(workspace_id))
                .limit(CONNECTIONS_PAGE)
                .set_exclusive_start_key(start.take())
                .send()
                .await?;
            for item in out.items.unwrap_or_default() {
                let connection: PushConnection = from_item(item)?;
                if connection.ttl > now.timestamp() {
                    live.push(connection);
                } else {
                    expired.push(connection);
                }
            }
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
        for connection in expired.iter().take(MAX_PRUNED_PER_READ) {
            // Only while it is still that expired item: a reconnect of the
            // session since replaced it with a live one.
            let delete = self
                .client
                .delete_item()
                .table_name(&self.table)
                .key("pk", s(&connection.head.pk))
                .key("sk", s(&connection.head.sk))
                .condition_expression("connection_id = :c AND #ttl <= :now")
                .expression_attribute_names("#ttl", "ttl")
                .expression_attribute_values(":c", AttributeValue::S(connection.connection_id.clone()))
                .expression_attribute_values(":now", n(now.timestamp()));
            if let Err(err) = super::condition_may_fail(|| delete.clone().send()).await {
                tracing::debug!(error = %err, "an expired push connection was not pruned; a later read will");
            }
        }
        Ok(live)
    }

    /// The socket of one session, if it has one.
    pub async fn push_connection(
        &self,
        workspace_id: &str,
        session_id: Uuid,
    ) -> Result<Option<PushConnection>, StoreError> {
        self.get_eventually(&push_connections_pk(workspace_id), &session_id.to_string())
            .await?
            .map(from_item)
            .transpose()
    }

    /// Forgets a socket that is gone, unless the session has connected again
    /// since (the condition keeps the newer socket), and unless the item is
    /// younger than `young_ttl` says (its `ttl` is later): the gateway
    /// answers gone to a post that arrives while `$connect`, which wrote the
    /// item, has not yet returned; that socket is about to open.
    pub async fn remove_push_connection(
        &self,
        workspace_id: &str,
        session_id: Uuid,
        connection_id: &str,
        young_ttl: i64,
    ) -> Result<(), StoreError> {
        let delete = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(push_connections_pk(workspace_id)))
            .key("sk", s(session_id.to_string()))
            .condition_expression("connection_id = :c AND #ttl <= :young")
            .expression_attribute_names("#ttl", "ttl")
            .expression_attribute_values(":c", AttributeValue::S(connection_id.to_string()))
            .expression_attribute_values(":young", n(young_ttl));
        super::condition_may_fail(|| delete.clone().send()).await.map(|_| ())
    }
}
