//! The facts' JSON Schemas (`events/schemas/`) and samples (`events/samples/`)
//! agree with the Rust types that produce and consume them:
//!
//! - every detail type has a schema, a valid draft 2020-12 document whose
//!   `required` is exactly the set of fields the Rust fact serializes;
//! - every fact built through the Rust constructors validates (optional
//!   fields both absent and present) and round-trips;
//! - every sample's `detail` validates and parses into its Rust type, and is
//!   exactly what the Rust type serializes;
//! - the schemas are not vacuous: a missing field, a wrong type, a bad enum,
//!   uuid or timestamp all fail; unknown fields are tolerated (forward
//!   compatibility), by the schema and by the Rust types;
//! - the SQS and DynamoDB stream samples are what the subscriber and the
//!   relay accept.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use aws_lambda_events::dynamodb::Event as StreamEvent;
use aws_lambda_events::eventbridge::EventBridgeEvent;
use aws_lambda_events::sqs::SqsEvent;
use baton_api::facts::{
    source_of, ApprovalDecided, Fact, FactDetail, InstanceTerminateRequested, JobClaimed, JobCompleted,
    JobExecutionQueued, JobExecutionTerminated, JobLeaseExpired, JobOutcome, JobTerminated, JobUnschedulable,
    JobWaiting, LeaseRef, PipelineChanged, QueuedJob, ReservationCreated, ReservationReleased, RunAttemptCreated,
    RunCancelled, RunRequested, RunTerminated, SettledBy, StepResult, StepStatus, WaitingFor, ALL_DETAIL_TYPES,
    SCHEMA_VERSION,
};
use baton_api::provisioners::TerminateReason;
use baton_api::runs::Decision;
use baton_localstack::schema::{common_schema_path, schema_path, schemas_dir, validate};
use baton_service::facts::relay::outbox_records;
use baton_service::facts::subscriber::{consume, delivered, Delivered, HandlerError};
use baton_store::outbox::OutboxItem;
use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::{json, Value};
use uuid::Uuid;

// ------------------------------------------------------------------ helpers

fn read_json(path: &Path) -> Value {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn samples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("events").join("samples")
}

fn sample(name: &str) -> Value {
    read_json(&samples_dir().join(format!("{name}.json")))
}

fn schema(detail_type: &str) -> Value {
    read_json(&schema_path(detail_type))
}

#[track_caller]
fn assert_valid(detail_type: &str, detail: &Value) {
    if let Err(errors) = validate(detail_type, detail) {
        panic!("{detail_type} rejected a valid detail: {errors}\n{detail:#}");
    }
}

#[track_caller]
fn assert_invalid(detail_type: &str, detail: &Value, why: &str) {
    assert!(validate(detail_type, detail).is_err(), "{detail_type} accepted a detail with {why}:\n{detail:#}");
}

fn required_of(detail_type: &str) -> BTreeSet<String> {
    schema(detail_type)["required"]
        .as_array()
        .expect("a fact schema lists its required fields")
        .iter()
        .map(|f| f.as_str().expect("required names are strings").to_owned())
        .collect()
}

fn keys(detail: &Value) -> BTreeSet<String> {
    detail.as_object().expect("a detail is an object").keys().cloned().collect()
}

/// The same value with another JSON type (an integer for a string or a
/// boolean, an object for a null, which no field may be besides its own
/// type, a string for anything else).
fn wrong_type(value: &Value) -> Value {
    match value {
        Value::Null => json!({ "not": "the right type" }),
        Value::String(_) | Value::Bool(_) => json!(12345),
        _ => json!("not the right type"),
    }
}

/// Every top-level field is required and typed: removing it, or giving it a
/// value of another type, must fail validation.
#[track_caller]
fn assert_every_field_is_enforced(detail_type: &str, detail: &Value) {
    let object = detail.as_object().expect("a detail is an object");
    for (field, value) in object {
        let mut missing = object.clone();
        missing.remove(field);
        assert_invalid(detail_type, &Value::Object(missing), &format!("`{field}` missing"));

        let mut mistyped = object.clone();
        mistyped.insert(field.clone(), wrong_type(value));
        assert_invalid(detail_type, &Value::Object(mistyped), &format!("`{field}` of the wrong type"));
    }
}

/// The detail types the constructor tests exercised.
static CHECKED: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());

/// Serializes a fact built by the Rust constructor, validates it, checks the
/// schema's `required` is exactly its fields, and that it round-trips.
#[track_caller]
fn check<D: FactDetail + PartialEq>(detail: D) -> Value {
    let fact = Fact::new("acme", Utc::now(), detail);
    let value = serde_json::to_value(&fact).expect("a fact serializes");
    assert_valid(D::DETAIL_TYPE, &value);
    assert_eq!(
        required_of(D::DETAIL_TYPE),
        keys(&value),
        "the schema of {} must require exactly the fields Rust serializes",
        D::DETAIL_TYPE
    );
    assert_every_field_is_enforced(D::DETAIL_TYPE, &value);
    let back: Fact<D> = serde_json::from_value(value.clone()).expect("a fact parses back");
    assert_eq!(back, fact);
    CHECKED.lock().unwrap_or_else(|e| e.into_inner()).insert(D::DETAIL_TYPE);
    value
}

fn id() -> Uuid {
    baton_domain::ids::new_id()
}

fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 14, h, m, s).single().expect("a valid instant")
}

fn lease() -> LeaseRef {
    LeaseRef { run_id: id(), attempt: 2, job_id: id(), job_execution_id: id(), session_id: id(), epoch: 7 }
}

fn step_results() -> Vec<StepResult> {
    vec![
        StepResult {
            id: id(),
            status: StepStatus::Succeeded,
            soft_failed: false,
            exit_code: Some(0),
            started_at: Some(at(9, 0, 0)),
            finished_at: Some(at(9, 1, 0)),
        },
        StepResult {
            id: id(),
            status: StepStatus::Failed,
            // `continue-on-error` let the job go on.
            soft_failed: true,
            exit_code: Some(-1),
            started_at: Some(Utc::now()),
            finished_at: Some(Utc::now()),
        },
        StepResult {
            id: id(),
            status: StepStatus::Running,
            soft_failed: false,
            exit_code: None,
            started_at: Some(at(9, 1, 1)),
            finished_at: None,
        },
        StepResult {
            id: id(),
            status: StepStatus::Skipped,
            soft_failed: false,
            exit_code: None,
            started_at: None,
            finished_at: None,
        },
        StepResult {
            id: id(),
            status: StepStatus::Pending,
            soft_failed: false,
            exit_code: None,
            started_at: None,
            finished_at: None,
        },
    ]
}

fn queued_job() -> QueuedJob {
    QueuedJob {
        key: "build".into(),
        labels: vec!["linux".into(), "x64".into()],
        timeout_s: 21_600,
        priority: 10,
        avoid_session: Some(uuid::Uuid::now_v7()),
        step_count: 3,
    }
}

/// Parses `detail` as the fact `detail_type` names, through the subscriber's
/// own parsing; the value is what that Rust fact serializes back to.
fn parse_as(detail_type: &str, detail: &Value) -> Result<Value, String> {
    fn typed<D: FactDetail>(delivered: &Delivered) -> Result<Value, String> {
        let fact = delivered.parse::<D>().map_err(|e| e.to_string())?;
        serde_json::to_value(fact).map_err(|e| e.to_string())
    }
    let delivered = Delivered { detail_type: detail_type.to_owned(), detail: detail.clone() };
    match detail_type {
        PipelineChanged::DETAIL_TYPE => typed::<PipelineChanged>(&delivered),
        RunRequested::DETAIL_TYPE => typed::<RunRequested>(&delivered),
        RunAttemptCreated::DETAIL_TYPE => typed::<RunAttemptCreated>(&delivered),
        JobExecutionQueued::DETAIL_TYPE => typed::<JobExecutionQueued>(&delivered),
        JobExecutionTerminated::DETAIL_TYPE => typed::<JobExecutionTerminated>(&delivered),
        JobTerminated::DETAIL_TYPE => typed::<JobTerminated>(&delivered),
        ApprovalDecided::DETAIL_TYPE => typed::<ApprovalDecided>(&delivered),
        JobWaiting::DETAIL_TYPE => typed::<JobWaiting>(&delivered),
        RunTerminated::DETAIL_TYPE => typed::<RunTerminated>(&delivered),
        RunCancelled::DETAIL_TYPE => typed::<RunCancelled>(&delivered),
        JobClaimed::DETAIL_TYPE => typed::<JobClaimed>(&delivered),
        JobCompleted::DETAIL_TYPE => typed::<JobCompleted>(&delivered),
        JobLeaseExpired::DETAIL_TYPE => typed::<JobLeaseExpired>(&delivered),
        JobUnschedulable::DETAIL_TYPE => typed::<JobUnschedulable>(&delivered),
        ReservationCreated::DETAIL_TYPE => typed::<ReservationCreated>(&delivered),
        ReservationReleased::DETAIL_TYPE => typed::<ReservationReleased>(&delivered),
        InstanceTerminateRequested::DETAIL_TYPE => typed::<InstanceTerminateRequested>(&delivered),
        other => Err(format!("no Rust type for {other}")),
    }
}

// ------------------------------------------------------------------ (a) files

#[test]
fn every_detail_type_has_a_valid_schema_and_a_sample() {
    let common = read_json(&common_schema_path());
    jsonschema::draft202012::meta::validate(&common).unwrap_or_else(|e| panic!("common.json: {e}"));

    for detail_type in ALL_DETAIL_TYPES {
        let path = schema_path(detail_type);
        assert!(path.is_file(), "no schema for {detail_type} at {}", path.display());
        let schema = schema(detail_type);
        jsonschema::draft202012::meta::validate(&schema).unwrap_or_else(|e| panic!("{detail_type}: {e}"));
        assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema", "{detail_type}");
        let schema_id = schema["$id"].as_str().unwrap_or_default();
        assert!(schema_id.ends_with(&format!("/{detail_type}.json")), "{detail_type}: $id {schema_id}");
        assert_eq!(schema["title"], *detail_type);
        assert!(
            schema["description"].as_str().is_some_and(|d| d.contains("Consumed by")),
            "{detail_type}: description"
        );
        assert_eq!(schema["type"], "object", "{detail_type}");
        assert_eq!(schema["additionalProperties"], true, "{detail_type}: consumers must tolerate new fields");
        let required = required_of(detail_type);
        for header in ["schema_version", "event_id", "occurred_at", "workspace_id"] {
            assert!(required.contains(header), "{detail_type} must require {header}");
        }
        assert!(samples_dir().join(format!("{detail_type}.json")).is_file(), "no sample for {detail_type}");
    }

    // No schema without a fact (a removed fact keeps nothing stale behind).
    let known: BTreeSet<String> =
        ALL_DETAIL_TYPES.iter().map(|t| format!("{t}.json")).chain(["common.json".to_owned()]).collect();
    for entry in fs::read_dir(schemas_dir()).expect("events/schemas exists") {
        let name = entry.expect("a directory entry").file_name().to_string_lossy().into_owned();
        assert!(known.contains(&name), "events/schemas/{name} describes no fact in ALL_DETAIL_TYPES");
    }
}

// ------------------------------------------------------------------ (b) Rust → schema

#[test]
fn every_fact_built_in_rust_conforms_to_its_schema() {
    for revision in [Some(3), None] {
        check(PipelineChanged { pipeline: "nightly".into(), revision });
    }
    for (trigger, delivery) in [("push", Some("72d3162e-cc78-11e3-81ab-4c9367dc0958")), ("schedule", None)] {
        check(RunRequested {
            run_id: id(),
            pipeline: "ci".into(),
            trigger: trigger.into(),
            delivery: delivery.map(str::to_owned),
        });
    }
    for rerun_mode in [None, Some("all"), Some("failed")] {
        check(RunAttemptCreated {
            run_id: id(),
            attempt: if rerun_mode.is_some() { 2 } else { 1 },
            workflow_name: "ci".into(),
            run_number: 42,
            rerun_mode: rerun_mode.map(str::to_owned),
            trigger: Some("push".into()),
            delivery: Some("72d3162e-cc78-11e3-81ab-4c9367dc0958".into()),
            pipeline: Some("ci".into()),
        });
    }

    for retry in [0, 3] {
        check(JobExecutionQueued {
            run_id: id(),
            attempt: 1,
            job_id: id(),
            job_execution_id: id(),
            queued_at: Utc::now(),
            job: queued_job(),
            retry,
        });
    }

    for (status, reason) in [
        ("succeeded", None),
        ("failed", Some("runner_lost")),
        ("failed", Some("timed_out")),
        ("cancelled", Some("run_cancelled")),
    ] {
        check(JobExecutionTerminated {
            run_id: id(),
            attempt: 1,
            job_id: id(),
            job_execution_id: id(),
            status: status.into(),
            reason: reason.map(str::to_owned),
        });
        check(RunTerminated { run_id: id(), attempt: 3, status: status.into(), reason: reason.map(str::to_owned) });
    }

    for (status, reason, soft_failed) in [
        ("succeeded", None, false),
        ("failed", Some("step_failed"), false),
        // `continue-on-error`: it failed, and succeeded.
        ("succeeded", Some("step_failed"), true),
        ("cancelled", Some("run_cancelled"), false),
        ("skipped", Some("condition_rejected"), false),
    ] {
        check(JobTerminated {
            run_id: id(),
            attempt: 1,
            job_id: id(),
            job_key: "report".into(),
            status: status.into(),
            reason: reason.map(str::to_owned),
            soft_failed,
        });
    }

    for (decision, comment, outcome, approvals) in
        [(Decision::Approve, None, "waiting", 1), (Decision::Reject, Some("not today"), "rejected", 1)]
    {
        check(ApprovalDecided {
            run_id: id(),
            attempt: 1,
            job_id: id(),
            job_key: "sign-off".into(),
            by: "alice".into(),
            decision,
            comment: comment.map(str::to_owned),
            inputs: [("channel".to_owned(), json!("stable")), ("dry_run".to_owned(), json!(true))]
                .into_iter()
                .collect(),
            decided_at: Utc::now(),
            outcome: outcome.into(),
            approvals,
            required: 2,
        });
    }

    for waiting_for in [WaitingFor::Approval, WaitingFor::Events] {
        check(JobWaiting {
            run_id: id(),
            attempt: 1,
            job_id: id(),
            job_key: "sign-off".into(),
            waiting_for,
            until: Utc::now(),
        });
    }

    check(RunCancelled { run_id: id(), attempt: 1 });

    check(JobClaimed { lease: lease(), claimed_at: Utc::now() });

    check(JobCompleted {
        lease: lease(),
        status: JobOutcome::Succeeded,
        steps: vec![],
        outputs: BTreeMap::new(),
        message: None,
        completed_at: Utc::now(),
        claimed_at: None,
        settled_by: SettledBy::Complete,
    });
    let outputs: BTreeMap<String, Value> = [
        ("artifact".to_owned(), json!("s3://bucket/build.tar.zst")),
        ("size".to_owned(), json!(1024)),
        ("matrix".to_owned(), json!({"os": ["linux"], "ok": true, "none": null})),
    ]
    .into_iter()
    .collect();
    check(JobCompleted {
        lease: lease(),
        status: JobOutcome::Failed,
        steps: step_results(),
        outputs,
        message: Some("step `test` exited with 101".into()),
        completed_at: Utc::now() + Duration::seconds(1),
        claimed_at: Some(Utc::now() - Duration::seconds(30)),
        settled_by: SettledBy::Steps,
    });

    check(JobLeaseExpired { lease: lease(), expired_at: Utc::now(), steps: vec![], claimed_at: None });
    check(JobLeaseExpired {
        lease: lease(),
        expired_at: at(23, 59, 59),
        steps: step_results(),
        claimed_at: Some(at(23, 50, 0)),
    });
    check(JobUnschedulable {
        run_id: id(),
        attempt: 1,
        job_id: id(),
        job_execution_id: id(),
        labels: vec!["gpu".into(), "linux".into()],
        fails_at: at(23, 59, 59),
    });
    check(ReservationCreated {
        provisioner_id: id(),
        reservation_id: id(),
        labels: vec!["linux".into(), "x64".into()],
        expires_at: at(23, 59, 59),
    });
    for reason in ["instance-ended", "expired-unused", "provisioner-removed"] {
        check(ReservationReleased {
            provisioner_id: id(),
            reservation_id: id(),
            reason: reason.into(),
            released_at: at(23, 59, 59),
        });
    }
    for (reason, session) in [(TerminateReason::JobCancelled, Some(id())), (TerminateReason::Orphan, None)] {
        check(InstanceTerminateRequested {
            provisioner_id: id(),
            provider_runner_id: "i-0abc".into(),
            reservation_id: session.map(|_| id()),
            runner_session_id: session,
            reason,
            requested_at: at(23, 59, 59),
        });
    }

    let checked = CHECKED.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let all: BTreeSet<&str> = ALL_DETAIL_TYPES.iter().copied().collect();
    assert_eq!(checked, all, "every detail type must be built and validated here");
}

// ------------------------------------------------------------------ (c) samples → Rust

#[test]
fn every_sample_validates_and_parses_into_its_rust_type() {
    for detail_type in ALL_DETAIL_TYPES {
        let envelope = sample(detail_type);
        let source = source_of(detail_type).expect("a Baton detail type");

        // The whole envelope is an EventBridge event as Lambda and the subscriber read it.
        let event: EventBridgeEvent<Value> =
            serde_json::from_value(envelope.clone()).unwrap_or_else(|e| panic!("{detail_type}: not an envelope: {e}"));
        assert_eq!(event.detail_type, *detail_type);
        assert_eq!(event.source, source, "{detail_type}");
        assert_eq!(envelope["version"], "0");
        assert_eq!(envelope["account"], "123456789012");
        assert_eq!(envelope["region"], "us-east-1");
        assert_eq!(envelope["resources"], json!([]));
        assert!(envelope["id"].as_str().and_then(|i| Uuid::parse_str(i).ok()).is_some(), "{detail_type}: id");

        let detail = &envelope["detail"];
        assert_valid(detail_type, detail);
        let reserialized = parse_as(detail_type, detail).unwrap_or_else(|e| panic!("{detail_type}: {e}"));
        assert_eq!(&reserialized, detail, "{detail_type}: the sample is exactly what Rust serializes");
        assert_eq!(detail["schema_version"], json!(SCHEMA_VERSION));

        // EventBridge's `time` is the fact's instant to the second.
        let occurred: DateTime<Utc> = serde_json::from_value(detail["occurred_at"].clone()).expect("occurred_at");
        let time: DateTime<Utc> = serde_json::from_value(envelope["time"].clone()).expect("time");
        assert_eq!(time.timestamp(), occurred.timestamp(), "{detail_type}: time");
    }
}

// ------------------------------------------------------------------ (d) not vacuous

#[test]
fn the_schemas_reject_what_rust_would_not_produce() {
    for detail_type in ALL_DETAIL_TYPES {
        let detail = sample(detail_type)["detail"].clone();
        assert_every_field_is_enforced(detail_type, &detail);

        let with = |field: &str, value: Value| {
            let mut d = detail.clone();
            d[field] = value;
            d
        };
        assert_invalid(detail_type, &with("event_id", json!("not-a-uuid")), "a malformed uuid");
        assert_invalid(detail_type, &with("occurred_at", json!("14/03/2026 09:26")), "a malformed timestamp");
        assert_invalid(detail_type, &with("occurred_at", json!("2026-03-14T09:26:53+02:00")), "a non-UTC timestamp");
        assert_invalid(detail_type, &with("schema_version", json!(2)), "another schema version");
        if detail.get("attempt").is_some() {
            assert_invalid(detail_type, &with("attempt", json!(0)), "attempt 0");
            assert_invalid(detail_type, &with("attempt", json!(1.5)), "a fractional attempt");
        }
        assert_invalid(detail_type, &with("workspace_id", json!("")), "an empty workspace");
        assert_invalid(detail_type, &json!([detail.clone()]), "an array for a detail");
    }

    // Enums and nested shapes.
    let detail = |t: &str| sample(t)["detail"].clone();
    let mutated = |t: &str, f: &dyn Fn(&mut Value)| {
        let mut d = detail(t);
        f(&mut d);
        d
    };
    let completed = JobCompleted::DETAIL_TYPE;
    assert_invalid(completed, &mutated(completed, &|d| d["status"] = json!("cancelled")), "an unknown job outcome");
    assert_invalid(
        completed,
        &mutated(completed, &|d| d["steps"][0]["status"] = json!("done")),
        "an unknown step status",
    );
    assert_invalid(
        completed,
        &mutated(completed, &|d| {
            d["steps"][0].as_object_mut().map(|s| s.remove("exit_code"));
        }),
        "a step without exit_code",
    );
    assert_invalid(completed, &mutated(completed, &|d| d["steps"][0]["exit_code"] = json!("0")), "a string exit code");
    assert_invalid(
        completed,
        &mutated(completed, &|d| d["steps"][0]["started_at"] = json!("yesterday")),
        "a bad step time",
    );
    assert_invalid(completed, &mutated(completed, &|d| d["epoch"] = json!(-1)), "a negative epoch");
    assert_invalid(completed, &mutated(completed, &|d| d["session_id"] = json!(null)), "a null session");

    let queued = JobExecutionQueued::DETAIL_TYPE;
    assert_invalid(
        queued,
        &mutated(queued, &|d| {
            d["job"].as_object_mut().map(|j| j.remove("labels"));
        }),
        "a job without labels",
    );
    assert_invalid(queued, &mutated(queued, &|d| d["job"]["labels"] = json!(["Linux"])), "a non-canonical label");
    assert_invalid(queued, &mutated(queued, &|d| d["job"]["labels"] = json!([])), "no labels");
    // A job's env and steps never travel on the bus (secrets, size).
    assert_invalid(queued, &mutated(queued, &|d| d["job"]["env"] = json!({"TOKEN": "x"})), "a job's env in a fact");
    assert_invalid(
        queued,
        &mutated(queued, &|d| d["job"]["steps"] = json!([{"id": Uuid::nil(), "run": "make"}])),
        "a job's steps in a fact",
    );

    let created = RunAttemptCreated::DETAIL_TYPE;
    assert_invalid(created, &mutated(created, &|d| d["rerun_mode"] = json!("some")), "an unknown rerun mode");
    for (t, bad) in [
        (JobExecutionTerminated::DETAIL_TYPE, "skipped"),
        (JobTerminated::DETAIL_TYPE, "running"),
        (RunTerminated::DETAIL_TYPE, "pending"),
    ] {
        assert_invalid(t, &mutated(t, &|d| d["status"] = json!(bad)), "a non-terminal status");
    }
}

#[test]
fn unknown_fields_are_tolerated_by_the_schemas_and_by_rust() {
    for detail_type in ALL_DETAIL_TYPES {
        let mut detail = sample(detail_type)["detail"].clone();
        detail["added_in_a_later_version"] = json!({"anything": [1, "two"]});
        assert_valid(detail_type, &detail);
        parse_as(detail_type, &detail).unwrap_or_else(|e| panic!("{detail_type} with a new field: {e}"));
    }
    let mut queued = sample(JobExecutionQueued::DETAIL_TYPE)["detail"].clone();
    queued["job"]["concurrency_group"] = json!("deploy");
    assert_valid(JobExecutionQueued::DETAIL_TYPE, &queued);
    parse_as(JobExecutionQueued::DETAIL_TYPE, &queued).expect("nested new fields are ignored");
}

// ------------------------------------------------------------------ (e) transport samples

#[tokio::test]
async fn the_sqs_sample_is_what_a_subscriber_accepts() {
    let event: SqsEvent = serde_json::from_value(sample("sqs-event")).expect("a Lambda SQS event");
    assert_eq!(event.records.len(), 1);
    for message in &event.records {
        let fact = delivered(message).expect("the body is an EventBridge envelope");
        assert_eq!(fact.detail_type, JobExecutionQueued::DETAIL_TYPE);
        assert_valid(&fact.detail_type, &fact.detail);
        let queued = fact.parse::<JobExecutionQueued>().expect("a queued fact");
        assert_eq!(
            fact.detail,
            sample(JobExecutionQueued::DETAIL_TYPE)["detail"],
            "the body carries the queued sample"
        );
        assert_eq!(queued.detail.job.key, "build");
        assert!(fact.parse::<JobClaimed>().is_err(), "a detail type is parsed only as itself");
    }

    let response = consume(event, |d: Delivered| async move {
        validate(&d.detail_type, &d.detail).map_err(HandlerError::Permanent)?;
        d.parse::<JobExecutionQueued>().map(|_| ())
    })
    .await;
    assert!(response.batch_item_failures.is_empty(), "{:?}", response.batch_item_failures);
}

#[test]
fn the_stream_sample_is_an_outbox_insert_the_relay_publishes() {
    let event: StreamEvent = serde_json::from_value(sample("dynamodb-stream-event")).expect("a DynamoDB stream event");
    let facts = outbox_records(&event);
    assert_eq!(facts.len(), 1, "the one INSERT of an outbox item is relayed");
    let pending = &facts[0];
    assert_eq!(pending.sequence_number, event.records[0].change.sequence_number);

    let item = &pending.item;
    assert_eq!(item.head.kind, "outbox");
    assert_eq!(item.head.pk, format!("OUTBOX#{}", item.event_id));
    assert_eq!(item.head.sk, "OUTBOX");
    assert_eq!(Some(item.source.as_str()), source_of(&item.detail_type));

    let detail: Value = serde_json::from_str(&item.detail).expect("the detail is JSON text");
    assert_valid(&item.detail_type, &detail);
    let fact: Fact<JobClaimed> =
        Delivered { detail_type: item.detail_type.clone(), detail: detail.clone() }.parse().expect("a claimed fact");
    assert_eq!(fact.header.event_id, item.event_id);
    assert_eq!(fact.header.occurred_at, item.occurred_at);
    assert_eq!(detail, sample(JobClaimed::DETAIL_TYPE)["detail"], "the item carries the claimed sample");

    // Byte for byte what the code writes to the outbox (7 days is the default TTL).
    let written = OutboxItem::for_fact(&fact, 7).expect("an outbox item");
    assert_eq!(&written, item);

    // Only INSERTs of outbox items are facts.
    let mut not_insert = event.clone();
    not_insert.records[0].event_name = "MODIFY".into();
    assert!(outbox_records(&not_insert).is_empty());
}
