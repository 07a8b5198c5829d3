//! Baton's own signed deliveries, for any system that can sign a request:
//! `X-Baton-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`
//! (api.md), refused outside a window around now so a captured delivery
//! cannot be replayed later; `X-Baton-Delivery` names a delivery for
//! redeliveries. The body:
//!
//! ```json
//! {"event": "push", "ref": "refs/heads/main", "sha": "…", "paths": ["src/a.rs"], "actor": "ci-bot"}
//! {"event": "pull_request", "action": "opened", "base": "main", "head": "feature", "sha": "…"}
//! ```
//!
//! `paths` may be left out (unknown: path filters pass).

use baton_api::pipelines::TriggerKind;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use super::{base_fields, hmac_matches, missing, text_at, trigger, BadSignature, Incoming, Reading};
use crate::error::ApiError;
use crate::triggers::{ChangedPaths, Event, PullRequestEvent, PushEvent};

/// How far a delivery's timestamp may be from now, either way.
pub const REPLAY_WINDOW_S: i64 = 300;

/// The `X-Baton-Signature` of `body` sent at `t` (what a sender computes).
pub fn sign(secret: &str, t: i64, body: &[u8]) -> String {
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret.as_bytes()) {
        Ok(mac) => mac,
        // HMAC takes a key of any length.
        Err(_) => return String::new(),
    };
    mac.update(format!("{t}.").as_bytes());
    mac.update(body);
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

pub(super) fn verify(
    headers: &dyn Fn(&str) -> Option<String>,
    body: &[u8],
    secrets: &[&str],
    now: DateTime<Utc>,
) -> Result<(), BadSignature> {
    let header = headers("x-baton-signature").ok_or_else(|| BadSignature("no X-Baton-Signature header".into()))?;
    let (mut t, mut v1) = (None, None);
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", value)) => t = value.parse::<i64>().ok(),
            Some(("v1", value)) => v1 = hex::decode(value).ok(),
            _ => {}
        }
    }
    let (Some(t), Some(signature)) = (t, v1) else {
        return Err(BadSignature("X-Baton-Signature is not `t=<unix seconds>,v1=<hex>`".into()));
    };
    // `abs_diff`: a sender's `t` far in the past must not overflow.
    if now.timestamp().abs_diff(t) > REPLAY_WINDOW_S.unsigned_abs() {
        return Err(BadSignature(format!(
            "X-Baton-Signature's t is more than {REPLAY_WINDOW_S} s from now: a delivery is signed when it is sent"
        )));
    }
    let mut message = format!("{t}.").into_bytes();
    message.extend_from_slice(body);
    if hmac_matches(secrets, &message, &signature) {
        Ok(())
    } else {
        Err(BadSignature("X-Baton-Signature does not match the hook's secret".into()))
    }
}

pub(super) fn read(payload: Value) -> Result<Reading, ApiError> {
    let paths = match payload.get("paths").and_then(Value::as_array) {
        Some(list) => ChangedPaths::Known(list.iter().filter_map(Value::as_str).map(String::from).collect()),
        None => ChangedPaths::Unknown,
    };
    let sha = text_at(&payload, &["sha"]).to_string();
    let actor = text_at(&payload, &["actor"]).to_string();
    let repository = text_at(&payload, &["repository"]).to_string();
    let owner = repository.rsplit_once('/').map_or("", |(owner, _)| owner).to_string();
    match text_at(&payload, &["event"]) {
        "push" => {
            let git_ref = text_at(&payload, &["ref"]).to_string();
            if git_ref.is_empty() {
                return Err(missing("ref"));
            }
            let github = base_fields(&git_ref, &sha, &repository, &owner, &actor, "", payload.clone());
            Ok(Reading::Event(Incoming {
                events: vec![Event::Push(PushEvent { git_ref: git_ref.clone(), paths })],
                trigger: trigger(TriggerKind::Push, &git_ref, &sha, &actor),
                github,
            }))
        }
        "pull_request" => {
            let (action, base, head) =
                (text_at(&payload, &["action"]), text_at(&payload, &["base"]), text_at(&payload, &["head"]));
            if action.is_empty() || base.is_empty() || head.is_empty() {
                return Err(missing("action, base and head"));
            }
            let git_ref = format!("refs/heads/{head}");
            let mut github = base_fields(&git_ref, &sha, &repository, &owner, &actor, "", payload.clone());
            github.insert("head_ref".into(), Value::String(head.to_string()));
            github.insert("base_ref".into(), Value::String(base.to_string()));
            let event = PullRequestEvent { action: action.into(), base: base.into(), head: head.into(), paths };
            Ok(Reading::Event(Incoming {
                events: vec![Event::PullRequest(event.clone()), Event::PullRequestTarget(event)],
                trigger: trigger(TriggerKind::PullRequest, &git_ref, &sha, &actor),
                github,
            }))
        }
        "" => Err(missing("event")),
        other => Ok(Reading::Ignored(format!("Baton starts runs on `push` and `pull_request`, not `{other}`"))),
    }
}
