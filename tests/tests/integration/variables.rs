//! Workspace variables (GitHub's `vars` context) through the real functions
//! on the dev host: set, listed with their values, deleted, by name in any
//! case; a run reads the ones it names as they were when it was created,
//! an unset one as empty; a workspace never reads another's.

use baton_tests::http::Answer;
use baton_tests::{workspace, TestStack};
use reqwest::Method;
use serde_json::json;

async fn set(stack: &TestStack, ws: &str, name: &str, value: &str) -> Answer {
    let body = json!({ "value": value }).to_string();
    stack.send(Method::PUT, &format!("/v1/workspaces/{ws}/variables/{name}"), &stack.admin_token, Some(body)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variables_are_set_listed_with_their_values_and_deleted_by_name_in_any_case() {
    let stack = TestStack::start().await;
    let (ws, other) = (workspace(), workspace());
    let first = set(&stack, &ws, "deploy_target", "staging").await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!((first.body["name"].as_str(), first.body["value"].as_str()), (Some("DEPLOY_TARGET"), Some("staging")));
    assert_eq!(set(&stack, &ws, "DEPLOY_TARGET", "production").await.status, 200, "a second set replaces it");
    assert_eq!(set(&stack, &ws, "REGION", "").await.status, 200, "a value may be empty");
    let listed = stack.get(&format!("/v1/workspaces/{ws}/variables"), &stack.admin_token).await;
    assert_eq!(listed.status, 200);
    let pairs: Vec<(&str, &str)> = listed.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["name"].as_str().unwrap(), v["value"].as_str().unwrap()))
        .collect();
    assert_eq!(pairs, [("DEPLOY_TARGET", "production"), ("REGION", "")]);
    let theirs = stack.get(&format!("/v1/workspaces/{other}/variables"), &stack.admin_token).await;
    assert_eq!(theirs.body["items"], json!([]), "another workspace sees none of them");
    for (name, value, why) in [
        ("1BAD", "x", "a name starting with a digit"),
        ("A-B", "x", "a dash"),
        ("GITHUB_SHA", "x", "GitHub's own prefix"),
        ("OK", &"v".repeat(48 * 1024 + 1), "a value over 48 KiB"),
    ] {
        let refused = set(&stack, &ws, name, value).await;
        assert_eq!((refused.status, refused.code()), (400, "invalid-request"), "{why}: {}", refused.body);
    }
    let path = format!("/v1/workspaces/{ws}/variables/Region");
    assert_eq!(stack.send(Method::DELETE, &path, &stack.admin_token, None).await.status, 204);
    assert_eq!(stack.send(Method::DELETE, &path, &stack.admin_token, None).await.status, 404);
    let listed = stack.get(&format!("/v1/workspaces/{ws}/variables"), &stack.admin_token).await;
    assert_eq!(listed.body["items"].as_array().map(Vec::len), Some(1), "a refusal wrote nothing: {}", listed.body);
}

/// `${{ vars.NAME }}` in a job's env, a step's command, a job's `if:` and
/// the run's `run-name`: the values the workspace held when the run was
/// created (a later set changes the runs created after, not this one), an
/// unset variable empty, and another workspace's variables never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_reads_its_workspaces_variables_as_they_were_when_it_was_created() {
    let stack = TestStack::start().await;
    let (ws, other) = (workspace(), workspace());
    assert_eq!(set(&stack, &ws, "DEPLOY_TARGET", "production").await.status, 200);
    assert_eq!(set(&stack, &other, "DEPLOY_TARGET", "theirs").await.status, 200);
    let yaml = "name: deploy\nrun-name: deploy to ${{ vars.deploy_target }}\njobs:\n  ship:\n    runs-on: linux\n    if: vars.DEPLOY_TARGET != ''\n    env:\n      TARGET: ${{ vars.DEPLOY_TARGET }}\n    steps:\n      - run: ./deploy --to '${{ vars.DEPLOY_TARGET }}' --note '${{ vars.UNSET_NOTE }}'\n";
    let leased = stack.leased_run(&ws, yaml).await;
    assert_eq!(leased.view["title"], "deploy to production", "{:#}", leased.view);
    // Set again after the run was created: the run keeps what it read.
    assert_eq!(set(&stack, &ws, "DEPLOY_TARGET", "staging").await.status, 200);
    let job = &leased.claim.job;
    assert_eq!(job.work.env["TARGET"], "production");
    assert_eq!(job.work.steps[0].run, "./deploy --to 'production' --note ''", "an unset variable is empty");

    // Another workspace's run reads its own value; a run created now, the new one.
    let theirs = stack.leased_run(&other, yaml).await;
    assert_eq!(theirs.claim.job.work.env["TARGET"], "theirs");
    let later = stack.leased_run(&ws, yaml).await;
    assert_eq!(later.claim.job.work.env["TARGET"], "staging");
}
