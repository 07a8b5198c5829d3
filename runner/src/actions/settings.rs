//! What a runner needs to run actions (`--actions-host`, `--node`).

/// Where actions come from and what runs them.
#[derive(Debug, Clone)]
pub struct ActionSettings {
    /// Where `owner/repo@ref` is fetched from (`--actions-host`).
    pub default_host: String,
    /// What runs a JavaScript action (`--node`).
    pub node: String,
}

impl Default for ActionSettings {
    fn default() -> Self {
        Self { default_host: "https://github.com".into(), node: "node".into() }
    }
}
