//! Where an action comes from, and fetching it once per runner: a step's
//! `uses:` names a git repository and a ref (or a directory of the job),
//! and the runner keeps each `repo@ref` it fetched under
//! `<work root>/_actions/<host>/<path…>/<ref>`, shared by its jobs.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one fetch of an action may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(300);

/// An action a step names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionRef {
    /// `./path`: a directory of the job's work directory.
    Local(String),
    /// A repository at a ref, and the action's directory inside it.
    Remote { url: String, reference: String, path: String },
}

impl ActionRef {
    /// Reads `uses`: `owner/repo[/path]@ref` on `default_host`, a URL
    /// `https://host/owner/repo[/path]@ref`, `file:///path/repo@ref` (the
    /// whole path is the repository), or `./path`.
    pub fn parse(uses: &str, default_host: &str) -> Result<Self, String> {
        let uses = uses.trim();
        if uses.starts_with("docker://") {
            return Err(format!("{uses}: Docker actions need Docker, which a Baton runner does not offer"));
        }
        if let Some(path) = uses.strip_prefix("./") {
            if path.split('/').any(|p| p == "..") {
                return Err(format!("{uses}: a local action is a path inside the job's directory"));
            }
            return Ok(Self::Local(path.trim_end_matches('/').to_string()));
        }
        let Some((name, reference)) = uses.rsplit_once('@').filter(|(_, r)| !r.is_empty()) else {
            return Err(format!("{uses}: an action is pinned to a ref, as owner/repo@ref"));
        };
        let reference = reference.to_string();
        if let Some(path) = name.strip_prefix("file://") {
            if !path.starts_with('/') {
                return Err(format!("{uses}: a file URL names an absolute path"));
            }
            return Ok(Self::Remote { url: name.to_string(), reference, path: String::new() });
        }
        let (host, rest) = match name.split_once("://") {
            Some((scheme, rest)) => {
                let (host, rest) = rest.split_once('/').unwrap_or((rest, ""));
                (format!("{scheme}://{host}"), rest.to_string())
            }
            None => (default_host.trim_end_matches('/').to_string(), name.to_string()),
        };
        let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
        if parts.len() < 2 || parts.contains(&"..") {
            return Err(format!("{uses}: expected owner/repo[/path]@ref"));
        }
        Ok(Self::Remote { url: format!("{host}/{}/{}", parts[0], parts[1]), reference, path: parts[2..].join("/") })
    }
}

/// Where `url@reference` is kept under `cache_root`: readable, and each
/// part escaped so that two repositories or refs never share a directory.
pub fn cache_dir(cache_root: &Path, url: &str, reference: &str) -> PathBuf {
    let without_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let mut dir = cache_root.to_path_buf();
    for part in without_scheme.split('/').filter(|p| !p.is_empty()) {
        dir.push(escape(part));
    }
    dir.push(format!("@{}", escape(reference)));
    dir
}

/// `text` with every byte but letters, digits, `.`, `_` and `-` as `%XX`
/// (and a leading `.` too, so no part is `.` or `..`).
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, byte) in text.bytes().enumerate() {
        let keep = byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-' || (byte == b'.' && i > 0);
        if keep {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The repository `url` at `reference`, fetched into the cache unless it
/// is there already: a fetch goes to a directory of its own and is renamed
/// into place, so two jobs fetching the same action at once each find a
/// whole copy (the second rename loses, and its copy is removed).
pub async fn fetch(cache_root: &Path, url: &str, reference: &str) -> Result<PathBuf, String> {
    let dir = cache_dir(cache_root, url, reference);
    if dir.is_dir() {
        return Ok(dir);
    }
    let parent = dir.parent().unwrap_or(cache_root);
    std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    let temp = parent.join(format!(".fetching-{}", uuid::Uuid::now_v7().simple()));
    let fetched = tokio::time::timeout(FETCH_TIMEOUT, clone_at(&temp, url, reference)).await;
    let fetched = match fetched {
        Ok(result) => result,
        Err(_) => Err(format!("fetching {url}@{reference} took more than {} s", FETCH_TIMEOUT.as_secs())),
    };
    if let Err(err) = fetched {
        let _ = std::fs::remove_dir_all(&temp);
        return Err(err);
    }
    if let Err(err) = std::fs::rename(&temp, &dir) {
        let _ = std::fs::remove_dir_all(&temp);
        // Another job's fetch of the same action got there first.
        if !dir.is_dir() {
            return Err(format!("cannot keep {url}@{reference} in {}: {err}", dir.display()));
        }
    }
    Ok(dir)
}

/// `git init` + a shallow fetch of the one ref + a checkout: works for a
/// tag, a branch and a full commit sha alike.
async fn clone_at(dir: &Path, url: &str, reference: &str) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    git(dir, &["init", "-q"]).await?;
    git(dir, &["fetch", "-q", "--depth", "1", "--no-tags", url, reference])
        .await
        .map_err(|err| format!("cannot fetch {url}@{reference}: {err}"))?;
    git(dir, &["checkout", "-q", "--detach", "FETCH_HEAD"]).await?;
    Ok(())
}

async fn git(dir: &Path, args: &[&str]) -> Result<(), String> {
    let output = tokio::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        // Never wait for a password nobody will type.
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("cannot run git: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr);
        Err(format!("git {}: {}", args.first().copied().unwrap_or_default(), stderr.trim()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_resolves_to_a_repository_a_ref_and_a_path() {
        let gh = "https://github.com";
        let remote = |url: &str, reference: &str, path: &str| ActionRef::Remote {
            url: url.into(),
            reference: reference.into(),
            path: path.into(),
        };
        assert_eq!(
            ActionRef::parse("actions/checkout@v4", gh),
            Ok(remote("https://github.com/actions/checkout", "v4", ""))
        );
        assert_eq!(
            ActionRef::parse("acme/tools/setup/node@main", "https://git.example/"),
            Ok(remote("https://git.example/acme/tools", "main", "setup/node"))
        );
        assert_eq!(
            ActionRef::parse("https://git.example/acme/tools/sub@release/v1", gh),
            Ok(remote("https://git.example/acme/tools", "release/v1", "sub"))
        );
        assert_eq!(ActionRef::parse("file:///srv/a/repo@v1", gh), Ok(remote("file:///srv/a/repo", "v1", "")));
        assert_eq!(ActionRef::parse("./my-action/", gh), Ok(ActionRef::Local("my-action".into())));
        assert!(ActionRef::parse("docker://alpine", gh).unwrap_err().contains("Docker actions need Docker"));
        assert!(ActionRef::parse("actions/checkout", gh).is_err());
        assert!(ActionRef::parse("checkout@v1", gh).is_err());
    }

    #[test]
    fn cache_directories_are_distinct_and_stay_under_the_root() {
        let root = Path::new("/w/_actions");
        let a = cache_dir(root, "https://github.com/acme/tools", "release/v1");
        let b = cache_dir(root, "https://github.com/acme/tools", "release%2Fv1");
        assert_eq!(a, Path::new("/w/_actions/github.com/acme/tools/@release%2Fv1"));
        assert_ne!(a, b);
        assert_eq!(cache_dir(root, "file:///x/../y", "v1"), Path::new("/w/_actions/x/%2E./y/@v1"));
    }
}
