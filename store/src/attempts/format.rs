//! The stored form of an attempt item, versioned apart from the domain.
//!
//! The attempt state is stored as deflated JSON in one binary attribute,
//! `state`. It holds every job of the run and is written whole on every job
//! outcome and every orchestration step; DynamoDB bills a write unit per
//! started KB of the item (twice inside a transaction), and as a map its
//! field names would repeat for every job. Deflated it is several times
//! smaller, which both cuts the write units per job and pushes the 400 KB
//! item limit out to runs several times larger. Nothing reads or updates it
//! by attribute path.
//!
//! The JSON inside is a storage type of this module ([`AttemptV1`]), not the
//! domain's `AttemptState`: renaming or reshaping a domain field changes the
//! conversions below (`stored_form!`), never what stored attempts mean. `state_format` names
//! the format (absent on items written before it existed: format 1); a new
//! format adds a type and a branch in [`unpack`], and old items keep loading.

use std::io::{Read, Write};

use chrono::{DateTime, Utc};
use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;
use flate2::Compression;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::AttemptItem;
use crate::ItemHead;
use baton_domain::workflows::attempt::{AttemptState, ExecutionRecord, JobState};
use baton_domain::workflows::concurrency::GroupHold;
use baton_domain::workflows::retry::RetryPolicy;
use baton_domain::workflows::status::{AttemptStatus, ExecutionStatus, JobStatus, StatusReason};
use baton_domain::workflows::RerunMode;

/// The format every attempt is written in.
pub const CURRENT_FORMAT: u32 = 1;

/// The attempt item's attributes as DynamoDB holds them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredAttemptItem {
    #[serde(flatten)]
    head: ItemHead,
    version: u64,
    progress: u64,
    wait_token: Option<String>,
    wait_progress: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    wait_sent_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    wait_until: Option<i64>,
    #[serde(default = "format_1")]
    state_format: u32,
    state: serde_bytes::ByteBuf,
}

fn format_1() -> u32 {
    1
}

/// Format 1 of the attempt state (the JSON that is deflated).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct AttemptV1 {
    run_id: Uuid,
    workspace_id: String,
    attempt: u32,
    status: AttemptStatus,
    reason: Option<StatusReason>,
    rerun_mode: Option<RerunMode>,
    snapshot_attempt: u32,
    created_at: DateTime<Utc>,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    deadline: Option<DateTime<Utc>>,
    jobs: Vec<JobV1>,
    /// Absent on attempts without a concurrency group (and on every item
    /// written before groups existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    concurrency: Option<GroupHold>,
    /// The matrices decided when their jobs were due, job key → strategy
    /// (added within format 1; absent: none).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    matrices: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct JobV1 {
    id: Uuid,
    key: String,
    status: JobStatus,
    reason: Option<StatusReason>,
    /// Why, in words (added within format 1; absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    carried_over: bool,
    #[serde(default)]
    carried_from: Option<Uuid>,
    execution: Option<ExecutionV1>,
    /// The four fields below were added within format 1: absent (older
    /// items, and every job without `continue-on-error` or `retry:`) reads
    /// as false, none and empty, which is what those items meant.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    continue_on_error: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    soft_failed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retry: Option<RetryPolicy>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    earlier_executions: Vec<ExecutionV1>,
    /// An approval job's decisions (added within format 1; absent: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    decisions: Vec<baton_domain::workflows::approval::ApprovalDecision>,
    /// A listening job's state (added within format 1; absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    listen: Option<baton_domain::workflows::listening::ListenState>,
    /// A job's place in its `concurrency:` group (added within format 1;
    /// absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    concurrency: Option<GroupHold>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct ExecutionV1 {
    id: Uuid,
    status: ExecutionStatus,
    reason: Option<StatusReason>,
    queued_at: Option<DateTime<Utc>>,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    deadline: Option<DateTime<Utc>>,
    runner_session_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    not_before: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    avoid_session: Option<Uuid>,
    /// A listening job's execution: its event (added within format 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    event: Option<baton_api::runs::EventRef>,
    /// Flagged unschedulable when queued (added within format 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    unschedulable: Option<baton_api::runs::Unschedulable>,
}

/// Both conversions between a domain type and its stored form, from one
/// list of fields, so that neither direction misses one (each struct
/// literal names every field). A plain field is the same type on both
/// sides (cloned from the domain); an `each` field is a list and an
/// `optional` field an option of types with their own conversions here.
/// A field the domain renames or reshapes takes conversions written out
/// instead, so stored attempts keep their meaning.
macro_rules! stored_form {
    ($domain:ty => $stored:ident {
        $($field:ident),* $(,)?
    } $(each { $($each:ident),* $(,)? })? $(optional { $($optional:ident),* $(,)? })?) => {
        impl From<&$domain> for $stored {
            fn from(domain: &$domain) -> Self {
                Self {
                    $($field: Clone::clone(&domain.$field),)*
                    $($($each: domain.$each.iter().map(From::from).collect(),)*)?
                    $($($optional: domain.$optional.as_ref().map(From::from),)*)?
                }
            }
        }

        impl From<$stored> for $domain {
            fn from(stored: $stored) -> Self {
                Self {
                    $($field: stored.$field,)*
                    $($($each: stored.$each.into_iter().map(From::from).collect(),)*)?
                    $($($optional: stored.$optional.map(From::from),)*)?
                }
            }
        }
    };
}

stored_form!(AttemptState => AttemptV1 {
    run_id, workspace_id, attempt, status, reason, rerun_mode, snapshot_attempt,
    created_at, started_at, finished_at, deadline, concurrency, matrices,
} each { jobs });

stored_form!(JobState => JobV1 {
    id, key, status, reason, message, carried_over, carried_from, continue_on_error, soft_failed,
    retry, decisions, listen, concurrency,
} each { earlier_executions } optional { execution });

stored_form!(ExecutionRecord => ExecutionV1 {
    id, status, reason, queued_at, started_at, finished_at, deadline, runner_session_id,
    not_before, avoid_session, event, unschedulable,
});

/// The state in the current format, deflated.
fn pack(state: &AttemptState) -> Result<Vec<u8>, String> {
    let json = serde_json::to_vec(&AttemptV1::from(state)).map_err(|e| e.to_string())?;
    let mut encoder = DeflateEncoder::new(Vec::with_capacity(json.len() / 4), Compression::default());
    encoder.write_all(&json).map_err(|e| e.to_string())?;
    encoder.finish().map_err(|e| e.to_string())
}

/// The state stored in `format`.
fn unpack(format: u32, packed: &[u8]) -> Result<AttemptState, String> {
    let mut json = Vec::new();
    DeflateDecoder::new(packed).read_to_end(&mut json).map_err(|e| format!("attempt state: {e}"))?;
    match format {
        1 => serde_json::from_slice::<AttemptV1>(&json)
            .map(AttemptState::from)
            .map_err(|e| format!("attempt state: {e}")),
        other => Err(format!("attempt state format {other} is newer than this code")),
    }
}

impl TryFrom<&AttemptItem> for StoredAttemptItem {
    type Error = String;

    fn try_from(item: &AttemptItem) -> Result<Self, String> {
        Ok(Self {
            head: item.head.clone(),
            version: item.version,
            progress: item.progress,
            wait_token: item.wait_token.clone(),
            wait_progress: item.wait_progress,
            wait_sent_at: item.wait_sent_at,
            wait_until: item.wait_until,
            state_format: CURRENT_FORMAT,
            state: serde_bytes::ByteBuf::from(pack(&item.state)?),
        })
    }
}

impl Serialize for AttemptItem {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        StoredAttemptItem::try_from(self).map_err(serde::ser::Error::custom)?.serialize(serializer)
    }
}

impl TryFrom<StoredAttemptItem> for AttemptItem {
    type Error = String;

    fn try_from(stored: StoredAttemptItem) -> Result<Self, String> {
        Ok(Self {
            state: unpack(stored.state_format, &stored.state)?,
            head: stored.head,
            version: stored.version,
            progress: stored.progress,
            wait_token: stored.wait_token,
            wait_progress: stored.wait_progress,
            wait_sent_at: stored.wait_sent_at,
            wait_until: stored.wait_until,
        })
    }
}
