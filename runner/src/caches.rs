//! Caches on the runner's side (behaviour.md §17): the `cache:` step runs
//! `baton-runner cache restore`, which restores the entry the server finds
//! (the exact key, else the newest under a restore prefix) into the job's
//! directory and, unless the key itself was found, writes what to save to
//! `$BATON_CACHE_SAVES`; the runner saves those after the job's steps all
//! succeeded, before it reports the last one (the save needs the lease).

use std::path::Path;

use baton_api::artifacts::ArtifactUploadResponse;
use baton_api::caches::{
    CacheCompleteRequest, CacheEntry, CacheHit, CacheRestoreRequest, CacheRestoreResponse, CacheSaveRequest,
};
use baton_client::error::ClientError;
use baton_client::retry::with_retries;
use baton_client::Client;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::artifacts::{self, RETRY_BUDGET};

/// A restore the `cache:` step asks for.
#[derive(Debug, Clone)]
pub struct Restore {
    pub key: String,
    pub restore_keys: Vec<String>,
    pub scope: String,
    pub paths: Vec<String>,
    /// Whether the job saves the key after it succeeded when the key itself
    /// was not found (`actions/cache/restore` only restores).
    pub save: bool,
}

/// A save the runner makes after the job (one JSON line of
/// `$BATON_CACHE_SAVES`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PendingSave {
    pub key: String,
    pub scope: String,
    pub paths: Vec<String>,
}

/// `key`, or with `key_files` `key-<16 hex of their SHA-256>` (each file's
/// path and contents, in the order given): a key that changes when a lock
/// file does.
pub fn effective_key(dir: &Path, key: &str, key_files: &[String]) -> Result<String, String> {
    if key_files.is_empty() {
        return Ok(key.to_string());
    }
    let mut hasher = Sha256::new();
    for file in key_files {
        let contents = std::fs::read(dir.join(file)).map_err(|e| format!("key file {file}: {e}"))?;
        hasher.update(file.as_bytes());
        hasher.update([0]);
        hasher.update(&contents);
    }
    let digest = format!("{:x}", hasher.finalize());
    Ok(format!("{key}-{}", &digest[..16]))
}

/// The `cache restore` command: restores, and notes the save for later.
pub async fn restore(
    client: &Client,
    token: &str,
    execution: Uuid,
    dir: &Path,
    restore: Restore,
) -> Result<(), String> {
    let body = CacheRestoreRequest {
        key: restore.key.clone(),
        restore_keys: restore.restore_keys.clone(),
        scope: restore.scope.clone(),
    };
    let path = format!("/v1/runners/leases/{execution}/caches/restore");
    let answer: CacheRestoreResponse = with_retries("cache restore", RETRY_BUDGET, || {
        client.send_for(reqwest::Method::POST, &path, token, Some(&body))
    })
    .await
    .map_err(|e| format!("cache {}: {e}", restore.key))?;
    let mut hit = answer.hit;
    match (&answer.entry, &answer.url) {
        (Some(entry), Some(url)) => match fetch_into(client, entry, url, dir).await {
            Ok(()) => println!("cache {}: restored {} ({} bytes, {:?} hit)", restore.key, entry.key, entry.bytes, hit),
            // A cache is an optimisation: a failed restore is a miss.
            Err(err) => {
                println!("cache {}: not restored ({err}); going on without it", restore.key);
                hit = CacheHit::Miss;
            }
        },
        _ => println!("cache {}: miss", restore.key),
    }
    // GitHub's `cache-hit` output: `true` for the key itself, `false` for
    // a restore prefix's entry, empty for a miss (`steps.<id>.outputs`).
    let cache_hit = match hit {
        CacheHit::Exact => "true",
        CacheHit::Prefix => "false",
        CacheHit::Miss => "",
    };
    write_output("cache-hit", cache_hit)?;
    if hit != CacheHit::Exact && restore.save {
        let save = PendingSave { key: restore.key.clone(), scope: restore.scope, paths: restore.paths };
        note_save(&save)?;
        println!("cache {}: will be saved if the job succeeds", restore.key);
    }
    Ok(())
}

/// The `cache save` command (`actions/cache/save`): saves `save` under its
/// key once the job's steps all succeeded (a save needs the job's lease,
/// which the runner holds; an entry is never replaced).
pub fn save_later(save: PendingSave) -> Result<(), String> {
    note_save(&save)?;
    println!("cache {}: will be saved if the job succeeds", save.key);
    Ok(())
}

/// `name=value` appended to the step's `$GITHUB_OUTPUT`, when it has one.
fn write_output(name: &str, value: &str) -> Result<(), String> {
    let Some(file) = std::env::var_os("GITHUB_OUTPUT") else { return Ok(()) };
    use std::io::Write;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&file)
        .and_then(|mut f| writeln!(f, "{name}={value}"))
        .map_err(|e| format!("{}: {e}", Path::new(&file).display()))
}

async fn fetch_into(client: &Client, entry: &CacheEntry, url: &str, dir: &Path) -> Result<(), String> {
    let what = format!("cache entry {:?}", entry.key);
    let bytes = artifacts::fetch_checked(client, url, &what, entry.bytes, &entry.sha256).await?;
    artifacts::unpack(&bytes, dir)
}

fn note_save(save: &PendingSave) -> Result<(), String> {
    let Some(file) = std::env::var_os("BATON_CACHE_SAVES") else {
        return Err("BATON_CACHE_SAVES is not set: run this in a Baton job".into());
    };
    let mut line = serde_json::to_string(save).map_err(|e| e.to_string())?;
    line.push('\n');
    use std::io::Write;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&file)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .map_err(|e| format!("{}: {e}", Path::new(&file).display()))
}

/// The saves the job's `cache:` steps asked for, in order, each key once.
pub fn pending_saves(file: &Path) -> Vec<PendingSave> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut saves: Vec<PendingSave> = Vec::new();
    for save in text.lines().filter_map(|line| serde_json::from_str::<PendingSave>(line).ok()) {
        if !saves.iter().any(|s| s.key == save.key && s.scope == save.scope) {
            saves.push(save);
        }
    }
    saves
}

/// Saves one entry after the job: what to say in the job's log.
pub async fn save(client: &Client, token: &str, execution: Uuid, dir: &Path, save: &PendingSave) -> String {
    let archive = match artifacts::pack(dir, &save.paths) {
        Ok(archive) => archive,
        Err(err) => return format!("cache {}: not saved: {err}", save.key),
    };
    match send(client, token, execution, save, &archive).await {
        Ok(true) => format!("cache {}: saved ({} bytes)", save.key, archive.bytes.len()),
        Ok(false) => format!("cache {}: saved already by another job; not saved again", save.key),
        Err(err) => format!("cache {}: not saved: {err}", save.key),
    }
}

async fn send(
    client: &Client,
    token: &str,
    execution: Uuid,
    save: &PendingSave,
    archive: &artifacts::Archive,
) -> Result<bool, ClientError> {
    let body = CacheSaveRequest {
        key: save.key.clone(),
        scope: save.scope.clone(),
        bytes: archive.bytes.len() as u64,
        sha256: archive.sha256.clone(),
        first_part: None,
    };
    let path = &format!("/v1/runners/leases/{execution}/caches");
    // Asked again, the same request gives fresh URLs for the same upload
    // (from `first_part` on).
    let begin = |first_part: Option<u32>| {
        let body = CacheSaveRequest { first_part, ..body.clone() };
        async move {
            with_retries("cache save", RETRY_BUDGET, || {
                client.send_for(reqwest::Method::POST, path, token, Some(&body))
            })
            .await
        }
    };
    let begun: ArtifactUploadResponse = begin(None).await?;
    if begun.stored {
        return Ok(false);
    }
    let parts = artifacts::send_parts(client, begun, archive, None, begin).await?;
    let complete = CacheCompleteRequest { key: save.key.clone(), scope: save.scope.clone(), parts };
    let path = format!("/v1/runners/leases/{execution}/caches/complete");
    let _: CacheEntry = with_retries("cache complete", RETRY_BUDGET, || {
        client.send_for(reqwest::Method::POST, &path, token, Some(&complete))
    })
    .await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_file_makes_the_key_change_with_its_contents() {
        let dir = std::env::temp_dir().join(format!("baton-key-{}", Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("Cargo.lock"), "a").unwrap();
        let first = effective_key(&dir, "cargo", &["Cargo.lock".into()]).unwrap();
        assert!(first.starts_with("cargo-") && first.len() == "cargo-".len() + 16, "{first}");
        std::fs::write(dir.join("Cargo.lock"), "b").unwrap();
        assert_ne!(effective_key(&dir, "cargo", &["Cargo.lock".into()]).unwrap(), first);
        assert_eq!(effective_key(&dir, "plain", &[]).unwrap(), "plain");
        assert!(effective_key(&dir, "cargo", &["missing.lock".into()]).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn saves_are_read_in_order_once_a_key() {
        let file = std::env::temp_dir().join(format!("baton-saves-{}", Uuid::new_v4()));
        let line = |key: &str| {
            serde_json::to_string(&PendingSave { key: key.into(), scope: String::new(), paths: vec!["t".into()] })
                .unwrap()
        };
        std::fs::write(&file, format!("{}\n{}\n{}\nnot json\n", line("a"), line("b"), line("a"))).unwrap();
        let keys: Vec<String> = pending_saves(&file).into_iter().map(|s| s.key).collect();
        assert_eq!(keys, vec!["a", "b"]);
        std::fs::remove_file(&file).unwrap();
    }
}
