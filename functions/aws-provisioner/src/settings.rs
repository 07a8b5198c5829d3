//! The function's configuration, read from the environment once per cold
//! start and validated (a bad value stops the cold start with its reason).
//! The CDK stack sets these from its `provisioner` props.

use std::collections::HashMap;

use baton_api::provisioners::MAX_RESERVATION_EXPIRY_S;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `BATON_STAGE`: tags, and the token parameters' path.
    pub stage: String,
    /// `BATON_API_URL`: the API this function and its runners talk to.
    pub api_url: String,
    /// `BATON_PROVISIONER_TOKEN_PARAMETER`: the SecureString parameter (or
    /// `/aws/reference/secretsmanager/<secret>`) holding the `bpt_` token.
    pub token_parameter: String,
    /// `BATON_LAUNCH_TEMPLATE`: the launch template's id (`lt-…`, what the
    /// CDK stack sets) or name.
    pub launch_template: String,
    /// `BATON_LAUNCH_TEMPLATE_VERSION`, default `$Default`.
    pub launch_template_version: String,
    /// `BATON_PROVISIONER_MAX_INSTANCES`: a cap on live instances below the
    /// provisioner's `max_instances` (which Baton enforces); none by default.
    pub max_instances: Option<u32>,
    /// `BATON_RESERVATION_EXPIRY_S`: asked for each reservation (Baton's
    /// default, 900 s, when unset); at most 3,600.
    pub reservation_expiry_s: Option<u32>,
    /// `BATON_RUNNER_ARGS`: more `baton-runner` arguments on every instance
    /// (space-separated).
    pub runner_args: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("configuration: {0}")]
pub struct SettingsError(String);

impl Settings {
    pub fn from_env() -> Result<Self, SettingsError> {
        Self::from_map(&std::env::vars().collect())
    }

    pub fn from_map(env: &HashMap<String, String>) -> Result<Self, SettingsError> {
        let get = |name: &str| env.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
        let required =
            |name: &str| get(name).map(str::to_string).ok_or_else(|| SettingsError(format!("{name} is required")));
        let number = |name: &str, max: u32| -> Result<Option<u32>, SettingsError> {
            get(name)
                .map(|v| match v.parse::<u32>() {
                    Ok(n) if (1..=max).contains(&n) => Ok(n),
                    _ => Err(SettingsError(format!("{name} must be a whole number from 1 to {max}, got {v:?}"))),
                })
                .transpose()
        };
        let api_url = required("BATON_API_URL")?;
        if !(api_url.starts_with("https://") || api_url.starts_with("http://")) {
            return Err(SettingsError(format!("BATON_API_URL must be an http(s) URL, got {api_url:?}")));
        }
        let token_parameter = required("BATON_PROVISIONER_TOKEN_PARAMETER")?;
        if !token_parameter.starts_with('/') {
            return Err(SettingsError(format!(
                "BATON_PROVISIONER_TOKEN_PARAMETER must be a parameter path starting with /, got {token_parameter:?}"
            )));
        }
        Ok(Self {
            stage: get("BATON_STAGE").unwrap_or("dev").to_string(),
            api_url: api_url.trim_end_matches('/').to_string(),
            token_parameter,
            launch_template: required("BATON_LAUNCH_TEMPLATE")?,
            launch_template_version: get("BATON_LAUNCH_TEMPLATE_VERSION").unwrap_or("$Default").to_string(),
            max_instances: number("BATON_PROVISIONER_MAX_INSTANCES", 10_000)?,
            reservation_expiry_s: number("BATON_RESERVATION_EXPIRY_S", MAX_RESERVATION_EXPIRY_S)?,
            runner_args: get("BATON_RUNNER_ARGS")
                .map(|a| a.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    const MINIMAL: [(&str, &str); 3] = [
        ("BATON_API_URL", "https://api.example/"),
        ("BATON_PROVISIONER_TOKEN_PARAMETER", "/baton/prod/provisioner-token"),
        ("BATON_LAUNCH_TEMPLATE", "baton-runners"),
    ];

    #[test]
    fn the_three_names_an_operator_gives_are_enough() {
        let settings = Settings::from_map(&env(&MINIMAL)).expect("valid");
        assert_eq!(settings.api_url, "https://api.example", "no trailing slash");
        assert_eq!(settings.launch_template_version, "$Default");
        assert_eq!(
            (settings.stage.as_str(), settings.max_instances, settings.reservation_expiry_s),
            ("dev", None, None)
        );
    }

    #[test]
    fn a_missing_or_bad_value_is_refused_with_its_name() {
        for missing in MINIMAL.map(|(k, _)| k) {
            let pairs: Vec<_> = MINIMAL.iter().copied().filter(|(k, _)| *k != missing).collect();
            let err = Settings::from_map(&env(&pairs)).expect_err("refused").to_string();
            assert!(err.contains(missing), "{err}");
        }
        let mut pairs = MINIMAL.to_vec();
        pairs.push(("BATON_RESERVATION_EXPIRY_S", "7200"));
        let err = Settings::from_map(&env(&pairs)).expect_err("refused").to_string();
        assert!(err.contains("BATON_RESERVATION_EXPIRY_S"), "{err}");
    }
}
