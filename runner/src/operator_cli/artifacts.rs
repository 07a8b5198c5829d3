//! `baton artifact download`: a stored artifact, checked and unpacked.

use std::path::PathBuf;
use std::process::ExitCode;

use baton_client::operators::Operator;
use clap::Subcommand;
use uuid::Uuid;

use super::answer::{print_json, CliError};

#[derive(Debug, Subcommand)]
pub(super) enum ArtifactCommand {
    /// Download a stored artifact, check its SHA-256, unpack it into DIR
    /// (default: the current directory).
    Download {
        #[arg(long, env = "BATON_WORKSPACE")]
        workspace: String,
        run_id: Uuid,
        name: String,
        #[arg(long = "output", short = 'o', default_value = ".")]
        output: PathBuf,
    },
}

pub(super) async fn artifact_command(
    operator: &Operator,
    command: ArtifactCommand,
    json: bool,
) -> Result<ExitCode, CliError> {
    let ArtifactCommand::Download { workspace, run_id, name, output } = command;
    let download = operator.artifact_download(&workspace, run_id, &name).await?;
    let bytes = crate::artifacts::fetch(&operator.client, &download).await.map_err(CliError::Usage)?;
    crate::artifacts::unpack(&bytes, &output).map_err(CliError::Usage)?;
    if json {
        print_json(&download.artifact);
    } else {
        println!(
            "artifact {name}: {} bytes (sha256 {}) from job {} unpacked into {}",
            bytes.len(),
            download.artifact.sha256,
            download.artifact.job_key,
            output.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
