//! Artifacts on the runner's side (behaviour.md §17): a step archives files
//! (`baton-runner artifact upload NAME PATH…`, what the `upload:` step
//! runs) into a gzipped tar and sends it straight to S3, part by part, with
//! the URLs the API issues under the job's lease; a later step downloads
//! one (`baton-runner artifact download NAME`), checks its SHA-256 and
//! unpacks it. The operator CLI downloads with the same unpacking.

use std::path::{Path, PathBuf};
use std::time::Duration;

use baton_api::artifacts::{
    Artifact, ArtifactCompleteRequest, ArtifactDownload, ArtifactPartDone, ArtifactUploadRequest,
    ArtifactUploadResponse,
};
use baton_client::error::ClientError;
use baton_client::retry::with_retries;
use baton_client::Client;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// How long one request of an upload or a download is retried.
pub const RETRY_BUDGET: Duration = Duration::from_secs(120);

/// An archive ready to send.
#[derive(Debug)]
pub struct Archive {
    pub bytes: Vec<u8>,
    pub sha256: String,
    /// How many files it holds.
    pub files: usize,
}

/// The lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// Archives what `patterns` (paths or globs, relative to `dir`) match: a
/// directory with everything under it, each entry at its path relative to
/// `dir`. A pattern that matches nothing is an error (a typo must not
/// upload an empty artifact), and so is a path outside `dir`.
pub fn pack(dir: &Path, patterns: &[String]) -> Result<Archive, String> {
    if patterns.is_empty() {
        return Err("name at least one path to upload".into());
    }
    let dir = dir.canonicalize().map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut paths: Vec<PathBuf> = Vec::new();
    for pattern in patterns {
        if matches(&dir, pattern, &mut paths)? == 0 {
            return Err(format!("{pattern}: no file matches"));
        }
    }
    archive(&dir, &paths)
}

/// Archives what `patterns` match as GitHub's `actions/upload-artifact`
/// does: a pattern that matches nothing is passed over, and the entries sit
/// at their paths relative to the search paths' least common ancestor
/// (`dist/` uploads `dist`'s contents, so a download into `dist` gives them
/// back where they were). `None` when nothing matched at all (the action's
/// `if-no-files-found` decides what that means).
pub fn pack_as_github(dir: &Path, patterns: &[String]) -> Result<Option<Archive>, String> {
    let dir = dir.canonicalize().map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut searched: Vec<PathBuf> = Vec::new();
    for pattern in patterns {
        if matches(&dir, pattern, &mut paths)? > 0 {
            searched.push(search_path(&dir, pattern));
        }
    }
    if paths.is_empty() {
        return Ok(None);
    }
    let mut root = searched.iter().skip(1).fold(searched[0].clone(), |common, path| {
        common.components().zip(path.components()).take_while(|(a, b)| a == b).map(|(a, _)| a).collect()
    });
    if !root.is_dir() {
        root = root.parent().map(Path::to_path_buf).unwrap_or_else(|| dir.clone());
    }
    // A search path above the job's directory cannot be: every match is in it.
    if !root.starts_with(&dir) {
        root = dir.clone();
    }
    archive(&root, &paths).map(Some)
}

/// The part of `pattern` before its first segment with a wildcard, as a
/// path under `dir` (GitHub's search path).
fn search_path(dir: &Path, pattern: &str) -> PathBuf {
    let literal: PathBuf = pattern.split('/').take_while(|segment| !segment.contains(['*', '?', '['])).collect();
    let path = dir.join(literal);
    path.canonicalize().unwrap_or(path)
}

/// Adds what `pattern` matches under `dir` to `paths` (each once); how many
/// it matched.
fn matches(dir: &Path, pattern: &str, paths: &mut Vec<PathBuf>) -> Result<usize, String> {
    let full = dir.join(pattern);
    let matched = glob::glob(&full.to_string_lossy()).map_err(|e| format!("{pattern}: {e}"))?;
    let mut count = 0;
    for entry in matched {
        let path = entry.map_err(|e| format!("{pattern}: {e}"))?;
        let path = path.canonicalize().map_err(|e| format!("{}: {e}", path.display()))?;
        if !path.starts_with(dir) {
            return Err(format!("{pattern}: {} is outside the job's directory", path.display()));
        }
        count += 1;
        if !paths.contains(&path) {
            paths.push(path);
        }
    }
    Ok(count)
}

/// The gzipped tar of `paths`, each at its path relative to `root` (the
/// root itself as its contents).
fn archive(root: &Path, paths: &[PathBuf]) -> Result<Archive, String> {
    let mut builder = tar::Builder::new(GzEncoder::new(Vec::new(), flate2::Compression::fast()));
    builder.follow_symlinks(false);
    let mut files = 0;
    for path in paths {
        let relative = path.strip_prefix(root).map_err(|e| e.to_string())?;
        if relative.as_os_str().is_empty() {
            for child in std::fs::read_dir(path).map_err(|e| format!("{}: {e}", path.display()))?.flatten() {
                let (child, name) = (child.path(), child.file_name());
                if child.is_dir() {
                    files += count_files(&child);
                    builder.append_dir_all(&name, &child).map_err(|e| format!("{}: {e}", child.display()))?;
                } else {
                    files += 1;
                    builder.append_path_with_name(&child, &name).map_err(|e| format!("{}: {e}", child.display()))?;
                }
            }
        } else if path.is_dir() {
            files += count_files(path);
            builder.append_dir_all(relative, path).map_err(|e| format!("{}: {e}", relative.display()))?;
        } else {
            files += 1;
            builder.append_path_with_name(path, relative).map_err(|e| format!("{}: {e}", relative.display()))?;
        }
    }
    let bytes = builder.into_inner().and_then(|gz| gz.finish()).map_err(|e| e.to_string())?;
    Ok(Archive { sha256: sha256_hex(&bytes), bytes, files })
}

fn count_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.path()).map(|p| if p.is_dir() { count_files(&p) } else { 1 }).sum())
        .unwrap_or(0)
}

/// Unpacks an archive into `into` (created if need be). Entries that would
/// land outside it (`..`, absolute paths) are skipped by `tar`.
pub fn unpack(bytes: &[u8], into: &Path) -> Result<(), String> {
    std::fs::create_dir_all(into).map_err(|e| format!("{}: {e}", into.display()))?;
    tar::Archive::new(GzDecoder::new(bytes)).unpack(into).map_err(|e| format!("unpacking into {}: {e}", into.display()))
}

/// Sends `archive` as artifact `name` of the job whose lease `token` holds,
/// each part no faster than `pace` allows.
pub async fn upload(
    client: &Client,
    token: &str,
    execution: Uuid,
    name: &str,
    archive: &Archive,
    pace: Pace,
) -> Result<Option<Artifact>, ClientError> {
    let body = ArtifactUploadRequest {
        name: name.to_string(),
        bytes: archive.bytes.len() as u64,
        sha256: archive.sha256.clone(),
        first_part: None,
    };
    let path = &format!("/v1/runners/leases/{execution}/artifacts");
    // Asked again, the same request gives fresh URLs for the same upload
    // (from `first_part` on).
    let begin = |first_part: Option<u32>| {
        let body = ArtifactUploadRequest { first_part, ..body.clone() };
        async move {
            with_retries("artifact upload", RETRY_BUDGET, || {
                client.send_for(reqwest::Method::POST, path, token, Some(&body))
            })
            .await
        }
    };
    let begun: ArtifactUploadResponse = begin(None).await?;
    if begun.stored {
        return Ok(None);
    }
    let complete = ArtifactCompleteRequest { parts: send_parts(client, begun, archive, pace, begin).await? };
    let path = format!("/v1/runners/leases/{execution}/artifacts/{}/complete", segment(name));
    let stored: Artifact = with_retries("artifact complete", RETRY_BUDGET, || {
        client.send_for(reqwest::Method::POST, &path, token, Some(&complete))
    })
    .await?;
    Ok(Some(stored))
}

/// The most bytes a second an upload sends (`None`: as fast as it goes).
/// Tests slow a runner down with it, as a slow link would, without `tc`.
pub type Pace = Option<u64>;

/// How close to their expiry URLs are asked again before a part: half
/// their validity, at most 30 s (enough for a part's request to start).
fn renew_margin(validity: chrono::Duration) -> chrono::Duration {
    (validity / 2).min(chrono::Duration::seconds(30))
}

/// Sends each part of `archive` to the URL the server issued for it; the
/// parts' ETags, in order (what completing the upload names).
///
/// An answer holds the URLs of a window of parts (a big archive's would not
/// fit one answer); the next window is asked for (`renew` with the first
/// part wanted: the same request to the upload route, which answers fresh
/// URLs for the same upload) when a part is not in the one at hand.
///
/// The server signs URLs valid no longer than the lease as it stands when
/// they are asked (a runner that lost its lease cannot send on), and the
/// lease is extended by heartbeats, not the URLs: an upload longer than
/// the lease's remaining time would otherwise meet expired URLs and fail
/// every time. So URLs close to their expiry are asked again before the
/// next part, and a part refused 403 (a clock ahead of the server's) is
/// sent once more with fresh ones.
pub async fn send_parts<F, Fut>(
    client: &Client,
    begun: ArtifactUploadResponse,
    archive: &Archive,
    pace: Pace,
    renew: F,
) -> Result<Vec<ArtifactPartDone>, ClientError>
where
    F: Fn(Option<u32>) -> Fut,
    Fut: std::future::Future<Output = Result<ArtifactUploadResponse, ClientError>>,
{
    let parts_refused = |message: String| ClientError::Permanent { status: 0, code: "artifact-parts".into(), message };
    // A server older than windows answers every part and no count.
    let count = if begun.part_count > 0 { begun.part_count } else { begun.parts.len() as u32 };
    let mut urls = begun;
    let mut got_at = chrono::Utc::now();
    let mut done = Vec::with_capacity(count as usize);
    let mut offset = 0usize;
    let started = tokio::time::Instant::now();
    let renewed = |urls: ArtifactUploadResponse| {
        if urls.part_count > 0 && urls.part_count != count {
            return Err(parts_refused("the server's parts changed while sending them".into()));
        }
        Ok((urls, chrono::Utc::now()))
    };
    let part_in =
        |urls: &ArtifactUploadResponse, number: u32| urls.parts.iter().find(|p| p.part_number == number).cloned();
    for number in 1..=count {
        let expiring = urls.expires_at.is_some_and(|at| at - chrono::Utc::now() < renew_margin(at - got_at));
        if expiring || part_in(&urls, number).is_none() {
            (urls, got_at) = renewed(renew(Some(number)).await?)?;
        }
        let part = part_in(&urls, number)
            .ok_or_else(|| parts_refused(format!("the server's answer holds no URL for part {number}")))?;
        let end = offset + part.bytes as usize;
        let slice = archive
            .bytes
            .get(offset..end)
            .ok_or_else(|| parts_refused("the server's parts do not cover the archive".into()))?;
        if let Some(rate) = pace.filter(|r| *r > 0) {
            // The part starts when the bytes before it would have gone at `rate`.
            tokio::time::sleep_until(started + Duration::from_secs_f64(offset as f64 / rate as f64)).await;
        }
        let etag = match send_part(client, &part.url, slice).await {
            Err(ClientError::Permanent { status: 403, .. }) => {
                (urls, got_at) = renewed(renew(Some(number)).await?)?;
                let again = part_in(&urls, number)
                    .ok_or_else(|| parts_refused("the server's parts changed while sending them".into()))?;
                send_part(client, &again.url, slice).await?
            }
            sent => sent?,
        };
        done.push(ArtifactPartDone { part_number: part.part_number, etag });
        offset = end;
    }
    if offset != archive.bytes.len() {
        return Err(parts_refused("the server's parts do not cover the archive".into()));
    }
    Ok(done)
}

/// One part to its URL, transient failures retried.
async fn send_part(client: &Client, url: &str, slice: &[u8]) -> Result<String, ClientError> {
    with_retries("archive part", RETRY_BUDGET, || client.put_part(url, slice.to_vec())).await
}

/// Fetches a download's archive and checks it is the one stored (size and
/// SHA-256) before anything is unpacked.
pub async fn fetch(client: &Client, download: &ArtifactDownload) -> Result<Vec<u8>, String> {
    let artifact = &download.artifact;
    let what = format!("artifact {:?}", artifact.name);
    fetch_checked(client, &download.url, &what, artifact.bytes, &artifact.sha256).await
}

/// The archive at `url` (a presigned `GET`), if it is `bytes` long with
/// SHA-256 `sha256` (`what` names it in the error).
pub async fn fetch_checked(
    client: &Client,
    url: &str,
    what: &str,
    bytes: u64,
    sha256: &str,
) -> Result<Vec<u8>, String> {
    let fetched =
        with_retries("archive download", RETRY_BUDGET, || client.get_bytes(url)).await.map_err(|e| e.to_string())?;
    let digest = sha256_hex(&fetched);
    if fetched.len() as u64 != bytes || digest != sha256 {
        return Err(format!(
            "{what} arrived as {} bytes with SHA-256 {digest}, stored as {bytes} bytes with {sha256}",
            fetched.len()
        ));
    }
    Ok(fetched)
}

/// A runner's download URL of the run's artifact `name`.
pub async fn runner_download(
    client: &Client,
    token: &str,
    execution: Uuid,
    name: &str,
) -> Result<ArtifactDownload, ClientError> {
    let path = format!("/v1/runners/leases/{execution}/artifacts/{}", segment(name));
    with_retries("artifact lookup", RETRY_BUDGET, || client.send_for::<(), _>(reqwest::Method::GET, &path, token, None))
        .await
}

/// The run's stored artifacts, for the job holding `token`'s lease.
pub async fn runner_list(
    client: &Client,
    token: &str,
    execution: Uuid,
) -> Result<baton_api::artifacts::ArtifactList, ClientError> {
    let path = format!("/v1/runners/leases/{execution}/artifacts");
    with_retries("artifact list", RETRY_BUDGET, || client.send_for::<(), _>(reqwest::Method::GET, &path, token, None))
        .await
}

fn segment(name: &str) -> String {
    form_urlencoded::byte_serialize(name.as_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_tree_unpacks_byte_identical_at_its_relative_paths() {
        let root = std::env::temp_dir().join(format!("baton-pack-{}", Uuid::new_v4()));
        std::fs::create_dir_all(root.join("dist/bin")).unwrap();
        std::fs::write(root.join("dist/bin/app"), b"binary").unwrap();
        std::fs::write(root.join("report.txt"), b"ok").unwrap();
        std::fs::write(root.join("other.log"), b"no").unwrap();
        let archive = pack(&root, &["dist".into(), "*.txt".into()]).unwrap();
        assert_eq!(archive.files, 2);
        assert_eq!(archive.sha256, sha256_hex(&archive.bytes));
        let out = root.join("out");
        unpack(&archive.bytes, &out).unwrap();
        assert_eq!(std::fs::read(out.join("dist/bin/app")).unwrap(), b"binary");
        assert_eq!(std::fs::read(out.join("report.txt")).unwrap(), b"ok");
        assert!(!out.join("other.log").exists());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_pattern_that_matches_nothing_or_leaves_the_directory_is_refused() {
        let root = std::env::temp_dir().join(format!("baton-pack-{}", Uuid::new_v4()));
        std::fs::create_dir_all(&root).unwrap();
        assert!(pack(&root, &["missing/*".into()]).unwrap_err().contains("no file matches"));
        assert!(pack(&root, &["..".into()]).unwrap_err().contains("outside"));
        assert!(pack(&root, &[]).is_err());
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// The files of a packed archive, as unpacked, relative to its root.
    fn unpacked(archive: &Archive, root: &Path) -> Vec<String> {
        let out = root.join(format!("out-{}", Uuid::new_v4()));
        unpack(&archive.bytes, &out).unwrap();
        let mut files: Vec<String> = glob::glob(&format!("{}/**/*", out.display()))
            .unwrap()
            .flatten()
            .filter(|p| p.is_file())
            .map(|p| p.strip_prefix(&out).unwrap().to_string_lossy().into_owned())
            .collect();
        files.sort();
        files
    }

    #[test]
    fn githubs_upload_lays_files_out_under_the_search_paths_common_ancestor() {
        let root = std::env::temp_dir().join(format!("baton-pack-{}", Uuid::new_v4()));
        std::fs::create_dir_all(root.join("dist/bin")).unwrap();
        std::fs::create_dir_all(root.join("reports/unit")).unwrap();
        std::fs::write(root.join("dist/bin/app"), b"binary").unwrap();
        std::fs::write(root.join("dist/index.html"), b"<p>").unwrap();
        std::fs::write(root.join("reports/unit/junit.xml"), b"<x/>").unwrap();
        let pack = |patterns: &[&str]| {
            pack_as_github(&root, &patterns.iter().map(|p| p.to_string()).collect::<Vec<_>>()).unwrap()
        };
        // A directory: its contents at the root (GitHub's `path: dist/`).
        assert_eq!(unpacked(&pack(&["dist/"]).unwrap(), &root), ["bin/app", "index.html"]);
        // A file: alone at the root.
        assert_eq!(unpacked(&pack(&["dist/bin/app"]).unwrap(), &root), ["app"]);
        // A glob: from where its wildcard starts.
        assert_eq!(unpacked(&pack(&["reports/**/*.xml"]).unwrap(), &root), ["unit/junit.xml"]);
        // Several: under their common ancestor; one matching nothing passes.
        assert_eq!(
            unpacked(&pack(&["dist/index.html", "reports/unit", "missing/*"]).unwrap(), &root),
            ["dist/index.html", "reports/unit/junit.xml"]
        );
        assert!(pack(&["missing/*", "none.txt"]).is_none(), "nothing at all: the action decides");
        assert!(pack_as_github(&root, &["..".into()]).unwrap_err().contains("outside"));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
