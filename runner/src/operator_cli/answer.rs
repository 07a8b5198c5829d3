//! What a `baton` command hands back: its answer printed as JSON, or the
//! error it fails with.

use baton_client::error::ClientError;

/// Why a command failed: the API's answer, or how it was called.
#[derive(Debug, thiserror::Error)]
pub(super) enum CliError {
    #[error("{0}")]
    Api(#[from] ClientError),
    #[error("{0}")]
    Usage(String),
}

/// What a delete prints: `{"<field>": …, "deleted": true}` as JSON, or
/// "<kind> <id> deleted from workspace <workspace>".
pub(super) fn print_deleted(json: bool, kind: &str, field: &str, id: &str, workspace: &str) {
    if json {
        print_json(&serde_json::json!({ field: id, "deleted": true }));
    } else {
        println!("{kind} {id} deleted from workspace {workspace}");
    }
}

/// Prints an answer as indented JSON on stdout.
pub(super) fn print_json<T: serde::Serialize>(value: &T) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => println!("{text}"),
        Err(err) => eprintln!("baton: cannot print the answer: {err}"),
    }
}
