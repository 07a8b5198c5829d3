//! The local stack's test equipment, kept out of what ships to Lambda: the
//! functions depend on `baton-service` only, so their release build holds
//! none of this, and no feature flag has to be remembered.
//!
//! - [`faults`]: AWS's failures (conflicts, throttling, lost answers,
//!   redeliveries, Step Functions' own service errors, …) injected below
//!   the SDK, seeded and switchable;
//! - [`index_lag`]: index reads that lag behind the table's writes, as a
//!   global secondary index does on AWS;
//! - [`aws_limits`]: AWS's request limits the emulator does not enforce;
//! - [`grants`]: each function's IAM grants from `infra/resources.json`,
//!   enforced on its clients as IAM would;
//! - [`provision`]: the emulator's resources, made from `resources.json`;
//! - [`schema`]: the facts' JSON Schemas under `events/schemas/`, checked.

use std::sync::Arc;

use baton_service::aws::AwsClients;

pub mod aws_limits;
pub mod ec2_lag;
pub mod faults;
pub mod grants;
pub mod index_lag;
pub mod provision;
pub mod resources;
pub mod schema;

/// `clients` with AWS's failures injected by `plan` below the SDK (its
/// retries see them as they would see real ones).
pub fn with_faults(clients: &AwsClients, plan: Arc<faults::FaultPlan>) -> AwsClients {
    function_clients(clients, plan, None)
}

/// The clients of one function on the local stack: AWS's failures injected
/// by `plan`, and only what `grants` allow (`None`: anything).
///
/// Each call gives the clients retry quotas of their own
/// (`baton_service::aws::retry_partition`: a custom partition owns its token
/// bucket, whatever its name), and the SDK stops retrying once failures
/// have spent a quota. On Lambda every function instance is a process with
/// quotas of its own, so one function's failures never spend another's
/// retries; the dev host runs every function (and every stack of a test) in
/// one process, so it calls this once a function instance (a cold start),
/// or one invocation's storm would leave all the others without retries,
/// which AWS never does.
pub fn function_clients(
    clients: &AwsClients,
    plan: Arc<faults::FaultPlan>,
    grants: Option<Arc<grants::Grants>>,
) -> AwsClients {
    let http =
        faults::FaultyHttpClient::new(aws_smithy_http_client::Builder::new().build_http(), plan).with_grants(grants);
    clients.with_http_client(aws_sdk_dynamodb::config::SharedHttpClient::new(http))
}

#[cfg(test)]
mod tests {
    /// What ships to Lambda never builds this crate: no function (nor the
    /// crates they build on) depends on it, so their release build holds no
    /// fault layer whatever features a workspace build unifies.
    #[test]
    fn no_function_and_none_of_the_crates_they_build_on_depend_on_the_test_equipment() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut manifests: Vec<_> = ["api", "telemetry", "domain", "store", "service", "client"]
            .iter()
            .map(|c| root.join(c).join("Cargo.toml"))
            .collect();
        for entry in std::fs::read_dir(root.join("functions")).expect("functions/") {
            manifests.push(entry.expect("an entry").path().join("Cargo.toml"));
        }
        assert!(manifests.len() > 20, "every function's manifest: {manifests:?}");
        for manifest in manifests {
            let text = std::fs::read_to_string(&manifest).expect("a manifest");
            assert!(!text.contains("baton-localstack"), "{} depends on the test equipment", manifest.display());
        }
    }
}
