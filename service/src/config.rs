//! Typed configuration, read once at start-up from the environment (on Lambda
//! the CDK stack sets it; the dev host passes the same variables through) and
//! validated before any request is served. Every default is documented here
//! and in the README; no handler carries a magic number.

use std::collections::HashMap;
use std::time::Duration;

pub use baton_domain::runners::lease::LeaseConfig;

/// Configuration of every function. Resource names are whatever the stack
/// gave them; timings have the defaults the spec names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `BATON_TABLE`: the single DynamoDB table. Required.
    pub table_name: String,
    /// `BATON_BUS`: the EventBridge bus that facts are published to. Required.
    pub bus_name: String,
    /// `BATON_STAGE` (default `dev`): names the deployment in logs and metrics.
    pub stage: String,
    /// Lease timings (see [`LeaseConfig`]).
    pub lease: LeaseConfig,
    /// `BATON_REAPER_PERIOD_S` (default 60): how often the lease reaper runs.
    pub reaper_period: Duration,
    /// `BATON_SCHEDULES_PERIOD_S` (default 60): on the local stack, how
    /// often the dev host fires the schedules that fell due (on AWS the
    /// scheduler fires each at its minute).
    pub schedules_period: Duration,
    /// Where pipelines' schedules live on EventBridge Scheduler; `None`
    /// when the function was not given them (only `schedule-sync` is).
    pub scheduler: Option<SchedulerConfig>,
    /// `BATON_DEMAND_METRICS_PERIOD_S` (default 60, 1 s to an hour): how
    /// often each provisioner-served label set's demand is published as a
    /// metric (the `demand-metrics` schedule), whether or not anything polls
    /// the demand.
    pub demand_metrics_period: Duration,
    /// `BATON_SESSION_TTL_S` (default 3600): lifetime of a runner session token.
    pub session_ttl: Duration,
    /// `BATON_POLL_INTERVAL_S` (default 5): how often an idle runner should poll.
    pub poll_interval: Duration,
    /// `BATON_UNSCHEDULABLE_FAIL_S` (default 900, 10 s to 7 days): how long
    /// a job queued with labels no registered runner and no provisioner
    /// offers waits for one (counted from queueing) before it fails
    /// `unschedulable`.
    pub unschedulable_fail_after: Duration,
    /// `BATON_OUTBOX_TTL_DAYS` (default 7): clean-up horizon of relayed outbox
    /// items. Only a clean-up aid: correctness never depends on TTL.
    pub outbox_ttl_days: u32,
    /// `BATON_RUN_STATE_MACHINE_ARN`: the run-attempt state machine (only the
    /// functions that start executions need it).
    pub run_state_machine_arn: Option<String>,
    /// Orchestration timings (see [`OrchestrationConfig`]).
    pub orchestration: OrchestrationConfig,
    /// `BATON_ADMIN_TOKEN`: optional bootstrap admin token (`bat_…`). The dev
    /// stack sets it so a fresh checkout can be driven with curl; its hash is
    /// stored like any other token at start-up, the secret never is.
    pub bootstrap_admin_token: Option<String>,
    /// `BATON_LOGS_BUCKET`: the bucket of job logs (only the logs function
    /// needs it).
    pub logs_bucket: Option<String>,
    /// `BATON_LOG_CAP_BYTES`: the most a job's log may weigh (default
    /// 32 MiB, 1 KiB to 1 GiB); past it the runner stores a note and no more.
    pub log_cap_bytes: u64,
    /// Artifacts (see [`ArtifactConfig`]).
    pub artifacts: ArtifactConfig,
    /// Nudging connected runners (see [`PushConfig`]).
    pub push: PushConfig,
    /// `BATON_SECRETS_KMS_KEY_ID`: the KMS key workspace secrets are
    /// encrypted with (the stack's; SSM's default key when unset, as on the
    /// local stack).
    pub secrets_kms_key_id: Option<String>,
}

/// Artifacts (behaviour.md §17): where they go, how much a job and a run
/// may store, how long they are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactConfig {
    /// `BATON_ARTIFACTS_BUCKET`: the bucket of artifact archives (only the
    /// artifacts function needs it).
    pub bucket: Option<String>,
    /// `BATON_ARTIFACT_JOB_CAP_BYTES`: the most one job's artifacts may
    /// weigh together (default 2 GiB, 1 KiB to 50 GiB).
    pub job_cap_bytes: u64,
    /// `BATON_ARTIFACT_RUN_CAP_BYTES`: the most a run's artifacts may weigh
    /// together, every attempt's uploads counted (default 10 GiB, 1 KiB to
    /// 1 TiB).
    pub run_cap_bytes: u64,
    /// `BATON_ARTIFACT_RETENTION_DAYS`: how long an artifact is kept: the
    /// bucket's lifecycle rule (the CDK prop `artifactRetentionDays`) and
    /// the item's TTL (default 30, 1 to 3650).
    pub retention_days: u32,
    /// `BATON_CACHE_ENTRY_CAP_BYTES`: the most one cache entry may weigh
    /// (default 2 GiB, 1 KiB to 50 GiB).
    pub cache_entry_cap_bytes: u64,
    /// `BATON_CACHE_RETENTION_DAYS`: a cache entry is evicted this many
    /// days after it was saved (default 7, 1 to 365; never past the
    /// bucket's own retention, which removes its archive).
    pub cache_retention_days: u32,
    /// `BATON_UPLOAD_URLS_PER_ANSWER`: the most part URLs one answer to an
    /// artifact's or a cache's upload carries (default 256, 1 to 1,000):
    /// about 2 KB each on AWS, so an answer stays far below Lambda's 6 MB.
    pub upload_urls_per_answer: u32,
}

/// Pipelines' schedules (`usecases::schedules`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// `BATON_SCHEDULE_GROUP`: the stack's schedule group.
    pub group: String,
    /// `BATON_SCHEDULE_TARGET_ARN`: the `schedules` function, each
    /// schedule's target.
    pub target_arn: String,
    /// `BATON_SCHEDULE_ROLE_ARN`: the role the scheduler invokes it with.
    pub role_arn: String,
}

/// Push to waiting runners (`crate::usecases::push`). Without an endpoint nothing is
/// pushed and runners long-poll, as before push existed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PushConfig {
    /// `BATON_PUSH_URL`: the WebSocket URL runners connect to (`wss://…` on
    /// AWS); the register answer hands it to runners.
    pub url: Option<String>,
    /// `BATON_PUSH_ENDPOINT`: the API Gateway management endpoint that posts
    /// to connections (`https://{api}.execute-api.{region}.amazonaws.com/{stage}`).
    pub endpoint: Option<String>,
    /// `BATON_PUSH_SAFETY_POLL_S` (default 300, 5 to 3600): how often a
    /// connected runner claims anyway, in case a nudge was lost.
    pub safety_poll: Duration,
    /// `BATON_PUSH_CONNECTION_TTL_S` (default 7800): how long a connection
    /// item lives unless renewed; API Gateway closes a socket after 2 hours.
    pub connection_ttl: Duration,
    /// `BATON_PUSH_CONNECTING_GRACE_S` (default 30, 0 to 300): a connection
    /// item younger than this is kept when a post finds its socket gone (the
    /// gateway answers gone while `$connect` runs).
    pub connecting_grace: Duration,
}

/// Orchestration timings (behaviour.md §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrchestrationConfig {
    /// `BATON_TIMEOUT_MINUTE_S` (default 60, 1..=60): how many seconds one
    /// "minute" of a definition's `timeout-minutes` (job and run) lasts. Only
    /// tests and demos lower it, to see timeouts fire in seconds; the
    /// definition and its frozen snapshot keep the minutes as written.
    pub timeout_minute: Duration,
    /// `BATON_ORCHESTRATOR_MAX_WAIT_S` (default 3600, 10..=86400): the longest
    /// an attempt's orchestration waits for progress before it looks again on
    /// its own. Job outcomes wake it at once; this only bounds how long a lost
    /// wake-up (a crash between a commit and its task callback) can delay an
    /// attempt, at one state transition per wait.
    pub max_wait: Duration,
}

impl Default for OrchestrationConfig {
    fn default() -> Self {
        Self { timeout_minute: Duration::from_secs(60), max_wait: Duration::from_secs(3_600) }
    }
}

/// A configuration value that is missing or out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid configuration: {0}")]
pub struct ConfigError(pub String);

/// A job's log cap when `BATON_LOG_CAP_BYTES` is not set.
pub const DEFAULT_LOG_CAP_BYTES: u64 = 32 * 1024 * 1024;

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    /// Reads an explicit map (the dev host and tests build one).
    pub fn from_map(map: &HashMap<String, String>) -> Result<Self, ConfigError> {
        Self::from_lookup(|key| map.get(key).cloned())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let required = |key: &str| {
            lookup(key).filter(|v| !v.trim().is_empty()).ok_or_else(|| ConfigError(format!("{key} is required")))
        };
        // A whole number of `unit`s within [min, max]; `default` when unset.
        let whole = |key: &str, unit: &str, default: u64, min: u64, max: u64| -> Result<u64, ConfigError> {
            let value = match lookup(key).filter(|v| !v.trim().is_empty()) {
                None => default,
                Some(raw) => raw
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| ConfigError(format!("{key} must be a whole number of {unit}, got {raw:?}")))?,
            };
            if !(min..=max).contains(&value) {
                return Err(ConfigError(format!("{key} must be between {min} and {max}, got {value}")));
            }
            Ok(value)
        };
        let seconds = |key: &str, default: u64, min: u64, max: u64| {
            whole(key, "seconds", default, min, max).map(Duration::from_secs)
        };
        let bytes = |key: &str, default: u64, min: u64, max: u64| whole(key, "bytes", default, min, max);
        let lease = LeaseConfig {
            duration: seconds("BATON_LEASE_DURATION_S", 180, 3, 86_400)?,
            heartbeat_interval: seconds("BATON_HEARTBEAT_INTERVAL_S", 15, 1, 3_600)?,
            first_heartbeat_grace: seconds("BATON_FIRST_HEARTBEAT_GRACE_S", 60, 1, 86_400)?,
        };
        validate_lease(&lease)?;
        let outbox_ttl_days = seconds("BATON_OUTBOX_TTL_DAYS", 7, 1, 365)?.as_secs() as u32;
        Ok(Self {
            table_name: required("BATON_TABLE")?,
            bus_name: required("BATON_BUS")?,
            stage: lookup("BATON_STAGE").filter(|s| !s.is_empty()).unwrap_or_else(|| "dev".into()),
            lease,
            reaper_period: seconds("BATON_REAPER_PERIOD_S", 60, 1, 3_600)?,
            schedules_period: seconds("BATON_SCHEDULES_PERIOD_S", 60, 1, 60)?,
            scheduler: match (
                lookup("BATON_SCHEDULE_GROUP").filter(|s| !s.is_empty()),
                lookup("BATON_SCHEDULE_TARGET_ARN").filter(|s| !s.is_empty()),
                lookup("BATON_SCHEDULE_ROLE_ARN").filter(|s| !s.is_empty()),
            ) {
                (Some(group), Some(target_arn), Some(role_arn)) => {
                    Some(SchedulerConfig { group, target_arn, role_arn })
                }
                (None, None, None) => None,
                _ => {
                    return Err(ConfigError(
                        "BATON_SCHEDULE_GROUP, BATON_SCHEDULE_TARGET_ARN and BATON_SCHEDULE_ROLE_ARN go together"
                            .into(),
                    ))
                }
            },
            demand_metrics_period: seconds("BATON_DEMAND_METRICS_PERIOD_S", 60, 1, 3_600)?,
            session_ttl: seconds("BATON_SESSION_TTL_S", 3_600, 60, 7 * 86_400)?,
            poll_interval: seconds("BATON_POLL_INTERVAL_S", 5, 1, 300)?,
            unschedulable_fail_after: seconds("BATON_UNSCHEDULABLE_FAIL_S", 900, 10, 7 * 86_400)?,
            outbox_ttl_days,
            orchestration: OrchestrationConfig {
                timeout_minute: seconds("BATON_TIMEOUT_MINUTE_S", 60, 1, 60)?,
                max_wait: seconds("BATON_ORCHESTRATOR_MAX_WAIT_S", 3_600, 10, 86_400)?,
            },
            run_state_machine_arn: lookup("BATON_RUN_STATE_MACHINE_ARN").filter(|s| !s.is_empty()),
            bootstrap_admin_token: lookup("BATON_ADMIN_TOKEN").filter(|s| !s.is_empty()),
            logs_bucket: lookup("BATON_LOGS_BUCKET").filter(|s| !s.is_empty()),
            secrets_kms_key_id: lookup("BATON_SECRETS_KMS_KEY_ID").filter(|s| !s.is_empty()),
            log_cap_bytes: bytes("BATON_LOG_CAP_BYTES", DEFAULT_LOG_CAP_BYTES, 1024, 1024 * 1024 * 1024)?,
            artifacts: ArtifactConfig {
                bucket: lookup("BATON_ARTIFACTS_BUCKET").filter(|s| !s.is_empty()),
                job_cap_bytes: bytes("BATON_ARTIFACT_JOB_CAP_BYTES", 2 << 30, 1024, 50 << 30)?,
                run_cap_bytes: bytes("BATON_ARTIFACT_RUN_CAP_BYTES", 10 << 30, 1024, 1 << 40)?,
                retention_days: whole("BATON_ARTIFACT_RETENTION_DAYS", "days", 30, 1, 3_650)? as u32,
                cache_entry_cap_bytes: bytes("BATON_CACHE_ENTRY_CAP_BYTES", 2 << 30, 1024, 50 << 30)?,
                cache_retention_days: whole("BATON_CACHE_RETENTION_DAYS", "days", 7, 1, 365)? as u32,
                upload_urls_per_answer: whole("BATON_UPLOAD_URLS_PER_ANSWER", "URLs", 256, 1, 1_000)? as u32,
            },
            push: PushConfig {
                url: lookup("BATON_PUSH_URL").filter(|s| !s.trim().is_empty()),
                endpoint: lookup("BATON_PUSH_ENDPOINT").filter(|s| !s.trim().is_empty()),
                safety_poll: seconds("BATON_PUSH_SAFETY_POLL_S", 300, 1, 3_600)?,
                connection_ttl: seconds("BATON_PUSH_CONNECTION_TTL_S", 7_800, 60, 86_400)?,
                connecting_grace: seconds("BATON_PUSH_CONNECTING_GRACE_S", 30, 0, 300)?,
            },
        })
    }
}

impl Config {
    /// The period a schedule of `resources.json` names by its configuration
    /// variable (`period_config`); `None` for a variable that is no period.
    pub fn schedule_period(&self, period_config: &str) -> Option<Duration> {
        match period_config {
            "BATON_REAPER_PERIOD_S" => Some(self.reaper_period),
            "BATON_DEMAND_METRICS_PERIOD_S" => Some(self.demand_metrics_period),
            "BATON_SCHEDULES_PERIOD_S" => Some(self.schedules_period),
            _ => None,
        }
    }
}

/// A lease must outlive three heartbeats, so that one lost heartbeat (or a
/// slow one) never costs a runner its job.
fn validate_lease(lease: &LeaseConfig) -> Result<(), ConfigError> {
    if lease.duration < lease.heartbeat_interval * 3 {
        return Err(ConfigError(format!(
            "BATON_LEASE_DURATION_S ({}) must be at least 3 × BATON_HEARTBEAT_INTERVAL_S ({})",
            lease.duration.as_secs(),
            lease.heartbeat_interval.as_secs()
        )));
    }
    if lease.first_heartbeat_grace < lease.heartbeat_interval {
        return Err(ConfigError(format!(
            "BATON_FIRST_HEARTBEAT_GRACE_S ({}) must be at least BATON_HEARTBEAT_INTERVAL_S ({})",
            lease.first_heartbeat_grace.as_secs(),
            lease.heartbeat_interval.as_secs()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> HashMap<String, String> {
        HashMap::from([("BATON_TABLE".to_string(), "t".to_string()), ("BATON_BUS".to_string(), "b".to_string())])
    }

    #[test]
    fn defaults_match_the_spec() {
        let config = Config::from_map(&base()).unwrap();
        assert_eq!(config.lease, LeaseConfig::default());
        assert_eq!(config.reaper_period, Duration::from_secs(60));
        assert_eq!(config.demand_metrics_period, Duration::from_secs(60));
        assert_eq!(config.session_ttl, Duration::from_secs(3600));
        assert_eq!(config.unschedulable_fail_after, Duration::from_secs(900));
        assert_eq!(config.orchestration, OrchestrationConfig::default());
    }

    #[test]
    fn the_log_cap_defaults_to_32_mib_and_is_bounded() {
        assert_eq!(Config::from_map(&base()).unwrap().log_cap_bytes, DEFAULT_LOG_CAP_BYTES);
        let mut map = base();
        map.insert("BATON_LOG_CAP_BYTES".into(), "100".into());
        assert!(Config::from_map(&map).unwrap_err().0.contains("BATON_LOG_CAP_BYTES must be between 1024"));
        map.insert("BATON_LOG_CAP_BYTES".into(), "lots".into());
        assert!(Config::from_map(&map).unwrap_err().0.contains("whole number of bytes"));
        map.insert("BATON_LOG_CAP_BYTES".into(), "4096".into());
        assert_eq!(Config::from_map(&map).unwrap().log_cap_bytes, 4096);
    }

    #[test]
    fn a_timeout_minute_longer_than_a_minute_is_rejected() {
        let mut map = base();
        map.insert("BATON_TIMEOUT_MINUTE_S".into(), "61".into());
        assert!(Config::from_map(&map).unwrap_err().0.contains("BATON_TIMEOUT_MINUTE_S"));
        map.insert("BATON_TIMEOUT_MINUTE_S".into(), "2".into());
        assert_eq!(Config::from_map(&map).unwrap().orchestration.timeout_minute, Duration::from_secs(2));
    }

    #[test]
    fn a_lease_shorter_than_three_heartbeats_is_rejected_at_start_up() {
        let mut map = base();
        map.insert("BATON_LEASE_DURATION_S".into(), "40".into());
        let err = Config::from_map(&map).unwrap_err();
        assert!(err.0.contains("3 ×"), "{err}");
    }

    #[test]
    fn missing_table_and_garbage_numbers_are_rejected() {
        assert!(Config::from_map(&HashMap::new()).is_err());
        let mut map = base();
        map.insert("BATON_REAPER_PERIOD_S".into(), "soon".into());
        assert!(Config::from_map(&map).unwrap_err().0.contains("BATON_REAPER_PERIOD_S"));
    }
}
