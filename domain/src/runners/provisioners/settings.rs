//! A provisioner's settings as an operator registers them (api.md
//! "Provisioners"): every bound checked, the 400 naming the field, and the
//! defaults filled in once, here.

use baton_api::provisioners::{
    CreateProvisioner, DEFAULT_BOOT_TIMEOUT_S, DEFAULT_IDLE_TIMEOUT_S, DEFAULT_JOBS_PER_INSTANCE,
    DEFAULT_RESERVATION_EXPIRY_S, MAX_RESERVATION_EXPIRY_S,
};
use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use crate::runners::labels::canonicalize;

pub const MAX_NAME_LEN: usize = 200;
pub const MAX_LABEL_SETS: usize = 20;
pub const MAX_INSTANCES: u32 = 10_000;
pub const MAX_JOBS_PER_INSTANCE: u32 = 1_000;
pub const IDLE_TIMEOUT_S: std::ops::RangeInclusive<u32> = 10..=86_400;
pub const BOOT_TIMEOUT_S: std::ops::RangeInclusive<u32> = 10..=3_600;
pub const RESERVE_COUNT: std::ops::RangeInclusive<u32> = 1..=1_000;

/// Validated settings, labels canonical (sorted, lower case, deduplicated).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProvisionerSettings {
    pub name: String,
    pub label_sets: Vec<Vec<String>>,
    pub max_instances: u32,
    pub jobs_per_instance: u32,
    pub idle_timeout_s: u32,
    pub boot_timeout_s: u32,
    pub warm: u32,
}

fn within(field: &str, value: u32, range: std::ops::RangeInclusive<u32>) -> Result<u32, ApiError> {
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(ApiError::invalid_request(format!(
            "{field} must be between {} and {} (got {value})",
            range.start(),
            range.end()
        )))
    }
}

/// Checks a creation request; the error names the first field at fault.
pub fn validate(request: &CreateProvisioner) -> Result<ProvisionerSettings, ApiError> {
    let name = request.name.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME_LEN {
        return Err(ApiError::invalid_request(format!("name must be 1 to {MAX_NAME_LEN} characters")));
    }
    if request.label_sets.is_empty() || request.label_sets.len() > MAX_LABEL_SETS {
        return Err(ApiError::invalid_request(format!(
            "label_sets must hold 1 to {MAX_LABEL_SETS} label sets (got {})",
            request.label_sets.len()
        )));
    }
    let mut label_sets = Vec::with_capacity(request.label_sets.len());
    for (i, raw) in request.label_sets.iter().enumerate() {
        let set = canonicalize(raw)
            .map_err(|e| ApiError::new(baton_api::error::ErrorCode::InvalidLabels, format!("label_sets[{i}]: {e}")))?;
        if !label_sets.contains(&set) {
            label_sets.push(set);
        }
    }
    let max_instances = within("max_instances", request.max_instances, 1..=MAX_INSTANCES)?;
    let jobs_per_instance = within(
        "jobs_per_instance",
        request.jobs_per_instance.unwrap_or(DEFAULT_JOBS_PER_INSTANCE),
        1..=MAX_JOBS_PER_INSTANCE,
    )?;
    let idle_timeout_s =
        within("idle_timeout_s", request.idle_timeout_s.unwrap_or(DEFAULT_IDLE_TIMEOUT_S), IDLE_TIMEOUT_S)?;
    let boot_timeout_s =
        within("boot_timeout_s", request.boot_timeout_s.unwrap_or(DEFAULT_BOOT_TIMEOUT_S), BOOT_TIMEOUT_S)?;
    let warm = within("warm", request.warm.unwrap_or(0), 0..=max_instances)?;
    Ok(ProvisionerSettings {
        name: name.to_string(),
        label_sets,
        max_instances,
        jobs_per_instance,
        idle_timeout_s,
        boot_timeout_s,
        warm,
    })
}

/// A reservation's count and lifetime, checked: `count` 1–1,000, expiry
/// default 900 s, at most 3,600 s.
pub fn reservation(count: u32, expires_in_s: Option<u32>) -> Result<(u32, u32), ApiError> {
    let count = within("count", count, RESERVE_COUNT)?;
    let expires =
        within("expires_in_s", expires_in_s.unwrap_or(DEFAULT_RESERVATION_EXPIRY_S), 1..=MAX_RESERVATION_EXPIRY_S)?;
    Ok((count, expires))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> CreateProvisioner {
        CreateProvisioner {
            name: "ci-fleet".into(),
            label_sets: vec![vec!["Linux".into(), "x64".into()], vec!["gpu".into()]],
            max_instances: 5,
            jobs_per_instance: None,
            idle_timeout_s: None,
            boot_timeout_s: None,
            warm: None,
            idempotency_key: None,
        }
    }

    #[test]
    fn defaults_fill_what_the_operator_left_out_and_labels_become_canonical() {
        let settings = validate(&request()).unwrap();
        assert_eq!(settings.label_sets, vec![vec!["linux".to_string(), "x64".into()], vec!["gpu".into()]]);
        assert_eq!(
            (settings.jobs_per_instance, settings.idle_timeout_s, settings.boot_timeout_s, settings.warm),
            (1, 300, 600, 0)
        );
    }

    #[test]
    fn each_bound_is_refused_naming_its_field() {
        type Change = Box<dyn Fn(&mut CreateProvisioner)>;
        let cases: Vec<(&str, Change)> = vec![
            ("name", Box::new(|r| r.name = " ".into())),
            ("label_sets", Box::new(|r| r.label_sets.clear())),
            ("label_sets", Box::new(|r| r.label_sets = vec![vec!["a".into()]; 21])),
            ("label_sets[1]", Box::new(|r| r.label_sets[1] = vec!["bad label!".into()])),
            ("max_instances", Box::new(|r| r.max_instances = 0)),
            ("max_instances", Box::new(|r| r.max_instances = 10_001)),
            ("jobs_per_instance", Box::new(|r| r.jobs_per_instance = Some(1_001))),
            ("idle_timeout_s", Box::new(|r| r.idle_timeout_s = Some(9))),
            ("boot_timeout_s", Box::new(|r| r.boot_timeout_s = Some(3_601))),
            ("warm", Box::new(|r| r.warm = Some(6))),
        ];
        for (field, change) in cases {
            let mut r = request();
            change(&mut r);
            let err = validate(&r).unwrap_err();
            assert_eq!(err.status().as_u16(), 400, "{field}");
            assert!(err.message.contains(field), "{field}: {}", err.message);
        }
    }

    #[test]
    fn a_reservation_of_zero_or_ten_thousand_or_past_an_hour_is_refused() {
        assert_eq!(reservation(3, None).unwrap(), (3, 900));
        for (count, expiry, field) in [(0, None, "count"), (10_000, None, "count"), (1, Some(3_601), "expires_in_s")] {
            let err = reservation(count, expiry).unwrap_err();
            assert!(err.message.contains(field), "{}", err.message);
        }
    }
}
