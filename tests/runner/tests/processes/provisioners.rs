//! Elastic fleets end to end with real processes (behaviour.md §15): the
//! local reference provisioner (`baton-provisioner local`) reads demand from
//! the dev host, reserves, starts real `baton-runner` processes with the
//! reservations' ephemeral tokens, reports them, and stops them by intent;
//! runs are created over the HTTP API and orchestrated as always.

use std::time::{Duration, Instant};

use crate::support::*;
use baton_tests::http::Answer;
use baton_tests::provisioners::is_live;
use baton_tests::runs::Identified;
use baton_tests::{wait_for, workspace, TestStack};
use serde_json::json;

/// `n` independent one-step jobs on `linux`.
fn fan_out(n: usize, run: &str) -> String {
    let mut yaml = String::from("jobs:\n");
    for i in 0..n {
        yaml.push_str(&format!("  j{i}:\n    runs-on: linux\n    steps:\n      - run: {run}\n"));
    }
    yaml
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fan_out_on_an_empty_fleet_scales_up_to_max_instances_and_back_to_zero() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let body = json!({"name": "local", "label_sets": [["linux"]], "max_instances": 5, "jobs_per_instance": 1});
    let token = stack.create_provisioner(&ws, body).await.1;
    let local = LocalProvisioner::start(&stack, &token, &["--kill-grace-s", "2"], None);
    let run_id = stack.create_run(&ws, &fan_out(20, "'sleep 1'")).await.id();

    // Sample the fleet while the run goes: never more than 5 machines.
    let (mut most, mut saw) = (0, 0);
    let started = Instant::now();
    loop {
        let items = stack.instances(&token).await;
        most = most.max(items.iter().filter(|i| is_live(i)).count());
        saw = saw.max(items.len());
        let view = stack.run_view(&ws, &run_id).await;
        if view["status"] == "succeeded" {
            break;
        }
        assert!(view["status"] != "failed" && view["status"] != "cancelled", "{view:#}");
        assert!(started.elapsed() < Duration::from_secs(240), "the run did not finish: {view:#}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(most <= 5, "at most max_instances machines at once (saw {most})");
    assert!(most >= 2, "the fleet scaled out (saw at most {most})");
    // Back to zero: every ephemeral machine ended after its job.
    let items = wait_for("the fleet back to zero", Duration::from_secs(60), || async {
        let items = stack.instances(&token).await;
        (!items.iter().any(is_live)).then_some(items)
    })
    .await;
    assert_eq!(items.len(), 20, "one machine a job (saw {saw} while running)");
    assert_eq!(stack.count_items("reservation").await, 20, "each job's capacity reserved once");
    let released = stack.items_of("reservation").await.iter().filter(|r| r.contains_key("released_at")).count();
    assert_eq!(released, 20, "every reservation released");
    local.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_provisioners_on_one_label_set_reserve_each_jobs_capacity_once() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let body = json!({"name": "a", "label_sets": [["linux"]], "max_instances": 4, "jobs_per_instance": 1});
    let a = stack.create_provisioner(&ws, body).await.1;
    let body = json!({"name": "b", "label_sets": [["linux"]], "max_instances": 4, "jobs_per_instance": 1});
    let b = stack.create_provisioner(&ws, body).await.1;
    let _a = LocalProvisioner::start(&stack, &a, &["--kill-grace-s", "2"], None);
    let _b = LocalProvisioner::start(&stack, &b, &["--kill-grace-s", "2"], None);
    let run_id = stack.create_run(&ws, &fan_out(10, "'sleep 1'")).await.id();
    stack.wait_view(&ws, &run_id, "the run to succeed", |v| v["status"] == "succeeded").await;
    let (of_a, of_b) = (stack.instances(&a).await.len(), stack.instances(&b).await.len());
    assert_eq!(of_a + of_b, 10, "ten jobs, ten machines between the two ({of_a} + {of_b})");
    assert_eq!(stack.count_items("reservation").await, 10, "no job's capacity reserved twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancelled_jobs_machine_is_stopped_by_its_job_cancelled_intent() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let body = json!({"name": "local", "label_sets": [["linux"]], "max_instances": 2, "jobs_per_instance": 1});
    let token = stack.create_provisioner(&ws, body).await.1;
    // The runner would wait 60 s for the step, which ignores SIGTERM, to
    // stop on its own: a machine gone well before that was stopped by the
    // provisioner acting on its intent.
    let _local = LocalProvisioner::start(&stack, &token, &["--kill-grace-s", "60"], None);
    let run_id = stack.create_run(&ws, &fan_out(1, "\"trap '' TERM; sleep 300\"")).await.id();
    stack
        .wait_view(&ws, &run_id, "the job to run", |v| {
            v["status"] == "running" && v.to_string().contains("\"running\"")
        })
        .await;
    wait_for("a running machine", Duration::from_secs(60), || async {
        let items = stack.instances(&token).await;
        items.iter().any(|i| i["state"] == "running" && !i["runner_session_id"].is_null()).then_some(())
    })
    .await;
    let Answer { status, body } =
        stack.post(&format!("/v1/workspaces/{ws}/runs/{run_id}/cancel"), &stack.admin_token, json!({})).await;
    assert_eq!(status, 202, "{body:#}");
    let cancelled_at = Instant::now();
    let items = wait_for("the machine stopped on its intent", Duration::from_secs(90), || async {
        let items = stack.instances(&token).await;
        (!items.iter().any(is_live)).then_some(items)
    })
    .await;
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["terminate"]["reason"], "job-cancelled", "{items:#?}");
    let took = cancelled_at.elapsed();
    assert!(took < Duration::from_secs(45), "stopped by the intent, not by the runner's own 60 s grace ({took:?})");
    stack.wait_view(&ws, &run_id, "the run cancelled", |v| v["status"] == "cancelled").await;
}
