//! `baton fleet`: a provisioner's demand and instances, read with its own
//! token and printed once, or redrawn as they change (`--watch`).

use std::io::IsTerminal;
use std::time::Duration;

use baton_client::error::ClientError;
use baton_client::provisioners::ProvisionerClient;
use baton_client::Client;

use super::answer::{print_json, CliError};
use crate::provisioner::view::fleet_lines;

/// How long `fleet --watch` waits for a demand change before it redraws
/// anyway (the instances and the ages change without one).
const FLEET_REDRAW_S: u32 = 5;

/// The provisioner token of `baton fleet`: `--token` when it is one (the
/// global flag, which otherwise holds the operator's), else
/// `--provisioner-token` / BATON_PROVISIONER_TOKEN.
pub(super) fn fleet_token(global: &str, provisioner: Option<&str>) -> Result<String, CliError> {
    if global.starts_with("bpt_") {
        return Ok(global.to_string());
    }
    match provisioner.filter(|t| !t.is_empty()) {
        Some(token) => Ok(token.to_string()),
        None => {
            Err(CliError::Usage("a provisioner token is required: --token bpt_… or BATON_PROVISIONER_TOKEN".into()))
        }
    }
}

/// Prints the provisioner's demand and instances; with `watch`, again on
/// each demand change or every few seconds (the screen is redrawn on a
/// terminal; otherwise a new picture is printed only when it changed).
pub(super) async fn show(api: &str, token: &str, watch: bool, json: bool) -> Result<(), ClientError> {
    let client = ProvisionerClient::new(Client::new(api)?, token);
    let terminal = std::io::stdout().is_terminal();
    let mut since: Option<String> = None;
    let mut shown: Option<serde_json::Value> = None;
    let mut failures = 0u32;
    loop {
        let wait_s = if watch && since.is_some() { FLEET_REDRAW_S } else { 0 };
        let read = async {
            let demand = client.demand(since.as_deref(), wait_s).await?;
            let instances = client.instances(false).await?;
            Ok::<_, ClientError>((demand, instances))
        };
        match read.await {
            Ok((demand, instances)) => {
                failures = 0;
                since = Some(demand.version.clone());
                let picture = serde_json::json!({"demand": demand, "instances": instances});
                let changed = shown.as_ref() != Some(&picture);
                if json {
                    if !watch {
                        print_json(&picture);
                    } else if changed {
                        println!("{picture}");
                    }
                } else if !watch || terminal || changed {
                    if watch && terminal {
                        // Home and clear: a redraw in place, not a scroll.
                        print!("\x1b[H\x1b[2J");
                    } else if shown.is_some() {
                        println!();
                    }
                    for line in fleet_lines(&demand, &instances, chrono::Utc::now()) {
                        println!("{line}");
                    }
                }
                shown = Some(picture);
            }
            Err(err) if watch && err.is_transient() && failures < 10 => {
                failures += 1;
                eprintln!("baton: {err} (retrying)");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            Err(err) => return Err(err),
        }
        if !watch {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fleet_takes_a_provisioner_token_from_token_or_its_own_variable() {
        assert_eq!(fleet_token("bpt_a", None).ok(), Some("bpt_a".to_string()), "--token bpt_…");
        assert_eq!(fleet_token("bat_admin", Some("bpt_b")).ok(), Some("bpt_b".to_string()), "the admin's is not it");
        assert_eq!(fleet_token("", Some("bpt_b")).ok(), Some("bpt_b".to_string()));
        assert!(matches!(fleet_token("bat_admin", None), Err(CliError::Usage(_))));
        assert!(matches!(fleet_token("", Some("")), Err(CliError::Usage(_))));
    }
}
