//! Webhook deliveries as the forges send them (`tests/fixtures/hooks/`, in
//! the shapes of GitHub's and GitLab's published payloads): verified, read,
//! and matched against a pipeline's `on:`.

use baton_api::pipelines::TriggerKind;
use chrono::{DateTime, TimeZone, Utc};
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

use super::*;
use crate::error::ErrorCode;
use crate::triggers::{read_triggers, ChangedPaths, Event, PullRequestEvent, PushEvent};

const GITHUB_PUSH: &str = include_str!("../../tests/fixtures/hooks/github/push.json");
const GITHUB_PUSH_DOCS_ONLY: &str = include_str!("../../tests/fixtures/hooks/github/push_docs_only.json");
const GITHUB_PUSH_TAG: &str = include_str!("../../tests/fixtures/hooks/github/push_tag.json");
const GITHUB_PR_OPENED: &str = include_str!("../../tests/fixtures/hooks/github/pull_request_opened.json");
const GITHUB_PR_SYNCHRONIZE: &str = include_str!("../../tests/fixtures/hooks/github/pull_request_synchronize.json");
const GITHUB_PR_CLOSED: &str = include_str!("../../tests/fixtures/hooks/github/pull_request_closed.json");
const GITHUB_PING: &str = include_str!("../../tests/fixtures/hooks/github/ping.json");
const GITLAB_PUSH: &str = include_str!("../../tests/fixtures/hooks/gitlab/push.json");
const GITLAB_TAG_PUSH: &str = include_str!("../../tests/fixtures/hooks/gitlab/tag_push.json");
const GITLAB_MR_OPEN: &str = include_str!("../../tests/fixtures/hooks/gitlab/merge_request_open.json");
const GITLAB_MR_UPDATE: &str = include_str!("../../tests/fixtures/hooks/gitlab/merge_request_update.json");

const SECRET: &str = "whsec-2f9c41d7e0a84b6c";
const PREVIOUS_SECRET: &str = "whsec-81be05c3f6d29a70";

const JOBS: &str = "jobs:\n  a: {runs-on: linux, steps: [{run: x}]}\n";

/// The `on:` most pipelines of the example service have.
const ON_MAIN: &str =
    "on:\n  push:\n    branches: [main]\n    paths-ignore: ['docs/**']\n  pull_request:\n    branches: [main]\n";

/// A delivery's headers, looked up the way the hook handler does (by name,
/// whatever its case on the wire).
fn headers<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |name: &str| pairs.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.to_string())
}

/// `X-Hub-Signature-256` as GitHub computes it.
fn github_signature(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 5, 14, 7, 31, 0).unwrap()
}

fn payload(body: &str) -> Value {
    serde_json::from_str(body).unwrap()
}

fn read_github(event: &str, body: &str) -> Reading {
    let pairs = [("X-GitHub-Event", event), ("X-GitHub-Delivery", "5b0e8a50-11f1-11ef-9c3a-8e1f2b7d4c60")];
    let h = headers(&pairs);
    read(Provider::Github, &h, body.as_bytes()).unwrap()
}

fn read_gitlab(event: &str, body: &str) -> Reading {
    let pairs = [("X-Gitlab-Event", event), ("X-Gitlab-Event-UUID", "0c3f9c1e-6a4b-4d3e-9b7a-2f1d5e8c9a10")];
    let h = headers(&pairs);
    read(Provider::Gitlab, &h, body.as_bytes()).unwrap()
}

fn incoming(reading: Reading) -> Incoming {
    match reading {
        Reading::Event(incoming) => incoming,
        other => panic!("expected an event, got {other:?}"),
    }
}

fn ignored(reading: Reading) -> String {
    match reading {
        Reading::Ignored(reason) => reason,
        other => panic!("expected the delivery to be ignored, got {other:?}"),
    }
}

fn pull_request_of(incoming: &Incoming) -> &PullRequestEvent {
    match &incoming.events[..] {
        [Event::PullRequest(pr), Event::PullRequestTarget(target)] => {
            assert_eq!(pr, target, "both triggers see the same pull request");
            pr
        }
        other => panic!("expected pull_request then pull_request_target, got {other:?}"),
    }
}

fn triggers(on: &str) -> crate::triggers::Triggers {
    read_triggers(&format!("{on}{JOBS}")).unwrap()
}

fn text<'a>(fields: &'a serde_json::Map<String, Value>, key: &str) -> &'a str {
    fields.get(key).and_then(Value::as_str).unwrap_or_else(|| panic!("no string `{key}` in {fields:?}"))
}

// Verifying deliveries

#[test]
fn a_github_delivery_signed_with_the_hooks_secret_verifies() {
    let body = GITHUB_PUSH.as_bytes();
    let signature = github_signature(SECRET, body);
    let pairs = [("X-Hub-Signature-256", signature.as_str())];
    assert_eq!(verify(Provider::Github, &headers(&pairs), body, &[SECRET], now()), Ok(()));
}

#[test]
fn a_github_delivery_signed_with_another_secret_is_refused() {
    let body = GITHUB_PUSH.as_bytes();
    let signature = github_signature("whsec-someone-else", body);
    let pairs = [("X-Hub-Signature-256", signature.as_str())];
    let BadSignature(why) = verify(Provider::Github, &headers(&pairs), body, &[SECRET], now()).unwrap_err();
    assert!(why.contains("does not match"), "{why}");
}

#[test]
fn a_github_delivery_without_a_signature_is_refused_and_says_to_set_the_secret() {
    let pairs = [("X-GitHub-Event", "push")];
    let BadSignature(why) =
        verify(Provider::Github, &headers(&pairs), GITHUB_PUSH.as_bytes(), &[SECRET], now()).unwrap_err();
    assert!(why.contains("X-Hub-Signature-256") && why.contains("secret"), "{why}");
}

#[test]
fn a_malformed_github_signature_header_is_refused() {
    let body = GITHUB_PUSH.as_bytes();
    let hex_only = github_signature(SECRET, body).trim_start_matches("sha256=").to_string();
    let sha1_prefixed = format!("sha1={hex_only}");
    let not_hex = format!("sha256={}", "zz".repeat(32));
    for header in [hex_only.as_str(), sha1_prefixed.as_str(), not_hex.as_str(), "sha256=", ""] {
        let pairs = [("X-Hub-Signature-256", header)];
        assert!(verify(Provider::Github, &headers(&pairs), body, &[SECRET], now()).is_err(), "{header:?} verified");
    }
}

#[test]
fn a_github_body_changed_after_signing_is_refused() {
    let signature = github_signature(SECRET, GITHUB_PUSH.as_bytes());
    let tampered = GITHUB_PUSH.replace("refs/heads/main", "refs/heads/release");
    assert_ne!(tampered, GITHUB_PUSH);
    let pairs = [("X-Hub-Signature-256", signature.as_str())];
    assert!(verify(Provider::Github, &headers(&pairs), tampered.as_bytes(), &[SECRET], now()).is_err());
}

#[test]
fn a_rotated_out_github_secret_still_verifies_during_its_grace() {
    let body = GITHUB_PR_OPENED.as_bytes();
    let signature = github_signature(PREVIOUS_SECRET, body);
    let pairs = [("X-Hub-Signature-256", signature.as_str())];
    assert_eq!(verify(Provider::Github, &headers(&pairs), body, &[SECRET, PREVIOUS_SECRET], now()), Ok(()));
    assert!(
        verify(Provider::Github, &headers(&pairs), body, &[SECRET], now()).is_err(),
        "once its grace is over, the previous secret no longer verifies"
    );
}

#[test]
fn a_gitlab_delivery_carrying_the_hooks_token_verifies() {
    let body = GITLAB_PUSH.as_bytes();
    let pairs = [("X-Gitlab-Token", SECRET)];
    assert_eq!(verify(Provider::Gitlab, &headers(&pairs), body, &[SECRET], now()), Ok(()));
    let pairs = [("X-Gitlab-Token", PREVIOUS_SECRET)];
    assert_eq!(verify(Provider::Gitlab, &headers(&pairs), body, &[SECRET, PREVIOUS_SECRET], now()), Ok(()));
}

#[test]
fn a_gitlab_delivery_with_a_wrong_or_missing_token_is_refused() {
    let body = GITLAB_PUSH.as_bytes();
    let prefix = &SECRET[..SECRET.len() - 1];
    let longer = format!("{SECRET}0");
    for token in ["whsec-someone-else", prefix, longer.as_str(), ""] {
        let pairs = [("X-Gitlab-Token", token)];
        let BadSignature(why) = verify(Provider::Gitlab, &headers(&pairs), body, &[SECRET], now()).unwrap_err();
        assert!(why.contains("not the hook's secret"), "{token:?}: {why}");
    }
    let BadSignature(why) = verify(Provider::Gitlab, &headers(&[]), body, &[SECRET], now()).unwrap_err();
    assert!(why.contains("X-Gitlab-Token"), "{why}");
}

#[test]
fn a_generic_delivery_signed_now_verifies() {
    let body = br#"{"event": "push", "ref": "refs/heads/main", "sha": "4d1c2a9e", "actor": "ci-bot"}"#;
    let t = now().timestamp();
    let signature = generic_signature(SECRET, t, body);
    assert!(signature.starts_with(&format!("t={t},v1=")), "{signature}");
    let pairs = [("X-Baton-Signature", signature.as_str())];
    assert_eq!(verify(Provider::Generic, &headers(&pairs), body, &[SECRET], now()), Ok(()));
    assert_eq!(verify(Provider::Generic, &headers(&pairs), body, &[PREVIOUS_SECRET, SECRET], now()), Ok(()));
}

#[test]
fn a_generic_delivery_signed_outside_the_replay_window_is_refused_either_way() {
    let body = br#"{"event": "push", "ref": "refs/heads/main"}"#;
    let at = |t: i64| {
        let signature = generic_signature(SECRET, t, body);
        let pairs = [("X-Baton-Signature", signature.as_str())];
        let h = headers(&pairs);
        verify(Provider::Generic, &h, body, &[SECRET], now())
    };
    let t = now().timestamp();
    assert_eq!(at(t - REPLAY_WINDOW_S), Ok(()), "the window's edge still verifies");
    assert_eq!(at(t + REPLAY_WINDOW_S), Ok(()), "a sender's clock a little ahead still verifies");
    for late in [t - REPLAY_WINDOW_S - 1, t + REPLAY_WINDOW_S + 1, t - 86_400, 0] {
        let BadSignature(why) = at(late).unwrap_err();
        assert!(why.contains("from now"), "t={late}: {why}");
    }
}

#[test]
fn a_generic_delivery_with_an_absurd_timestamp_is_refused_not_a_crash() {
    let body = br#"{"event": "push", "ref": "refs/heads/main"}"#;
    for t in [i64::MIN, i64::MIN + 1, i64::MAX] {
        let signature = generic_signature(SECRET, t, body);
        let pairs = [("X-Baton-Signature", signature.as_str())];
        assert!(verify(Provider::Generic, &headers(&pairs), body, &[SECRET], now()).is_err(), "t={t} verified");
    }
}

#[test]
fn a_generic_delivery_signed_with_another_secret_or_malformed_is_refused() {
    let body = br#"{"event": "push", "ref": "refs/heads/main"}"#;
    let t = now().timestamp();
    let wrong = generic_signature("whsec-someone-else", t, body);
    let BadSignature(why) =
        verify(Provider::Generic, &headers(&[("X-Baton-Signature", wrong.as_str())]), body, &[SECRET], now())
            .unwrap_err();
    assert!(why.contains("does not match"), "{why}");
    let good = generic_signature(SECRET, t, body);
    let v1_only = good.split_once(',').unwrap().1.to_string();
    for header in [v1_only.as_str(), "t=1715671860", "t=soon,v1=00", ""] {
        let pairs = [("X-Baton-Signature", header)];
        assert!(verify(Provider::Generic, &headers(&pairs), body, &[SECRET], now()).is_err(), "{header:?} verified");
    }
    let BadSignature(why) = verify(Provider::Generic, &headers(&[]), body, &[SECRET], now()).unwrap_err();
    assert!(why.contains("X-Baton-Signature"), "{why}");
}

// Reading GitHub

/// Both forges' push fixtures are the same push: `octo-dev` pushing to
/// `main` commits that touch the same three files, with the forge's
/// delivery id.
#[track_caller]
fn assert_push_to_main(incoming: &Incoming, sent: &Value, delivery: &str) {
    assert_eq!(
        incoming.events,
        vec![Event::Push(PushEvent {
            git_ref: "refs/heads/main".into(),
            paths: ChangedPaths::Known(vec!["docs/guide.md".into(), "src/api.rs".into(), "src/lib.rs".into()]),
        })]
    );
    let trigger = &incoming.trigger;
    assert_eq!(trigger.kind, TriggerKind::Push);
    assert_eq!(trigger.git_ref.as_deref(), Some("refs/heads/main"));
    assert_eq!(trigger.sha.as_deref(), sent["after"].as_str());
    assert_eq!(trigger.actor.as_deref(), Some("octo-dev"));
    assert_eq!(trigger.delivery.as_deref(), Some(delivery));
}

#[test]
fn a_github_push_is_read_as_a_push_of_its_ref_with_the_files_its_commits_changed() {
    let sent = payload(GITHUB_PUSH);
    let incoming = incoming(read_github("push", GITHUB_PUSH));
    assert_push_to_main(&incoming, &sent, "5b0e8a50-11f1-11ef-9c3a-8e1f2b7d4c60");
    assert_eq!(incoming.trigger.actor.as_deref(), sent["sender"]["login"].as_str());
}

#[test]
fn a_github_push_fills_the_runs_github_context() {
    let sent = payload(GITHUB_PUSH);
    let github = incoming(read_github("push", GITHUB_PUSH)).github;
    assert_eq!(text(&github, "ref"), "refs/heads/main");
    assert_eq!(text(&github, "ref_name"), "main");
    assert_eq!(text(&github, "ref_type"), "branch");
    assert_eq!(text(&github, "repository"), "example-org/service");
    assert_eq!(text(&github, "repository_owner"), "example-org");
    assert_eq!(Some(text(&github, "sha")), sent["after"].as_str());
    assert_eq!(text(&github, "actor"), "octo-dev");
    assert_eq!(text(&github, "triggering_actor"), "octo-dev");
    assert_eq!(text(&github, "server_url"), "https://github.com");
    assert_eq!(text(&github, "head_ref"), "", "a push has no head_ref");
    assert_eq!(text(&github, "base_ref"), "");
    assert_eq!(github["event"], sent, "a push this small is kept whole as `github.event`");
    assert_eq!(github["event"]["head_commit"]["id"], sent["after"]);
    assert_eq!(github["event"]["commits"].as_array().map(Vec::len), Some(2));
}

#[test]
fn a_run_records_the_event_it_matched_as_event_name() {
    let incoming = incoming(read_github("pull_request", GITHUB_PR_OPENED));
    assert!(!incoming.github.contains_key("event_name"), "the event name is set per match");
    let fields = github_fields(&incoming, "pull_request_target");
    assert_eq!(text(&fields, "event_name"), "pull_request_target");
    assert_eq!(text(&fields, "head_ref"), "feature/login");
}

#[test]
fn a_github_tag_push_is_read_as_a_push_of_the_tag() {
    let sent = payload(GITHUB_PUSH_TAG);
    let incoming = incoming(read_github("push", GITHUB_PUSH_TAG));
    match &incoming.events[..] {
        [Event::Push(push)] => assert_eq!(push.git_ref, "refs/tags/v1.4.0"),
        other => panic!("{other:?}"),
    }
    assert_eq!(incoming.trigger.kind, TriggerKind::Push);
    assert_eq!(incoming.trigger.sha.as_deref(), sent["after"].as_str());
    assert_eq!(text(&incoming.github, "ref_name"), "v1.4.0");
    assert_eq!(text(&incoming.github, "ref_type"), "tag");
}

#[test]
fn a_github_ping_is_answered_and_starts_nothing() {
    assert_eq!(read_github("ping", GITHUB_PING), Reading::Ping);
}

#[test]
fn a_github_pull_request_is_matched_as_pull_request_then_pull_request_target() {
    let sent = payload(GITHUB_PR_OPENED);
    let incoming = incoming(read_github("pull_request", GITHUB_PR_OPENED));
    let pr = pull_request_of(&incoming);
    assert_eq!(pr.action, "opened");
    assert_eq!(pr.base, "main");
    assert_eq!(pr.head, "feature/login");
    assert_eq!(pr.paths, ChangedPaths::Unknown, "a pull request's payload lists no files");
    let trigger = &incoming.trigger;
    assert_eq!(trigger.kind, TriggerKind::PullRequest);
    assert_eq!(trigger.git_ref.as_deref(), Some("refs/pull/42/merge"));
    assert_eq!(trigger.sha.as_deref(), sent["pull_request"]["head"]["sha"].as_str());
    assert_eq!(trigger.actor.as_deref(), Some("octo-dev"));
    let github = &incoming.github;
    assert_eq!(text(github, "head_ref"), "feature/login");
    assert_eq!(text(github, "base_ref"), "main");
    assert_eq!(text(github, "ref"), "refs/pull/42/merge");
    assert_eq!(text(github, "repository"), "example-org/service");
    assert_eq!(github["event"]["number"], json!(42));
    assert_eq!(github["event"]["pull_request"]["labels"][0]["name"], json!("benchmark"));
    assert_eq!(github["event"]["pull_request"]["draft"], json!(false));
}

#[test]
fn a_github_pull_request_synchronize_runs_on_the_new_head_commit() {
    let sent = payload(GITHUB_PR_SYNCHRONIZE);
    let incoming = incoming(read_github("pull_request", GITHUB_PR_SYNCHRONIZE));
    assert_eq!(pull_request_of(&incoming).action, "synchronize");
    assert_eq!(incoming.trigger.sha.as_deref(), sent["after"].as_str());
    assert_eq!(sent["after"], sent["pull_request"]["head"]["sha"]);
}

#[test]
fn a_github_pull_request_merged_reads_as_closed_by_whoever_merged_it() {
    let incoming = incoming(read_github("pull_request", GITHUB_PR_CLOSED));
    assert_eq!(pull_request_of(&incoming).action, "closed");
    assert_eq!(incoming.trigger.actor.as_deref(), Some("octo-reviewer"));
}

#[test]
fn a_github_event_baton_does_not_run_on_is_ignored_with_a_reason() {
    let issue = json!({"action": "opened", "issue": {"number": 43, "title": "Login page is slow"}}).to_string();
    let why = ignored(read_github("issues", &issue));
    assert!(why.contains("`issues`") && why.contains("push") && why.contains("pull_request"), "{why}");
}

#[test]
fn a_github_branch_deletion_starts_no_run() {
    let mut deletion = payload(GITHUB_PUSH);
    deletion["before"] = deletion["after"].clone();
    deletion["after"] = json!("0000000000000000000000000000000000000000");
    deletion["deleted"] = json!(true);
    deletion["commits"] = json!([]);
    deletion["head_commit"] = Value::Null;
    let why = ignored(read_github("push", &deletion.to_string()));
    assert!(why.contains("refs/heads/main") && why.contains("deleted"), "{why}");
}

#[test]
fn a_github_delivery_that_is_not_json_or_names_no_event_is_a_bad_request() {
    let err = read(Provider::Github, &headers(&[("X-GitHub-Event", "push")]), b"ref=refs/heads/main").unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidRequest);
    assert!(err.message.contains("not JSON"), "{}", err.message);
    let err = read(Provider::Github, &headers(&[]), GITHUB_PUSH.as_bytes()).unwrap_err();
    assert!(err.message.contains("X-GitHub-Event"), "{}", err.message);
    let err = read(Provider::Github, &headers(&[("X-GitHub-Event", "push")]), b"{}").unwrap_err();
    assert!(err.message.contains("`ref`"), "{}", err.message);
}

#[test]
fn a_github_push_listing_the_most_commits_github_lists_has_unknown_paths() {
    let mut push = payload(GITHUB_PUSH);
    let commit = push["commits"][0].clone();
    push["commits"] = Value::Array(vec![commit; 2048]);
    let incoming = incoming(read_github("push", &push.to_string()));
    assert_eq!(
        incoming.events,
        vec![Event::Push(PushEvent { git_ref: "refs/heads/main".into(), paths: ChangedPaths::Unknown })]
    );
}

// Reading GitLab

#[test]
fn a_gitlab_push_is_read_like_a_github_push() {
    let sent = payload(GITLAB_PUSH);
    let incoming = incoming(read_gitlab("Push Hook", GITLAB_PUSH));
    assert_push_to_main(&incoming, &sent, "0c3f9c1e-6a4b-4d3e-9b7a-2f1d5e8c9a10");
    let github = &incoming.github;
    assert_eq!(text(github, "ref_name"), "main");
    assert_eq!(text(github, "ref_type"), "branch");
    assert_eq!(text(github, "repository"), "example-org/service");
    assert_eq!(text(github, "repository_owner"), "example-org");
    assert_eq!(text(github, "server_url"), "https://gitlab.example.com");
    assert_eq!(github["event"]["checkout_sha"], sent["after"]);
}

#[test]
fn a_gitlab_push_of_more_commits_than_it_lists_has_unknown_paths() {
    let mut push = payload(GITLAB_PUSH);
    push["total_commits_count"] = json!(27);
    let incoming = incoming(read_gitlab("Push Hook", &push.to_string()));
    assert_eq!(
        incoming.events,
        vec![Event::Push(PushEvent { git_ref: "refs/heads/main".into(), paths: ChangedPaths::Unknown })]
    );
}

#[test]
fn a_gitlab_tag_push_is_read_as_a_push_of_the_tag() {
    let sent = payload(GITLAB_TAG_PUSH);
    let incoming = incoming(read_gitlab("Tag Push Hook", GITLAB_TAG_PUSH));
    match &incoming.events[..] {
        [Event::Push(push)] => assert_eq!(push.git_ref, "refs/tags/v1.4.0"),
        other => panic!("{other:?}"),
    }
    assert_eq!(incoming.trigger.sha.as_deref(), sent["after"].as_str());
    assert_eq!(text(&incoming.github, "ref_name"), "v1.4.0");
    assert_eq!(text(&incoming.github, "ref_type"), "tag");
}

#[test]
fn a_gitlab_branch_deletion_starts_no_run() {
    let mut deletion = payload(GITLAB_PUSH);
    deletion["after"] = json!("0000000000000000000000000000000000000000");
    deletion["checkout_sha"] = Value::Null;
    deletion["commits"] = json!([]);
    deletion["total_commits_count"] = json!(0);
    let why = ignored(read_gitlab("Push Hook", &deletion.to_string()));
    assert!(why.contains("deleted"), "{why}");
}

#[test]
fn a_gitlab_merge_request_opened_reads_as_a_pull_request_opened() {
    let sent = payload(GITLAB_MR_OPEN);
    let incoming = incoming(read_gitlab("Merge Request Hook", GITLAB_MR_OPEN));
    let pr = pull_request_of(&incoming);
    assert_eq!(pr.action, "opened");
    assert_eq!(pr.base, "main");
    assert_eq!(pr.head, "feature/login");
    let trigger = &incoming.trigger;
    assert_eq!(trigger.kind, TriggerKind::PullRequest);
    assert_eq!(trigger.git_ref.as_deref(), Some("refs/merge-requests/42/head"), "the iid, not the global id");
    assert_eq!(trigger.sha.as_deref(), sent["object_attributes"]["last_commit"]["id"].as_str());
    assert_eq!(trigger.actor.as_deref(), Some("octo-dev"));
    assert_eq!(text(&incoming.github, "head_ref"), "feature/login");
    assert_eq!(text(&incoming.github, "base_ref"), "main");
    assert_eq!(text(&incoming.github, "repository"), "example-org/service");
}

#[test]
fn a_gitlab_merge_request_update_with_new_commits_is_a_synchronize() {
    let sent = payload(GITLAB_MR_UPDATE);
    assert!(sent["object_attributes"]["oldrev"].is_string());
    let incoming = incoming(read_gitlab("Merge Request Hook", GITLAB_MR_UPDATE));
    assert_eq!(pull_request_of(&incoming).action, "synchronize");
    assert_eq!(incoming.trigger.sha.as_deref(), sent["object_attributes"]["last_commit"]["id"].as_str());
}

#[test]
fn a_gitlab_merge_request_update_without_new_commits_is_an_edit() {
    let mut edit = payload(GITLAB_MR_UPDATE);
    edit["object_attributes"].as_object_mut().unwrap().remove("oldrev");
    let incoming = incoming(read_gitlab("Merge Request Hook", &edit.to_string()));
    assert_eq!(pull_request_of(&incoming).action, "edited");
}

#[test]
fn a_gitlab_merge_request_merged_or_closed_reads_as_closed_and_an_approval_is_ignored() {
    for (action, expected) in [("merge", "closed"), ("close", "closed"), ("reopen", "reopened")] {
        let mut mr = payload(GITLAB_MR_OPEN);
        mr["object_attributes"]["action"] = json!(action);
        let incoming = incoming(read_gitlab("Merge Request Hook", &mr.to_string()));
        assert_eq!(pull_request_of(&incoming).action, expected, "{action}");
    }
    let mut approval = payload(GITLAB_MR_OPEN);
    approval["object_attributes"]["action"] = json!("approved");
    let why = ignored(read_gitlab("Merge Request Hook", &approval.to_string()));
    assert!(why.contains("`approved`"), "{why}");
}

#[test]
fn a_gitlab_event_baton_does_not_run_on_is_ignored_with_a_reason() {
    let why = ignored(read_gitlab("Issue Hook", r#"{"object_kind": "issue"}"#));
    assert!(why.contains("`Issue Hook`"), "{why}");
}

// Reading Baton's own deliveries

#[test]
fn a_generic_push_reads_its_paths_or_leaves_them_unknown() {
    let body = json!({
        "event": "push", "ref": "refs/heads/main", "sha": "4d1c2a9e", "paths": ["src/lib.rs"],
        "actor": "ci-bot", "repository": "example-org/service",
    });
    let pairs = [("X-Baton-Delivery", "dl-7781")];
    let pushed = incoming(read(Provider::Generic, &headers(&pairs), body.to_string().as_bytes()).unwrap());
    assert_eq!(
        pushed.events,
        vec![Event::Push(PushEvent {
            git_ref: "refs/heads/main".into(),
            paths: ChangedPaths::Known(vec!["src/lib.rs".into()])
        })]
    );
    assert_eq!(pushed.trigger.delivery.as_deref(), Some("dl-7781"));
    assert_eq!(text(&pushed.github, "repository_owner"), "example-org");
    let unlisted = json!({"event": "push", "ref": "refs/heads/main", "sha": "4d1c2a9e"});
    let unknown = incoming(read(Provider::Generic, &headers(&[]), unlisted.to_string().as_bytes()).unwrap());
    assert_eq!(
        unknown.events,
        vec![Event::Push(PushEvent { git_ref: "refs/heads/main".into(), paths: ChangedPaths::Unknown })]
    );
}

// Deciding whether a pipeline runs

#[test]
fn a_push_to_main_runs_the_pipeline_as_push() {
    let on = triggers(ON_MAIN);
    assert_eq!(decide(&on, &incoming(read_github("push", GITHUB_PUSH))), Ok("push"));
    assert_eq!(decide(&on, &incoming(read_gitlab("Push Hook", GITLAB_PUSH))), Ok("push"));
}

#[test]
fn a_push_changing_only_ignored_paths_is_skipped_naming_the_paths() {
    let on = triggers(ON_MAIN);
    let why = decide(&on, &incoming(read_github("push", GITHUB_PUSH_DOCS_ONLY))).unwrap_err();
    assert!(why.contains("paths-ignore"), "{why}");
    assert!(why.contains("`docs/guide.md`") && why.contains("`docs/api/rate-limits.md`"), "{why}");
}

#[test]
fn a_tag_push_is_skipped_by_a_pipeline_that_filters_branches_only() {
    let on = triggers(ON_MAIN);
    let why = decide(&on, &incoming(read_github("push", GITHUB_PUSH_TAG))).unwrap_err();
    assert!(why.contains("v1.4.0") && why.contains("branches only"), "{why}");
    let releases = triggers("on:\n  push:\n    tags: ['v*']\n");
    assert_eq!(decide(&releases, &incoming(read_github("push", GITHUB_PUSH_TAG))), Ok("push"));
    assert_eq!(decide(&releases, &incoming(read_gitlab("Tag Push Hook", GITLAB_TAG_PUSH))), Ok("push"));
}

#[test]
fn a_pull_request_opened_or_updated_against_main_runs_as_pull_request() {
    let on = triggers(ON_MAIN);
    assert_eq!(decide(&on, &incoming(read_github("pull_request", GITHUB_PR_OPENED))), Ok("pull_request"));
    assert_eq!(decide(&on, &incoming(read_github("pull_request", GITHUB_PR_SYNCHRONIZE))), Ok("pull_request"));
    assert_eq!(decide(&on, &incoming(read_gitlab("Merge Request Hook", GITLAB_MR_OPEN))), Ok("pull_request"));
    assert_eq!(decide(&on, &incoming(read_gitlab("Merge Request Hook", GITLAB_MR_UPDATE))), Ok("pull_request"));
}

#[test]
fn a_closed_pull_request_is_skipped_by_its_types() {
    let on = triggers(ON_MAIN);
    let why = decide(&on, &incoming(read_github("pull_request", GITHUB_PR_CLOSED))).unwrap_err();
    assert!(why.contains("`closed`") && why.contains("on.pull_request.types"), "{why}");
    let on_close = triggers("on:\n  pull_request:\n    types: [closed]\n");
    assert_eq!(decide(&on_close, &incoming(read_github("pull_request", GITHUB_PR_CLOSED))), Ok("pull_request"));
}

#[test]
fn a_pipeline_with_only_pull_request_target_runs_as_pull_request_target() {
    let on = triggers("on:\n  pull_request_target:\n    branches: [main]\n");
    assert_eq!(decide(&on, &incoming(read_github("pull_request", GITHUB_PR_OPENED))), Ok("pull_request_target"));
    assert_eq!(decide(&on, &incoming(read_gitlab("Merge Request Hook", GITLAB_MR_UPDATE))), Ok("pull_request_target"));
}

#[test]
fn a_pull_request_against_another_branch_is_skipped_naming_the_filter() {
    let on = triggers("on:\n  pull_request:\n    branches: [release/*]\n");
    let why = decide(&on, &incoming(read_github("pull_request", GITHUB_PR_OPENED))).unwrap_err();
    assert!(why.contains("base branch `main`") && why.contains("on.pull_request.branches"), "{why}");
}

// Delivery ids and stored events

#[test]
fn each_provider_names_its_delivery_id_header() {
    let pairs = [
        ("X-GitHub-Delivery", "5b0e8a50-11f1-11ef-9c3a-8e1f2b7d4c60"),
        ("X-Gitlab-Event-UUID", " 0c3f9c1e-6a4b-4d3e-9b7a-2f1d5e8c9a10 "),
        ("X-Baton-Delivery", "dl-7781"),
    ];
    let h = headers(&pairs);
    assert_eq!(Provider::Github.delivery_id(&h).as_deref(), Some("5b0e8a50-11f1-11ef-9c3a-8e1f2b7d4c60"));
    assert_eq!(Provider::Gitlab.delivery_id(&h).as_deref(), Some("0c3f9c1e-6a4b-4d3e-9b7a-2f1d5e8c9a10"));
    assert_eq!(Provider::Generic.delivery_id(&h).as_deref(), Some("dl-7781"));
    assert_eq!(Provider::Github.delivery_id(&headers(&[])), None);
    let too_long = "d".repeat(129);
    assert_eq!(Provider::Generic.delivery_id(&headers(&[("X-Baton-Delivery", too_long.as_str())])), None);
    assert_eq!(Provider::Generic.delivery_id(&headers(&[("X-Baton-Delivery", "  ")])), None);
}

#[test]
fn a_provider_is_named_as_in_a_hooks_settings() {
    for provider in [Provider::Github, Provider::Gitlab, Provider::Generic] {
        assert_eq!(Provider::parse(provider.as_str()), Some(provider));
    }
    assert_eq!(Provider::parse("bitbucket"), None);
}

#[test]
fn an_oversized_push_keeps_its_ref_and_head_commit_within_the_event_limit() {
    let mut push = payload(GITHUB_PUSH);
    let head_commit = push["head_commit"].clone();
    let commits: Vec<Value> = (0..3000)
        .map(|i| {
            let id = format!("{i:040x}");
            json!({
                "id": id,
                "tree_id": format!("{:040x}", i + 1_000_000),
                "distinct": true,
                "message": format!("Regenerate fixture {i} of the login benchmarks"),
                "timestamp": "2024-05-14T09:12:31+02:00",
                "url": format!("https://github.com/example-org/service/commit/{id}"),
                "author": {"name": "Octo Dev", "email": "octo-dev@example.com", "username": "octo-dev"},
                "committer": {"name": "Octo Dev", "email": "octo-dev@example.com", "username": "octo-dev"},
                "added": [format!("bench/fixtures/login-{i}.json")],
                "removed": [],
                "modified": [],
            })
        })
        .collect();
    push["commits"] = Value::Array(commits);
    let body = push.to_string();
    assert!(body.len() > 4 * crate::limits::MAX_EVENT_BYTES, "the payload is far past the limit");

    let incoming = incoming(read_github("push", &body));
    let stored = Value::Object(github_fields(&incoming, "push")).to_string();
    assert!(stored.len() <= crate::limits::MAX_EVENT_BYTES, "{} bytes stored", stored.len());
    let event = &incoming.github["event"];
    assert_eq!(event["ref"], json!("refs/heads/main"));
    assert_eq!(event["head_commit"], head_commit);
    assert!(event.get("commits").is_none(), "the commit list goes first");
    assert_eq!(event["repository"]["full_name"], json!("example-org/service"), "the rest is kept");
    assert_eq!(
        incoming.events,
        vec![Event::Push(PushEvent { git_ref: "refs/heads/main".into(), paths: ChangedPaths::Unknown })],
        "past 2048 commits the changed paths are not all known"
    );
}

#[test]
fn a_pull_request_with_a_huge_description_keeps_what_workflows_read() {
    let mut pr = payload(GITHUB_PR_OPENED);
    pr["pull_request"]["body"] = json!("A very long description. ".repeat(6000));
    pr["pull_request"]["title"] = json!("t".repeat(2000));
    let incoming = incoming(read_github("pull_request", &pr.to_string()));
    let stored = Value::Object(incoming.github.clone()).to_string();
    assert!(stored.len() <= crate::limits::MAX_EVENT_BYTES, "{} bytes stored", stored.len());
    let event = &incoming.github["event"];
    assert_eq!(event["action"], json!("opened"));
    assert_eq!(event["number"], json!(42));
    assert_eq!(event["pull_request"]["head"]["ref"], json!("feature/login"));
    assert_eq!(event["pull_request"]["base"]["ref"], json!("main"));
    assert!(event["pull_request"].get("body").is_none() && event["pull_request"].get("title").is_none());
    assert!(event.get("organization").is_none(), "fields workflows do not read are cut");
    assert_eq!(text(&incoming.github, "head_ref"), "feature/login", "the context's own fields stay");
}
