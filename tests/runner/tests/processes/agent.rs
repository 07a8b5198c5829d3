//! The real `baton-runner` binary against the local stack: jobs run and are
//! reported, failures skip what follows, cancellation and lost leases stop
//! the processes, labels route jobs, signals stop the runner cleanly.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::support::*;
use baton_store::records::RunnerStatus;
use baton_tests::runners::Queued;
use baton_tests::{wait_for, TestStack, WAIT};
use chrono::{Duration as Span, Utc};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_steps_share_files_in_the_work_dir_succeeds() {
    let stack = TestStack::start().await;
    let (ws, token) = stack.new_workspace().await;
    let mut fact = job(
        &ws,
        &["linux"],
        &[
            ("write", "echo hello > a.txt && mkdir -p out && echo \"$BATON_JOB_KEY\" > out/key"),
            (
                "check",
                "test \"$(cat a.txt)\" = hello && test \"$(cat out/key)\" = build && test \"$PWD\" = \"$BATON_WORK_DIR\" \
                 && test \"$FROM_JOB\" = job && test \"$FROM_STEP\" = step && test -z \"$BATON_REGISTRATION_TOKEN\"",
            ),
            ("count", "ls | wc -l | grep -qx 2"),
        ],
        &[("FROM_JOB", "job"), ("FROM_STEP", "overridden by the step")],
    );
    fact.spec.work.steps[1].env.insert("FROM_STEP".into(), "step".into());
    queue(&stack, &fact).await;
    let mut runner = Runner::start(&stack, &token, "linux,x64", &["--once"]);

    let done = completed(&stack, fact.detail.job_execution_id).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
    // The last step's report ended the job: the runner sent no complete.
    assert_eq!(done["settled_by"], "steps", "{done:#}");
    let steps = done["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 3);
    for (step, spec) in steps.iter().zip(&fact.spec.work.steps) {
        assert_eq!(step["id"], spec.id.to_string());
        assert_eq!((&step["status"], &step["exit_code"]), (&json!("succeeded"), &json!(0)), "{step:#}");
        assert!(step["started_at"].is_string() && step["finished_at"].is_string());
    }
    assert!(runner.exited(WAIT).await.success(), "--once exits 0 after its job");
    let dir = runner.work_dir.join(fact.detail.job_execution_id.to_string());
    assert!(!dir.exists(), "the job's work dir is removed afterwards");
    stack.assert_all_facts_valid();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_step_fails_the_job_and_the_next_step_is_skipped() {
    let stack = TestStack::start().await;
    let (ws, token) = stack.new_workspace().await;
    let marker = scratch().join("should-not-exist");
    let fact = job(
        &ws,
        &["linux"],
        &[("ok", "true"), ("boom", "echo boom >&2; exit 3"), ("after", &format!("touch {}", marker.display()))],
        &[],
    );
    queue(&stack, &fact).await;
    let mut runner = Runner::start(&stack, &token, "linux", &["--once"]);

    let done = completed(&stack, fact.detail.job_execution_id).await;
    assert_eq!((&done["status"], &done["settled_by"]), (&json!("failed"), &json!("steps")), "{done:#}");
    let statuses: Vec<_> =
        done["steps"].as_array().unwrap().iter().map(|s| (s["status"].clone(), s["exit_code"].clone())).collect();
    assert_eq!(
        statuses,
        vec![(json!("succeeded"), json!(0)), (json!("failed"), json!(3)), (json!("skipped"), json!(null))]
    );
    assert!(!marker.exists(), "the skipped step never ran");
    assert!(runner.exited(WAIT).await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_past_its_timeout_is_killed_and_fails_the_job() {
    let stack = TestStack::start().await;
    let (ws, token) = stack.new_workspace().await;
    let marker = scratch().join("pgid");
    let mut fact =
        job(&ws, &["linux"], &[("slow", &format!("echo $$ > {}; sleep 600", marker.display())), ("next", "true")], &[]);
    fact.spec.work.steps[0].timeout_s = Some(1);
    queue(&stack, &fact).await;
    let _runner = Runner::start(&stack, &token, "linux", &["--once"]);

    let pgid = pgid_from(&marker).await;
    let done = completed(&stack, fact.detail.job_execution_id).await;
    assert_eq!(done["status"], "failed");
    assert_eq!(done["steps"][0]["exit_code"], 128 + libc::SIGTERM);
    assert_eq!(done["steps"][1]["status"], "skipped");
    assert!(done["message"].as_str().unwrap_or("").contains("timed out"), "{done:#}");
    group_gone(pgid, Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_job_is_stopped_within_a_heartbeat_and_its_process_group_is_gone() {
    let stack = fast_lease_stack().await;
    let (ws, token) = stack.new_workspace().await;
    let marker = scratch().join("pgid");
    let fact = job(
        &ws,
        &["linux"],
        &[("long", &format!("echo $$ > {}; sleep 600 & sleep 600", marker.display())), ("after", "true")],
        &[],
    );
    queue(&stack, &fact).await;
    let mut runner = Runner::start(&stack, &token, "linux", &["--once"]);
    let pgid = pgid_from(&marker).await;
    // The marker is written before the sleeps start: wait for them.
    wait_for("the step and its background child to run", Duration::from_secs(10), || async {
        (live_count(pgid) >= 2).then_some(())
    })
    .await;

    let cancel = terminated(&fact);
    stack.publish(&cancel).await;
    stack.wait_handled(cancel.header.event_id, "reconcile").await;
    let flagged = Instant::now();
    // One heartbeat interval (1 s) plus the time to act on it.
    group_gone(pgid, Duration::from_secs(3)).await;
    let stopped_after = flagged.elapsed();

    let done = completed(&stack, fact.detail.job_execution_id).await;
    assert_eq!(done["status"], "failed", "{done:#}");
    assert_eq!(done["steps"][0]["status"], "failed");
    assert_eq!(done["steps"][0]["exit_code"], 128 + libc::SIGTERM);
    assert_eq!(done["steps"][1]["status"], "skipped");
    assert!(runner.exited(WAIT).await.success());
    assert!(stopped_after < Duration::from_secs(3), "stopped {stopped_after:?} after the cancellation");
}

/// A one-step job sleeping ten minutes, queued for a new `linux` runner of
/// `token`, once its step runs: the job, the runner and the step's process
/// group.
async fn running_sleeper(stack: &TestStack, ws: &str, token: &str) -> (Queued, Runner, i32) {
    let marker = scratch().join("pgid");
    let fact = job(ws, &["linux"], &[("long", &format!("echo $$ > {}; sleep 600", marker.display()))], &[]);
    queue(stack, &fact).await;
    let runner = Runner::start(stack, token, "linux", &[]);
    let pgid = pgid_from(&marker).await;
    (fact, runner, pgid)
}

fn live_count(pgid: i32) -> usize {
    baton_runner::process::live_members(pgid).len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_killed_mid_job_loses_the_lease_and_another_runner_does_not_get_the_job() {
    let stack = fast_lease_stack().await;
    let (ws, token) = stack.new_workspace().await;
    let (lost, mut first, pgid) = running_sleeper(&stack, &ws, &token).await;

    first.signal(libc::SIGKILL);
    assert!(!first.exited(WAIT).await.success());
    kill_group(pgid); // the orphaned step; a real machine would have lost it with the runner
    let execution = lost.detail.job_execution_id;
    // Past the last possible heartbeat plus the 3 s lease.
    stack.reap_at(Utc::now() + Span::seconds(10)).await;
    let expired = stack
        .wait_fact("baton.runners.job.lease_expired", WAIT, |d| d["job_execution_id"] == execution.to_string())
        .await;
    assert_eq!(expired["epoch"], 1);
    assert_eq!(stack.store.runner_record(execution).await.unwrap().unwrap().status, RunnerStatus::Expired);

    // A second runner gets the next job, never the lost one.
    let mut second = Runner::start(&stack, &token, "linux", &["--once"]);
    let next = job(&ws, &["linux"], &[("quick", "true")], &[]);
    queue(&stack, &next).await;
    let done = completed(&stack, next.detail.job_execution_id).await;
    assert_eq!(done["status"], "succeeded");
    assert!(second.exited(WAIT).await.success());
    let claims_of_lost = stack
        .facts("baton.runners.job.claimed")
        .into_iter()
        .filter(|d| d["job_execution_id"] == execution.to_string())
        .count();
    assert_eq!(claims_of_lost, 1, "the expired job was claimed once, by the killed runner");
    assert!(stack.facts("baton.runners.job.completed").iter().all(|d| d["job_execution_id"] != execution.to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_with_labels_no_runner_has_stay_queued_while_others_run() {
    let stack = TestStack::start().await;
    let (ws, token) = stack.new_workspace().await;
    let gpu = job(&ws, &["linux", "gpu"], &[("train", "true")], &[]);
    queue(&stack, &gpu).await;
    let fits = job(&ws, &["linux"], &[("build", "true")], &[]);
    queue(&stack, &fits).await;
    let fits_too = job(&ws, &["x64"], &[("test", "true")], &[]);
    queue(&stack, &fits_too).await;
    let mut runner = Runner::start(&stack, &token, "linux,x64", &["--max-jobs", "2", "--concurrency", "2"]);

    for fact in [&fits, &fits_too] {
        assert_eq!(completed(&stack, fact.detail.job_execution_id).await["status"], "succeeded");
    }
    assert!(runner.exited(WAIT).await.success(), "--max-jobs 2 exits after two jobs");
    let record = stack.store.runner_record(gpu.detail.job_execution_id).await.unwrap().unwrap();
    assert_eq!(record.status, RunnerStatus::Pending, "the gpu job waits for a gpu runner");
    let pending = stack.pending_of(&ws).await;
    assert_eq!(pending.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_an_idle_runner_with_exit_code_zero() {
    let stack = TestStack::start().await;
    let (ws, token) = stack.new_workspace().await;
    let mut runner = Runner::start(&stack, &token, "linux", &[]);
    // Known to be running (registered, claiming) once it ran a job.
    let warmup = job(&ws, &["linux"], &[("quick", "true")], &[]);
    queue(&stack, &warmup).await;
    completed(&stack, warmup.detail.job_execution_id).await;

    let asked = Instant::now();
    runner.signal(libc::SIGTERM);
    let status = runner.exited(Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(0));
    assert!(asked.elapsed() < Duration::from_secs(5), "a long poll in flight does not delay the exit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_without_drain_abandons_the_running_job_and_reports_nothing() {
    let stack = TestStack::start().await;
    let (ws, token) = stack.new_workspace().await;
    let (fact, mut runner, pgid) = running_sleeper(&stack, &ws, &token).await;

    runner.signal(libc::SIGTERM);
    assert_eq!(runner.exited(Duration::from_secs(15)).await.code(), Some(0));
    group_gone(pgid, Duration::from_secs(5)).await;
    let record = stack.store.runner_record(fact.detail.job_execution_id).await.unwrap().unwrap();
    assert_eq!(record.status, RunnerStatus::Leased, "no complete: the lease is left to expire");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_drain_lets_the_running_job_finish_and_report() {
    let stack = TestStack::start().await;
    let (ws, token) = stack.new_workspace().await;
    let scratch = scratch();
    let (marker, release) = (scratch.join("started"), scratch.join("release"));
    let fact = job(
        &ws,
        &["linux"],
        &[("wait", &format!("touch {}; while [ ! -e {} ]; do sleep 0.1; done", marker.display(), release.display()))],
        &[],
    );
    queue(&stack, &fact).await;
    let mut runner = Runner::start(&stack, &token, "linux", &["--drain"]);
    wait_for("the step to start", WAIT, || async { marker.exists().then_some(()) }).await;

    runner.signal(libc::SIGTERM);
    std::fs::write(&release, b"").expect("release the step");
    assert_eq!(runner.exited(WAIT).await.code(), Some(0));
    let done = completed(&stack, fact.detail.job_execution_id).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_paused_past_its_lease_stops_the_job_without_a_report_and_claims_again() {
    let stack = fast_lease_stack().await;
    let (ws, token) = stack.new_workspace().await;
    let (fact, mut runner, pgid) = running_sleeper(&stack, &ws, &token).await;

    // The runner freezes (its step keeps running) and the reaper takes the lease.
    runner.signal(libc::SIGSTOP);
    stack.reap_at(Utc::now() + Span::seconds(10)).await;
    let execution = fact.detail.job_execution_id;
    stack.wait_fact("baton.runners.job.lease_expired", WAIT, |d| d["job_execution_id"] == execution.to_string()).await;
    runner.signal(libc::SIGCONT);

    // Its next heartbeat is 409 lease-lost: the step is killed, nothing reported.
    group_gone(pgid, Duration::from_secs(10)).await;
    let next = job(&ws, &["linux"], &[("quick", "true")], &[]);
    queue(&stack, &next).await;
    assert_eq!(completed(&stack, next.detail.job_execution_id).await["status"], "succeeded", "it claims again");
    assert!(stack.facts("baton.runners.job.completed").iter().all(|d| d["job_execution_id"] != execution.to_string()));
    assert_eq!(stack.store.runner_record(execution).await.unwrap().unwrap().status, RunnerStatus::Expired);
    runner.signal(libc::SIGTERM);
    assert_eq!(runner.exited(WAIT).await.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_concurrency_two_two_jobs_run_at_the_same_time() {
    let stack = TestStack::start().await;
    let (ws, token) = stack.new_workspace().await;
    let dir = scratch();
    // Each job waits for the other to have started: they can only both
    // succeed if they run at once.
    let rendezvous = |me: &str, other: &str| {
        format!("touch {d}/{me}; while [ ! -e {d}/{other} ]; do sleep 0.1; done", d = dir.display())
    };
    let mut jobs = Vec::new();
    for (me, other) in [("a", "b"), ("b", "a")] {
        let mut fact = job(&ws, &["linux"], &[(me, &rendezvous(me, other))], &[]);
        fact.detail.job.timeout_s = 30;
        queue(&stack, &fact).await;
        jobs.push(fact);
    }
    let mut runner = Runner::start(&stack, &token, "linux", &["--concurrency", "2", "--max-jobs", "2"]);
    for fact in &jobs {
        assert_eq!(completed(&stack, fact.detail.job_execution_id).await["status"], "succeeded");
    }
    assert!(runner.exited(WAIT).await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_its_last_step_report_settled_counts_as_reported_though_every_answer_of_that_report_was_lost() {
    // Every answer of the step-report route is lost (the reports are
    // applied): the last step's report settles the job, its answer never
    // comes, and the heartbeat then finds the lease ended. The runner must
    // not take that for a lost lease: the complete it then sends once gets
    // the recorded outcome back.
    let options = baton_devhost::HostOptions::default();
    options.answers_lost.lock().expect("the list").push("/v1/runners/leases/{execution_id}/steps/{step_id}".into());
    let overrides = HashMap::from([("BATON_HEARTBEAT_INTERVAL_S".into(), "1".into())]);
    let stack = TestStack::start_custom(|_| {}, overrides, options).await;
    let (ws, token) = stack.new_workspace().await;
    let fact = job(&ws, &["linux"], &[("only", "true")], &[]);
    queue(&stack, &fact).await;
    let log = scratch().join("runner.log");
    let mut runner = Runner::start_logged(&stack, &token, "linux", &["--once"], &log);

    let done = completed(&stack, fact.detail.job_execution_id).await;
    assert_eq!((&done["status"], &done["settled_by"]), (&json!("succeeded"), &json!("steps")), "{done:#}");
    assert!(runner.exited(WAIT).await.success(), "--once exits 0 after its job");
    let entries: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .expect("the runner's log")
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let fields = |message: &str| {
        entries.iter().find(|e| e["fields"]["message"] == message).map(|e| e["fields"].clone()).unwrap_or_default()
    };
    assert!(
        !fields("the last step's report was not delivered; completing instead").is_null(),
        "the settling report's answers were lost: {entries:#?}"
    );
    assert_eq!(fields("job finished")["status"], "succeeded", "{entries:#?}");
    let stopped = fields("runner stopped");
    assert_eq!((&stopped["succeeded"], &stopped["lost"]), (&json!(1), &json!(0)), "{stopped:#}");
}
