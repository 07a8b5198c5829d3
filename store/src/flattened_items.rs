//! The items that flatten shared parts (`ItemHead`, `ExecutionRef`,
//! `Upload`, a run request) store each part's fields as top-level
//! attributes, exactly as a struct naming them itself would, and read back
//! from such an item: the attribute maps below are written out by hand,
//! so a change to a part's serde attributes that moved, renamed, nested or
//! retyped a stored attribute fails here.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::artifacts::{ArtifactItem, Upload};
use crate::caches::CacheItem;
use crate::records::{RunnerRecord, RunnerStatus};
use crate::run_requests::{NewRunRequest, RunRequestItem};
use crate::runner_items::{ExecutionRef, LeaseItem, PendingItem};
use crate::variables::VariableItem;
use crate::{from_item, to_item, Item, ItemHead};
use baton_api::artifacts::ArtifactStatus;
use baton_api::facts::{JobOutcome, QueuedJob};
use baton_api::pipelines::{RunTrigger, TriggerKind};

fn s(value: &str) -> AttributeValue {
    AttributeValue::S(value.to_string())
}

fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

fn item(attributes: &[(&str, AttributeValue)]) -> Item {
    attributes.iter().map(|(name, value)| (name.to_string(), value.clone())).collect()
}

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).map(|at| at.with_timezone(&Utc)).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// `value` is stored as `expected`, and `expected` reads back as `value`.
fn stored_as<T>(value: &T, expected: Item)
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let stored = to_item(value).unwrap_or_else(|e| panic!("serialises: {e}"));
    let mut names: Vec<&String> = stored.keys().chain(expected.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
        assert_eq!(stored.get(name), expected.get(name), "attribute {name}");
    }
    let read: T = from_item(expected).unwrap_or_else(|e| panic!("deserialises: {e}"));
    assert_eq!(&read, value);
}

const EXECUTION: &str = "0190a5b0-0000-7000-8000-000000000001";
const RUN: &str = "0190a5b0-0000-7000-8000-000000000002";
const JOB: &str = "0190a5b0-0000-7000-8000-000000000003";
const SESSION: &str = "0190a5b0-0000-7000-8000-000000000004";
const QUEUED_AT: &str = "2026-03-01T10:00:00.000000000Z";
const LATER: &str = "2026-03-01T10:05:00.000000000Z";

fn uuid(text: &str) -> Uuid {
    text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn execution() -> ExecutionRef {
    ExecutionRef { id: uuid(EXECUTION), workspace_id: "ws1".into(), run_id: uuid(RUN), job_id: uuid(JOB), attempt: 2 }
}

/// The attributes of `execution()`, and a head's.
fn execution_attributes(pk: &str, sk: &str, kind: &str) -> Vec<(&'static str, AttributeValue)> {
    vec![
        ("pk", s(pk)),
        ("sk", s(sk)),
        ("type", s(kind)),
        ("execution_id", s(EXECUTION)),
        ("workspace_id", s("ws1")),
        ("run_id", s(RUN)),
        ("job_id", s(JOB)),
        ("attempt", n(2)),
    ]
}

#[test]
fn a_pending_item_stores_its_head_and_execution_as_its_own_attributes() {
    let job = QueuedJob {
        key: "build".into(),
        labels: vec!["linux".into()],
        timeout_s: 600,
        priority: 0,
        avoid_session: None,
        step_count: 3,
    };
    let pending = PendingItem {
        head: ItemHead::new("Q#ws1#set", "0001#x", "pending"),
        execution: execution(),
        queued_at: at(QUEUED_AT),
        epoch: 4,
        job: job.clone(),
        direct_adoption: false,
    };
    let mut expected = execution_attributes("Q#ws1#set", "0001#x", "pending");
    expected.extend([
        ("queued_at", s(QUEUED_AT)),
        ("epoch", n(4)),
        (
            "job",
            AttributeValue::M(item(&[
                ("key", s("build")),
                ("labels", AttributeValue::L(vec![s("linux")])),
                ("timeout_s", n(600)),
                ("step_count", n(3)),
            ])),
        ),
    ]);
    stored_as(&pending, item(&expected));
}

#[test]
fn a_lease_stores_its_head_and_execution_as_its_own_attributes() {
    let lease = LeaseItem {
        head: ItemHead::new(format!("EXEC#{EXECUTION}"), "LEASE", "lease"),
        execution: execution(),
        session_id: uuid(SESSION),
        epoch: 1,
        token_hash: "hash".into(),
        claimed_at: at(QUEUED_AT),
        expires_at: at(LATER),
        heartbeated: true,
        cancel_requested_at: Some(at(LATER)),
        steps: BTreeMap::new(),
        lx_shard: "L#3".into(),
        lx_expires_at: 1_772_359_500_000,
        direct_adoption: true,
        labelset: Some("set".into()),
        reservation: None,
        step_count: Some(3),
    };
    let mut expected = execution_attributes(&format!("EXEC#{EXECUTION}"), "LEASE", "lease");
    expected.extend([
        ("session_id", s(SESSION)),
        ("epoch", n(1)),
        ("token_hash", s("hash")),
        ("claimed_at", s(QUEUED_AT)),
        ("expires_at", s(LATER)),
        ("heartbeated", AttributeValue::Bool(true)),
        ("cancel_requested_at", s(LATER)),
        ("lx_shard", s("L#3")),
        ("lx_expires_at", n(1_772_359_500_000_i64)),
        ("direct_adoption", AttributeValue::Bool(true)),
        ("labelset", s("set")),
        ("step_count", n(3)),
    ]);
    stored_as(&lease, item(&expected));
}

#[test]
fn a_runner_record_stores_its_head_and_execution_as_its_own_attributes() {
    let unclaimed = RunnerRecord::unclaimed(execution(), RunnerStatus::Pending);
    let mut expected = execution_attributes(&format!("EXEC#{EXECUTION}"), "RUNNER", "runner_execution");
    expected.extend([("status", s("pending")), ("epoch", n(0)), ("step_reports", n(0))]);
    stored_as(&unclaimed, item(&expected));

    let completed = RunnerRecord {
        status: RunnerStatus::Completed,
        epoch: 1,
        outcome: Some(JobOutcome::Succeeded),
        completed_epoch: Some(1),
        step_reports: 2,
        outputs: BTreeMap::from([("out".to_string(), serde_json::json!("v"))]),
        ..unclaimed
    };
    let mut expected = execution_attributes(&format!("EXEC#{EXECUTION}"), "RUNNER", "runner_execution");
    expected.extend([
        ("status", s("completed")),
        ("epoch", n(1)),
        ("outcome", s("succeeded")),
        ("completed_epoch", n(1)),
        ("step_reports", n(2)),
        ("outputs", AttributeValue::M(item(&[("out", s("v"))]))),
    ]);
    stored_as(&completed, item(&expected));
}

fn upload(stored_at: Option<DateTime<Utc>>) -> Upload {
    Upload {
        status: if stored_at.is_some() { ArtifactStatus::Stored } else { ArtifactStatus::Uploading },
        stored_at,
        ..Upload::begun(42, "ab".repeat(32), "object".into(), "upload".into(), at(QUEUED_AT), at(LATER))
    }
}

fn upload_attributes(stored_at: Option<&str>) -> Vec<(&'static str, AttributeValue)> {
    let mut attributes = vec![
        ("bytes", n(42)),
        ("sha256", s(&"ab".repeat(32))),
        ("object_key", s("object")),
        ("upload_id", s("upload")),
        ("status", s(if stored_at.is_some() { "stored" } else { "uploading" })),
        ("created_at", s(QUEUED_AT)),
        ("expires_at", s(LATER)),
        ("ttl", n(at(LATER).timestamp())),
    ];
    attributes.extend(stored_at.map(|stored| ("stored_at", s(stored))));
    attributes
}

#[test]
fn an_artifact_stores_its_execution_and_upload_as_its_own_attributes() {
    for stored_at in [None, Some(LATER)] {
        let artifact = ArtifactItem {
            head: ItemHead::new(format!("RUN#{RUN}"), "ARTIFACT#dist", "artifact"),
            execution: execution(),
            name: "dist".into(),
            job_key: "build".into(),
            upload: upload(stored_at.map(at)),
        };
        let mut expected = execution_attributes(&format!("RUN#{RUN}"), "ARTIFACT#dist", "artifact");
        expected.extend([("name", s("dist")), ("job_key", s("build"))]);
        expected.extend(upload_attributes(stored_at));
        stored_as(&artifact, item(&expected));
    }
}

#[test]
fn a_cache_entry_stores_its_upload_as_its_own_attributes() {
    for stored_at in [None, Some(LATER)] {
        let entry = CacheItem {
            head: ItemHead::new("CACHE#ws1", "deps,linux-1", "cache"),
            workspace_id: "ws1".into(),
            scope: "deps".into(),
            key: "linux-1".into(),
            execution_id: uuid(EXECUTION),
            upload: upload(stored_at.map(at)),
        };
        let mut expected = vec![
            ("pk", s("CACHE#ws1")),
            ("sk", s("deps,linux-1")),
            ("type", s("cache")),
            ("workspace_id", s("ws1")),
            ("scope", s("deps")),
            ("key", s("linux-1")),
            ("execution_id", s(EXECUTION)),
        ];
        expected.extend(upload_attributes(stored_at));
        stored_as(&entry, item(&expected));
    }
}

#[test]
fn a_run_request_stores_the_request_as_its_own_attributes() {
    let request = RunRequestItem {
        head: ItemHead::new(format!("RUNREQ#{RUN}"), "REQUEST", "run_request"),
        workspace_id: "ws1".into(),
        run: NewRunRequest {
            run_id: uuid(RUN),
            pipeline: "ci".into(),
            pipeline_version: "v1".into(),
            trigger: RunTrigger {
                kind: TriggerKind::Push,
                git_ref: Some("refs/heads/main".into()),
                sha: None,
                actor: Some("octocat".into()),
                delivery: None,
            },
            github: "{}".into(),
            inputs: "{\"a\":1}".into(),
            idempotency_key: "key".into(),
        },
        requested_at: at(QUEUED_AT),
        ttl: 1_772_964_000,
    };
    let expected = item(&[
        ("pk", s(&format!("RUNREQ#{RUN}"))),
        ("sk", s("REQUEST")),
        ("type", s("run_request")),
        ("run_id", s(RUN)),
        ("workspace_id", s("ws1")),
        ("pipeline", s("ci")),
        ("pipeline_version", s("v1")),
        (
            "trigger",
            AttributeValue::M(item(&[("kind", s("push")), ("ref", s("refs/heads/main")), ("actor", s("octocat"))])),
        ),
        ("github", s("{}")),
        ("inputs", s("{\"a\":1}")),
        ("idempotency_key", s("key")),
        ("requested_at", s(QUEUED_AT)),
        ("ttl", n(1_772_964_000)),
    ]);
    stored_as(&request, expected);
}

#[test]
fn an_item_with_a_head_alone_stores_it_as_its_own_attributes() {
    let variable = VariableItem {
        head: ItemHead::new("VARS#ws1", "REGION", "variable"),
        workspace_id: "ws1".into(),
        name: "REGION".into(),
        value: "eu-west-1".into(),
        updated_at: at(QUEUED_AT),
    };
    let expected = item(&[
        ("pk", s("VARS#ws1")),
        ("sk", s("REGION")),
        ("type", s("variable")),
        ("workspace_id", s("ws1")),
        ("name", s("REGION")),
        ("value", s("eu-west-1")),
        ("updated_at", s(QUEUED_AT)),
    ]);
    stored_as(&variable, expected);
}
