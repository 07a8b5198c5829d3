//! `strategy.matrix` (behaviour.md §17): one job written, one leg run per
//! combination of its dimensions' values.
//!
//! Expanded when the run is created: each leg is an ordinary job of the
//! definition (its key `<job> (<value>, <value>…)`, its `runs-on` with
//! `${{ matrix.<name> }}` put in), so queueing, claims, timeouts, retries
//! and reruns need nothing new. What the legs share is kept in a
//! [`MatrixGroup`]: `fail-fast` (a failed leg cancels its siblings) and
//! `max-parallel` (how many legs may be queued or running at once), and a
//! job that `needs` the matrix job waits for every leg and reads them
//! together (`needs.<job>.result`, GitHub's rule; `needs.<job>.outputs.<name>`
//! as a JSON object keyed by leg, where GitHub keeps only the last leg's).
//!
//! The combinations follow GitHub Actions: the product of the dimensions in
//! the order written, less every combination an `exclude` entry matches (all
//! of its keys equal), then each `include` entry either extends the
//! combinations whose dimension values it matches with its other keys, or,
//! matching none, is a combination of its own.

use serde::{Deserialize, Serialize};

use super::status::JobStatus;

/// One combination: (name, value) pairs, the dimensions first in the order
/// written, then keys an `include` added.
pub type Combination = Vec<(String, String)>;

/// A job's `strategy`, as written.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Strategy {
    /// The dimensions in the order written, each with its values.
    pub dimensions: Vec<(String, Vec<String>)>,
    pub include: Vec<Combination>,
    pub exclude: Vec<Combination>,
    /// `fail-fast` (GitHub's default: true).
    pub fail_fast: bool,
    pub max_parallel: Option<u32>,
    /// The names given a mapping or a list as a value somewhere (kept as
    /// JSON text, read into as values: `matrix.pair.otp`).
    pub structured: std::collections::BTreeSet<String>,
}

/// Whether `value` of the name `name` is a mapping or a list kept as JSON
/// text, given the names that had one (`Strategy::structured`).
pub fn structured_value(
    structured: &std::collections::BTreeSet<String>,
    name: &str,
    value: &str,
) -> Option<serde_json::Value> {
    if !structured.contains(name) || !(value.starts_with('{') || value.starts_with('[')) {
        return None;
    }
    serde_json::from_str::<serde_json::Value>(value).ok().filter(|v| v.is_object() || v.is_array())
}

/// The legs of one matrix job, what the attempt decides on together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixGroup {
    /// The matrix job's key as written (what `needs` and expressions name).
    pub job: String,
    /// Its legs' keys, in combination order.
    pub legs: Vec<String>,
    pub fail_fast: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<u32>,
}

/// What makes a job a leg: its matrix job and its combination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixLeg {
    pub job: String,
    pub values: Combination,
    /// Where the leg stands among its matrix's (`strategy.job-index`, from
    /// 0) and how many there are (`strategy.job-total`); the matrix's
    /// `fail-fast` and `max-parallel` (`strategy.*`). A leg stored before
    /// these were kept reads 0 of 0: nothing read them then.
    #[serde(default)]
    pub index: u32,
    #[serde(default)]
    pub total: u32,
    #[serde(default = "fail_fast_default")]
    pub fail_fast: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<u32>,
    /// The names of its values that are a mapping or a list (as JSON text).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub structured: Vec<String>,
}

fn fail_fast_default() -> bool {
    true
}

impl MatrixLeg {
    /// `${{ matrix.<name> }}`: the leg's value, if its combination has it.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    /// `matrix.<name>` with its structure: a mapping or a list as such (read
    /// into: `matrix.pair.otp`), anything else as text.
    pub fn typed_value(&self, name: &str) -> Option<serde_json::Value> {
        let text = self.value(name)?;
        if self.structured.iter().any(|s| s == name) {
            if let Ok(value) = serde_json::from_str(text) {
                return Some(value);
            }
        }
        Some(serde_json::Value::String(text.to_string()))
    }
}

/// `strategy.<field>` (`fail-fast`, `job-index`, `job-total`,
/// `max-parallel`) of a job: its leg's, or, as GitHub gives a job without a
/// matrix, one job of one that fails fast. `max-parallel` unset is every
/// leg at once.
pub fn strategy_value(leg: Option<&MatrixLeg>, field: &str) -> Option<String> {
    let (index, total, fail_fast, max_parallel) = match leg {
        Some(leg) => (leg.index, leg.total, leg.fail_fast, leg.max_parallel.unwrap_or(leg.total)),
        None => (0, 1, true, 1),
    };
    Some(match field {
        "job-index" => index.to_string(),
        "job-total" => total.to_string(),
        "fail-fast" => fail_fast.to_string(),
        "max-parallel" => max_parallel.to_string(),
        _ => return None,
    })
}

/// The fields of the `strategy` context.
pub const STRATEGY_FIELDS: &[&str] = &["fail-fast", "job-index", "job-total", "max-parallel"];

/// Every combination of `strategy`, in order (see the module doc).
pub fn combinations(strategy: &Strategy) -> Vec<Combination> {
    let mut combos: Vec<Combination> = vec![Vec::new()];
    for (name, values) in &strategy.dimensions {
        combos = combos
            .into_iter()
            .flat_map(|combo| {
                values.iter().map(move |value| {
                    let mut next = combo.clone();
                    next.push((name.clone(), value.clone()));
                    next
                })
            })
            .collect();
    }
    if strategy.dimensions.is_empty() {
        combos.clear();
    }
    combos.retain(|combo| !strategy.exclude.iter().any(|exclude| matches(combo, exclude)));
    let is_dimension = |name: &str| strategy.dimensions.iter().any(|(dimension, _)| dimension == name);
    for entry in &strategy.include {
        let on_dimensions: Combination = entry.iter().filter(|(name, _)| is_dimension(name)).cloned().collect();
        let mut extended = false;
        if !on_dimensions.is_empty() || strategy.dimensions.is_empty() {
            for combo in combos.iter_mut().filter(|combo| matches(combo, &on_dimensions)) {
                // Only where nothing it says would change a value already
                // there (GitHub: an include never overwrites a dimension).
                if entry.iter().all(|(name, value)| lookup(combo, name).is_none_or(|v| v == value)) {
                    for (name, value) in entry {
                        if lookup(combo, name).is_none() {
                            combo.push((name.clone(), value.clone()));
                        }
                    }
                    extended = true;
                }
            }
        }
        if !extended {
            combos.push(entry.clone());
        }
    }
    combos
}

fn lookup<'a>(combo: &'a Combination, name: &str) -> Option<&'a str> {
    combo.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
}

/// `combo` has every (name, value) of `pattern`.
fn matches(combo: &Combination, pattern: &Combination) -> bool {
    pattern.iter().all(|(name, value)| lookup(combo, name) == Some(value.as_str()))
}

/// A leg's key: `test (x64, stable)`.
pub fn leg_key(job: &str, combo: &Combination) -> String {
    leg_key_of(job, combo, &std::collections::BTreeSet::new())
}

/// [`leg_key`], a mapping's or a list's values shown by their scalars in
/// order (`test (1.15, 25, lint)`, not its JSON).
pub fn leg_key_of(job: &str, combo: &Combination, structured: &std::collections::BTreeSet<String>) -> String {
    fn leaves(value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => map.values().for_each(|v| leaves(v, out)),
            serde_json::Value::Array(items) => items.iter().for_each(|v| leaves(v, out)),
            serde_json::Value::String(text) => out.push(text.clone()),
            other => out.push(other.to_string()),
        }
    }
    let mut values = Vec::new();
    for (name, value) in combo {
        match structured_value(structured, name, value) {
            Some(json) => leaves(&json, &mut values),
            None => values.push(value.clone()),
        }
    }
    format!("{job} ({})", values.join(", "))
}

/// The result of a matrix job as its dependants see it, from its legs'
/// statuses (GitHub's rule): `failure` if a leg failed, else `cancelled` if
/// one was cancelled, else `skipped` if every leg was, else `success`.
pub fn aggregate_status(legs: &[JobStatus]) -> JobStatus {
    if legs.contains(&JobStatus::Failed) {
        JobStatus::Failed
    } else if legs.contains(&JobStatus::Cancelled) {
        JobStatus::Cancelled
    } else if !legs.is_empty() && legs.iter().all(|s| *s == JobStatus::Skipped) {
        JobStatus::Skipped
    } else if legs.iter().any(|s| !s.is_terminal()) {
        JobStatus::Running
    } else {
        JobStatus::Succeeded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(items: &[(&str, &str)]) -> Combination {
        items.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn strategy(dimensions: &[(&str, &[&str])]) -> Strategy {
        Strategy {
            dimensions: dimensions
                .iter()
                .map(|(name, values)| (name.to_string(), values.iter().map(|v| v.to_string()).collect()))
                .collect(),
            fail_fast: true,
            ..Strategy::default()
        }
    }

    #[test]
    fn a_two_by_three_matrix_less_an_exclude_plus_an_include_has_six_legs_in_order() {
        let mut matrix = strategy(&[("os", &["linux", "macos"]), ("rust", &["stable", "beta", "nightly"])]);
        matrix.exclude = vec![pairs(&[("os", "macos"), ("rust", "nightly")])];
        matrix.include =
            vec![pairs(&[("os", "linux"), ("rust", "1.70")]), pairs(&[("os", "macos"), ("arch", "arm64")])];
        let legs: Vec<String> = combinations(&matrix).iter().map(|c| leg_key("test", c)).collect();
        assert_eq!(
            legs,
            [
                "test (linux, stable)",
                "test (linux, beta)",
                "test (linux, nightly)",
                "test (macos, stable, arm64)",
                "test (macos, beta, arm64)",
                "test (linux, 1.70)",
            ]
        );
    }

    #[test]
    fn an_include_alone_makes_its_own_legs() {
        let mut matrix = Strategy { fail_fast: true, ..Strategy::default() };
        matrix.include = vec![pairs(&[("target", "wasm")]), pairs(&[("target", "musl")])];
        let legs: Vec<String> = combinations(&matrix).iter().map(|c| leg_key("build", c)).collect();
        assert_eq!(legs, ["build (wasm)", "build (musl)"]);
    }

    #[test]
    fn a_matrix_jobs_result_is_githubs_aggregate_of_its_legs() {
        use JobStatus::*;
        assert_eq!(aggregate_status(&[Succeeded, Failed, Cancelled]), Failed);
        assert_eq!(aggregate_status(&[Succeeded, Cancelled]), Cancelled);
        assert_eq!(aggregate_status(&[Skipped, Skipped]), Skipped);
        assert_eq!(aggregate_status(&[Succeeded, Skipped]), Succeeded);
        assert_eq!(aggregate_status(&[Succeeded, Running]), Running);
    }
}
