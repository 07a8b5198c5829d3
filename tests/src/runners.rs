//! Helpers for driving the runner API as a runner and an operator would.

use std::time::Duration;

use baton_api::facts::{Fact, JobExecutionQueued, JobExecutionTerminated, JobSpec, JobWork, QueuedJob, StepSpec};
use baton_api::runners::{ClaimResponse, RegisterResponse};
use baton_service::context::Context;
use baton_store::records::RunnerRecord;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::http::Answer;
use crate::{wait_for, TestStack, WAIT};

impl TestStack {
    /// The functions' context, for calling a handler directly (the reaper
    /// with a chosen `now`).
    pub fn context(&self) -> Context {
        Context::new(self.host.config.clone(), self.clients.clone())
    }

    /// A registration token of `workspace` with the given options.
    pub async fn registration_token(&self, workspace: &str, options: Value) -> String {
        let answer =
            self.post(&format!("/v1/workspaces/{workspace}/registration-tokens"), &self.admin_token, options).await;
        assert_eq!(answer.status, 201, "{}", answer.body);
        answer.body["token"].as_str().unwrap().to_string()
    }

    /// A workspace no other test uses, and a reusable registration token
    /// of it.
    pub async fn new_workspace(&self) -> (String, String) {
        let ws = crate::workspace();
        let token = self.registration_token(&ws, json!({})).await;
        (ws, token)
    }

    /// A runner session of `workspace` with `labels` (a fresh reusable token).
    pub async fn runner(&self, workspace: &str, labels: &[&str]) -> RegisterResponse {
        let token = self.registration_token(workspace, json!({})).await;
        self.register(&token, labels).await
    }

    pub async fn register(&self, token: &str, labels: &[&str]) -> RegisterResponse {
        let answer = self.post("/v1/runners/register", token, json!({ "labels": labels })).await;
        assert_eq!(answer.status, 201, "{}", answer.body);
        serde_json::from_value(answer.body).unwrap()
    }

    /// Claims once; `Some` on 200, `None` on 204, panics otherwise.
    pub async fn claim(&self, session_token: &str) -> Option<ClaimResponse> {
        let answer = self.post("/v1/runners/claim", session_token, json!({})).await;
        match answer.status {
            200 => Some(serde_json::from_value(answer.body).unwrap()),
            204 => None,
            other => panic!("claim answered {other}: {}", answer.body),
        }
    }

    /// Claims until a job is handed out (the pipeline queues it meanwhile);
    /// fails the test after [`WAIT`].
    pub async fn wait_claim(&self, session_token: &str) -> ClaimResponse {
        wait_for("a job to claim", WAIT, || self.claim(session_token)).await
    }

    pub async fn heartbeat(&self, lease_token: &str, execution: Uuid) -> Answer {
        self.post(&format!("/v1/runners/leases/{execution}/heartbeat"), lease_token, json!({})).await
    }

    pub async fn complete(&self, lease_token: &str, execution: Uuid, body: Value) -> Answer {
        self.post(&format!("/v1/runners/leases/{execution}/complete"), lease_token, body).await
    }

    /// Queues a one-step job the way the orchestrator does (its spec and its
    /// `job_execution.queued` fact in one transaction) and waits until the
    /// enqueue subscriber made it pending.
    pub async fn queue_job(&self, workspace: &str, labels: &[&str], queued_at: DateTime<Utc>) -> Queued {
        let queued = queued_fact(workspace, labels, queued_at);
        self.publish(&queued).await;
        self.wait_runner_record(queued.detail.job_execution_id).await;
        queued
    }

    /// Writes a fact (and, for a queued job, its spec) in one transaction,
    /// as Baton does: the fact then travels the real pipeline (stream →
    /// relay → bus → queues).
    pub async fn publish<P: Publishable>(&self, what: &P) {
        let outcome = self.store.transact(what.items(&self.store)).await.unwrap();
        assert!(matches!(outcome, baton_store::TxOutcome::Committed));
    }

    /// Delivers `fact` to the bus again, as a retried relay batch would (the
    /// outbox holds it once; its event_id stays the same).
    pub async fn redeliver<D: baton_api::facts::FactDetail>(&self, fact: &Fact<D>) {
        self.publish_again(baton_store::outbox::OutboxItem::for_fact(fact, 7).unwrap()).await;
    }

    /// Publishes the already relayed fact `event_id` again, from its outbox
    /// item (its own, or the one it was written in with other facts).
    pub async fn redeliver_event(&self, event_id: &str) {
        let fact = self
            .outbox_facts()
            .await
            .into_iter()
            .find(|fact| fact.event_id.to_string() == event_id)
            .expect("the fact in an outbox item");
        self.publish_again(fact).await;
    }

    /// Every fact written to the outbox, one item each.
    async fn outbox_facts(&self) -> Vec<baton_store::outbox::OutboxItem> {
        self.items_of(baton_store::outbox::OUTBOX_TYPE)
            .await
            .into_iter()
            .flat_map(|item| {
                let item: baton_store::outbox::OutboxItem = baton_store::from_item(item).expect("an outbox item");
                item.facts()
            })
            .collect()
    }

    async fn publish_again(&self, item: baton_store::outbox::OutboxItem) {
        let pending = vec![baton_service::facts::relay::PendingFact { sequence_number: None, item }];
        let response =
            baton_service::facts::relay::publish(self.clients.eventbridge(), &self.provisioned.bus, &pending).await;
        assert!(response.batch_item_failures.is_empty());
    }

    pub async fn wait_runner_record(&self, execution: Uuid) -> RunnerRecord {
        wait_for("the runners' record of the execution", Duration::from_secs(30), || async {
            self.store.runner_record(execution).await.unwrap()
        })
        .await
    }

    /// Waits until the fact with `event_id` was published and the subscriber
    /// queue `logical` has no message left, visible or in flight: the
    /// subscriber has handled it (a handled message is deleted).
    pub async fn wait_handled(&self, event_id: Uuid, logical: &str) {
        let id = event_id.to_string();
        wait_for("the fact on the bus", Duration::from_secs(30), || async {
            let captured = self.captured.lock().unwrap_or_else(|e| e.into_inner());
            captured.iter().any(|c| c.detail["event_id"] == id.as_str()).then_some(())
        })
        .await;
        let url = self.provisioned.queues[logical].url.clone();
        wait_for(&format!("queue {logical} to drain"), Duration::from_secs(30), || async {
            let out = self
                .clients
                .sqs()
                .get_queue_attributes()
                .queue_url(&url)
                .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
                .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
                .send()
                .await
                .ok()?;
            let attributes = out.attributes()?;
            let count = |name| attributes.get(&name).and_then(|v| v.parse::<u64>().ok()).unwrap_or(1);
            (count(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages) == 0
                && count(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible) == 0)
                .then_some(())
        })
        .await;
    }

    /// Sends each part of `archive` to the URL an upload's answer lists for
    /// it, as a runner does; the parts (number and ETag) its complete names.
    pub async fn put_parts(&self, answer: &Value, archive: &[u8]) -> Vec<Value> {
        let mut offset = 0usize;
        let mut done = Vec::new();
        for part in answer["parts"].as_array().expect("parts") {
            let size = part["bytes"].as_u64().expect("a size") as usize;
            let response = self
                .http
                .put(part["url"].as_str().expect("a URL"))
                .body(archive[offset..offset + size].to_vec())
                .send()
                .await
                .expect("S3 answers");
            assert_eq!(response.status().as_u16(), 200, "part {}", part["part_number"]);
            let etag = response.headers()["etag"].to_str().expect("an ETag").to_string();
            done.push(json!({"part_number": part["part_number"], "etag": etag}));
            offset += size;
        }
        assert_eq!(offset, archive.len(), "the parts cover the archive");
        done
    }

    /// Every pending item of `workspace` (for assertions; tests may query).
    pub async fn pending_of(&self, workspace: &str) -> Vec<baton_store::runner_items::PendingItem> {
        let mut all = Vec::new();
        for set in self.store.label_sets(workspace).await.unwrap() {
            all.extend(self.store.pending_head(workspace, &set.sk, 1000).await.unwrap());
        }
        all
    }
}

/// A job as the orchestrator queues it: the fact the bus carries (key,
/// labels, timeout) and the spec the table keeps for the runner that claims
/// it (steps, env). Derefs to the fact.
#[derive(Debug, Clone)]
pub struct Queued {
    pub fact: Fact<JobExecutionQueued>,
    pub spec: JobSpec,
}

impl std::ops::Deref for Queued {
    type Target = Fact<JobExecutionQueued>;
    fn deref(&self) -> &Self::Target {
        &self.fact
    }
}

impl std::ops::DerefMut for Queued {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.fact
    }
}

/// What [`TestStack::publish`] writes in one transaction.
pub trait Publishable {
    fn items(&self, store: &baton_store::Store) -> Vec<aws_sdk_dynamodb::types::TransactWriteItem>;
}

impl<D: baton_api::facts::FactDetail> Publishable for Fact<D> {
    fn items(&self, store: &baton_store::Store) -> Vec<aws_sdk_dynamodb::types::TransactWriteItem> {
        vec![store.outbox_put(self, 7).unwrap()]
    }
}

impl Publishable for Queued {
    fn items(&self, store: &baton_store::Store) -> Vec<aws_sdk_dynamodb::types::TransactWriteItem> {
        let d = &self.fact.detail;
        let work = JobWork {
            key: d.job.key.clone(),
            labels: d.job.labels.clone(),
            timeout_s: d.job.timeout_s,
            ..self.spec.work.clone()
        };
        let spec = JobSpec { work, ..self.spec.clone() };
        vec![
            store.job_spec_put(d.job_execution_id, &self.fact.header.workspace_id, &spec).unwrap(),
            store.outbox_put(&self.fact, 7).unwrap(),
        ]
    }
}

/// A queued one-step job. Its step id is one Baton derives for the
/// execution, but at the index after its last (`ids::step_id(_, 1)`), so
/// the step route knows it and no step report settles the job: the
/// complete does.
pub fn queued_fact(workspace: &str, labels: &[&str], queued_at: DateTime<Utc>) -> Queued {
    job_fact(workspace, labels, queued_at, 1, |execution, index| baton_domain::ids::step_id(execution, index + 1))
}

/// A queued job of `steps` steps with ids derived as Baton derives them
/// (`ids::step_id`): the report of its last step settles it.
pub fn queued_steps_fact(workspace: &str, labels: &[&str], queued_at: DateTime<Utc>, steps: usize) -> Queued {
    job_fact(workspace, labels, queued_at, steps, baton_domain::ids::step_id)
}

fn job_fact(
    workspace: &str,
    labels: &[&str],
    queued_at: DateTime<Utc>,
    steps: usize,
    step_id: impl Fn(Uuid, usize) -> Uuid,
) -> Queued {
    let job_execution_id = Uuid::now_v7();
    let spec = JobSpec {
        work: JobWork {
            key: "build".into(),
            labels: labels.iter().map(|l| l.to_string()).collect(),
            timeout_s: 3600,
            env: Default::default(),
            steps: (0..steps)
                .map(|index| StepSpec {
                    id: step_id(job_execution_id, index),
                    name: Some(format!("step-{index}")),
                    run: "true".into(),
                    ..StepSpec::default()
                })
                .collect(),
            outputs: Default::default(),
            mask_env: Vec::new(),
        },
        continue_on_error: false,
        priority: 0,
        secrets: Vec::new(),
    };
    let fact = Fact::new(
        workspace,
        queued_at,
        JobExecutionQueued {
            run_id: Uuid::now_v7(),
            attempt: 1,
            job_id: Uuid::now_v7(),
            job_execution_id,
            queued_at,
            job: QueuedJob::from(&spec),
            retry: 0,
        },
    );
    Queued { fact, spec }
}

impl TestStack {
    /// How many items of `kind` (the item `type`) the table holds. Tests only:
    /// it scans, which no hot path may.
    pub async fn count_items(&self, kind: &str) -> usize {
        self.items_of(kind).await.len()
    }

    /// Whether `needle` appears in any item of the table (any attribute, as
    /// its debug text) or any object of any of the stack's buckets. Tests
    /// only: it scans the table and reads every object.
    pub async fn stored_anywhere(&self, needle: &str) -> Vec<String> {
        let mut found = Vec::new();
        for item in self.scan_table(None).await {
            if format!("{item:?}").contains(needle) {
                found.push(format!("table item {:?}/{:?}", item.get("pk"), item.get("sk")));
            }
        }
        for bucket in self.provisioned.buckets.values() {
            for (key, bytes) in self.objects(bucket).await {
                if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                    found.push(format!("object {bucket}/{key}"));
                }
            }
        }
        found
    }

    /// Every object of `bucket` (its first listing page), as `(key, bytes)`.
    pub async fn objects(&self, bucket: &str) -> Vec<(String, Vec<u8>)> {
        let listed = self.clients.s3().list_objects_v2().bucket(bucket).send().await.expect("a listing");
        let mut objects = Vec::new();
        for object in listed.contents() {
            let key = object.key().unwrap_or_default();
            let body = self.clients.s3().get_object().bucket(bucket).key(key).send().await.expect("an object");
            let bytes = body.body.collect().await.expect("its bytes").into_bytes();
            objects.push((key.to_string(), bytes.to_vec()));
        }
        objects
    }

    /// Every item of `kind` (the item `type`) in the table. Tests only: it
    /// scans, which no hot path may.
    pub async fn items_of(&self, kind: &str) -> Vec<baton_store::Item> {
        self.scan_table(Some(kind)).await
    }

    /// The whole table, or its items of `kind`, every page. Tests only.
    async fn scan_table(&self, kind: Option<&str>) -> Vec<baton_store::Item> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let mut scan = self.clients.dynamodb().scan().table_name(&self.store.table);
            if let Some(kind) = kind {
                scan = scan
                    .filter_expression("#t = :t")
                    .expression_attribute_names("#t", "type")
                    .expression_attribute_values(":t", aws_sdk_dynamodb::types::AttributeValue::S(kind.into()));
            }
            let out = scan.set_exclusive_start_key(start).send().await.expect("a scan of the table");
            items.extend(out.items().iter().cloned());
            start = out.last_evaluated_key;
            if start.is_none() {
                return items;
            }
        }
    }

    /// Outbox items (by event id and detail type) that the capture
    /// subscriber never received: facts written but never published.
    pub fn unpublished<'a>(&self, outbox: impl IntoIterator<Item = &'a (String, String)>) -> Vec<(String, String)> {
        let published: std::collections::HashSet<String> = baton_api::facts::ALL_DETAIL_TYPES
            .iter()
            .flat_map(|t| self.facts(t))
            .filter_map(|d| d["event_id"].as_str().map(str::to_string))
            .collect();
        outbox.into_iter().filter(|(id, _)| !published.contains(id)).cloned().collect()
    }

    /// The event ids and detail types of every fact in the outbox.
    pub async fn outbox(&self) -> Vec<(String, String)> {
        self.outbox_facts().await.into_iter().map(|fact| (fact.event_id.to_string(), fact.detail_type)).collect()
    }

    /// Messages left in each dead-letter queue, by logical queue name (only
    /// queues with some).
    pub async fn dead_letters(&self) -> std::collections::BTreeMap<String, usize> {
        let mut dead = std::collections::BTreeMap::new();
        for (logical, queue) in &self.provisioned.queues {
            let out = self
                .clients
                .sqs()
                .get_queue_attributes()
                .queue_url(&queue.dlq_url)
                .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
                .send()
                .await
                .unwrap();
            let count = out
                .attributes()
                .and_then(|a| a.get(&aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages))
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(0);
            if count > 0 {
                dead.insert(logical.clone(), count);
            }
        }
        dead
    }

    /// Waits for a message in the dead-letter queue of subscriber `logical`:
    /// the event it holds.
    pub async fn wait_dead_letter(&self, logical: &str) -> Value {
        let dlq = &self.provisioned.queues[logical].dlq_url;
        let body = wait_for(&format!("a dead letter of {logical}"), Duration::from_secs(90), || async {
            let out = self.clients.sqs().receive_message().queue_url(dlq).wait_time_seconds(1).send().await.ok()?;
            out.messages().first().and_then(|m| m.body().map(str::to_string))
        })
        .await;
        serde_json::from_str(&body).expect("an event envelope")
    }

    /// Runs the lease reaper once, through every shard, as if the time were `now`.
    pub async fn reap_at(&self, now: DateTime<Utc>) -> usize {
        let limits = baton_lease_reaper::ReapLimits {
            page: baton_lease_reaper::REAPER_PAGE,
            stop_at: std::time::Instant::now() + std::time::Duration::from_secs(60),
        };
        baton_lease_reaper::reap(&self.context(), now, limits).await.unwrap().expired()
    }
}

/// The fact a cancel of the run publishes for the execution `job` claimed
/// (the workflows side's `job_execution.terminated`, `run_cancelled`).
pub fn cancelled_fact(job: &ClaimResponse) -> Fact<JobExecutionTerminated> {
    Fact::new(
        job.workspace_id.clone(),
        Utc::now(),
        JobExecutionTerminated {
            run_id: job.run_id,
            attempt: job.attempt,
            job_id: job.job_id,
            job_execution_id: job.job_execution_id,
            status: "cancelled".into(),
            reason: Some("run_cancelled".into()),
        },
    )
}
