//! History piled up fast: items written straight to the table, as months of
//! use would have left them, so a test can show what a call costs, or
//! finds, against a year of it rather than against a fresh stack's few
//! items.

use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use baton_api::artifacts::ArtifactStatus;
use baton_api::provisioners::{InstanceState, TerminateReason};
use baton_store::artifacts::Upload;
use baton_store::caches::CacheItem;
use baton_store::keys::{
    cache_pk, cache_sk, instance_sk, provisioner_history_pk, provisioner_pk, reservation_sk,
    PROVISIONER_HISTORY_COUNT_SK,
};
use baton_store::provisioners::{InstanceItem, ReservationItem, RELEASED_INSTANCE_ENDED};
use baton_store::ItemHead;
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
                    head: ItemHead::new(cache_pk(ws), cache_sk(scope, key), "cache"),
                    workspace_id: ws.into(),
                    scope: scope.into(),
                    key: key.clone(),
                    execution_id: Uuid::now_v7(),
                    upload: Upload {
                        status: ArtifactStatus::Stored,
                        stored_at: Some(*stored_at),
                        ..Upload::begun(
                            1,
                            "0".repeat(64),
                            format!("caches/{ws}/history/{key}"),
                            "history".into(),
                            *stored_at,
                            expires_at,
                        )
                    },
                };
                requests.push(serde_dynamo::to_item(&item).expect("a cache item is a DynamoDB item"));
            }
            self.put_all(requests).await;
        }
    }

    /// Writes `count` machines that came and went for provisioner `id` of
    /// workspace `ws`, each ended at `ended_at`: a released reservation and
    /// its terminated instance, in the provisioner's partition, where every
    /// release and report left them before the fleet's history existed
    /// (`moved`: in the fleet's history, where passes move them now).
    pub async fn pile_up_ended_instances(
        &self,
        ws: &str,
        id: Uuid,
        count: usize,
        ended_at: DateTime<Utc>,
        moved: bool,
    ) {
        let pk = if moved { provisioner_history_pk(id) } else { provisioner_pk(id) };
        let mut items = Vec::with_capacity(2 * count + 1);
        if moved {
            let mut counted = std::collections::HashMap::new();
            counted.insert("pk".to_string(), AttributeValue::S(pk.clone()));
            counted.insert("sk".to_string(), AttributeValue::S(PROVISIONER_HISTORY_COUNT_SK.into()));
            counted.insert("instances".to_string(), AttributeValue::N(count.to_string()));
            items.push(counted);
        }
        for n in 0..count {
            let reservation = Uuid::now_v7();
            let provider_runner_id = format!("i-history-{n:06}");
            let booted = ended_at - chrono::Duration::minutes(5);
            items.push(
                serde_dynamo::to_item(&ReservationItem {
                    head: ItemHead::new(pk.clone(), reservation_sk(reservation), "reservation"),
                    id: reservation,
                    provisioner_id: id,
                    workspace_id: ws.into(),
                    labels: vec!["linux".into()],
                    labelset: "linux".into(),
                    expires_at: booted + chrono::Duration::minutes(15),
                    created_at: booted,
                    holds_demand: None,
                    session_id: Some(Uuid::now_v7()),
                    provider_runner_id: Some(provider_runner_id.clone()),
                    first_claim_at: Some(booted),
                    released_at: Some(ended_at),
                    release_reason: Some(RELEASED_INSTANCE_ENDED.into()),
                })
                .expect("a reservation is a DynamoDB item"),
            );
            items.push(
                serde_dynamo::to_item(&InstanceItem {
                    head: ItemHead::new(pk.clone(), instance_sk(&provider_runner_id), "instance"),
                    provider_runner_id,
                    provisioner_id: id,
                    state: InstanceState::Terminated,
                    rank: InstanceState::Terminated.rank(),
                    reservation_id: Some(reservation),
                    session_id: None,
                    first_seen_at: booted,
                    state_at: ended_at,
                    terminate_reason: Some(TerminateReason::Exhausted),
                    terminate_at: Some(ended_at),
                    honored_at: Some(ended_at),
                })
                .expect("an instance is a DynamoDB item"),
            );
        }
        for chunk in items.chunks(25) {
            self.put_all(chunk.to_vec()).await;
        }
    }

    /// Puts at most 25 items in one `BatchWriteItem`, sending what it left
    /// unprocessed again.
    async fn put_all(&self, items: Vec<std::collections::HashMap<String, AttributeValue>>) {
        let requests = items
            .into_iter()
            .map(|item| {
                WriteRequest::builder()
                    .put_request(PutRequest::builder().set_item(Some(item)).build().expect("an item"))
                    .build()
            })
            .collect();
        let mut unprocessed = Some(std::collections::HashMap::from([(self.store.table.clone(), requests)]));
        while let Some(items) = unprocessed.filter(|items| !items.is_empty()) {
            let written = self.clients.dynamodb().batch_write_item().set_request_items(Some(items)).send().await;
            unprocessed = written.expect("the emulator takes a batch write").unprocessed_items;
        }
    }
}
