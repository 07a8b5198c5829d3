//! Webhooks (behaviour.md §18) through the real functions on the dev host,
//! fed with payloads in the shape GitHub and GitLab publish them
//! (`domain/tests/fixtures/hooks/`), each signed in the test as the forge
//! signs it: a delivery is verified before anything of it is read or
//! stored, starts one run per pipeline it matches with the `github`
//! context the forge's payload gives, says why the others did not start,
//! and a redelivery starts nothing new.

use std::collections::BTreeSet;

use baton_api::facts::{FactDetail, RunRequested};
use baton_tests::hooks::{fixture, github_signature, Hook};
use baton_tests::{workspace, TestStack};
use reqwest::Method;
use serde_json::{json, Value};

async fn put_pipeline(stack: &TestStack, ws: &str, name: &str, definition: &str) {
    let body = json!({ "definition": definition }).to_string();
    let path = format!("/v1/workspaces/{ws}/pipelines/{name}");
    let answer = stack.send(Method::PUT, &path, &stack.admin_token, Some(body)).await;
    assert_eq!(answer.status, 201, "{:#}", answer.body);
}

async fn run_count(stack: &TestStack, ws: &str) -> usize {
    stack.run_ids(ws).await.len()
}

fn started(answer: &Value) -> BTreeSet<String> {
    answer["runs"].as_array().into_iter().flatten().filter_map(|r| r["pipeline"].as_str().map(String::from)).collect()
}

fn reason_of<'a>(answer: &'a Value, pipeline: &str) -> &'a str {
    let ignored = answer["ignored"].as_array().into_iter().flatten();
    ignored.filter(|i| i["pipeline"] == pipeline).find_map(|i| i["reason"].as_str()).unwrap_or("")
}

const CI: &str = "name: ci
on:
  push:
    branches: [main]
    paths-ignore: ['docs/**']
  pull_request:
    branches: [main]
jobs:
  test:
    runs-on: linux
    steps:
      - run: echo ${{ github.event_name }} ${{ github.ref_name }} ${{ github.sha }} ${{ github.repository }} ${{ github.head_ref }}
";

const RELEASE: &str = "name: release
on:
  push:
    tags: ['v*']
jobs:
  ship: {runs-on: linux, steps: [{run: ship}]}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_github_push_starts_the_matching_pipelines_once_and_says_why_the_others_did_not() {
    let stack = TestStack::start().await;
    let ws = workspace();
    put_pipeline(&stack, &ws, "ci", CI).await;
    put_pipeline(&stack, &ws, "release", RELEASE).await;
    let hook = stack.create_hook(&ws, "github", None).await;
    assert!(hook.url.ends_with(&format!("/v1/hooks/{}", hook.id)), "{}", hook.url);
    let listed = stack.get_ok(&format!("/v1/workspaces/{ws}/hooks"), &stack.admin_token).await;
    assert_eq!(listed["items"][0]["provider"], "github");
    assert!(!listed.to_string().contains(&hook.secret), "a list never holds a secret");

    // GitHub checks the hook first.
    let pong = stack
        .github_delivery(&hook, "ping", "9c0f6a1e-0001-11ef-8000-000000000001", &fixture("github/ping.json"))
        .await;
    assert_eq!((pong.status, &pong.body["message"]), (202, &json!("pong")), "{:#}", pong.body);

    let push = fixture("github/push.json");
    let delivery = "72d3162e-cc78-11e3-81ab-4c9367dc0958";
    let first = stack.github_delivery(&hook, "push", delivery, &push).await;
    assert_eq!(first.status, 202, "{:#}", first.body);
    assert_eq!(started(&first.body), BTreeSet::from(["ci".to_string()]));
    assert!(reason_of(&first.body, "release").contains("tag"), "{:#}", first.body);
    let run_id = first.body["runs"][0]["run_id"].as_str().expect("a run").to_string();
    assert_eq!(
        stack.wait_requested_runs(&ws, &first.body).await,
        std::slice::from_ref(&run_id),
        "the run the answer named"
    );
    let view = stack.run_view(&ws, &run_id).await;
    assert_eq!(
        view["trigger"],
        json!({"kind": "push", "ref": "refs/heads/main", "sha": push["after"], "actor": "octo-dev", "delivery": delivery})
    );
    assert_eq!(view["pipeline"]["name"], "ci");
    let session = stack.runner(&ws, &["linux"]).await.session_token;
    let claim = stack.wait_claim(&session).await;
    let sha = push["after"].as_str().unwrap_or_default();
    assert_eq!(claim.job.work.steps[0].run, format!("echo push main {sha} example-org/service "));

    // Redelivered (the forge's "Redeliver", or a retry after a lost
    // answer): the first delivery's runs, nothing new.
    let again = stack.github_delivery(&hook, "push", delivery, &push).await;
    assert_eq!((again.status, &again.body), (202, &first.body));
    // The fact that made the run, delivered again (at least once), finds
    // the run it made and creates nothing.
    let requested = stack.facts(RunRequested::DETAIL_TYPE);
    let event_id = requested.iter().find(|f| f["run_id"] == run_id.as_str()).expect("the run.requested fact")
        ["event_id"]
        .as_str()
        .and_then(|id| uuid::Uuid::parse_str(id).ok())
        .expect("an event id");
    stack.redeliver_event(&event_id.to_string()).await;
    stack.wait_handled(event_id, "run-requests").await;
    assert_eq!(stack.run_ids(&ws).await, std::slice::from_ref(&run_id));

    // A push touching only ignored paths starts nothing, and says why.
    let docs = stack.github_delivery(&hook, "push", "72d3162e-0002", &fixture("github/push_docs_only.json")).await;
    assert_eq!(docs.status, 202, "{:#}", docs.body);
    assert!(started(&docs.body).is_empty());
    assert!(reason_of(&docs.body, "ci").contains("docs/guide.md"), "{:#}", docs.body);
    // A tag push starts the release.
    let tag = stack.github_delivery(&hook, "push", "72d3162e-0003", &fixture("github/push_tag.json")).await;
    assert_eq!(started(&tag.body), BTreeSet::from(["release".to_string()]), "{:#}", tag.body);
    stack.wait_requested_runs(&ws, &tag.body).await;
    // An event Baton does not start runs on is answered with the reason.
    let issues = stack.github_delivery(&hook, "issues", "72d3162e-0004", &json!({"action": "opened"})).await;
    assert_eq!(issues.status, 202);
    assert!(issues.body["message"].as_str().unwrap_or("").contains("issues"), "{:#}", issues.body);
    assert_eq!(run_count(&stack, &ws).await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_or_missing_signature_is_refused_and_nothing_is_stored() {
    let stack = TestStack::start().await;
    let ws = workspace();
    put_pipeline(&stack, &ws, "ci", CI).await;
    let hook = stack.create_hook(&ws, "github", None).await;
    let body = serde_json::to_vec(&fixture("github/push.json")).expect("JSON");
    let delivery = "5b2f4a10-0000-4000-8000-00000000dead";
    let base = |signature: Option<String>| {
        let mut headers = vec![("x-github-event", "push".to_string()), ("x-github-delivery", delivery.to_string())];
        if let Some(signature) = signature {
            headers.push(("x-hub-signature-256", signature));
        }
        headers
    };
    let mut tampered = body.clone();
    tampered.extend_from_slice(b" ");
    for (headers, sent, why) in [
        (base(None), &body, "no signature"),
        (base(Some(github_signature("not-the-secret", &body))), &body, "another secret"),
        (base(Some(github_signature(&hook.secret, &body))), &tampered, "a body changed after signing"),
        (base(Some("sha1=abc".into())), &body, "not sha256"),
    ] {
        let refused = stack.deliver(&hook.id, &headers, sent).await;
        assert_eq!((refused.status, refused.code()), (401, "bad-signature"), "{why}: {:#}", refused.body);
    }
    assert_eq!(run_count(&stack, &ws).await, 0);
    assert!(stack.stored_anywhere(delivery).await.is_empty(), "nothing of a refused delivery is kept");
    // The same delivery id, signed, is then handled: nothing was recorded.
    let signed = stack.deliver(&hook.id, &base(Some(github_signature(&hook.secret, &body))), &body).await;
    assert_eq!(started(&signed.body), BTreeSet::from(["ci".to_string()]), "{:#}", signed.body);
    assert_eq!(stack.wait_requested_runs(&ws, &signed.body).await.len(), 1);

    // A hook that does not exist, and a body over the limit.
    let unknown = stack.deliver(&uuid::Uuid::now_v7().to_string(), &base(None), &body).await;
    assert_eq!(unknown.status, 404);
    let huge = vec![b' '; 1024 * 1024 + 1];
    let too_big = stack.deliver(&hook.id, &base(Some(github_signature(&hook.secret, &huge))), &huge).await;
    assert_eq!((too_big.status, too_big.code()), (413, "payload-too-large"));

    // The secret is kept in the secret store only: no table item, object
    // or fact holds it.
    assert!(stack.stored_anywhere(&hook.secret).await.is_empty());
    assert!(!stack.all_facts().iter().any(|(_, fact)| fact.to_string().contains(&hook.secret)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_request_opened_starts_the_pipeline_with_its_head_and_base_and_closed_does_not() {
    let stack = TestStack::start().await;
    let ws = workspace();
    put_pipeline(&stack, &ws, "ci", CI).await;
    let hook = stack.create_hook(&ws, "github", Some(&["ci"])).await;
    let opened = fixture("github/pull_request_opened.json");
    let answer = stack.github_delivery(&hook, "pull_request", "pr-opened-1", &opened).await;
    assert_eq!(started(&answer.body), BTreeSet::from(["ci".to_string()]), "{:#}", answer.body);
    let run_id = answer.body["runs"][0]["run_id"].as_str().unwrap_or_default().to_string();
    stack.wait_requested_runs(&ws, &answer.body).await;
    let view = stack.run_view(&ws, &run_id).await;
    assert_eq!(view["trigger"]["kind"], "pull_request");
    assert_eq!(view["trigger"]["ref"], "refs/pull/42/merge");
    assert_eq!(view["trigger"]["sha"], opened["pull_request"]["head"]["sha"]);
    let session = stack.runner(&ws, &["linux"]).await.session_token;
    let claim = stack.wait_claim(&session).await;
    let sha = opened["pull_request"]["head"]["sha"].as_str().unwrap_or_default();
    assert_eq!(
        claim.job.work.steps[0].run,
        format!("echo pull_request 42/merge {sha} example-org/service feature/login")
    );
    let closed =
        stack.github_delivery(&hook, "pull_request", "pr-closed-1", &fixture("github/pull_request_closed.json")).await;
    assert!(started(&closed.body).is_empty());
    assert!(reason_of(&closed.body, "ci").contains("closed"), "{:#}", closed.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitlab_and_generic_deliveries_are_verified_their_way_and_start_runs() {
    let stack = TestStack::start().await;
    let ws = workspace();
    put_pipeline(&stack, &ws, "ci", CI).await;
    let gitlab = stack.create_hook(&ws, "gitlab", None).await;
    let push = serde_json::to_vec(&fixture("gitlab/push.json")).expect("JSON");
    let headers = |token: &str, uuid: &str| {
        vec![
            ("x-gitlab-event", "Push Hook".to_string()),
            ("x-gitlab-token", token.to_string()),
            ("x-gitlab-event-uuid", uuid.to_string()),
        ]
    };
    let wrong = stack.deliver(&gitlab.id, &headers("not-it", "gl-1"), &push).await;
    assert_eq!((wrong.status, wrong.code()), (401, "bad-signature"));
    let ok = stack.deliver(&gitlab.id, &headers(&gitlab.secret, "gl-1"), &push).await;
    assert_eq!(started(&ok.body), BTreeSet::from(["ci".to_string()]), "{:#}", ok.body);
    let again = stack.deliver(&gitlab.id, &headers(&gitlab.secret, "gl-1"), &push).await;
    assert_eq!(again.body, ok.body, "a redelivery (same X-Gitlab-Event-UUID) starts nothing");
    stack.wait_requested_runs(&ws, &ok.body).await;
    let run = stack.run_view(&ws, ok.body["runs"][0]["run_id"].as_str().unwrap_or_default()).await;
    assert_eq!(run["trigger"]["actor"], "octo-dev");

    let generic = stack.create_hook(&ws, "generic", Some(&["ci"])).await;
    let body = serde_json::to_vec(&json!({"event": "push", "ref": "refs/heads/main", "sha": "0123abcd", "paths": ["src/main.rs"], "actor": "deploy-bot"})).expect("JSON");
    let now = chrono::Utc::now().timestamp();
    let signed =
        |t: i64| vec![("x-baton-signature", baton_domain::hooks::generic_signature(&generic.secret, t, &body))];
    let stale = stack.deliver(&generic.id, &signed(now - 3600), &body).await;
    assert_eq!((stale.status, stale.code()), (401, "bad-signature"), "a replay an hour later is refused");
    let fresh = stack.deliver(&generic.id, &signed(now), &body).await;
    assert_eq!(started(&fresh.body), BTreeSet::from(["ci".to_string()]), "{:#}", fresh.body);
    assert_eq!(stack.wait_requested_runs(&ws, &fresh.body).await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_secret_verifies_as_the_old_one_does_during_its_grace_and_a_deleted_hook_refuses() {
    let logs = baton_tests::logs::capture();
    let stack = TestStack::start().await;
    let ws = workspace();
    put_pipeline(&stack, &ws, "ci", CI).await;
    let hook = stack.create_hook(&ws, "github", None).await;
    let rotated =
        stack.post(&format!("/v1/workspaces/{ws}/hooks/{}/rotate", hook.id), &stack.admin_token, json!({})).await;
    assert_eq!(rotated.status, 200, "{:#}", rotated.body);
    let new_secret = rotated.body["secret"].as_str().unwrap_or_default().to_string();
    assert_ne!(new_secret, hook.secret);
    assert!(rotated.body["previous_valid_until"].is_string());
    let push = fixture("github/push.json");
    let new_hook = Hook {
        secret: new_secret.clone(),
        ..Hook { id: hook.id.clone(), url: hook.url.clone(), secret: String::new() }
    };
    assert_eq!(stack.github_delivery(&new_hook, "push", "rot-1", &push).await.status, 202);
    assert_eq!(stack.github_delivery(&hook, "push", "rot-2", &push).await.status, 202, "the old secret, in its grace");
    // Another workspace's operator cannot reach the hook.
    let other = workspace();
    let theirs =
        stack.post(&format!("/v1/workspaces/{other}/hooks/{}/rotate", hook.id), &stack.admin_token, json!({})).await;
    assert_eq!(theirs.status, 404);
    let path = format!("/v1/workspaces/{ws}/hooks/{}", hook.id);
    assert_eq!(stack.send(Method::DELETE, &path, &stack.admin_token, None).await.status, 204);
    assert_eq!(stack.github_delivery(&new_hook, "push", "rot-3", &push).await.status, 404);
    assert_eq!(stack.send(Method::DELETE, &path, &stack.admin_token, None).await.status, 404);

    // Neither secret, nor a signature made with one, is in any log line
    // the functions wrote (what CloudWatch would keep), and the scan does
    // read their lines: the hook's id is there.
    let logged = logs.text();
    assert!(logged.contains(&hook.id), "the functions' log lines were captured");
    let signature = github_signature(&hook.secret, &serde_json::to_vec(&push).unwrap_or_default());
    for (what, value) in
        [("the secret", &hook.secret), ("the rotated secret", &new_secret), ("a signature", &signature)]
    {
        assert!(!logged.contains(value.as_str()), "{what} was logged");
    }
}

/// A hundred distinct pushes delivered at once start a hundred runs, and
/// the same delivery sent ten times at once starts one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_deliveries_start_a_hundred_runs_and_concurrent_copies_of_one_start_one() {
    let stack = TestStack::start().await;
    let ws = workspace();
    // A job the push skips: each run ends at once, so a hundred of them
    // load the stack no more than the test needs.
    put_pipeline(
        &stack,
        &ws,
        "ci",
        "name: ci\non: [push]\njobs:\n  a: {runs-on: linux, if: github.ref == 'refs/heads/never', steps: [{run: x}]}\n",
    )
    .await;
    let hook = stack.create_hook(&ws, "github", None).await;
    let push = fixture("github/push.json");
    let deliveries = (0..100).map(|i| {
        let mut payload = push.clone();
        payload["after"] = json!(format!("{i:040x}"));
        let (stack, hook) = (&stack, &hook);
        async move { stack.github_delivery(hook, "push", &format!("burst-{i}"), &payload).await }
    });
    let bursts = futures::future::join_all(deliveries).await;
    assert!(
        bursts.iter().all(|a| a.status == 202 && a.body["runs"].as_array().map(Vec::len) == Some(1)),
        "{bursts:#?}"
    );
    let copies = (0..10).map(|_| stack.github_delivery(&hook, "push", "burst-same", &push));
    let answers = futures::future::join_all(copies).await;
    let ids: BTreeSet<String> =
        answers.iter().map(|a| a.body["runs"][0]["run_id"].as_str().unwrap_or("").to_string()).collect();
    assert_eq!(ids.len(), 1, "one run for one delivery: {answers:#?}");
    let mut named: Vec<String> = ids.into_iter().collect();
    for answer in &bursts {
        named.push(answer.body["runs"][0]["run_id"].as_str().unwrap_or("").to_string());
    }
    let all = stack
        .wait_requested_runs(&ws, &json!({"runs": named.iter().map(|id| json!({"run_id": id})).collect::<Vec<_>>()}))
        .await;
    assert_eq!(all.len(), 101, "a hundred and one deliveries, as many runs");
}
