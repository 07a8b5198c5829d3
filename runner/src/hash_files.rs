//! `hashFiles(pattern…)`, as GitHub's runner computes it for a step: the
//! files the patterns match under the job's directory (globs, `**`
//! included; a pattern starting with `!` leaves its matches out), in path
//! order, each hashed with SHA-256, and those digests hashed together; the
//! empty string when nothing matches. Only files count, never a
//! directory, and never anything outside the job's directory.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

/// The hex digest of what `patterns` match under `root`.
pub fn hash_files(root: &Path, patterns: &[String]) -> Result<String, String> {
    let root = root.canonicalize().map_err(|e| format!("hashFiles: {}: {e}", root.display()))?;
    let mut excluded = Vec::new();
    for pattern in patterns.iter().filter_map(|p| p.trim().strip_prefix('!')) {
        excluded.push(glob::Pattern::new(pattern).map_err(|e| format!("hashFiles('!{pattern}'): {e}"))?);
    }
    let mut files = BTreeSet::new();
    for pattern in patterns.iter().map(|p| p.trim()).filter(|p| !p.starts_with('!') && !p.is_empty()) {
        let full = root.join(pattern);
        let matched = glob::glob(&full.to_string_lossy()).map_err(|e| format!("hashFiles('{pattern}'): {e}"))?;
        // An unreadable entry is left out, as GitHub's glob does.
        for path in matched.flatten() {
            let Ok(path) = path.canonicalize() else { continue };
            let Ok(relative) = path.strip_prefix(&root) else { continue };
            if path.is_file() && !excluded.iter().any(|p| p.matches_path(relative)) {
                files.insert(relative.to_path_buf());
            }
        }
    }
    if files.is_empty() {
        return Ok(String::new());
    }
    let mut all = Sha256::new();
    for relative in &files {
        let mut file =
            std::fs::File::open(root.join(relative)).map_err(|e| format!("hashFiles: {}: {e}", relative.display()))?;
        let mut one = Sha256::new();
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            let read = file.read(&mut buffer).map_err(|e| format!("hashFiles: {}: {e}", relative.display()))?;
            if read == 0 {
                break;
            }
            one.update(&buffer[..read]);
        }
        all.update(one.finalize());
    }
    Ok(format!("{:x}", all.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matched_files_hash_in_path_order_exclusions_apply_and_nothing_matched_is_empty() {
        let dir = std::env::temp_dir().join(format!("baton-hash-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(dir.join("a/vendor")).unwrap();
        std::fs::write(dir.join("Cargo.lock"), "one").unwrap();
        std::fs::write(dir.join("a/Cargo.lock"), "two").unwrap();
        std::fs::write(dir.join("a/vendor/Cargo.lock"), "vendored").unwrap();
        let hash =
            |patterns: &[&str]| hash_files(&dir, &patterns.iter().map(|p| p.to_string()).collect::<Vec<_>>()).unwrap();
        let all = hash(&["**/Cargo.lock"]);
        assert_eq!(all.len(), 64);
        let kept = hash(&["**/Cargo.lock", "!a/vendor/**"]);
        assert_ne!(all, kept, "the vendored lock file is left out");
        // The same files, whatever the patterns: the same hash.
        assert_eq!(kept, hash(&["Cargo.lock", "a/Cargo.lock"]));
        assert_eq!(kept, hash(&["a/Cargo.lock", "Cargo.lock"]));
        std::fs::write(dir.join("a/Cargo.lock"), "changed").unwrap();
        assert_ne!(kept, hash(&["Cargo.lock", "a/Cargo.lock"]), "a changed file changes the hash");
        assert_eq!(hash(&["nothing/*.lock"]), "");
        assert_eq!(hash(&["../*"]), "", "nothing outside the job's directory");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
