//! GitHub's artifact and cache actions, `actions/upload-artifact`,
//! `actions/download-artifact`, `actions/cache` (and its `restore` and
//! `save`), run as Baton's own artifact and cache steps with the same
//! inputs and outputs.
//!
//! Fetched from GitHub and run as they are, they would talk to GitHub's
//! artifact and cache services, which a Baton job has no token for: every
//! such step would fail. Run as the runner's own commands, their bytes go
//! to the workspace's S3 bucket under the job's lease, as Baton's
//! `upload:`, `download:` and `cache:` steps' do, never through Lambda.
//! What they are given and do as on GitHub: `path` lists (one a line), an
//! upload laid out under its paths' common ancestor with
//! `if-no-files-found`, a download of one artifact, of all or of a
//! `pattern` (each into its own directory unless `merge-multiple`), the
//! cache's `key`, `restore-keys` and its `cache-hit` output. Inputs that
//! change nothing here (`retention-days`: the stack keeps artifacts for its
//! own retention) are accepted; those that would mean something Baton does
//! not do are refused, naming them.

use std::collections::BTreeMap;

use super::fields::Location;
use crate::workflows::definition::DefinitionError;

/// The action's input names: the ones Baton honours and the ones it takes
/// and ignores.
struct Inputs {
    honoured: &'static [&'static str],
    ignored: &'static [&'static str],
}

const UPLOAD: Inputs = Inputs {
    honoured: &["name", "path", "if-no-files-found"],
    ignored: &["retention-days", "compression-level", "overwrite", "include-hidden-files"],
};
const DOWNLOAD: Inputs =
    Inputs { honoured: &["name", "path", "pattern", "merge-multiple"], ignored: &["github-token"] };
const CACHE: Inputs = Inputs {
    honoured: &["key", "path", "restore-keys", "fail-on-cache-miss", "lookup-only", "save-always"],
    ignored: &["enableCrossOsArchive", "upload-chunk-size"],
};

/// The step's command and its default name when `uses` is one of the
/// actions above (any version); `None` for any other action.
pub(super) fn as_baton_step(
    uses: &str,
    with: &BTreeMap<String, String>,
    at: &Location,
) -> Option<Result<(String, String), DefinitionError>> {
    let bare = uses.strip_prefix("https://github.com/").unwrap_or(uses);
    let (action, _) = bare.rsplit_once('@')?;
    let command = match action.to_ascii_lowercase().as_str() {
        "actions/upload-artifact" => upload(with, at),
        "actions/download-artifact" => download(with, at),
        "actions/cache" => cache(with, at, Cache::RestoreThenSave),
        "actions/cache/restore" => cache(with, at, Cache::Restore),
        "actions/cache/save" => cache(with, at, Cache::Save),
        _ => return None,
    };
    Some(command.map(|command| (command, uses.to_string())))
}

fn check_inputs(
    action: &str,
    with: &BTreeMap<String, String>,
    inputs: &Inputs,
    at: &Location,
) -> Result<(), DefinitionError> {
    match with.keys().find(|key| !inputs.honoured.contains(&key.as_str()) && !inputs.ignored.contains(&key.as_str())) {
        Some(key) => Err(at.field(key).error(format!(
            "`{action}` takes {} here: `{key}` is not one of its inputs Baton runs",
            inputs.honoured.iter().chain(inputs.ignored).map(|i| format!("`{i}`")).collect::<Vec<_>>().join(", ")
        ))),
        None => Ok(()),
    }
}

/// A `path`-like input: one entry a line, blank lines dropped.
fn lines(text: &str) -> Vec<String> {
    text.lines().map(str::trim).filter(|line| !line.is_empty()).map(str::to_string).collect()
}

fn paths(with: &BTreeMap<String, String>, at: &Location) -> Result<Vec<String>, DefinitionError> {
    let paths = with.get("path").map(|text| lines(text)).unwrap_or_default();
    if paths.is_empty() {
        return Err(at.field("path").error("required: what to upload or cache, one path or glob a line"));
    }
    if let Some(excluded) = paths.iter().find(|p| p.starts_with('!')) {
        return Err(at
            .field("path")
            .error(format!("`{excluded}`: exclusions are not supported here: list the paths to take")));
    }
    Ok(paths)
}

/// `true`/`false` as text (an expression is refused: it decides what
/// command the step is).
fn flag(with: &BTreeMap<String, String>, input: &str, at: &Location) -> Result<bool, DefinitionError> {
    match with.get(input).map(|v| v.trim().to_ascii_lowercase()) {
        None => Ok(false),
        Some(value) if value == "true" => Ok(true),
        Some(value) if value == "false" || value.is_empty() => Ok(false),
        Some(value) => Err(at.field(input).error(format!("`{value}`: expected true or false"))),
    }
}

/// `text` as one single-quoted shell word; a `${{ … }}` in it is left as
/// written (its quotes are the expression's), since it is replaced by its
/// value before the shell reads the command.
fn quote(text: &str) -> String {
    let mut out = String::from("'");
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        let end = rest[start..].find("}}").map_or(rest.len(), |end| start + end + 2);
        out.push_str(&rest[..start].replace('\'', r"'\''"));
        out.push_str(&rest[start..end]);
        rest = &rest[end..];
    }
    out.push_str(&rest.replace('\'', r"'\''"));
    out.push('\'');
    out
}

fn upload(with: &BTreeMap<String, String>, at: &Location) -> Result<String, DefinitionError> {
    check_inputs("actions/upload-artifact", with, &UPLOAD, at)?;
    let name = with.get("name").map(|n| n.trim().to_string()).filter(|n| !n.is_empty());
    let name = name.unwrap_or_else(|| "artifact".to_string());
    if !name.contains("${{") && !baton_api::artifacts::valid_artifact_name(&name) {
        return Err(at.field("name").error(format!(
            "`{name}`: an artifact's name is 1 to {} of letters, digits, '.', '_' and '-', not starting with '.'",
            baton_api::artifacts::MAX_ARTIFACT_NAME_LEN
        )));
    }
    let when_none = with.get("if-no-files-found").map(|v| v.trim().to_string()).unwrap_or_else(|| "warn".into());
    if !matches!(when_none.as_str(), "warn" | "error" | "ignore") {
        return Err(at.field("if-no-files-found").error(format!("`{when_none}`: expected warn, error or ignore")));
    }
    let quoted: Vec<String> = paths(with, at)?.iter().map(|p| quote(p)).collect();
    Ok(format!(
        "\"$BATON_RUNNER\" artifact upload --name {} --if-no-files-found {when_none} -- {}",
        quote(&name),
        quoted.join(" ")
    ))
}

fn download(with: &BTreeMap<String, String>, at: &Location) -> Result<String, DefinitionError> {
    for input in ["run-id", "repository"] {
        if with.contains_key(input) {
            return Err(at.field(input).error(
                "another run's or repository's artifacts are not reachable from a Baton job: download this run's",
            ));
        }
    }
    check_inputs("actions/download-artifact", with, &DOWNLOAD, at)?;
    let name = with.get("name").map(|n| n.trim().to_string()).filter(|n| !n.is_empty());
    let pattern = with.get("pattern").map(|p| p.trim().to_string()).filter(|p| !p.is_empty());
    let merge = flag(with, "merge-multiple", at)?;
    let mut command = String::from("\"$BATON_RUNNER\" artifact download");
    match (&name, &pattern) {
        (Some(name), _) => command.push_str(&format!(" --name {}", quote(name))),
        (None, Some(pattern)) => command.push_str(&format!(" --pattern {}", quote(pattern))),
        (None, None) => {}
    }
    if name.is_none() && merge {
        command.push_str(" --merge-multiple");
    }
    if let Some(path) = with.get("path").map(|p| p.trim().to_string()).filter(|p| !p.is_empty()) {
        command.push_str(&format!(" --into {}", quote(&path)));
    }
    Ok(command)
}

enum Cache {
    RestoreThenSave,
    Restore,
    Save,
}

fn cache(with: &BTreeMap<String, String>, at: &Location, kind: Cache) -> Result<String, DefinitionError> {
    use baton_api::caches::{valid_cache_key, MAX_CACHE_KEY_LEN, MAX_RESTORE_KEYS};
    check_inputs("actions/cache", with, &CACHE, at)?;
    for (input, why) in [
        ("fail-on-cache-miss", "a Baton cache step never fails the job: a miss is a miss"),
        ("lookup-only", "a Baton cache step restores what it finds"),
        ("save-always", "Baton saves a cache only after the job's steps all succeeded"),
    ] {
        if flag(with, input, at)? {
            return Err(at.field(input).error(format!("`{input}: true` is not supported: {why}")));
        }
    }
    let checked = |text: &str, field: &str| {
        if text.contains("${{") || valid_cache_key(text, MAX_CACHE_KEY_LEN) {
            Ok(())
        } else {
            Err(at
                .field(field)
                .error(format!("`{text}`: 1 to {MAX_CACHE_KEY_LEN} printable ASCII characters, no spaces or commas")))
        }
    };
    let key = with.get("key").map(|k| k.trim().to_string()).filter(|k| !k.is_empty());
    let Some(key) = key else { return Err(at.field("key").error("required: the cache's key")) };
    checked(&key, "key")?;
    let quoted: Vec<String> = paths(with, at)?.iter().map(|p| quote(p)).collect();
    if let Cache::Save = kind {
        return Ok(format!("\"$BATON_RUNNER\" cache save --key {} -- {}", quote(&key), quoted.join(" ")));
    }
    let restore_keys = with.get("restore-keys").map(|text| lines(text)).unwrap_or_default();
    if restore_keys.len() > MAX_RESTORE_KEYS {
        return Err(at.field("restore-keys").error(format!("at most {MAX_RESTORE_KEYS} prefixes")));
    }
    let mut command = format!("\"$BATON_RUNNER\" cache restore --key {}", quote(&key));
    for prefix in &restore_keys {
        checked(prefix, "restore-keys")?;
        command.push_str(&format!(" --restore-key {}", quote(prefix)));
    }
    if let Cache::Restore = kind {
        command.push_str(" --no-save");
    }
    command.push_str(&format!(" -- {}", quoted.join(" ")));
    Ok(command)
}

#[cfg(test)]
mod tests {
    use crate::workflows::parse_definition;

    /// The one step of a job with `step` (YAML), as (name, run), or the
    /// refusal as `field: message`.
    fn step(step: &str) -> Result<(String, String), String> {
        let yaml = format!("jobs:\n  build:\n    runs-on: linux\n    steps:\n{step}");
        parse_definition(&yaml)
            .map(|mut definition| {
                let step = definition.jobs.remove(0).steps.remove(0);
                assert!(step.uses.is_none() && step.with.is_empty(), "run as Baton's own step: {step:?}");
                (step.name.unwrap_or_default(), step.run)
            })
            .map_err(|err| format!("{}: {}", err.field.unwrap_or_default(), err.message))
    }

    #[test]
    fn githubs_upload_and_download_run_as_batons_artifact_commands() {
        let (name, run) = step(
            "      - uses: actions/upload-artifact@v4\n        with:\n          name: dist-${{ inputs.flavour }}\n          \
             path: |\n            dist/\n            reports/*.xml\n          retention-days: 5\n",
        )
        .unwrap();
        assert_eq!(name, "actions/upload-artifact@v4");
        assert_eq!(
            run,
            "\"$BATON_RUNNER\" artifact upload --name 'dist-${{ inputs.flavour }}' --if-no-files-found warn -- 'dist/' \
             'reports/*.xml'"
        );
        let (_, run) =
            step("      - uses: actions/upload-artifact@v3\n        with: {path: out.bin, if-no-files-found: error}\n")
                .unwrap();
        assert_eq!(run, "\"$BATON_RUNNER\" artifact upload --name 'artifact' --if-no-files-found error -- 'out.bin'");
        let (_, run) =
            step("      - uses: actions/download-artifact@v4\n        with: {name: dist, path: dist}\n").unwrap();
        assert_eq!(run, "\"$BATON_RUNNER\" artifact download --name 'dist' --into 'dist'");
        let (_, run) = step(
            "      - uses: actions/download-artifact@v4\n        with: {pattern: 'dist-*', merge-multiple: true, path: all}\n",
        )
        .unwrap();
        assert_eq!(run, "\"$BATON_RUNNER\" artifact download --pattern 'dist-*' --merge-multiple --into 'all'");
        let (_, run) = step("      - uses: actions/download-artifact@v4\n").unwrap();
        assert_eq!(run, "\"$BATON_RUNNER\" artifact download");
    }

    #[test]
    fn githubs_cache_runs_as_batons_cache_commands() {
        let (_, run) = step(
            "      - id: deps\n        uses: actions/cache@v4\n        with:\n          path: |\n            ~/.cargo/registry\n            \
             target\n          key: ${{ runner.os }}-cargo-${{ hashFiles('**/Cargo.lock') }}\n          restore-keys: |\n            \
             ${{ runner.os }}-cargo-\n",
        )
        .unwrap();
        assert_eq!(
            run,
            "\"$BATON_RUNNER\" cache restore --key '${{ runner.os }}-cargo-${{ hashFiles('**/Cargo.lock') }}' \
             --restore-key '${{ runner.os }}-cargo-' -- '~/.cargo/registry' 'target'"
        );
        let (_, run) = step("      - uses: actions/cache/restore@v4\n        with: {key: k, path: p}\n").unwrap();
        assert_eq!(run, "\"$BATON_RUNNER\" cache restore --key 'k' --no-save -- 'p'");
        let (_, run) = step("      - uses: actions/cache/save@v4\n        with: {key: k, path: p}\n").unwrap();
        assert_eq!(run, "\"$BATON_RUNNER\" cache save --key 'k' -- 'p'");
    }

    #[test]
    fn what_baton_would_not_do_as_asked_is_refused_naming_the_input() {
        for (yaml, says) in [
            ("actions/upload-artifact@v4\n        with: {name: x}", "with.path: required"),
            ("actions/upload-artifact@v4\n        with: {path: \"a\\n!a/tmp\"}", "with.path: `!a/tmp`: exclusions"),
            ("actions/upload-artifact@v4\n        with: {path: a, if-no-files-found: fail}", "with.if-no-files-found"),
            ("actions/upload-artifact@v4\n        with: {path: a, name: 'my report'}", "with.name"),
            ("actions/upload-artifact@v4\n        with: {path: a, colour: red}", "with.colour"),
            ("actions/download-artifact@v4\n        with: {name: a, run-id: '42'}", "with.run-id"),
            ("actions/cache@v4\n        with: {path: a}", "with.key: required"),
            ("actions/cache@v4\n        with: {path: a, key: k, lookup-only: true}", "with.lookup-only"),
            ("actions/cache@v4\n        with: {path: a, key: 'a,b'}", "with.key"),
        ] {
            let err = step(&format!("      - uses: {yaml}\n")).unwrap_err();
            assert!(err.contains(says), "{yaml}: {err}");
        }
        // Any other action runs as an action.
        let yaml = "jobs:\n  b:\n    runs-on: l\n    steps:\n      - uses: actions/checkout@v4\n";
        assert_eq!(parse_definition(yaml).unwrap().jobs[0].steps[0].uses.as_deref(), Some("actions/checkout@v4"));
    }
}
