//! GitLab's deliveries: `X-Gitlab-Token` carries the hook's secret itself
//! (compared in constant time), `X-Gitlab-Event` names the event (`Push
//! Hook`, `Tag Push Hook`, `Merge Request Hook`), `X-Gitlab-Event-UUID` is
//! the delivery's id. Merge requests are read as GitHub's pull requests,
//! their actions in GitHub's words, so one `on:` serves both forges.

use std::collections::BTreeSet;

use baton_api::pipelines::TriggerKind;
use serde_json::Value;
use subtle::ConstantTimeEq;

use super::{base_fields, missing, text_at, trigger, BadSignature, Incoming, Reading};
use crate::error::ApiError;
use crate::triggers::{ChangedPaths, Event, PullRequestEvent, PushEvent};

/// A ref's commit id when the ref was deleted.
const NO_COMMIT: &str = "0000000000000000000000000000000000000000";

pub(super) fn verify(headers: &dyn Fn(&str) -> Option<String>, secrets: &[&str]) -> Result<(), BadSignature> {
    let token = headers("x-gitlab-token")
        .ok_or_else(|| BadSignature("no X-Gitlab-Token header: set the hook's secret token on GitLab".into()))?;
    // Every secret is compared, whichever matches: the time taken says
    // nothing of which one, or of how much of it, was right.
    let matched =
        secrets.iter().fold(subtle::Choice::from(0), |found, secret| found | token.as_bytes().ct_eq(secret.as_bytes()));
    if bool::from(matched) {
        Ok(())
    } else {
        Err(BadSignature("X-Gitlab-Token is not the hook's secret".into()))
    }
}

pub(super) fn read(headers: &dyn Fn(&str) -> Option<String>, payload: Value) -> Result<Reading, ApiError> {
    let event = headers("x-gitlab-event").unwrap_or_default();
    match event.as_str() {
        "Push Hook" | "Tag Push Hook" => push(payload),
        "Merge Request Hook" => merge_request(payload),
        "" => Err(ApiError::invalid_request("no X-Gitlab-Event header")),
        other => Ok(Reading::Ignored(format!(
            "Baton does not start runs on GitLab `{other}` events (it does on pushes, tag pushes and merge requests)"
        ))),
    }
}

fn common(payload: &Value, git_ref: &str, sha: &str, actor: &str) -> serde_json::Map<String, Value> {
    let repository = text_at(payload, &["project", "path_with_namespace"]);
    let owner = repository.rsplit_once('/').map_or("", |(owner, _)| owner);
    let web = text_at(payload, &["project", "web_url"]);
    let server_url = web.strip_suffix(&format!("/{repository}")).unwrap_or("");
    base_fields(git_ref, sha, repository, owner, actor, server_url, payload.clone())
}

fn push(payload: Value) -> Result<Reading, ApiError> {
    let git_ref = text_at(&payload, &["ref"]).to_string();
    if git_ref.is_empty() {
        return Err(missing("ref"));
    }
    let sha = text_at(&payload, &["after"]).to_string();
    if sha == NO_COMMIT {
        return Ok(Reading::Ignored(format!("`{git_ref}` was deleted: a deletion starts no run")));
    }
    let commits = payload.get("commits").and_then(Value::as_array).cloned().unwrap_or_default();
    let total = payload.get("total_commits_count").and_then(Value::as_u64).unwrap_or(commits.len() as u64);
    // GitLab lists at most 20 commits; past them the changed paths are not
    // all known, and path filters pass.
    let paths = if commits.is_empty() || total > commits.len() as u64 {
        ChangedPaths::Unknown
    } else {
        let mut paths = BTreeSet::new();
        for commit in &commits {
            for list in ["added", "modified", "removed"] {
                let listed = commit.get(list).and_then(Value::as_array).into_iter().flatten();
                paths.extend(listed.filter_map(Value::as_str).map(String::from));
            }
        }
        ChangedPaths::Known(paths.into_iter().collect())
    };
    let actor = text_at(&payload, &["user_username"]).to_string();
    let github = common(&payload, &git_ref, &sha, &actor);
    Ok(Reading::Event(Incoming {
        events: vec![Event::Push(PushEvent { git_ref: git_ref.clone(), paths })],
        trigger: trigger(TriggerKind::Push, &git_ref, &sha, &actor),
        github,
    }))
}

/// GitLab's merge request action in GitHub's pull request words: an update
/// that brought commits (`oldrev` set) is a `synchronize`, any other an
/// `edited`; a merge closes it.
fn action_of(attributes: &Value) -> Option<&'static str> {
    Some(match text_at(attributes, &["action"]) {
        "open" => "opened",
        "reopen" => "reopened",
        "close" | "merge" => "closed",
        "update" if attributes.get("oldrev").is_some_and(|v| v.is_string()) => "synchronize",
        "update" => "edited",
        _ => return None,
    })
}

fn merge_request(payload: Value) -> Result<Reading, ApiError> {
    let attributes = payload.get("object_attributes").cloned().unwrap_or(Value::Null);
    let raw_action = text_at(&attributes, &["action"]).to_string();
    let Some(action) = action_of(&attributes) else {
        return Ok(Reading::Ignored(format!(
            "a merge request `{raw_action}` starts no run (open, reopen, update, close and merge do)"
        )));
    };
    let base = text_at(&attributes, &["target_branch"]).to_string();
    let head = text_at(&attributes, &["source_branch"]).to_string();
    if base.is_empty() || head.is_empty() {
        return Err(missing("object_attributes.target_branch and source_branch"));
    }
    let iid = attributes.get("iid").and_then(Value::as_u64).unwrap_or_default();
    let git_ref = format!("refs/merge-requests/{iid}/head");
    let sha = text_at(&attributes, &["last_commit", "id"]).to_string();
    let actor = text_at(&payload, &["user", "username"]).to_string();
    let mut github = common(&payload, &git_ref, &sha, &actor);
    github.insert("head_ref".into(), Value::String(head.clone()));
    github.insert("base_ref".into(), Value::String(base.clone()));
    let event = PullRequestEvent { action: action.to_string(), base, head, paths: ChangedPaths::Unknown };
    Ok(Reading::Event(Incoming {
        events: vec![Event::PullRequest(event.clone()), Event::PullRequestTarget(event)],
        trigger: trigger(TriggerKind::PullRequest, &git_ref, &sha, &actor),
        github,
    }))
}
