//! Every limit a client can reach that is not the definition's (those are in
//! `workflows::definition`), in one place: each is checked before anything
//! is written and refused with 400 and a stable code, so what a user sends
//! never meets an AWS limit (item 400 KB, transaction 4 MB, `PutEvents`
//! 256 KB, key lengths, DynamoDB's number range) as a 500. docs/limits.md
//! lists them with their tests.

use std::collections::BTreeSet;

use crate::error::{ApiError, ErrorCode};

/// Workspace ids: 1 to this many characters of `A-Z a-z 0-9 - _ .`,
/// starting with a letter or digit. `#` (the key separator) and anything
/// else that could make two workspaces' keys meet is refused.
pub const MAX_WORKSPACE_ID_LEN: usize = 64;

/// The longest a registration token may live (`expires_in_s`): a year.
pub const MAX_TOKEN_EXPIRY_S: u64 = 366 * 24 * 60 * 60;

/// The longest name of a registration token.
pub const MAX_TOKEN_NAME_LEN: usize = 200;

/// A run's `inputs`, as JSON text.
pub const MAX_INPUTS_BYTES: usize = 64 * 1024;
/// The most a run keeps of what started it (its `github` context's fields,
/// the forge's payload as `github.event` among them), stored on the run's
/// item beside its inputs: a DynamoDB item holds 400 KB.
pub const MAX_EVENT_BYTES: usize = 96 * 1024;

pub use baton_api::runners::MAX_OUTPUTS_BYTES;

/// A complete's `message`.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024;

/// The most label sets a workspace may have queued work for at once: a
/// claim queries the pending partition of every set its runner fits, and
/// reads the workspace's registry of sets, so both stay bounded. Checked
/// when a run is created (409 `too-many-label-sets`); a set leaves the
/// registry once its queue is empty. Soft: creates racing each other may
/// pass it by the sets of one definition each.
pub const MAX_PENDING_LABEL_SETS: usize = 256;

/// Whether a run queueing jobs of the label sets `new` fits beside the sets
/// `pending` of its workspace.
pub fn pending_label_sets(pending: &BTreeSet<String>, new: &BTreeSet<String>) -> Result<(), ApiError> {
    let total = pending.union(new).count();
    if total > MAX_PENDING_LABEL_SETS {
        return Err(ApiError::new(
            ErrorCode::TooManyLabelSets,
            format!(
                "the workspace would have queued work for {total} label sets (`runs-on`), more than \
                 {MAX_PENDING_LABEL_SETS}; wait for its runners to drain some, or use fewer distinct label sets"
            ),
        ));
    }
    Ok(())
}

/// DynamoDB stores numbers of magnitude 1E-130 to 9.9999999999999999999999999999999999999E+125
/// (the bound here is a hair lower: what an f64 can say without rounding up).
const DYNAMODB_MAX_MAGNITUDE: f64 = 9.999_999_999_999e125;
const DYNAMODB_MIN_MAGNITUDE: f64 = 1e-130;

/// A workspace id as the path names it; 400 `invalid-request` otherwise.
pub fn workspace_id(raw: &str) -> Result<&str, ApiError> {
    let well_formed = !raw.is_empty()
        && raw.len() <= MAX_WORKSPACE_ID_LEN
        && raw.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && raw.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if well_formed {
        Ok(raw)
    } else {
        Err(ApiError::invalid_request(format!(
            "workspace ids are 1 to {MAX_WORKSPACE_ID_LEN} characters of letters, digits, '-', '_' and '.', \
             starting with a letter or digit"
        )))
    }
}

/// `expires_in_s` of a registration token: 1 s to [`MAX_TOKEN_EXPIRY_S`].
pub fn token_expiry(expires_in_s: Option<u64>) -> Result<Option<u64>, ApiError> {
    match expires_in_s {
        Some(s) if !(1..=MAX_TOKEN_EXPIRY_S).contains(&s) => {
            Err(ApiError::invalid_request(format!("expires_in_s must be from 1 to {MAX_TOKEN_EXPIRY_S}")))
        }
        other => Ok(other),
    }
}

/// A JSON value a client sends to be stored (`inputs`, `outputs`): at most
/// `max` bytes as JSON text, and every number within DynamoDB's range.
pub fn storable_json(field: &str, value: &serde_json::Value, max: usize) -> Result<(), ApiError> {
    let size = serde_json::to_string(value).map(|text| text.len()).unwrap_or(usize::MAX);
    if size > max {
        return Err(ApiError::invalid_request(format!("{field} is {size} bytes as JSON, at most {max} are accepted")));
    }
    match out_of_range_number(value) {
        Some(number) => Err(ApiError::invalid_request(format!(
            "{field} holds the number {number}, outside the storable range (magnitude 1e-130 to 9.99e125)"
        ))),
        None => Ok(()),
    }
}

/// The first number in `value` DynamoDB cannot store, if any.
fn out_of_range_number(value: &serde_json::Value) -> Option<&serde_json::Number> {
    match value {
        serde_json::Value::Number(number) => {
            let magnitude = number.as_f64().map(f64::abs)?;
            let storable = magnitude == 0.0 || (DYNAMODB_MIN_MAGNITUDE..=DYNAMODB_MAX_MAGNITUDE).contains(&magnitude);
            (!storable).then_some(number)
        }
        serde_json::Value::Array(items) => items.iter().find_map(out_of_range_number),
        serde_json::Value::Object(fields) => fields.values().find_map(out_of_range_number),
        _ => None,
    }
}

/// A text field a client sends: at most `max` bytes.
pub fn bounded_text(field: &str, text: &str, max: usize) -> Result<(), ApiError> {
    if text.len() > max {
        return Err(ApiError::invalid_request(format!("{field} is {} bytes, at most {max} are accepted", text.len())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn workspace_ids_are_short_plain_and_never_hold_the_key_separator() {
        for good in ["ws1", "acme-prod", "a.b_c", "0", &"x".repeat(MAX_WORKSPACE_ID_LEN)] {
            assert!(workspace_id(good).is_ok(), "{good}");
        }
        let long = "x".repeat(MAX_WORKSPACE_ID_LEN + 1);
        for bad in ["", "a#b", "a/b", "a\nb", "-a", ".a", "é", "a b", long.as_str()] {
            assert_eq!(workspace_id(bad).unwrap_err().code, crate::ErrorCode::InvalidRequest, "{bad:?}");
        }
    }

    #[test]
    fn a_token_lives_a_second_to_a_year() {
        assert_eq!(token_expiry(None), Ok(None));
        assert_eq!(token_expiry(Some(1)), Ok(Some(1)));
        assert_eq!(token_expiry(Some(MAX_TOKEN_EXPIRY_S)), Ok(Some(MAX_TOKEN_EXPIRY_S)));
        assert!(token_expiry(Some(0)).is_err());
        assert!(token_expiry(Some(8_300_000_000_000)).is_err(), "the value that used to overflow chrono");
        assert!(token_expiry(Some(u64::MAX)).is_err());
    }

    #[test]
    fn the_largest_fact_a_client_can_cause_is_far_under_the_buses_limit() {
        use baton_api::facts::{Fact, JobCompleted, JobOutcome, LeaseRef, StepResult, StepStatus};
        // The completed fact is the only one a client fills: every step
        // reported, the largest outputs and message the API accepts. Every
        // other fact holds ids, statuses and bounded keys and labels.
        let at = chrono::Utc::now();
        let steps = (0..crate::workflows::definition::MAX_STEPS_PER_JOB)
            .map(|_| StepResult {
                id: uuid::Uuid::now_v7(),
                status: StepStatus::Succeeded,
                soft_failed: false,
                exit_code: Some(i32::MIN),
                started_at: Some(at),
                finished_at: Some(at),
            })
            .collect();
        // One output whose JSON text is exactly the limit.
        let value = "x".repeat(MAX_OUTPUTS_BYTES - r#"{"k":""}"#.len());
        let outputs = [("k".to_string(), json!(value))].into_iter().collect();
        assert!(storable_json("outputs", &serde_json::to_value(&outputs).unwrap(), MAX_OUTPUTS_BYTES).is_ok());
        let lease = LeaseRef {
            run_id: uuid::Uuid::now_v7(),
            attempt: u32::MAX,
            job_id: uuid::Uuid::now_v7(),
            job_execution_id: uuid::Uuid::now_v7(),
            session_id: uuid::Uuid::now_v7(),
            epoch: u64::MAX,
        };
        let detail = JobCompleted {
            lease,
            status: JobOutcome::Succeeded,
            steps,
            outputs,
            message: Some("m".repeat(MAX_MESSAGE_BYTES)),
            completed_at: at,
            claimed_at: Some(at),
            settled_by: baton_api::facts::SettledBy::Steps,
        };
        let fact = Fact::new("w".repeat(MAX_WORKSPACE_ID_LEN), at, detail);
        let size = serde_json::to_string(&fact).unwrap().len();
        eprintln!("the largest completed fact: {size} bytes");
        assert!(size <= 64 * 1024, "{size} bytes: a quarter of PutEvents' 256 KB at most");
    }

    #[test]
    fn stored_json_is_bounded_and_its_numbers_storable() {
        assert!(storable_json("outputs", &json!({"v": 1.5, "n": [0, -3, 1e125]}), 1024).is_ok());
        assert!(storable_json("outputs", &json!({"v": 1e200}), 1024).is_err());
        assert!(storable_json("outputs", &json!({"deep": [{"v": -1e-200}]}), 1024).is_err());
        assert!(storable_json("outputs", &json!({"v": "x".repeat(2000)}), 1024).is_err());
    }

    #[test]
    fn label_sets_already_pending_count_once_and_the_bound_is_inclusive() {
        let sets = |range: std::ops::Range<usize>| range.map(|i| format!("{i:016x}")).collect::<BTreeSet<_>>();
        let pending = sets(0..MAX_PENDING_LABEL_SETS - 1);
        assert!(pending_label_sets(&pending, &sets(0..MAX_PENDING_LABEL_SETS)).is_ok());
        let refused = pending_label_sets(&pending, &sets(100..MAX_PENDING_LABEL_SETS + 1)).unwrap_err();
        assert_eq!(refused.code, ErrorCode::TooManyLabelSets);
        assert_eq!(refused.status().as_u16(), 409);
    }
}
