//! Labels (behaviour.md §1): what a runner offers and what a job requires.
//!
//! Labels are compared only in their canonical form (trimmed, lowercased,
//! deduplicated, sorted), so `Linux` and `linux` are the same label and two
//! spellings of one set land in the same queue partition. Both sides are
//! canonicalised before anything is stored or compared.

use sha2::{Digest, Sha256};

use crate::error::{ApiError, ErrorCode};

/// The longest label accepted, in characters (after trimming).
pub const MAX_LABEL_LEN: usize = 128;
/// The most labels a set may hold after deduplication, tool labels apart.
pub const MAX_LABELS: usize = 20;
/// The most tool labels (`tool:…`) a set may hold besides.
pub const MAX_TOOL_LABELS: usize = 160;

/// Why a set of labels was refused. Every variant names the offending label
/// (or count) so the 400 `invalid-labels` answer tells the user what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    #[error(
        "label `{label}` is invalid: a label starts with a letter or digit and holds only \
         letters, digits, '.', '_' and '-'"
    )]
    Invalid { label: String },
    #[error("label `{label}` is too long: at most {MAX_LABEL_LEN} characters")]
    TooLong { label: String },
    #[error("at least one label is required")]
    Empty,
    #[error("too many labels: {count} distinct labels, at most {MAX_LABELS}")]
    TooMany { count: usize },
}

impl From<LabelError> for ApiError {
    fn from(err: LabelError) -> Self {
        ApiError::new(ErrorCode::InvalidLabels, err.to_string())
    }
}

/// Canonicalises a raw label set: trim, lowercase, drop empties, dedupe,
/// sort; then checks every label and the size of the set.
pub fn canonicalize(raw: &[String]) -> Result<Vec<String>, LabelError> {
    let mut labels = Vec::with_capacity(raw.len());
    for original in raw {
        let trimmed = original.trim();
        if trimmed.is_empty() {
            continue;
        }
        if trimmed.chars().count() > MAX_LABEL_LEN {
            return Err(LabelError::TooLong { label: abbreviate(trimmed) });
        }
        let label = trimmed.to_lowercase();
        if !is_valid_label(&label) {
            return Err(LabelError::Invalid { label: trimmed.to_string() });
        }
        labels.push(label);
    }
    labels.sort();
    labels.dedup();
    // Tool labels (`runners::tools`) come in their own, larger allowance: a
    // runner's few tools offer several each.
    let tools = labels.iter().filter(|label| super::tools::is_tool_label(label)).count();
    match labels.len() - tools {
        0 if tools == 0 => Err(LabelError::Empty),
        count if count > MAX_LABELS => Err(LabelError::TooMany { count }),
        _ if tools > MAX_TOOL_LABELS => Err(LabelError::TooMany { count: tools }),
        _ => Ok(labels),
    }
}

/// Whether a runner offering `runner` may run a job requiring `job`: every
/// required label is offered. Both sides are expected in canonical form.
pub fn is_subset(job: &[String], runner: &[String]) -> bool {
    job.iter().all(|label| runner.contains(label))
}

/// A short, stable id of a canonical label set: the first 16 hex characters
/// of the SHA-256 of the labels joined by `\n`. Used as a partition key
/// (`Q#<workspace>#<labelset-id>`), so it must never change for a given set.
pub fn labelset_id(canonical: &[String]) -> String {
    let digest = Sha256::digest(canonical.join("\n").as_bytes());
    digest.iter().take(8).map(|byte| format!("{byte:02x}")).collect()
}

/// A canonical label set as one text of at most `max_chars` characters,
/// for the places with a length limit a set (up to 20 labels of 128
/// characters, tool labels besides) can pass: an EC2 tag value (256), a
/// CloudWatch dimension value (1,024). The labels joined by commas when
/// they fit; otherwise the joined text cut to fit `...#` and the set's
/// [`labelset_id`], so two long sets sharing their first labels stay apart
/// and a set always reads the same (what a dashboard or an alarm on the
/// dimension relies on).
pub fn label_set_text(canonical: &[String], max_chars: usize) -> String {
    let joined = canonical.join(",");
    if joined.chars().count() <= max_chars {
        return joined;
    }
    let suffix = format!("...#{}", labelset_id(canonical));
    let head: String = joined.chars().take(max_chars.saturating_sub(suffix.len())).collect();
    format!("{head}{suffix}")
}

/// `^[a-z0-9][a-z0-9._-]*$`, checked by hand to avoid a regex dependency,
/// or a tool label (`tool:node@20`, `runners::tools`).
fn is_valid_label(label: &str) -> bool {
    if label.starts_with(super::tools::TOOL_PREFIX) {
        return super::tools::is_tool_label(label);
    }
    let mut chars = label.chars();
    let Some(first) = chars.next() else { return false };
    (first.is_ascii_lowercase() || first.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
}

/// Keeps an over-long label readable in an error message.
fn abbreviate(label: &str) -> String {
    let head: String = label.chars().take(32).collect();
    format!("{head}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(raw: &[&str]) -> Vec<String> {
        raw.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_label_set_text_fits_its_limit_and_tells_long_sets_apart() {
        let short = strings(&["linux", "x64"]);
        assert_eq!(label_set_text(&short, 256), "linux,x64");
        let long: Vec<String> = (0..20).map(|i| format!("{i:02}-{}", "l".repeat(125))).collect();
        let text = label_set_text(&long, 256);
        assert_eq!(text.chars().count(), 256);
        assert!(text.starts_with("00-lll"), "{text}");
        assert!(text.ends_with(&format!("...#{}", labelset_id(&long))), "{text}");
        assert_eq!(label_set_text(&long, 256), text, "stable");
        let mut other = long.clone();
        other[19] = format!("19-{}", "m".repeat(125));
        assert_ne!(label_set_text(&other, 256), text, "sets sharing their first labels differ");
        assert!(label_set_text(&long, 1024).chars().count() <= 1024);
    }

    #[test]
    fn canonical_form_is_trimmed_lowercased_deduplicated_and_sorted() {
        let canonical = canonicalize(&strings(&[" X64 ", "Linux", "linux", "", "  ", "gpu"])).unwrap();
        assert_eq!(canonical, strings(&["gpu", "linux", "x64"]));
    }

    #[test]
    fn uppercase_label_is_the_same_as_lowercase() {
        assert_eq!(canonicalize(&strings(&["Linux"])), canonicalize(&strings(&["linux"])));
    }

    #[test]
    fn dots_underscores_dashes_and_digits_are_allowed_after_the_first_character() {
        assert!(canonicalize(&strings(&["ubuntu-22.04_x", "0day"])).is_ok());
    }

    #[test]
    fn label_starting_with_punctuation_is_rejected_and_named() {
        let err = canonicalize(&strings(&["linux", "-gpu"])).unwrap_err();
        assert_eq!(err, LabelError::Invalid { label: "-gpu".into() });
        assert!(err.to_string().contains("`-gpu`"));
    }

    #[test]
    fn label_with_inner_space_or_symbol_is_rejected() {
        assert!(matches!(canonicalize(&strings(&["linux x64"])), Err(LabelError::Invalid { .. })));
        assert!(matches!(canonicalize(&strings(&["arm@64"])), Err(LabelError::Invalid { .. })));
        assert!(matches!(canonicalize(&strings(&["café"])), Err(LabelError::Invalid { .. })));
    }

    #[test]
    fn label_of_128_characters_is_accepted_and_129_rejected() {
        assert!(canonicalize(&[("a".repeat(128))]).is_ok());
        let err = canonicalize(&[("a".repeat(129))]).unwrap_err();
        assert!(matches!(err, LabelError::TooLong { .. }));
        assert!(err.to_string().len() < 200, "the message stays short: {err}");
    }

    #[test]
    fn empty_set_or_only_blank_labels_is_rejected() {
        assert_eq!(canonicalize(&[]), Err(LabelError::Empty));
        assert_eq!(canonicalize(&strings(&["", "  "])), Err(LabelError::Empty));
    }

    #[test]
    fn twenty_distinct_labels_are_accepted_and_twenty_one_rejected() {
        let twenty: Vec<String> = (0..20).map(|i| format!("l{i}")).collect();
        assert!(canonicalize(&twenty).is_ok());
        let mut twenty_one = twenty.clone();
        twenty_one.push("l20".into());
        assert_eq!(canonicalize(&twenty_one), Err(LabelError::TooMany { count: 21 }));
    }

    #[test]
    fn duplicates_do_not_count_towards_the_limit() {
        let mut labels: Vec<String> = (0..20).map(|i| format!("l{i}")).collect();
        labels.extend((0..20).map(|i| format!("L{i}")));
        assert_eq!(canonicalize(&labels).unwrap().len(), 20);
    }

    #[test]
    fn job_runs_on_a_runner_offering_a_superset_of_its_labels() {
        assert!(is_subset(&strings(&["linux"]), &strings(&["linux", "x64"])));
        assert!(is_subset(&strings(&["linux", "x64"]), &strings(&["linux", "x64"])));
    }

    #[test]
    fn job_requiring_a_label_the_runner_lacks_does_not_run_there() {
        assert!(!is_subset(&strings(&["gpu", "linux"]), &strings(&["linux"])));
    }

    #[test]
    fn labelset_id_is_16_hex_characters_and_stable() {
        let id = labelset_id(&strings(&["linux", "x64"]));
        assert_eq!(id.len(), 16);
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
        // sha256("linux\nx64"): pinned, because stored partition keys depend on it.
        assert_eq!(id, labelset_id(&canonicalize(&strings(&["X64", "Linux"])).unwrap()));
        assert_eq!(id, "357a4233aa38c444");
    }

    #[test]
    fn different_label_sets_have_different_ids() {
        assert_ne!(labelset_id(&strings(&["linux"])), labelset_id(&strings(&["linux", "x64"])));
        // Joining by "\n" is unambiguous: a canonical label never holds a newline.
        assert_ne!(labelset_id(&strings(&["a", "b"])), labelset_id(&strings(&["ab"])));
    }

    #[test]
    fn label_error_maps_to_a_400_invalid_labels() {
        let api: ApiError = LabelError::Invalid { label: "-x".into() }.into();
        assert_eq!(api.code, ErrorCode::InvalidLabels);
        assert_eq!(api.status(), http::StatusCode::BAD_REQUEST);
        assert!(api.message.contains("`-x`"));
    }
}
