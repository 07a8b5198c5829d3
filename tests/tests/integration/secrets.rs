//! Workspace secrets (behaviour.md §17) through the real functions on the
//! dev host against the emulator's SSM Parameter Store: set, list and
//! delete by name, never a value back; a claim puts them in for its job
//! only; a workspace never reaches another's.

use baton_tests::http::Answer;
use baton_tests::{workspace, TestStack};
use chrono::Utc;
use reqwest::Method;
use serde_json::json;

async fn set(stack: &TestStack, ws: &str, name: &str, value: &str) -> Answer {
    let body = json!({ "value": value }).to_string();
    stack.send(Method::PUT, &format!("/v1/workspaces/{ws}/secrets/{name}"), &stack.admin_token, Some(body)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_set_listed_by_name_and_deleted_and_no_route_answers_a_value() {
    let stack = TestStack::start().await;
    let (ws, other) = (workspace(), workspace());
    assert_eq!(set(&stack, &ws, "DEPLOY_TOKEN", "s3cr3t-one").await.status, 204);
    assert_eq!(set(&stack, &ws, "DEPLOY_TOKEN", "s3cr3t-two").await.status, 204, "a second set replaces it");
    assert_eq!(set(&stack, &ws, "SIGNING_KEY", "k3y").await.status, 204);
    let listed = stack.get(&format!("/v1/workspaces/{ws}/secrets"), &stack.admin_token).await;
    assert_eq!(listed.status, 200);
    let names: Vec<&str> = listed.body["items"].as_array().unwrap().iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(names, ["DEPLOY_TOKEN", "SIGNING_KEY"]);
    assert!(listed.body["items"][0]["updated_at"].is_string());
    assert!(!listed.body.to_string().contains("s3cr3t"), "a list never holds a value: {}", listed.body);
    // Stored as a SecureString under the workspace's own path.
    let stored = stack
        .clients
        .ssm()
        .get_parameter()
        .name(format!("/baton/dev/secrets/{ws}/DEPLOY_TOKEN"))
        .send()
        .await
        .expect("the parameter exists");
    let parameter = stored.parameter.expect("a parameter");
    assert_eq!(parameter.r#type, Some(aws_sdk_ssm::types::ParameterType::SecureString));
    // Another workspace sees none of them.
    let theirs = stack.get(&format!("/v1/workspaces/{other}/secrets"), &stack.admin_token).await;
    assert_eq!(theirs.body["items"], json!([]));
    // Bad input changes nothing.
    for (name, value, why) in
        [("1BAD", "x", "name"), ("A-B", "x", "name"), ("OK", "", "empty"), ("OK", &"v".repeat(4097), "too big")]
    {
        let refused = set(&stack, &ws, name, value).await;
        assert_eq!((refused.status, refused.code()), (400, "invalid-request"), "{why}: {}", refused.body);
    }
    let deleted =
        stack.send(Method::DELETE, &format!("/v1/workspaces/{ws}/secrets/SIGNING_KEY"), &stack.admin_token, None).await;
    assert_eq!(deleted.status, 204);
    let again =
        stack.send(Method::DELETE, &format!("/v1/workspaces/{ws}/secrets/SIGNING_KEY"), &stack.admin_token, None).await;
    assert_eq!(again.status, 404);
    let listed = stack.get(&format!("/v1/workspaces/{ws}/secrets"), &stack.admin_token).await;
    assert_eq!(listed.body["items"].as_array().map(Vec::len), Some(1));
}

/// The claim puts the values in for the job it hands out, and the values
/// are nowhere else: not in the stored spec, a fact or the run view. A
/// run in another workspace naming the same secret gets it as missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_puts_in_its_workspaces_secrets_and_only_there() {
    let stack = TestStack::start().await;
    let (ws, other) = (workspace(), workspace());
    assert_eq!(set(&stack, &ws, "DEPLOY_TOKEN", "s3cr3t-value").await.status, 204);
    let yaml = "name: deploy\njobs:\n  ship:\n    runs-on: linux\n    env:\n      TOKEN: ${{ secrets.DEPLOY_TOKEN }}\n    steps:\n      - run: ./deploy --token '${{ secrets.DEPLOY_TOKEN }}'\n";
    let mut claimed = Vec::new();
    for workspace in [&ws, &other] {
        claimed.push(stack.leased_run(workspace, yaml).await.claim);
    }
    let ours = &claimed[0].job;
    assert_eq!(ours.work.env["TOKEN"], "s3cr3t-value");
    assert_eq!(ours.work.steps[0].run, "./deploy --token 's3cr3t-value'");
    assert_eq!(ours.secret_values, ["s3cr3t-value"], "the runner masks it");
    assert!(ours.missing_secrets.is_empty());
    let theirs = &claimed[1].job;
    assert_eq!(theirs.missing_secrets, ["DEPLOY_TOKEN"], "another workspace's secret is not theirs");
    assert!(!serde_json::to_string(theirs).unwrap().contains("s3cr3t"));
    // Nowhere stored or published.
    let spec = stack.store.job_spec(claimed[0].job_execution_id).await.expect("read the spec").expect("a spec");
    let stored = serde_json::to_string(&spec).unwrap();
    assert!(stored.contains("${{ secrets.DEPLOY_TOKEN }}") && !stored.contains("s3cr3t"), "{stored}");
    let facts = serde_json::to_string(&stack.all_facts()).unwrap();
    assert!(!facts.contains("s3cr3t"));
    let view = stack.run_view(&ws, &claimed[0].run_id.to_string()).await;
    assert!(!view.to_string().contains("s3cr3t"));
    let _ = Utc::now();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_is_read_alone_and_only_in_env_and_run() {
    let stack = TestStack::start().await;
    let ws = workspace();
    for (yaml, says) in [
        ("jobs:\n  a:\n    runs-on: l\n    if: ${{ secrets.X == 'y' }}\n    steps: [{run: x}]\n", "never decided on"),
        ("jobs:\n  a:\n    runs-on: l\n    steps: [{run: \"${{ secrets.X == 'y' }}\"}]\n", "read alone"),
        ("jobs:\n  a:\n    runs-on: l\n    steps: [{run: \"${{ secrets.A-B }}\"}]\n", "secret name"),
    ] {
        let refused =
            stack.post(&format!("/v1/workspaces/{ws}/runs"), &stack.admin_token, json!({"definition": yaml})).await;
        assert_eq!((refused.status, refused.code()), (400, "invalid-definition"), "{yaml}: {}", refused.body);
        assert!(refused.body.to_string().contains(says), "{says}: {}", refused.body);
    }
}

/// Helm, Jinja and Go-template values are common secrets, and Parameter
/// Store refuses a value holding `{{`…`}}` (the local stack refuses it as
/// AWS does): such a value is still stored, with no `{{` in what Parameter
/// Store holds, and reaches its job exactly as it was set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_value_parameter_store_would_refuse_is_stored_and_reaches_its_job_as_set() {
    let stack = TestStack::start().await;
    let ws = workspace();
    let helm = "password: {{ .Values.db.password }}";
    let set_answer = set(&stack, &ws, "VALUES", helm).await;
    assert_eq!(set_answer.status, 204, "{}", set_answer.body);
    let stored = stack
        .clients
        .ssm()
        .get_parameter()
        .name(format!("/baton/dev/secrets/{ws}/VALUES"))
        .with_decryption(true)
        .send()
        .await
        .expect("the parameter exists");
    let held = stored.parameter.and_then(|p| p.value).expect("a value");
    assert!(!held.contains("{{"), "Parameter Store is given no nested reference: {held}");
    let yaml = "name: deploy\njobs:\n  ship:\n    runs-on: linux\n    env:\n      VALUES: ${{ secrets.VALUES }}\n    steps:\n      - run: helm upgrade app\n";
    let claimed = stack.leased_run(&ws, yaml).await.claim;
    assert_eq!(claimed.job.work.env["VALUES"], helm);
    assert_eq!(claimed.job.secret_values, [helm], "the runner masks it as set");
}
