//! Webhooks in (behaviour.md §18): a forge's delivery to a hook, verified
//! and read into the events the triggers match, with what a run they start
//! records (its `trigger`, its `github` context). No I/O: the `hooks`
//! function reads the hook, its secrets and the body, and asks these.
//!
//! - `verify` first: nothing of a delivery is read before its signature
//!   holds, for the provider's scheme (constant-time comparisons);
//! - `read`: the provider's event into [`Reading`] (a ping, an event, or
//!   one Baton does not start runs on);
//! - one module per provider: `github`, `gitlab`, `generic` (Baton's own,
//!   for any system that can sign a request).

mod generic;
mod github;
mod gitlab;
#[cfg(test)]
mod tests;

use baton_api::pipelines::{RunTrigger, TriggerKind};
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
use sha2::Sha256;

use crate::triggers::{Event, Match, Triggers};

pub use generic::{sign as generic_signature, REPLAY_WINDOW_S};

/// The most of a delivery's body Baton reads (GitHub caps payloads at
/// 25 MB, but an API Gateway request ends at 10 MB and a Lambda's at 6;
/// real pushes and pull requests are tens of KB): more is 413.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// How long a rotated-out secret keeps verifying deliveries: a forge's
/// settings are changed by hand, after the new secret is shown.
pub const ROTATION_GRACE: chrono::Duration = chrono::Duration::hours(24);

/// A hook's secrets, as kept in the secret store: the current one, and the
/// one a rotation replaced while its grace lasts.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HookSecrets {
    pub current: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "crate::time::stored_option")]
    pub previous_until: Option<DateTime<Utc>>,
}

impl std::fmt::Debug for HookSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never a value, in a log or a panic.
        f.debug_struct("HookSecrets").field("previous_until", &self.previous_until).finish_non_exhaustive()
    }
}

impl HookSecrets {
    /// A new hook's secrets.
    pub fn new() -> Self {
        HookSecrets { current: new_secret(), previous: None, previous_until: None }
    }

    /// The secrets a delivery at `now` may be signed with.
    pub fn verifying(&self, now: DateTime<Utc>) -> Vec<&str> {
        let mut secrets = vec![self.current.as_str()];
        if let (Some(previous), Some(until)) = (&self.previous, self.previous_until) {
            if now < until {
                secrets.push(previous);
            }
        }
        secrets
    }

    /// A new current secret; the one it replaces keeps verifying for
    /// [`ROTATION_GRACE`] (a secret rotated out earlier stops now).
    pub fn rotated(&self, now: DateTime<Utc>) -> Self {
        HookSecrets {
            current: new_secret(),
            previous: Some(self.current.clone()),
            previous_until: Some(now + ROTATION_GRACE),
        }
    }
}

impl Default for HookSecrets {
    fn default() -> Self {
        Self::new()
    }
}

/// A hook secret: 32 random bytes as hex (what a forge's settings take).
fn new_secret() -> String {
    let bytes: [u8; 32] = rand::random();
    format!("bhs_{}", hex::encode(bytes))
}

/// The forge a hook receives deliveries from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Github,
    Gitlab,
    Generic,
}

impl From<baton_api::hooks::HookProvider> for Provider {
    fn from(provider: baton_api::hooks::HookProvider) -> Self {
        match provider {
            baton_api::hooks::HookProvider::Github => Provider::Github,
            baton_api::hooks::HookProvider::Gitlab => Provider::Gitlab,
            baton_api::hooks::HookProvider::Generic => Provider::Generic,
        }
    }
}

impl Provider {
    pub fn parse(name: &str) -> Option<Provider> {
        Some(match name {
            "github" => Provider::Github,
            "gitlab" => Provider::Gitlab,
            "generic" => Provider::Generic,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Github => "github",
            Provider::Gitlab => "gitlab",
            Provider::Generic => "generic",
        }
    }

    /// The forge's id of a delivery, the same when it delivers again.
    pub fn delivery_id(self, headers: &dyn Fn(&str) -> Option<String>) -> Option<String> {
        let name = match self {
            Provider::Github => "x-github-delivery",
            Provider::Gitlab => "x-gitlab-event-uuid",
            Provider::Generic => "x-baton-delivery",
        };
        headers(name).map(|id| id.trim().to_string()).filter(|id| !id.is_empty() && id.len() <= 128)
    }
}

/// Why a delivery's signature does not hold (401 `bad-signature`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadSignature(pub String);

/// Whether the delivery was signed with one of `secrets` (the current one,
/// and the previous one during its grace), by `provider`'s scheme.
pub fn verify(
    provider: Provider,
    headers: &dyn Fn(&str) -> Option<String>,
    body: &[u8],
    secrets: &[&str],
    now: DateTime<Utc>,
) -> Result<(), BadSignature> {
    match provider {
        Provider::Github => github::verify(headers, body, secrets),
        Provider::Gitlab => gitlab::verify(headers, secrets),
        Provider::Generic => generic::verify(headers, body, secrets, now),
    }
}

/// Whether `signature` is the HMAC-SHA256 of `message` under one of
/// `secrets`, compared in constant time.
fn hmac_matches(secrets: &[&str], message: &[u8], signature: &[u8]) -> bool {
    secrets.iter().any(|secret| {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else { return false };
        mac.update(message);
        mac.verify_slice(signature).is_ok()
    })
}

/// A verified delivery, read.
#[derive(Debug, Clone, PartialEq)]
pub enum Reading {
    /// The forge checking the hook works: answered, starts nothing.
    Ping,
    /// An event the triggers are matched against.
    Event(Incoming),
    /// An event Baton does not start runs on (the reason says which).
    Ignored(String),
}

/// An event a forge delivered: what the triggers match, and what a run it
/// starts records.
#[derive(Debug, Clone, PartialEq)]
pub struct Incoming {
    /// In the order tried: a pull request is matched as `pull_request`,
    /// then as `pull_request_target` (one run a pipeline, the first match).
    pub events: Vec<Event>,
    pub trigger: RunTrigger,
    /// The `github` context's trigger fields, `event_name` set per match.
    pub github: Map<String, Value>,
}

/// Reads a verified delivery (400 `invalid-request` for a body that is not
/// the provider's JSON).
pub fn read(
    provider: Provider,
    headers: &dyn Fn(&str) -> Option<String>,
    body: &[u8],
) -> Result<Reading, crate::error::ApiError> {
    let payload: Value = serde_json::from_slice(body)
        .map_err(|err| crate::error::ApiError::invalid_request(format!("the delivery is not JSON: {err}")))?;
    let mut reading = match provider {
        Provider::Github => github::read(headers, payload),
        Provider::Gitlab => gitlab::read(headers, payload),
        Provider::Generic => generic::read(payload),
    }?;
    if let Reading::Event(incoming) = &mut reading {
        incoming.trigger.delivery = provider.delivery_id(headers);
        fit_event(&mut incoming.github);
    }
    Ok(reading)
}

/// What a pipeline does with an incoming event: the run it starts (of which
/// event: `push`, `pull_request`, `pull_request_target`), or why not.
pub fn decide(triggers: &Triggers, incoming: &Incoming) -> Result<&'static str, String> {
    let mut reasons = Vec::new();
    for event in &incoming.events {
        match triggers.matches(event) {
            Match::Run { event_name, .. } => return Ok(event_name),
            Match::Skip { reason } => reasons.push(reason),
            Match::BadInputs(err) => reasons.push(err.to_string()),
        }
    }
    reasons.dedup();
    Err(reasons.join("; "))
}

/// The run's `github` fields for `event_name`.
pub fn github_fields(incoming: &Incoming, event_name: &str) -> Map<String, Value> {
    let mut fields = incoming.github.clone();
    fields.insert("event_name".into(), Value::String(event_name.into()));
    fields
}

/// Keeps the event within what a run stores ([`crate::limits::MAX_EVENT_BYTES`]):
/// a push's commit list goes first (its head commit stays), then the
/// payload is cut to the fields ported workflows read.
fn fit_event(fields: &mut Map<String, Value>) {
    let budget = crate::limits::MAX_EVENT_BYTES - 8 * 1024;
    let size = |fields: &Map<String, Value>| Value::Object(fields.clone()).to_string().len();
    if size(fields) <= budget {
        return;
    }
    if let Some(Value::Object(event)) = fields.get_mut("event") {
        event.remove("commits");
    }
    if size(fields) <= budget {
        return;
    }
    if let Some(Value::Object(event)) = fields.get_mut("event") {
        let kept = ["ref", "before", "after", "action", "number", "repository", "sender", "pull_request"];
        event.retain(|key, _| kept.contains(&key.as_str()));
        for key in ["repository", "pull_request"] {
            if let Some(Value::Object(inner)) = event.get_mut(key) {
                inner.retain(|k, v| !matches!(v, Value::String(s) if s.len() > 1024) && k != "body");
            }
        }
    }
    if size(fields) > budget {
        fields.insert("event".into(), Value::Object(Map::new()));
    }
}

/// `refs/heads/main` → (`main`, `branch`); `refs/tags/v1` → (`v1`, `tag`);
/// `refs/pull/42/merge` → (`42/merge`, `branch`).
fn ref_name_and_type(git_ref: &str) -> (String, &'static str) {
    if let Some(tag) = git_ref.strip_prefix("refs/tags/") {
        (tag.to_string(), "tag")
    } else if let Some(pull) = git_ref.strip_prefix("refs/pull/") {
        // GitHub's `ref_name` of a pull request: `<number>/merge`.
        (pull.to_string(), "branch")
    } else {
        (git_ref.strip_prefix("refs/heads/").unwrap_or(git_ref).to_string(), "branch")
    }
}

/// The `github` fields every event has, the payload as `event`.
#[allow(clippy::too_many_arguments)]
fn base_fields(
    git_ref: &str,
    sha: &str,
    repository: &str,
    owner: &str,
    actor: &str,
    server_url: &str,
    payload: Value,
) -> Map<String, Value> {
    let (ref_name, ref_type) = ref_name_and_type(git_ref);
    let text = |s: &str| Value::String(s.to_string());
    let mut fields = Map::new();
    fields.insert("ref".into(), text(git_ref));
    fields.insert("ref_name".into(), text(&ref_name));
    fields.insert("ref_type".into(), text(ref_type));
    fields.insert("sha".into(), text(sha));
    fields.insert("repository".into(), text(repository));
    fields.insert("repository_owner".into(), text(owner));
    fields.insert("actor".into(), text(actor));
    fields.insert("triggering_actor".into(), text(actor));
    fields.insert("head_ref".into(), text(""));
    fields.insert("base_ref".into(), text(""));
    fields.insert("server_url".into(), text(server_url));
    fields.insert("event".into(), payload);
    fields
}

fn trigger(kind: TriggerKind, git_ref: &str, sha: &str, actor: &str) -> RunTrigger {
    let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
    RunTrigger { kind, git_ref: some(git_ref), sha: some(sha), actor: some(actor), delivery: None }
}

/// A string at `path` of `value`, or `""`.
fn text_at<'a>(value: &'a Value, path: &[&str]) -> &'a str {
    path.iter().try_fold(value, |v, key| v.get(key)).and_then(Value::as_str).unwrap_or("")
}

/// The payload lacks a field the event needs (400 `invalid-request`).
fn missing(what: &str) -> crate::error::ApiError {
    crate::error::ApiError::invalid_request(format!("the delivery has no `{what}`"))
}
