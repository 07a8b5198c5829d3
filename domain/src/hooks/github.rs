//! GitHub's deliveries: `X-Hub-Signature-256: sha256=<hex>` (HMAC-SHA256 of
//! the raw body under the hook's secret), `X-GitHub-Event` naming the event
//! (`ping`, `push`, `pull_request`, …), `X-GitHub-Delivery` its id.

use std::collections::BTreeSet;

use baton_api::pipelines::TriggerKind;
use serde_json::Value;

use super::{base_fields, hmac_matches, missing, text_at, trigger, BadSignature, Incoming, Reading};
use crate::error::ApiError;
use crate::triggers::{ChangedPaths, Event, PullRequestEvent, PushEvent};

/// GitHub lists at most this many commits in a push; past it the changed
/// paths are not all known.
const MAX_LISTED_COMMITS: usize = 2048;

pub(super) fn verify(
    headers: &dyn Fn(&str) -> Option<String>,
    body: &[u8],
    secrets: &[&str],
) -> Result<(), BadSignature> {
    let header = headers("x-hub-signature-256")
        .ok_or_else(|| BadSignature("no X-Hub-Signature-256 header: set the hook's secret on GitHub".into()))?;
    let hex_digest = header
        .trim()
        .strip_prefix("sha256=")
        .ok_or_else(|| BadSignature("X-Hub-Signature-256 is not `sha256=<hex>`".into()))?;
    let signature = hex::decode(hex_digest).map_err(|_| BadSignature("X-Hub-Signature-256 is not hex".into()))?;
    if hmac_matches(secrets, body, &signature) {
        Ok(())
    } else {
        Err(BadSignature("X-Hub-Signature-256 does not match the hook's secret".into()))
    }
}

pub(super) fn read(headers: &dyn Fn(&str) -> Option<String>, payload: Value) -> Result<Reading, ApiError> {
    let event = headers("x-github-event").unwrap_or_default();
    match event.as_str() {
        "ping" => Ok(Reading::Ping),
        "push" => push(payload),
        "pull_request" => pull_request(payload),
        "" => Err(ApiError::invalid_request("no X-GitHub-Event header")),
        other => Ok(Reading::Ignored(format!(
            "Baton does not start runs on GitHub `{other}` events (it does on push and pull_request)"
        ))),
    }
}

fn common(payload: &Value, git_ref: &str, sha: &str) -> serde_json::Map<String, Value> {
    let repository = text_at(payload, &["repository", "full_name"]);
    let owner = match text_at(payload, &["repository", "owner", "login"]) {
        "" => text_at(payload, &["repository", "owner", "name"]),
        login => login,
    };
    let actor = text_at(payload, &["sender", "login"]);
    let server = text_at(payload, &["repository", "html_url"]);
    let server_url = server.strip_suffix(&format!("/{repository}")).unwrap_or("https://github.com");
    base_fields(git_ref, sha, repository, owner, actor, server_url, payload.clone())
}

fn push(payload: Value) -> Result<Reading, ApiError> {
    let git_ref = text_at(&payload, &["ref"]).to_string();
    if git_ref.is_empty() {
        return Err(missing("ref"));
    }
    if payload.get("deleted").and_then(Value::as_bool) == Some(true) {
        return Ok(Reading::Ignored(format!("`{git_ref}` was deleted: a deletion starts no run, as on GitHub")));
    }
    let sha = text_at(&payload, &["after"]).to_string();
    let commits = payload.get("commits").and_then(Value::as_array).cloned().unwrap_or_default();
    let paths = if commits.is_empty() || commits.len() >= MAX_LISTED_COMMITS {
        ChangedPaths::Unknown
    } else {
        let mut paths = BTreeSet::new();
        for commit in &commits {
            for list in ["added", "removed", "modified"] {
                let listed = commit.get(list).and_then(Value::as_array).into_iter().flatten();
                paths.extend(listed.filter_map(Value::as_str).map(String::from));
            }
        }
        ChangedPaths::Known(paths.into_iter().collect())
    };
    let actor = text_at(&payload, &["sender", "login"]).to_string();
    let github = common(&payload, &git_ref, &sha);
    Ok(Reading::Event(Incoming {
        events: vec![Event::Push(PushEvent { git_ref: git_ref.clone(), paths })],
        trigger: trigger(TriggerKind::Push, &git_ref, &sha, &actor),
        github,
    }))
}

fn pull_request(payload: Value) -> Result<Reading, ApiError> {
    let action = text_at(&payload, &["action"]).to_string();
    let base = text_at(&payload, &["pull_request", "base", "ref"]).to_string();
    let head = text_at(&payload, &["pull_request", "head", "ref"]).to_string();
    if action.is_empty() || base.is_empty() || head.is_empty() {
        return Err(missing("action, pull_request.base.ref and pull_request.head.ref"));
    }
    let number = payload.get("number").and_then(Value::as_u64).unwrap_or_default();
    // GitHub runs a pull request's workflow on its merge ref; the head's
    // commit is what the forge reports the status on.
    let git_ref = format!("refs/pull/{number}/merge");
    let sha = text_at(&payload, &["pull_request", "head", "sha"]).to_string();
    let actor = text_at(&payload, &["sender", "login"]).to_string();
    let mut github = common(&payload, &git_ref, &sha);
    github.insert("head_ref".into(), Value::String(head.clone()));
    github.insert("base_ref".into(), Value::String(base.clone()));
    // The payload lists no files: path filters pass (matching's rule for
    // unknown paths), where GitHub would ask its API for the diff.
    let event = PullRequestEvent { action, base, head, paths: ChangedPaths::Unknown };
    Ok(Reading::Event(Incoming {
        events: vec![Event::PullRequest(event.clone()), Event::PullRequestTarget(event)],
        trigger: trigger(TriggerKind::PullRequest, &git_ref, &sha, &actor),
        github,
    }))
}
