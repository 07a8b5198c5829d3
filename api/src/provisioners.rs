//! Request and response bodies of the provisioner routes (api.md
//! "Provisioners", behaviour.md §15): what an operator registers, what a
//! provisioner (`bpt_` token) reads as demand, reserves, and reports about
//! its instances, and the terminate intents Baton answers with.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The defaults of api.md, in one place for the server and the clients.
pub const DEFAULT_JOBS_PER_INSTANCE: u32 = 1;
pub const DEFAULT_IDLE_TIMEOUT_S: u32 = 300;
pub const DEFAULT_BOOT_TIMEOUT_S: u32 = 600;
pub const DEFAULT_RESERVATION_EXPIRY_S: u32 = 900;
pub const MAX_RESERVATION_EXPIRY_S: u32 = 3_600;
/// How long a demand read may wait for a change.
pub const MAX_DEMAND_WAIT_S: u32 = 20;
/// How many instance events one report may carry.
pub const MAX_INSTANCE_EVENTS: usize = 100;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateProvisioner {
    pub name: String,
    /// The label sets its machines can serve (1–20 sets of 1–20 labels).
    pub label_sets: Vec<Vec<String>>,
    /// 1–10,000.
    pub max_instances: u32,
    /// 1–1,000; 1 makes every machine ephemeral (one job, then it goes).
    #[serde(default)]
    pub jobs_per_instance: Option<u32>,
    /// 10–86,400.
    #[serde(default)]
    pub idle_timeout_s: Option<u32>,
    /// 10–3,600.
    #[serde(default)]
    pub boot_timeout_s: Option<u32>,
    /// Idle instances to keep ready, 0–`max_instances`.
    #[serde(default)]
    pub warm: Option<u32>,
    /// 1–200 characters: a create retried with the same key (its answer
    /// lost) makes no second provisioner. The repeat answers 200 with the
    /// same provisioner and a new token (a token is shown once, so the one
    /// the lost answer held stops working); a repeat with other settings,
    /// or after the provisioner was removed, is a 409 `idempotency-conflict`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProvisionerSummary {
    pub id: Uuid,
    pub name: String,
    pub label_sets: Vec<Vec<String>>,
    pub max_instances: u32,
    pub jobs_per_instance: u32,
    pub idle_timeout_s: u32,
    pub boot_timeout_s: u32,
    pub warm: u32,
    /// Reservations that hold an instance slot now (counted against `max_instances`).
    pub reserved_instances: u32,
    pub created_at: DateTime<Utc>,
}

/// The 201 of a creation: the provisioner and its token, shown this once.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreatedProvisioner {
    #[serde(flatten)]
    pub provisioner: ProvisionerSummary,
    pub token: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProvisionerList {
    pub items: Vec<ProvisionerSummary>,
}

/// `GET /v1/workspaces/{ws}/provisioners/{id}` (operators): the fleet as
/// its provisioner sees it, for people: the demand of each served label
/// set and the instances that are not gone.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProvisionerFleet {
    pub provisioner: ProvisionerSummary,
    /// As `GET /v1/provisioners/demand` answers them.
    pub label_sets: Vec<LabelSetDemand>,
    /// Instances not `terminated` or `failed`, by `provider_runner_id`.
    pub instances: Vec<InstanceView>,
    /// Instances that ended (`terminated` or `failed`) since the
    /// provisioner was created.
    pub ended_instances: u64,
}

/// Demand for one label set a provisioner serves. A job counts toward it
/// when the job's labels are a subset of `labels`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LabelSetDemand {
    pub labels: Vec<String>,
    /// Claimable jobs not covered by a reservation.
    pub queued: u64,
    /// Reservations whose instance has not taken its first job yet.
    pub reserved: u64,
    /// Jobs of these labels held by a runner now.
    pub running: u64,
    /// This provisioner's registered runners that hold no job and may take one.
    pub idle_sessions: u64,
    pub oldest_queued_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Demand {
    pub label_sets: Vec<LabelSetDemand>,
    /// Changes whenever any figure above does; pass it back as `since`.
    pub version: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReserveRequest {
    /// One of the provisioner's label sets.
    pub labels: Vec<String>,
    /// 1–1,000 instances.
    pub count: u32,
    /// Default 900, at most 3,600.
    #[serde(default)]
    pub expires_in_s: Option<u32>,
    /// Chosen by the provisioner for one reserve and sent again with each
    /// retry of it: a retry whose earlier try reserved (its answer lost)
    /// gets those reservations and tokens back instead of reserving again,
    /// so a lost answer neither holds demand nor leaves machines unstarted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<Uuid>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Reservation {
    pub id: Uuid,
    /// An ephemeral `brt_` token: single use, bound to the labels, its
    /// session capped at `jobs_per_instance` claims, expiring with the
    /// reservation. Shown once.
    pub registration_token: String,
    pub expires_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Reserved {
    /// Fewer than asked (possibly none) when demand or `max_instances` does
    /// not allow more.
    pub reservations: Vec<Reservation>,
}

/// The states of a runner instance, in the only order they may move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum InstanceState {
    Requested,
    Booting,
    Running,
    Terminating,
    Terminated,
    Failed,
}

impl InstanceState {
    pub fn as_str(self) -> &'static str {
        match self {
            InstanceState::Requested => "requested",
            InstanceState::Booting => "booting",
            InstanceState::Running => "running",
            InstanceState::Terminating => "terminating",
            InstanceState::Terminated => "terminated",
            InstanceState::Failed => "failed",
        }
    }

    /// Its place in the order states move in: a report of a lower rank than
    /// the instance's is late and changes nothing.
    pub fn rank(self) -> u8 {
        self as u8
    }

    /// The machine is gone (or never came).
    pub fn is_terminal(self) -> bool {
        matches!(self, InstanceState::Terminated | InstanceState::Failed)
    }
}

/// Why Baton wants an instance gone (behaviour.md §15).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum TerminateReason {
    JobCancelled,
    Idle,
    Orphan,
    Exhausted,
    ReservationExpired,
    ProvisionerRemoved,
}

impl TerminateReason {
    pub fn as_str(self) -> &'static str {
        match self {
            TerminateReason::JobCancelled => "job-cancelled",
            TerminateReason::Idle => "idle",
            TerminateReason::Orphan => "orphan",
            TerminateReason::Exhausted => "exhausted",
            TerminateReason::ReservationExpired => "reservation-expired",
            TerminateReason::ProvisionerRemoved => "provisioner-removed",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InstanceEvent {
    /// The provisioner's own id of the machine (1–256 characters).
    pub provider_runner_id: String,
    pub state: InstanceState,
    #[serde(default)]
    pub reservation_id: Option<Uuid>,
    #[serde(default)]
    pub runner_session_id: Option<Uuid>,
    #[serde(default)]
    pub at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InstanceReport {
    /// At most 100.
    pub events: Vec<InstanceEvent>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HonoredIntent {
    pub provider_runner_id: String,
    pub reason: TerminateReason,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InstanceReportAnswer {
    /// Events that moved an instance forward (late or repeated ones are not counted).
    pub accepted: u32,
    /// Reservations this report released (their instance ended and no
    /// uncancelled lease remains on it).
    pub reservations_released: u32,
    /// Instances this report stopped (`terminating` or later) that Baton had
    /// asked to go, with the reason it had.
    pub terminate_intents_honored: Vec<HonoredIntent>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TerminateIntent {
    pub reason: TerminateReason,
    pub at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InstanceView {
    pub provider_runner_id: String,
    pub state: InstanceState,
    pub reservation_id: Option<Uuid>,
    pub runner_session_id: Option<Uuid>,
    pub terminate: Option<TerminateIntent>,
    /// When Baton first heard of the instance (its first report). A
    /// provisioner reads it to tell an instance its cloud does not list yet
    /// (EC2's describe calls lag a launch) from one that is gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_seen_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InstanceList {
    /// By `provider_runner_id`, at most `MAX_INSTANCES_PER_PAGE` a page.
    pub items: Vec<InstanceView>,
    /// Pass it as `cursor` for the next page; absent on the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// The most instances one page of `GET /v1/provisioners/instances` holds
/// (`limit`, default and most): 10,000 instances are 10 pages, each far
/// under Lambda's 6 MB answer.
pub const MAX_INSTANCES_PER_PAGE: usize = 1_000;

/// The most instances one reservation request may ask for (api.md).
pub const MAX_RESERVE_COUNT: u32 = 1_000;

/// How many instances to reserve for one label set, from its demand.
///
/// `queued` is the server's figure of claimable jobs **no reservation
/// covers yet** (reserved instances, booting or not, are already taken off
/// it), so reservations are not subtracted again; idle sessions of this
/// provisioner are about to claim queued jobs, so they cover that many.
/// `headroom` is what a local cap on live instances still allows (`None`:
/// no local cap). Asking for more than the server allows is safe: it
/// answers with fewer (capped by demand and `max_instances`), so there is no
/// need to mirror its rules here.
pub fn instances_to_reserve(queued: u64, idle_sessions: u64, headroom: Option<u64>) -> u32 {
    let uncovered = queued.saturating_sub(idle_sessions);
    let allowed = headroom.map_or(uncovered, |room| uncovered.min(room));
    u32::try_from(allowed).unwrap_or(u32::MAX).min(MAX_RESERVE_COUNT)
}

/// What a local cap of `limit` live instances still allows with `live`
/// running (`None`: no cap).
pub fn headroom(limit: Option<u32>, live: usize) -> Option<u64> {
    limit.map(|limit| u64::from(limit).saturating_sub(live as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queued_demand_that_no_idle_session_covers_is_reserved() {
        assert_eq!(instances_to_reserve(5, 0, None), 5);
        assert_eq!(instances_to_reserve(5, 2, None), 3, "two idle runners will take two of them");
        assert_eq!(instances_to_reserve(2, 5, None), 0, "more idle runners than jobs: nothing to start");
        assert_eq!(instances_to_reserve(0, 0, None), 0);
    }

    #[test]
    fn a_local_cap_bounds_what_is_reserved() {
        assert_eq!(instances_to_reserve(10, 0, headroom(Some(4), 1)), 3);
        assert_eq!(instances_to_reserve(10, 0, headroom(Some(4), 6)), 0, "over the cap already: none");
        assert_eq!(headroom(None, 1_000), None);
    }

    #[test]
    fn one_request_never_asks_for_more_than_the_api_takes() {
        assert_eq!(instances_to_reserve(u64::MAX, 0, None), MAX_RESERVE_COUNT);
        assert_eq!(instances_to_reserve(2_500, 100, None), MAX_RESERVE_COUNT);
    }
}
