//! History piled up fast: items written straight to the table, as months of
//! use would have left them, so a test can show what a call costs, or
//! finds, against a year of it rather than against a fresh stack's few
//! items.

use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
use baton_api::artifacts::ArtifactStatus;
use baton_store::caches::CacheItem;
use baton_store::keys::{cache_pk, cache_sk};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::TestStack;

/// How long a piled-up entry lives (the caches' default retention).
const CACHE_RETENTION: chrono::Duration = chrono::Duration::days(7);

impl TestStack {
    /// Writes stored cache entries of workspace `ws` in `scope`, one per
    /// `(key, stored_at)`, 25 a request (BatchWriteItem's most).
    pub async fn pile_up_cache_entries(&self, ws: &str, scope: &str, entries: &[(String, DateTime<Utc>)]) {
        for chunk in entries.chunks(25) {
            let mut requests = Vec::new();
            for (key, stored_at) in chunk {
                let expires_at = *stored_at + CACHE_RETENTION;
                let item = CacheItem {
                    pk: cache_pk(ws),
                    sk: cache_sk(scope, key),
                    kind: "cache".into(),
                    workspace_id: ws.into(),
                    scope: scope.into(),
                    key: key.clone(),
                    bytes: 1,
                    sha256: "0".repeat(64),
                    object_key: format!("caches/{ws}/history/{key}"),
                    upload_id: "history".into(),
                    execution_id: Uuid::now_v7(),
                    status: ArtifactStatus::Stored,
                    created_at: *stored_at,
                    stored_at: Some(*stored_at),
                    expires_at,
                    ttl: expires_at.timestamp(),
                };
                let item = serde_dynamo::to_item(&item).expect("a cache item is a DynamoDB item");
                requests.push(
                    WriteRequest::builder()
                        .put_request(PutRequest::builder().set_item(Some(item)).build().expect("an item"))
                        .build(),
                );
            }
            let mut unprocessed = Some(std::collections::HashMap::from([(self.store.table.clone(), requests)]));
            while let Some(items) = unprocessed.filter(|items| !items.is_empty()) {
                let written = self.clients.dynamodb.batch_write_item().set_request_items(Some(items)).send().await;
                unprocessed = written.expect("the emulator takes a batch write").unprocessed_items;
            }
        }
    }
}
