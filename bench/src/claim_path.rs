//! The claim path, one operation at a time and uncontended (1 runner): the
//! DynamoDB requests of each runner operation, the enqueue function, the
//! reaper and a provisioner's reads and writes at scale.

use baton_api::facts::{Fact, FactDetail, JobExecutionQueued};
use baton_domain::runners::labels::{canonicalize, labelset_id};
use baton_service::context::Context;
use baton_store::Store;
use baton_tests::runners::{queued_fact, queued_steps_fact, Queued};
use baton_tests::{unique_stage, TestStack};
use chrono::Utc;
use futures::FutureExt;
use serde_json::json;

use crate::recorder::Recorder;
use crate::windows::{measure, OperationFigures};

/// The labels of the bench's jobs and runners.
pub(crate) const LABELS: &[&str] = &["linux", "x64"];

fn sqs_event_for(fact: &Fact<JobExecutionQueued>) -> aws_lambda_events::sqs::SqsEvent {
    let envelope = json!({
        "version": "0",
        "id": uuid::Uuid::new_v4(),
        "detail-type": JobExecutionQueued::DETAIL_TYPE,
        "source": "baton",
        "account": "123456789012",
        "time": Utc::now(),
        "region": "us-east-1",
        "resources": [],
        "detail": fact,
    });
    serde_json::from_value(json!({
        "Records": [{
            "messageId": uuid::Uuid::new_v4().to_string(),
            "receiptHandle": "bench",
            "body": envelope.to_string(),
            "attributes": {},
            "messageAttributes": {},
            "eventSource": "aws:sqs",
            "awsRegion": "us-east-1",
        }]
    }))
    .expect("an SQS event")
}

/// Queues a job as the orchestrator and the enqueue function together do
/// (its spec, then its pending item), without the pipeline in between.
pub(crate) async fn enqueue_direct(store: &Store, workspace: &str, at: chrono::DateTime<Utc>, priority: i32) {
    let mut queued = queued_fact(workspace, LABELS, at);
    queued.spec.priority = priority;
    queued.fact.detail.job.priority = priority;
    write_spec(store, &queued).await;
    enqueue_pending(store, &queued).await;
}

/// Writes the pending item of a queued job, as the enqueue function does.
async fn enqueue_pending(store: &Store, queued: &Queued) {
    let labels = canonicalize(&queued.detail.job.labels).expect("valid labels");
    let set = labelset_id(&labels);
    store.enqueue(&queued.fact, labels, &set).await.expect("enqueue");
}

/// Writes a queued job's spec, as the orchestrator does with its fact.
async fn write_spec(store: &Store, queued: &Queued) {
    let put =
        store.job_spec_put(queued.detail.job_execution_id, workspace_of(queued), &queued.spec).expect("a spec put");
    store.transact(vec![put]).await.expect("the spec is written");
}

fn workspace_of(queued: &Queued) -> &str {
    &queued.fact.header.workspace_id
}

pub(crate) async fn per_operation(stack: &TestStack, recorder: &Recorder, context: &Context) -> Vec<OperationFigures> {
    let ws = format!("bench-ops-{}", &unique_stage()[1..]);
    let mut all = Vec::new();

    let reg_token = stack.registration_token(&ws, json!({})).await;
    let (f, runner) = measure(recorder, "register", stack.register(&reg_token, LABELS)).await;
    all.push(f);
    let session = runner.session_token.clone();

    let (f, none) = measure(recorder, "empty claim (no work ever queued)", stack.claim(&session)).await;
    assert!(none.is_none());
    all.push(f);

    let queued = queued_fact(&ws, LABELS, Utc::now());
    write_spec(&stack.store, &queued).await;
    let event = sqs_event_for(&queued.fact);
    let (f, response) = measure(recorder, "enqueue (function, one fact)", baton_enqueue::handle(context, event)).await;
    assert!(response.batch_item_failures.is_empty(), "the enqueue function took the fact");
    all.push(f);

    let (f, job) = measure(recorder, "claim (first job of a new label set)", stack.claim(&session)).await;
    let job = job.expect("the queued job is claimed");
    all.push(f);
    let id = job.job_execution_id;
    let token = job.lease.token.clone();

    let (f, hb) = measure(recorder, "heartbeat", stack.heartbeat(&token, id)).await;
    assert_eq!(hb.status, 200, "{}", hb.body);
    all.push(f);

    let step = job.job.work.steps[0].id;
    let path = format!("/v1/runners/leases/{id}/steps/{step}");
    let (f, report) = measure(
        recorder,
        "step report",
        stack.post(&path, &token, json!({"status": "running", "started_at": Utc::now()})),
    )
    .await;
    assert_eq!(report.status, 200, "{}", report.body);
    all.push(f);

    let (f, done) =
        measure(recorder, "complete", stack.complete(&token, id, json!({"status": "succeeded", "steps": []}))).await;
    assert_eq!(done.status, 200, "{}", done.body);
    all.push(f);

    // The same one-step job, ended by its step's report (behaviour.md §16):
    // the report reads the lease and the record, then ends the lease in the
    // complete's transaction; the runner sends no complete.
    {
        let queued = queued_steps_fact(&ws, LABELS, Utc::now(), 1);
        write_spec(&stack.store, &queued).await;
        enqueue_pending(&stack.store, &queued).await;
        let job = stack.claim(&session).await.expect("the queued job is claimed");
        let (id, token, step) = (job.job_execution_id, job.lease.token.clone(), job.job.work.steps[0].id);
        let path = format!("/v1/runners/leases/{id}/steps/{step}");
        let report = json!({"status": "succeeded", "exit_code": 0, "outputs": {"version": "1.0.0"}, "last": true});
        let (f, settled) =
            measure(recorder, "last step report (settles the job, no complete)", stack.post(&path, &token, report))
                .await;
        assert_eq!(settled.body["settled"], "succeeded", "{}", settled.body);
        all.push(f);
    }

    let (f, none) = measure(recorder, "empty claim (label set drained)", stack.claim(&session)).await;
    assert!(none.is_none());
    all.push(f);

    // The steady state: a job of a label set this instance read in the last
    // second (claims cache a workspace's label sets for LABEL_SETS_TTL). The
    // drain above pruned the set, so one claim first registers it in the
    // cache again.
    enqueue_direct(&stack.store, &ws, Utc::now(), 0).await;
    enqueue_direct(&stack.store, &ws, Utc::now(), 0).await;
    let first = stack.claim(&session).await.expect("the first of two jobs");
    let done =
        stack.complete(&first.lease.token, first.job_execution_id, json!({"status": "succeeded", "steps": []})).await;
    assert_eq!(done.status, 200, "{}", done.body);
    let (f, warm) = measure(recorder, "claim (label set seen < 1 s ago)", stack.claim(&session)).await;
    let warm = warm.expect("the queued job is claimed");
    all.push(f);
    let done =
        stack.complete(&warm.lease.token, warm.job_execution_id, json!({"status": "succeeded", "steps": []})).await;
    assert_eq!(done.status, 200, "{}", done.body);

    // A claim of a job naming 5 workspace secrets: the claim reads them
    // (one SSM GetParameters for up to 10 names) and puts them in.
    let names: Vec<String> = (1..=5).map(|i| format!("BENCH_SECRET_{i}")).collect();
    for name in &names {
        context.secrets().put(&ws, name, "bench-value").await.expect("a secret is set");
    }
    {
        let mut queued = queued_fact(&ws, LABELS, Utc::now());
        queued.spec.secrets = names.clone();
        queued.spec.work.env = names
            .iter()
            .map(|name| (name.clone(), baton_domain::workflows::references::secret_placeholder(name)))
            .collect();
        write_spec(&stack.store, &queued).await;
        enqueue_pending(&stack.store, &queued).await;
    }
    let (f, with_secrets) = measure(recorder, "claim (job naming 5 secrets)", stack.claim(&session)).await;
    let with_secrets = with_secrets.expect("the queued job is claimed");
    assert_eq!(with_secrets.job.secret_values.len(), 5, "the claim put the 5 secrets in");
    all.push(f);
    let done = stack
        .complete(&with_secrets.lease.token, with_secrets.job_execution_id, json!({"status": "succeeded", "steps": []}))
        .await;
    assert_eq!(done.status, 200, "{}", done.body);

    // A lease nobody heartbeats, then the reaper after its expiry.
    enqueue_direct(&stack.store, &ws, Utc::now(), 0).await;
    let _lost = stack.claim(&session).await.expect("a job to let expire");
    let later = Utc::now() + chrono::Duration::hours(2);
    let limits = baton_lease_reaper::ReapLimits {
        page: baton_lease_reaper::REAPER_PAGE,
        stop_at: std::time::Instant::now() + std::time::Duration::from_secs(60),
    };
    let (f, reaped) =
        measure(recorder, "reaper (expires one lease)", baton_lease_reaper::reap(context, later, limits)).await;
    assert_eq!(reaped.expect("the reaper runs").expired(), 1, "the reaper expired the lease");
    all.push(f);

    // A claim that must look at 30 fitting label sets, each queueing a job
    // with a 4 KB spec: the registry read, one head query a set, the claim
    // transaction and the winner's spec. Pending items carry no spec, so each
    // head query reads a small item whatever the scripts weigh.
    let wide = ["linux", "x64", "a", "b", "c", "d", "e"];
    let wide_ws = format!("{ws}-wide");
    let subsets: Vec<Vec<&str>> = (1u32..128)
        .filter(|mask| mask.count_ones() >= 2)
        .take(30)
        .map(|mask| wide.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, l)| *l).collect())
        .collect();
    for labels in &subsets {
        let mut queued = queued_fact(&wide_ws, labels, Utc::now());
        queued.spec.work.steps[0].run = "x".repeat(4096);
        write_spec(&stack.store, &queued).await;
        enqueue_pending(&stack.store, &queued).await;
    }
    let wide_session = stack.runner(&wide_ws, &wide).await.session_token;
    let (f, job) =
        measure(recorder, "claim among 30 fitting label sets (4 KB job specs)", stack.claim(&wide_session)).await;
    assert_eq!(job.expect("a job").job.work.steps[0].run.len(), 4096, "the spec reaches the runner whole");
    all.push(f);

    // A provisioner's reads and writes at scale (issue 23): the same 30
    // label sets hold 2,000 queued jobs (pending items only: demand counts
    // them, nobody claims them here). A provisioner serves at most
    // `MAX_LABEL_SETS` (20) sets: two share the 30.
    for (index, labels) in subsets.iter().cycle().take(2_000 - subsets.len()).enumerate() {
        let queued = queued_fact(&wide_ws, labels, Utc::now() + chrono::Duration::milliseconds(index as i64));
        enqueue_pending(&stack.store, &queued).await;
    }
    let served = |sets: &[Vec<&str>]| json!({"name": "bench", "label_sets": sets, "max_instances": 1000});
    let mut provisioner_tokens = Vec::new();
    for sets in subsets.chunks(baton_domain::runners::provisioners::settings::MAX_LABEL_SETS) {
        provisioner_tokens.push(stack.create_provisioner(&wide_ws, served(sets)).await.1);
    }
    let (f, demand) = measure(
        recorder,
        "provisioner demand read (20 of 30 label sets, 2,000 jobs queued)",
        stack.get("/v1/provisioners/demand", &provisioner_tokens[0]),
    )
    .await;
    assert_eq!(demand.status, 200, "{}", demand.body);
    let queued: u64 = demand.body["label_sets"]
        .as_array()
        .expect("label sets")
        .iter()
        .map(|set| set["queued"].as_u64().unwrap_or(0))
        .sum();
    assert!(queued >= 1_300, "the demand counts its sets' queued jobs ({queued})");
    all.push(f);
    let reserve = json!({"labels": subsets[0], "count": 1});
    let (f, reserved) = measure(
        recorder,
        "provisioner reservation (1 instance; 30 label sets, 2,000 jobs queued)",
        stack.post("/v1/provisioners/reservations", &provisioner_tokens[0], reserve),
    )
    .await;
    assert_eq!(reserved.status, 201, "{}", reserved.body);
    all.push(f);
    // The fleet pass at scale: every report and read of instances runs one
    // (intents, releases); here with 50 instances booting (a set holds
    // about 66 of the 2,000 jobs).
    let reserve = json!({"labels": subsets[1], "count": 50});
    let (f, reserved) = measure(
        recorder,
        "provisioner reservation (50 instances at once; same queue)",
        stack.post("/v1/provisioners/reservations", &provisioner_tokens[0], reserve),
    )
    .await;
    assert_eq!(reserved.status, 201, "{}", reserved.body);
    all.push(f);
    let events: Vec<serde_json::Value> = reserved.body["reservations"]
        .as_array()
        .expect("reservations")
        .iter()
        .enumerate()
        .map(|(i, r)| json!({"provider_runner_id": format!("i-{i:04}"), "state": "booting", "reservation_id": r["id"]}))
        .collect();
    assert_eq!(events.len(), 50, "50 reservations granted");
    let (f, report) = measure(
        recorder,
        "instance report (50 booting; with its fleet pass)",
        stack.post("/v1/provisioners/instances", &provisioner_tokens[0], json!({ "events": events })),
    )
    .await;
    assert_eq!(report.status, 200, "{}", report.body);
    all.push(f);
    let (f, listed) = measure(
        recorder,
        "instances read (50 instances; with its fleet pass)",
        stack.get("/v1/provisioners/instances", &provisioner_tokens[0]),
    )
    .await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    all.push(f);

    // A fleet with a year of history (issue 42): 10 or 10,000 one-job
    // machines that came and went, moved to the fleet's history as passes
    // leave them. One live instance each; a provisioner's tick is a report,
    // a demand read and an instances page. Then the same 10,000 left in the
    // partition, as every release and report left them before the history
    // existed: the read each of those calls made then (through the gateway
    // it passes 30 s on the emulator, so it is measured at the store).
    let history_ws = format!("{ws}-history");
    let ended_at = Utc::now() - chrono::Duration::days(200);
    for (ended, shape) in [(10, "10 ended"), (10_000, "10,000 ended")] {
        let (id, token) = stack.create_provisioner(&history_ws, served(&subsets[..1])).await;
        let id: uuid::Uuid = id.parse().expect("a provisioner id");
        stack.pile_up_ended_instances(&history_ws, id, ended, ended_at, true).await;
        let live = json!({"events": [{"provider_runner_id": "i-live", "state": "running"}]});
        for (name, call) in [
            ("instance report", stack.post("/v1/provisioners/instances", &token, live.clone()).boxed()),
            ("demand read", stack.get("/v1/provisioners/demand", &token).boxed()),
            ("instances page", stack.get("/v1/provisioners/instances", &token).boxed()),
        ] {
            let (f, answer) = measure(recorder, &format!("{name} (1 live instance, {shape})"), call).await;
            assert_eq!(answer.status, 200, "{}", answer.body);
            all.push(f);
        }
    }
    let (id, _) = stack.create_provisioner(&history_ws, served(&subsets[..1])).await;
    let id: uuid::Uuid = id.parse().expect("a provisioner id");
    stack.pile_up_ended_instances(&history_ws, id, 10_000, ended_at, false).await;
    let (f, fleet) = measure(
        recorder,
        "fleet read of every call before the history (10,000 ended in the partition)",
        stack.store.fleet(id),
    )
    .await;
    assert_eq!(fleet.expect("the read").expect("the fleet").instances.len(), 10_000);
    all.push(f);

    for f in &mut all {
        match f.name.as_str() {
            "claim (label set seen < 1 s ago)" => {
                f.target = Some("≤ 3 reads (session, head, spec) + 1 transaction".into());
                f.meets_target = Some(f.read_requests <= 3 && f.transactions == 1 && f.write_requests == 1);
            }
            "heartbeat" => {
                f.target = Some("exactly 1 write, no read".into());
                f.meets_target = Some(f.write_requests == 1 && f.read_requests == 0 && f.requests == 1);
            }
            _ => {}
        }
    }
    all
}
