//! The single-table key schema, in one place: every `pk`/`sk` and index key
//! the store writes or queries is made here, and nowhere else.
//!
//! | item family | `pk` | `sk` | index keys |
//! | --- | --- | --- | --- |
//! | run | `RUN#<run>` | `RUN` | `runs-by-workspace`: `rw_pk = WS#<ws>`, `rw_sk = <run id>` (v7: by creation) |
//! | attempt | `RUN#<run>` | `ATTEMPT#<n:010>` | |
//! | definition snapshot | `RUN#<run>` | `SNAPSHOT#<n:010>` | |
//! | execution result (steps, outputs) | `RUN#<run>` | `STEPS#<n:010>#<execution>` | |
//! | artifact (its job, size, digest, upload) | `RUN#<run>` | `ARTIFACT#<name>` | |
//! | the run's artifact bytes (its cap) | `RUN#<run>` | `ARTIFACTS` | |
//! | run counter | `RUNNUM#<ws>#<workflow>` | `COUNTER` | |
//! | idempotency key | `RUNIDEM#<ws>#<key>` | `IDEM` | |
//! | workspace variable (`vars.NAME`) | `VARS#<ws>` | `<NAME>` | |
//! | a provisioner create's idempotency key | `PROVIDEM#<ws>#<key>` | `IDEM` | |
//! | runners' record of an execution (tombstone; the step reports) | `EXEC#<execution>` | `RUNNER` | |
//! | job spec (steps, env: what a runner runs) | `EXEC#<execution>` | `SPEC` | |
//! | lease | `EXEC#<execution>` | `LEASE` | `leases-by-expiry`: `lx_shard = L#<0..8>`, `lx_expires_at` (ms, a lower bound of the expiry) |
//! | pending item | `Q#<ws>#<labelset>` | `<queued_at>#<execution>` | |
//! | label-set registry | `QREG#<ws>` | `<labelset>` | |
//! | registration token | `REGTOKEN#<id>` | `REGTOKEN` | `runs-by-workspace`: `rw_pk = REGTOKENS#<ws>`, `rw_sk = <created_at>#<id>` |
//! | runner session | `SESSION#<id>` | `SESSION` | |
//! | a label set registered sessions offer, until the last one's expiry | `OFFERS#<ws>` | `<labelset>` | |
//! | a claim's answer, for its retries | `SESSION#<id>` | `CLAIM#<request id>` | |
//! | provisioner | `PROV#<id>` | `PROV` | `runs-by-workspace`: `rw_pk = PROVS#<ws>`, `rw_sk = <created_at>#<id>` |
//! | provisioner registry entry (its workspace, served sets), for the demand metrics | `PROVREG` | `<ws>#<id>` | |
//! | reservation | `PROV#<provisioner>` | `RESV#<id>` | |
//! | runner instance | `PROV#<provisioner>` | `INST#<provider runner id>` | |
//! | an ended instance or released reservation, once settled (`ttl`), and the ended count | `PROVHIST#<provisioner>` | `INST#…`, `RESV#…`, `ENDED` | |
//! | operator API token | `APITOKEN#<sha256>` | `APITOKEN` | |
//! | outbox (a fact to relay) | `OUTBOX#<event id>` | `OUTBOX` | |
//! | concurrency group (its holder and waiting attempts) | `CGROUP#<ws>#<group>` | `CGROUP` | |
//! | cache entry of a workspace | `CACHE#<ws>` | `<scope>,<key>` (`,` is in no scope or key) | |
//! | processed marker of a consumer | `PROCESSED#<consumer>#<event id>` | `PROCESSED` | |
//!
//! `#` separates the parts of a key; a run's items share its partition so
//! one `Query` reads a whole run; an execution's runner record and lease
//! share theirs. Timestamps inside keys, in expressions and in items all use
//! one fixed-width format (`baton_domain::time`), so that string order is time order.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// The index of a workspace's runs (and of its registration tokens).
pub const RUNS_BY_WORKSPACE: &str = "runs-by-workspace";
/// The sparse index of live leases by expiry, sharded.
pub const LEASES_BY_EXPIRY: &str = "leases-by-expiry";

pub const RUN_SK: &str = "RUN";
pub const COUNTER_SK: &str = "COUNTER";
pub const IDEMPOTENCY_SK: &str = "IDEM";
pub const RUNNER_SK: &str = "RUNNER";
pub const LEASE_SK: &str = "LEASE";
pub const SPEC_SK: &str = "SPEC";
pub const REGISTRATION_TOKEN_SK: &str = "REGTOKEN";
pub const SESSION_SK: &str = "SESSION";
pub const OPERATOR_TOKEN_SK: &str = "APITOKEN";
pub const OUTBOX_SK: &str = "OUTBOX";
pub const PROVISIONER_SK: &str = "PROV";
pub const RESERVATION_PREFIX: &str = "RESV#";
pub const INSTANCE_PREFIX: &str = "INST#";
pub const PROCESSED_SK: &str = "PROCESSED";
pub const CONCURRENCY_GROUP_SK: &str = "CGROUP";

/// Shards of the live-lease index: expiring leases spread over this many
/// partitions so one partition never takes every heartbeat of a fleet.
pub const LEASE_SHARDS: u32 = 8;

/// A timestamp as stored (`baton_domain::time`): fixed width, so that comparing
/// two as strings compares the instants.
pub fn timestamp(at: DateTime<Utc>) -> String {
    baton_domain::time::format(at)
}

/// The partition of a run and everything it holds.
pub fn run_pk(run_id: Uuid) -> String {
    format!("RUN#{run_id}")
}

pub const ARTIFACT_PREFIX: &str = "ARTIFACT#";
pub const ARTIFACT_USAGE_SK: &str = "ARTIFACTS";

pub fn cache_pk(workspace_id: &str) -> String {
    format!("CACHE#{workspace_id}")
}

/// A cache entry's sort key; with a prefix for `key`, what `begins_with`
/// finds the entries under a restore prefix by.
pub fn cache_sk(scope: &str, key: &str) -> String {
    format!("{scope},{key}")
}

pub fn artifact_sk(name: &str) -> String {
    format!("{ARTIFACT_PREFIX}{name}")
}

pub fn attempt_sk(attempt: u32) -> String {
    format!("ATTEMPT#{attempt:010}")
}

pub fn snapshot_sk(attempt: u32) -> String {
    format!("SNAPSHOT#{attempt:010}")
}

/// The attempt a snapshot's sort key names.
pub fn snapshot_attempt(sk: &str) -> Option<u32> {
    sk.strip_prefix("SNAPSHOT#")?.parse().ok()
}

/// The prefix of every result item's sort key in a run's partition.
pub const STEPS_PREFIX: &str = "STEPS#";

pub fn steps_sk(attempt: u32, execution_id: Uuid) -> String {
    format!("{STEPS_PREFIX}{attempt:010}#{execution_id}")
}

/// `rw_pk` of a workspace's runs.
pub fn workspace_runs_pk(workspace_id: &str) -> String {
    format!("WS#{workspace_id}")
}

pub fn run_counter_pk(workspace_id: &str, workflow: &str) -> String {
    format!("RUNNUM#{workspace_id}#{workflow}")
}

pub fn idempotency_pk(workspace_id: &str, key: &str) -> String {
    format!("RUNIDEM#{workspace_id}#{key}")
}

pub fn provisioner_idempotency_pk(workspace_id: &str, key: &str) -> String {
    format!("PROVIDEM#{workspace_id}#{key}")
}

/// The partition of an execution on the runners side: its record and its lease.
pub fn execution_pk(execution_id: Uuid) -> String {
    format!("EXEC#{execution_id}")
}

/// The partition of a workspace's pending items of one canonical label set.
pub fn queue_pk(workspace_id: &str, labelset: &str) -> String {
    format!("Q#{workspace_id}#{labelset}")
}

/// The label set id a queue partition key names (`Q#<ws>#<labelset>`).
pub fn labelset_of_queue_pk(pk: &str) -> Option<&str> {
    pk.strip_prefix("Q#")?.rsplit_once('#').map(|(_, labelset)| labelset)
}

/// A pending item's sort key: oldest `queued_at` first, ties by execution.
pub fn pending_sk(queued_at: DateTime<Utc>, execution_id: Uuid) -> String {
    format!("{}#{execution_id}", timestamp(queued_at))
}

/// The partition of a workspace's push connections (one item per session).
pub fn push_connections_pk(workspace_id: &str) -> String {
    format!("PUSH#{workspace_id}")
}

/// The partition of a workspace's label-set registry.
pub fn labelset_registry_pk(workspace_id: &str) -> String {
    format!("QREG#{workspace_id}")
}

/// `lx_shard` of shard `n` of the live-lease index.
pub fn lease_shard_key(n: u32) -> String {
    format!("L#{n}")
}

/// The index shard of an execution's lease (stable for the execution).
pub fn lease_shard(execution_id: Uuid) -> String {
    // The low bytes of a v7 id are random; the high ones are time.
    lease_shard_key(u32::from(execution_id.as_bytes()[15]) % LEASE_SHARDS)
}

pub fn registration_token_pk(id: Uuid) -> String {
    format!("REGTOKEN#{id}")
}

/// `rw_pk` of a workspace's registration tokens.
pub fn workspace_registration_tokens_pk(workspace_id: &str) -> String {
    format!("REGTOKENS#{workspace_id}")
}

/// `rw_sk` of a registration token: newest first in a backwards query.
pub fn registration_token_listing_sk(created_at: DateTime<Utc>, id: Uuid) -> String {
    format!("{}#{id}", timestamp(created_at))
}

/// The partition of a provisioner, its reservations and its instances: one
/// `Query` reads its whole live fleet (what ended moves to its history).
pub fn provisioner_pk(id: Uuid) -> String {
    format!("PROV#{id}")
}

/// The history of a provisioner's fleet: its ended instances and released
/// reservations, moved out of `provisioner_pk` once settled (same sort keys,
/// a `ttl`), so the fleet a pass reads does not grow with months of
/// machines; and the count of ended instances (`PROVISIONER_HISTORY_COUNT_SK`).
pub fn provisioner_history_pk(id: Uuid) -> String {
    format!("PROVHIST#{id}")
}

pub const PROVISIONER_HISTORY_COUNT_SK: &str = "ENDED";

pub fn reservation_sk(id: Uuid) -> String {
    format!("{RESERVATION_PREFIX}{id}")
}

pub fn instance_sk(provider_runner_id: &str) -> String {
    format!("{INSTANCE_PREFIX}{provider_runner_id}")
}

/// The one partition listing every live provisioner of the stage (what the
/// scheduled demand metrics read instead of a Scan). Written only when a
/// provisioner is created or removed, read once a period: one partition is
/// far from its limits.
pub const PROVISIONER_REGISTRY_PK: &str = "PROVREG";

pub fn provisioner_registry_sk(workspace_id: &str, id: Uuid) -> String {
    format!("{workspace_id}#{id}")
}

/// `rw_pk` of a workspace's provisioners.
pub fn workspace_provisioners_pk(workspace_id: &str) -> String {
    format!("PROVS#{workspace_id}")
}

/// A webhook, found by the id its delivery URL names (`hooks`).
pub fn hook_pk(id: Uuid) -> String {
    format!("HOOK#{id}")
}

pub const HOOK_SK: &str = "HOOK";

/// A delivery's answer, under its hook.
pub fn hook_delivery_sk(delivery: &str) -> String {
    format!("DELIVERY#{delivery}")
}

/// The ticks a pipeline's cron has fired (`schedules`): one item a
/// minute, put only if absent, so a tick the scheduler delivers twice (or
/// two schedules of one cron wake for) starts one run.
pub fn schedule_fired_pk(workspace_id: &str, pipeline: &str, index: usize) -> String {
    format!("FIRED#{workspace_id}#{pipeline}#{index}")
}

pub fn schedule_fired_sk(due: DateTime<Utc>) -> String {
    due.format("%Y-%m-%dT%H:%M").to_string()
}

/// A requested run, by the id it is to be created with (`run_requests`).
pub fn run_request_pk(run_id: Uuid) -> String {
    format!("RUNREQ#{run_id}")
}

pub const RUN_REQUEST_SK: &str = "REQUEST";

/// A workspace's hooks, one entry a hook.
pub fn hooks_pk(workspace_id: &str) -> String {
    format!("HOOKS#{workspace_id}")
}

/// A workspace's pipelines, one item a name (`pipelines`).
pub fn pipelines_pk(workspace_id: &str) -> String {
    format!("PIPELINES#{workspace_id}")
}

/// A workspace's variables: one partition, so a run's create reads them all
/// in one `Query`.
pub fn variables_pk(workspace_id: &str) -> String {
    format!("VARS#{workspace_id}")
}

pub fn pipeline_sk(name: &str) -> String {
    name.to_string()
}

/// The label sets a workspace's registered sessions offer
/// (`runners::schedulable`).
pub fn offers_pk(workspace_id: &str) -> String {
    format!("OFFERS#{workspace_id}")
}

pub fn session_pk(id: Uuid) -> String {
    format!("SESSION#{id}")
}

/// `sk` of what a session's claim `request_id` took (under [`session_pk`]).
pub fn claim_request_sk(request_id: Uuid) -> String {
    format!("CLAIM#{request_id}")
}

pub fn operator_token_pk(token_hash: &str) -> String {
    format!("APITOKEN#{token_hash}")
}

pub fn outbox_pk(event_id: Uuid) -> String {
    format!("OUTBOX#{event_id}")
}

/// A workspace's concurrency group (names may hold `#`: the workspace id
/// cannot, so the key stays unambiguous).
pub fn concurrency_group_pk(workspace_id: &str, group: &str) -> String {
    format!("CGROUP#{workspace_id}#{group}")
}

pub fn processed_pk(consumer: &str, event_id: Uuid) -> String {
    format!("PROCESSED#{consumer}#{event_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_sort_as_strings_in_time_order() {
        let whole = DateTime::parse_from_rfc3339("2026-12-02T10:00:00Z").expect("valid").with_timezone(&Utc);
        let later = whole + chrono::Duration::milliseconds(500);
        assert!(timestamp(whole) < timestamp(later), "{} vs {}", timestamp(whole), timestamp(later));
        assert_eq!(timestamp(whole), "2026-12-02T10:00:00.000000000Z");
    }

    #[test]
    fn lease_shards_are_stable_and_in_range() {
        let id = Uuid::now_v7();
        assert_eq!(lease_shard(id), lease_shard(id));
        assert!((0..LEASE_SHARDS).map(lease_shard_key).any(|s| s == lease_shard(id)));
    }

    #[test]
    fn a_snapshot_key_names_its_attempt() {
        assert_eq!(snapshot_attempt(&snapshot_sk(12)), Some(12));
        assert_eq!(snapshot_attempt(&attempt_sk(12)), None);
    }
}
