//! `baton provisioner`: register, list and remove the workspace's
//! provisioners.

use std::process::ExitCode;

use baton_api::provisioners::{CreateProvisioner, ProvisionerSummary};
use baton_client::operators::Operator;
use clap::{Args, Subcommand};
use uuid::Uuid;

use super::answer::{print_json, CliError};

#[derive(Debug, Subcommand)]
pub(super) enum ProvisionerCommand {
    /// Register a provisioner; prints its token (shown once) on stdout.
    Create {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        #[command(flatten)]
        provisioner: NewProvisioner,
    },
    /// List the workspace's provisioners (no tokens).
    List {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
    },
    /// Remove a provisioner: its token stops working, its instances are asked to go.
    Remove {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        id: Uuid,
    },
}

/// What `create` registers: the API's request, as options (the api crate
/// knows no clap).
#[derive(Debug, Args)]
pub(super) struct NewProvisioner {
    #[arg(long)]
    name: String,
    /// A label set its machines serve, comma-separated (repeatable).
    #[arg(long = "label-set", required = true, value_parser = parse_label_set)]
    label_sets: Vec<Vec<String>>,
    /// The most instances it may hold at once (1 to 10,000).
    #[arg(long)]
    max_instances: u32,
    /// Jobs each instance takes before it goes (1, the default: ephemeral).
    #[arg(long)]
    jobs_per_instance: Option<u32>,
    /// An instance idle this long goes (default 300).
    #[arg(long)]
    idle_timeout_s: Option<u32>,
    /// An instance whose runner has not registered by then goes (default 600).
    #[arg(long)]
    boot_timeout_s: Option<u32>,
    /// Idle instances to keep ready (default 0).
    #[arg(long)]
    warm: Option<u32>,
    /// Makes the command safe to run again after an answer was lost: the
    /// same key creates nothing new and prints the same provisioner
    /// with a new token (the earlier one stops working).
    #[arg(long)]
    idempotency_key: Option<String>,
}

impl From<NewProvisioner> for CreateProvisioner {
    fn from(new: NewProvisioner) -> Self {
        CreateProvisioner {
            name: new.name,
            label_sets: new.label_sets,
            max_instances: new.max_instances,
            jobs_per_instance: new.jobs_per_instance,
            idle_timeout_s: new.idle_timeout_s,
            boot_timeout_s: new.boot_timeout_s,
            warm: new.warm,
            idempotency_key: new.idempotency_key,
        }
    }
}

/// `linux,x64` as the label set `["linux", "x64"]` (blanks dropped).
fn parse_label_set(raw: &str) -> Result<Vec<String>, String> {
    let labels: Vec<String> = raw.split(',').map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect();
    if labels.is_empty() {
        return Err(format!("expected labels separated by commas, got {raw:?}"));
    }
    Ok(labels)
}

pub(super) async fn provisioner_command(
    operator: &Operator,
    command: ProvisionerCommand,
    json: bool,
) -> Result<ExitCode, CliError> {
    match command {
        ProvisionerCommand::Create { workspace, provisioner } => {
            let body = CreateProvisioner::from(provisioner);
            let created = operator.create_provisioner(&workspace, &body).await?;
            if json {
                print_json(&created);
            } else {
                eprintln!("{} in workspace {workspace}; its token, shown once:", describe(&created.provisioner));
                println!("{}", created.token);
            }
        }
        ProvisionerCommand::List { workspace } => {
            let list = operator.list_provisioners(&workspace).await?;
            if json {
                print_json(&list);
            } else {
                for provisioner in &list.items {
                    println!("{}", describe(provisioner));
                }
            }
        }
        ProvisionerCommand::Remove { workspace, id } => {
            operator.remove_provisioner(&workspace, id).await?;
            if json {
                print_json(&serde_json::json!({"id": id, "removed": true}));
            } else {
                println!("provisioner {id} removed: its token no longer works, its instances are asked to go");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One line about a provisioner.
fn describe(p: &ProvisionerSummary) -> String {
    let sets: Vec<String> = p.label_sets.iter().map(|set| set.join(",")).collect();
    format!(
        "provisioner {} {}  label sets {}  max {} (reserved {})  jobs/instance {}  idle {}s  boot {}s  warm {}  created {}",
        p.id,
        p.name,
        sets.join(" "),
        p.max_instances,
        p.reserved_instances,
        p.jobs_per_instance,
        p.idle_timeout_s,
        p.boot_timeout_s,
        p.warm,
        p.created_at.to_rfc3339()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_set_is_its_comma_separated_labels() {
        assert_eq!(parse_label_set("linux, x64,"), Ok(vec!["linux".to_string(), "x64".to_string()]));
        assert!(parse_label_set(" , ").is_err(), "an empty set is refused here, not by the API");
    }
}
