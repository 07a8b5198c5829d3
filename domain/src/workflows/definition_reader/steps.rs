//! `steps:`: shell commands, and the artifact and cache steps that run the
//! runner's own commands.

use super::fields::{Fields, Location};
use super::values::{read_continue_on_error, read_env, read_text, read_text_list, read_timeout};
use crate::workflows::definition::{DefinitionError, StepDefinition, MAX_JOB_ID_LEN, MAX_STEPS_PER_JOB};
use crate::workflows::yaml::YamlNode;

const STEP_FIELDS: &[&str] =
    &["id", "name", "run", "upload", "download", "cache", "env", "timeout-minutes", "continue-on-error"];
const CACHE_FIELDS: &[&str] = &["key", "path", "restore-keys", "key-files", "scope"];
const UPLOAD_FIELDS: &[&str] = &["name", "path"];
const DOWNLOAD_FIELDS: &[&str] = &["name", "path"];

pub(super) fn read_steps(node: Option<&YamlNode>, at: &Location) -> Result<Vec<StepDefinition>, DefinitionError> {
    let Some(node) = node else { return Err(at.error("required: a list of steps")) };
    let YamlNode::Sequence(items) = node else { return Err(at.expected("a list of steps", node)) };
    if items.is_empty() {
        return Err(at.error("at least one step is required"));
    }
    if items.len() > MAX_STEPS_PER_JOB {
        return Err(at.error(format!("{} steps, at most {MAX_STEPS_PER_JOB} are accepted", items.len())));
    }
    items.iter().enumerate().map(|(position, item)| read_step(item, &at.step(position))).collect()
}

fn read_step(node: &YamlNode, at: &Location) -> Result<StepDefinition, DefinitionError> {
    let fields = Fields::read(node, STEP_FIELDS, at, "a mapping with `run`")?;
    let id = fields.get("id").map(|node| read_text(node, &at.field("id"))).transpose()?.flatten();
    if let Some(id) = &id {
        let valid = id.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && id.len() <= MAX_JOB_ID_LEN
            && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(at
                .field("id")
                .error("a step id starts with a letter or '_' and holds letters, digits, '_' and '-'"));
        }
    }
    let mut name = fields.get("name").map(|node| read_text(node, &at.field("name"))).transpose()?.flatten();
    let kinds = ["run", "upload", "download", "cache"].iter().filter(|k| fields.get(k).is_some()).count();
    if kinds > 1 {
        return Err(at.error("a step has one of `run`, `upload`, `download` and `cache`"));
    }
    let run = match (fields.get("run"), fields.get("upload"), fields.get("download")) {
        (Some(YamlNode::String(run)), None, None) if run.trim().is_empty() => {
            return Err(at.field("run").error("must not be empty"))
        }
        (Some(YamlNode::String(run)), None, None) => run.clone(),
        (Some(other), None, None) => return Err(at.field("run").expected("a string", other)),
        (None, Some(upload), None) => {
            let (run, label) = read_upload(upload, &at.field("upload"))?;
            name.get_or_insert(label);
            run
        }
        (None, None, Some(download)) => {
            let (run, label) = read_download(download, &at.field("download"))?;
            name.get_or_insert(label);
            run
        }
        (None, None, None) => match fields.get("cache") {
            Some(cache) => {
                let (run, label) = read_cache(cache, &at.field("cache"))?;
                name.get_or_insert(label);
                run
            }
            None => {
                return Err(at.field("run").error("required: the shell command to run (or `upload:` / `download:`)"))
            }
        },
        _ => return Err(at.error("a step has one of `run`, `upload`, `download` and `cache`")),
    };
    let env = read_env(fields.get("env"), &at.field("env"))?;
    let timeout_minutes = read_timeout(fields.get("timeout-minutes"), &at.field("timeout-minutes"))?;
    let continue_on_error = read_continue_on_error(fields.get("continue-on-error"), &at.field("continue-on-error"))?;
    Ok(StepDefinition { id, name, run, env, timeout_minutes, continue_on_error })
}

/// `upload: {name, path}` (behaviour.md §17): the step that archives
/// `path` (a path or glob, or a list of them, relative to the job's
/// directory) as artifact `name` of the run; it runs the runner's own
/// `baton-runner artifact upload`, so it is a `run` like any other.
fn read_upload(node: &YamlNode, at: &Location) -> Result<(String, String), DefinitionError> {
    let fields = Fields::read(node, UPLOAD_FIELDS, at, "a mapping with `name` and `path`")?;
    let name = read_artifact_name(fields.get("name"), &at.field("name"))?;
    let Some(path) = fields.get("path") else { return Err(at.field("path").error("required: what to upload")) };
    let paths = read_text_list(path, &at.field("path"), "paths")?;
    if paths.is_empty() || paths.iter().any(|p| p.trim().is_empty()) {
        return Err(at.field("path").error("name at least one path, none empty"));
    }
    let quoted: Vec<String> = paths.iter().map(|p| shell_quote(p)).collect();
    let run = format!("\"$BATON_RUNNER\" artifact upload --name {} -- {}", shell_quote(&name), quoted.join(" "));
    Ok((run, format!("upload {name}")))
}

/// `download: {name, path}`: the step that unpacks the run's artifact
/// `name` into `path` (default: the job's directory).
fn read_download(node: &YamlNode, at: &Location) -> Result<(String, String), DefinitionError> {
    let fields = Fields::read(node, DOWNLOAD_FIELDS, at, "a mapping with `name`")?;
    let name = read_artifact_name(fields.get("name"), &at.field("name"))?;
    let into = fields.get("path").map(|p| read_text(p, &at.field("path"))).transpose()?.flatten();
    let mut run = format!("\"$BATON_RUNNER\" artifact download --name {}", shell_quote(&name));
    if let Some(into) = into.filter(|p| !p.trim().is_empty()) {
        run.push_str(&format!(" --into {}", shell_quote(&into)));
    }
    Ok((run, format!("download {name}")))
}

/// `cache: {key, path, restore-keys, key-files, scope}` (behaviour.md §17):
/// the step that restores the exact key, else the newest entry under each
/// restore prefix, and has the runner save `path` under the key after the
/// job succeeded when the key itself was not found.
fn read_cache(node: &YamlNode, at: &Location) -> Result<(String, String), DefinitionError> {
    use baton_api::caches::{valid_cache_key, MAX_CACHE_KEY_LEN, MAX_RESTORE_KEYS};
    let fields = Fields::read(node, CACHE_FIELDS, at, "a mapping with `key` and `path`")?;
    let checked = |text: &str, at: &Location| {
        if text.contains("${{") || valid_cache_key(text, MAX_CACHE_KEY_LEN) {
            Ok(())
        } else {
            Err(at.error(format!("1 to {MAX_CACHE_KEY_LEN} printable ASCII characters, no spaces or commas")))
        }
    };
    let key = fields.get("key").map(|n| read_text(n, &at.field("key"))).transpose()?.flatten();
    let Some(key) = key.filter(|k| !k.trim().is_empty()) else {
        return Err(at.field("key").error("required: the cache's key"));
    };
    checked(&key, &at.field("key"))?;
    let Some(path) = fields.get("path") else { return Err(at.field("path").error("required: what to cache")) };
    let paths = read_text_list(path, &at.field("path"), "paths")?;
    if paths.is_empty() || paths.iter().any(|p| p.trim().is_empty()) {
        return Err(at.field("path").error("name at least one path, none empty"));
    }
    let restore_keys = match fields.get("restore-keys") {
        Some(node) => read_text_list(node, &at.field("restore-keys"), "prefixes")?,
        None => Vec::new(),
    };
    if restore_keys.len() > MAX_RESTORE_KEYS {
        return Err(at.field("restore-keys").error(format!("at most {MAX_RESTORE_KEYS} prefixes")));
    }
    for prefix in &restore_keys {
        checked(prefix, &at.field("restore-keys"))?;
    }
    let key_files = match fields.get("key-files") {
        Some(node) => read_text_list(node, &at.field("key-files"), "files")?,
        None => Vec::new(),
    };
    let scope = fields.get("scope").map(|n| read_text(n, &at.field("scope"))).transpose()?.flatten();
    let mut run = format!("\"$BATON_RUNNER\" cache restore --key {}", shell_quote(&key));
    for file in &key_files {
        run.push_str(&format!(" --key-file {}", shell_quote(file)));
    }
    for prefix in &restore_keys {
        run.push_str(&format!(" --restore-key {}", shell_quote(prefix)));
    }
    if let Some(scope) = scope.filter(|s| !s.trim().is_empty()) {
        checked(&scope, &at.field("scope"))?;
        run.push_str(&format!(" --scope {}", shell_quote(&scope)));
    }
    let quoted: Vec<String> = paths.iter().map(|p| shell_quote(p)).collect();
    run.push_str(&format!(" -- {}", quoted.join(" ")));
    Ok((run, format!("cache {key}")))
}

/// An artifact's name: checked now unless an expression makes it.
fn read_artifact_name(node: Option<&YamlNode>, at: &Location) -> Result<String, DefinitionError> {
    let name = node.map(|n| read_text(n, at)).transpose()?.flatten();
    let Some(name) = name.filter(|n| !n.trim().is_empty()) else {
        return Err(at.error("required: the artifact's name"));
    };
    if !name.contains("${{") && !baton_api::artifacts::valid_artifact_name(&name) {
        return Err(at.error(format!(
            "1 to {} of letters, digits, '.', '_' and '-', not starting with '.'",
            baton_api::artifacts::MAX_ARTIFACT_NAME_LEN
        )));
    }
    Ok(name)
}

/// `text` as one single-quoted shell word (an expression inside is still
/// substituted when the job is queued, before the shell sees it).
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}
