//! The demand metrics (scheduled, `BATON_DEMAND_METRICS_PERIOD_S`): each
//! label set a provisioner serves gets its demand published as EMF
//! (`DemandQueued`, `DemandRunning`; dimensions `workspace`, `label_set`)
//! every period, zeros included, whether or not anything polls the demand.
//! That is what an AWS auto scaling group's target tracking scales on with
//! no provisioner process at all (docs/provisioners.md): create a
//! provisioner for the label set, never poll with its token, scale on the
//! metric.
//!
//! Cost: one `Query` of the stage's provisioner registry (`PROVREG`, written
//! only when a provisioner is created or removed), then one `Query` of each
//! workspace's label-set counters (`QREG#<ws>`, one small item a job label
//! set), whatever the number of queued jobs. Never a Scan.
//!
//! A workspace whose counters cannot be read (past the SDK's own retries)
//! is left out of this period and the invocation then fails, after the rest
//! were published, so the function's errors alarm says so; the next period
//! publishes it again (a datapoint carries no state, so a gap is only a gap).

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use baton_domain::runners::labels::label_set_text;
use baton_domain::runners::provisioners::demand::{workspace_datapoints, DemandDatapoint, SetCounts};
use baton_service::context::{Context, Scheduled};
use baton_store::provisioners::RegisteredProvisioner;
use baton_store::runner_items::LabelSet;
use baton_store::StoreError;
use baton_telemetry::metrics::{demand_emf_line, emit, Unit, DIMENSION_VALUE_CHARS};

/// How long before the invocation's deadline no further workspace is read.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(3);

/// What one pass read.
#[derive(Debug, Default)]
pub struct Collected {
    pub datapoints: Vec<DemandDatapoint>,
    /// Workspaces whose counters could not be read, with the error.
    pub failed: Vec<(String, StoreError)>,
    /// Workspaces not reached before the deadline.
    pub unreached: usize,
}

/// Reads the registry and every workspace's counters into datapoints, one
/// per distinct served label set of a workspace (`workspace_datapoints`).
pub async fn collect(context: &Context, stop_at: Instant) -> Result<Collected, StoreError> {
    let entries = context.store.registered_provisioners().await?;
    let mut by_workspace: BTreeMap<&str, Vec<&RegisteredProvisioner>> = BTreeMap::new();
    for entry in &entries {
        by_workspace.entry(entry.workspace_id.as_str()).or_default().push(entry);
    }
    let mut collected = Collected::default();
    let total = by_workspace.len();
    for (visited, (workspace_id, provisioners)) in by_workspace.into_iter().enumerate() {
        if Instant::now() >= stop_at {
            collected.unreached = total - visited;
            break;
        }
        match context.store.label_sets(workspace_id).await {
            Ok(sets) => {
                let counts: Vec<SetCounts> = sets.iter().map(LabelSet::counts).collect();
                let served = provisioners.iter().flat_map(|p| p.label_sets.iter());
                collected.datapoints.extend(workspace_datapoints(workspace_id, served, &counts));
            }
            Err(err) => collected.failed.push((workspace_id.to_string(), err)),
        }
    }
    Ok(collected)
}

/// The scheduled entry point: publishes what [`collect`] read.
pub async fn handle(context: &Context, invocation: Scheduled) -> Result<usize, StoreError> {
    let left = invocation.deadline.duration_since(SystemTime::now()).unwrap_or_default();
    let stop_at = Instant::now() + left.saturating_sub(DEADLINE_MARGIN);
    let collected = collect(context, stop_at).await?;
    let now_ms = chrono::Utc::now().timestamp_millis();
    for point in &collected.datapoints {
        // A long set's text is shortened to a dimension CloudWatch keeps.
        let label_set = label_set_text(&point.labels, DIMENSION_VALUE_CHARS);
        println!("{}", demand_emf_line(&point.workspace_id, &label_set, point.queued, point.running, now_ms));
    }
    emit(
        "demand-metrics",
        &[
            ("demand_datapoints", collected.datapoints.len() as f64, Unit::Count),
            ("demand_workspaces_missed", (collected.failed.len() + collected.unreached) as f64, Unit::Count),
        ],
    );
    if collected.unreached > 0 {
        tracing::warn!(
            unreached = collected.unreached,
            "demand metrics stopped at the deadline; those workspaces wait for the next period"
        );
    }
    let published = collected.datapoints.len();
    match collected.failed.into_iter().next() {
        Some((workspace_id, err)) => {
            tracing::error!(%workspace_id, error = %err, published, "a workspace's demand could not be read; the next period publishes it");
            Err(err)
        }
        None => {
            tracing::info!(published, "demand metrics published");
            Ok(published)
        }
    }
}
