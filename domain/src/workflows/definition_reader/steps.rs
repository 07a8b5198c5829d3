//! `steps:`: shell commands, actions (`uses:`), and the artifact and cache
//! steps that run the runner's own commands.

use super::fields::{Fields, Location};
use super::values::{read_continue_on_error, read_env, read_text, read_text_list, read_timeout};
use crate::workflows::definition::{DefinitionError, StepDefinition, MAX_JOB_ID_LEN, MAX_STEPS_PER_JOB};
use crate::workflows::expressions::{self, Dialect};
use crate::workflows::yaml::YamlNode;

const STEP_FIELDS: &[&str] = &[
    "id",
    "name",
    "run",
    "uses",
    "with",
    "upload",
    "download",
    "cache",
    "env",
    "timeout-minutes",
    "continue-on-error",
    "shell",
    "working-directory",
    "if",
];
/// What a step is: one of these, exactly.
const STEP_KINDS: [&str; 5] = ["run", "uses", "upload", "download", "cache"];
const CACHE_FIELDS: &[&str] = &["key", "path", "restore-keys", "key-files", "scope"];
const UPLOAD_FIELDS: &[&str] = &["name", "path"];
const DOWNLOAD_FIELDS: &[&str] = &["name", "path"];
const DEFAULTS_FIELDS: &[&str] = &["run"];
const RUN_DEFAULTS_FIELDS: &[&str] = &["shell", "working-directory"];
/// GitHub's own shells; anything else is a command with `{0}`.
const SHELLS: [&str; 6] = ["bash", "sh", "pwsh", "python", "cmd", "powershell"];

/// `defaults.run`: what a `run` step without its own `shell` or
/// `working-directory` takes (a job's over the workflow's, field by field).
#[derive(Debug, Clone, Default)]
pub(super) struct RunDefaults {
    shell: Option<String>,
    working_directory: Option<String>,
}

impl RunDefaults {
    /// These defaults with `inner`'s fields over them, where it has them
    /// (a job's defaults over the workflow's, as on GitHub).
    pub(super) fn overridden_by(&self, inner: RunDefaults) -> RunDefaults {
        RunDefaults {
            shell: inner.shell.or_else(|| self.shell.clone()),
            working_directory: inner.working_directory.or_else(|| self.working_directory.clone()),
        }
    }
}

/// `defaults: {run: {shell, working-directory}}`, on the workflow or a job.
pub(super) fn read_defaults(node: Option<&YamlNode>, at: &Location) -> Result<RunDefaults, DefinitionError> {
    let Some(node) = node.filter(|n| **n != YamlNode::Null) else { return Ok(RunDefaults::default()) };
    let fields = Fields::read(node, DEFAULTS_FIELDS, at, "a mapping with `run`")?;
    let Some(run) = fields.get("run").filter(|n| **n != YamlNode::Null) else { return Ok(RunDefaults::default()) };
    let at = at.field("run");
    let fields = Fields::read(run, RUN_DEFAULTS_FIELDS, &at, "a mapping with `shell` or `working-directory`")?;
    Ok(RunDefaults {
        shell: fields.get("shell").map(|n| read_shell(n, &at.field("shell"))).transpose()?,
        working_directory: fields
            .get("working-directory")
            .map(|n| read_working_directory(n, &at.field("working-directory")))
            .transpose()?,
    })
}

/// `shell:`: one of GitHub's shells, or a command holding `{0}` (the
/// script's file), e.g. `perl {0}`. No expressions: which program runs
/// the step is known when the run is created.
fn read_shell(node: &YamlNode, at: &Location) -> Result<String, DefinitionError> {
    let expected = "`bash`, `sh`, `pwsh`, `python`, `cmd`, `powershell`, or a command with `{0}` (e.g. `perl {0}`)";
    let shell = read_text(node, at)?.map(|s| s.trim().to_string()).unwrap_or_default();
    if shell.contains("${{") {
        return Err(at.error("a shell is named as written: no `${{ }}` expressions (as on GitHub)"));
    }
    if SHELLS.contains(&shell.as_str()) || (shell.contains("{0}") && !shell.starts_with("{0}")) {
        return Ok(shell);
    }
    Err(at.error(format!("`{shell}` is not a shell: expected {expected}")))
}

/// `working-directory:`: a path relative to the job's directory, or an
/// absolute one, as on GitHub (`/tmp/digests`, `${{ runner.temp }}/out`).
/// A relative path climbing out with `..` is refused: a relative path means
/// the job's own directory, which goes with the job (a script may still
/// `cd` anywhere: this is no sandbox). Expressions are checked with the
/// job's others and resolved when it is queued or on the runner, which
/// checks the value they come to the same way.
fn read_working_directory(node: &YamlNode, at: &Location) -> Result<String, DefinitionError> {
    let Some(dir) = read_text(node, at)?.filter(|d| !d.trim().is_empty()) else {
        return Err(at.error("required: a directory, relative to the job's or absolute"));
    };
    // Each expression stands for one plain name here: what it comes to
    // is checked by the runner.
    let mut shape = String::new();
    let mut rest = dir.as_str();
    while let Some(start) = rest.find("${{") {
        shape.push_str(&rest[..start]);
        shape.push('x');
        rest = rest[start..].find("}}").map_or("", |end| &rest[start + end + 2..]);
    }
    shape.push_str(rest);
    if shape.starts_with('/') {
        return Ok(dir);
    }
    if shape.starts_with('~') {
        return Err(at.error(format!(
            "`{dir}`: `~` is not expanded here (nor on GitHub): write the absolute path, or one relative to the job's directory"
        )));
    }
    let mut depth = 0usize;
    for part in shape.split('/') {
        match part {
            "" | "." => {}
            ".." if depth == 0 => {
                return Err(at.error(format!("`{dir}` climbs out of the job's directory with `..`")));
            }
            ".." => depth -= 1,
            _ => depth += 1,
        }
    }
    Ok(dir)
}

pub(super) fn read_steps(
    node: Option<&YamlNode>,
    at: &Location,
    defaults: &RunDefaults,
) -> Result<Vec<StepDefinition>, DefinitionError> {
    let Some(node) = node else { return Err(at.error("required: a list of steps")) };
    let YamlNode::Sequence(items) = node else { return Err(at.expected("a list of steps", node)) };
    if items.is_empty() {
        return Err(at.error("at least one step is required"));
    }
    if items.len() > MAX_STEPS_PER_JOB {
        return Err(at.error(format!("{} steps, at most {MAX_STEPS_PER_JOB} are accepted", items.len())));
    }
    items.iter().enumerate().map(|(position, item)| read_step(item, &at.step(position), defaults)).collect()
}

fn read_step(node: &YamlNode, at: &Location, defaults: &RunDefaults) -> Result<StepDefinition, DefinitionError> {
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
    let kinds = STEP_KINDS.iter().filter(|k| fields.get(k).is_some()).count();
    if kinds > 1 {
        return Err(at.error("a step has one of `run`, `upload`, `download` and `cache`, or an action (`uses`)"));
    }
    let uses = fields.get("uses").map(|node| read_uses(node, &at.field("uses"))).transpose()?;
    let mut with = read_env(fields.get("with"), &at.field("with"))?;
    if uses.is_none() && fields.get("with").is_some() {
        return Err(at.field("with").error("only a step that `uses:` an action takes inputs"));
    }
    // GitHub's artifact and cache actions run as Baton's own steps
    // (`artifact_actions`): the step becomes the runner's command.
    let as_baton = match &uses {
        Some(action) => super::artifact_actions::as_baton_step(action, &with, &at.field("with")).transpose()?,
        None => None,
    };
    if let Some((command, label)) = as_baton {
        name.get_or_insert(label);
        with.clear();
        return finish_step(&fields, at, id, name, command, None, with, false, defaults);
    }
    let run = match (fields.get("run"), fields.get("upload"), fields.get("download")) {
        _ if uses.is_some() => String::new(),
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
                return Err(at
                    .field("run")
                    .error("required: the shell command to run (or `uses:`, `upload:`, `download:`, `cache:`)"))
            }
        },
        _ => return Err(at.error("a step has one of `run`, `upload`, `download` and `cache`, or an action (`uses`)")),
    };
    let is_run = uses.is_none() && fields.get("run").is_some();
    finish_step(&fields, at, id, name, run, uses, with, is_run, defaults)
}

/// A step's fields that every kind of step shares, and the step.
#[allow(clippy::too_many_arguments)]
fn finish_step(
    fields: &Fields<'_>,
    at: &Location,
    id: Option<String>,
    name: Option<String>,
    run: String,
    uses: Option<String>,
    with: std::collections::BTreeMap<String, String>,
    is_run: bool,
    defaults: &RunDefaults,
) -> Result<StepDefinition, DefinitionError> {
    // A shell and a directory are a `run` step's: an action, an upload, a
    // download or a cache step runs what the runner chooses, where it
    // chooses (on GitHub too, `uses:` takes neither).
    let (shell, working_directory) = if is_run {
        let shell = fields.get("shell").map(|n| read_shell(n, &at.field("shell"))).transpose()?;
        let working_directory = fields
            .get("working-directory")
            .map(|n| read_working_directory(n, &at.field("working-directory")))
            .transpose()?;
        (shell.or_else(|| defaults.shell.clone()), working_directory.or_else(|| defaults.working_directory.clone()))
    } else {
        if let Some(field) = ["shell", "working-directory"].into_iter().find(|f| fields.get(f).is_some()) {
            return Err(at.field(field).error(format!("only a `run` step takes `{field}`")));
        }
        (None, None)
    };
    let env = read_env(fields.get("env"), &at.field("env"))?;
    let timeout_minutes = read_timeout(fields.get("timeout-minutes"), &at.field("timeout-minutes"))?;
    let continue_on_error = read_continue_on_error(fields.get("continue-on-error"), &at.field("continue-on-error"))?;
    let condition = fields.get("if").map(|n| read_step_condition(n, &at.field("if"))).transpose()?;
    Ok(StepDefinition {
        id,
        name,
        run,
        uses,
        with,
        env,
        timeout_minutes,
        continue_on_error,
        shell,
        working_directory,
        condition,
    })
}

/// A step's `if:`: an expression of [`Dialect::Step`], `${{ }}` optional,
/// stored as written. Its syntax and the contexts it names are checked
/// here; what each reference names (an earlier step, a need, a matrix
/// value) is checked with the job's other references.
fn read_step_condition(node: &YamlNode, at: &Location) -> Result<String, DefinitionError> {
    // YAML's `if: true` is the text `true`, as GitHub reads it.
    let Some(text) = read_text(node, at)?.map(|t| t.trim().to_string()).filter(|t| !t.is_empty()) else {
        return Err(at.error("required: a condition, e.g. `failure()` or `steps.build.outcome == 'success'`"));
    };
    expressions::condition_references(&text, Dialect::Step).map_err(|err| at.error(format!("`{text}`: {err}")))?;
    Ok(text)
}

/// `uses:`: the action a step runs, checked for its form now so that a
/// typo is refused when the run is created, not when the runner fetches it:
/// `owner/repo[/path]@ref` (on the runner's default host), a git URL
/// `https://host/owner/repo[/path]@ref` or `file:///path/repo@ref`, or
/// `./path` (an action in the job's directory, no ref). `docker://` is
/// refused: a Baton runner offers no Docker to run a container action in.
fn read_uses(node: &YamlNode, at: &Location) -> Result<String, DefinitionError> {
    let Some(uses) = read_text(node, at)?.map(|u| u.trim().to_string()).filter(|u| !u.is_empty()) else {
        return Err(at.error("required: the action to run, as `owner/repo@ref` or `./path`"));
    };
    if uses.contains("${{") {
        return Err(at.error("an action is named as written: no `${{ }}` expressions (as on GitHub)"));
    }
    if uses.starts_with("docker://") {
        return Err(at.error(
            "a `docker://` action runs in a container: Docker actions need Docker, which a Baton runner does not offer",
        ));
    }
    if uses.chars().any(char::is_whitespace) {
        return Err(at.error("an action's name holds no spaces"));
    }
    if let Some(path) = uses.strip_prefix("./") {
        if path.split('/').any(|part| part == "..") {
            return Err(at.error("a local action is a path inside the job's directory: no `..`"));
        }
        return Ok(uses);
    }
    let form = "`owner/repo[/path]@ref`, `https://host/owner/repo[/path]@ref`, `file:///path/repo@ref` or `./path`";
    let Some((name, reference)) = uses.rsplit_once('@') else {
        return Err(at.error(format!("`{uses}` names no ref: pin it, as {form}")));
    };
    if reference.is_empty() {
        return Err(at.error(format!("`{uses}`: the ref after `@` is a tag, a branch or a commit sha")));
    }
    let repository = if let Some(rest) = name.strip_prefix("https://").or_else(|| name.strip_prefix("http://")) {
        // host, owner, repo: at least three parts.
        rest.split('/').filter(|p| !p.is_empty()).count() >= 3
    } else if let Some(path) = name.strip_prefix("file://") {
        path.starts_with('/') && path.len() > 1
    } else {
        let parts: Vec<&str> = name.split('/').collect();
        parts.len() >= 2 && parts.iter().all(|p| !p.is_empty() && *p != "..") && !name.contains(':')
    };
    if !repository {
        return Err(at.error(format!("`{uses}` is not an action: expected {form}")));
    }
    Ok(uses)
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

#[cfg(test)]
mod tests {
    use crate::workflows::parse_definition;

    /// The steps of a one-job workflow whose steps are `steps` (YAML), or
    /// the refusal as `field: message`.
    fn read(steps: &str) -> Result<Vec<crate::workflows::StepDefinition>, String> {
        let yaml = format!("jobs:\n  build:\n    runs-on: linux\n    steps:\n{steps}");
        parse_definition(&yaml)
            .map(|mut definition| definition.jobs.remove(0).steps)
            .map_err(|err| format!("{}: {}", err.field.unwrap_or_default(), err.message))
    }

    #[test]
    fn every_form_of_uses_is_accepted_with_its_inputs_as_text() {
        for uses in [
            "actions/checkout@v4",
            "acme/tools/setup-thing@main",
            "acme/tools@0123456789abcdef0123456789abcdef01234567",
            "acme/tools@release/v1",
            "https://git.example.com/acme/tools@v1",
            "https://git.example.com/acme/tools/sub/dir@v1",
            "file:///srv/actions/tools@v1",
            "./my-action",
            "./.github/actions/build",
        ] {
            let steps = read(&format!("      - uses: {uses}\n")).unwrap_or_else(|e| panic!("{uses}: {e}"));
            assert_eq!((steps[0].uses.as_deref(), steps[0].run.as_str()), (Some(uses), ""));
        }
        let steps = read(
            "      - id: setup\n        name: set up\n        uses: acme/setup@v1\n        with:\n          version: 20\n          cache: true\n          registry: ${{ inputs.registry }}\n        env: {A: b}\n        timeout-minutes: 5\n        continue-on-error: true\n",
        )
        .unwrap();
        let step = &steps[0];
        assert_eq!((step.id.as_deref(), step.name.as_deref()), (Some("setup"), Some("set up")));
        assert_eq!(step.with["version"], "20");
        assert_eq!(step.with["cache"], "true");
        assert_eq!(step.with["registry"], "${{ inputs.registry }}");
        assert_eq!((step.timeout_minutes, step.continue_on_error.as_deref()), (Some(5), Some("true")));
    }

    #[test]
    fn a_malformed_or_docker_action_is_refused_naming_the_step_field() {
        for (steps, field, says) in [
            ("      - run: x\n      - uses: docker://alpine:3.19\n", "steps[1].uses", "Docker actions need Docker"),
            ("      - uses: actions/checkout\n", "steps[0].uses", "names no ref"),
            ("      - uses: checkout@v4\n", "steps[0].uses", "is not an action"),
            ("      - uses: acme/x@\n", "steps[0].uses", "the ref after `@`"),
            ("      - uses: ./../elsewhere\n", "steps[0].uses", "no `..`"),
            ("      - uses: acme/${{ inputs.x }}@v1\n", "steps[0].uses", "no `${{ }}`"),
            ("      - uses: https://host/acme@v1\n", "steps[0].uses", "is not an action"),
            ("      - uses: acme/x@v1\n        run: echo\n", "steps[0]", "or an action (`uses`)"),
            ("      - run: echo\n        with: {a: b}\n", "steps[0].with", "only a step that `uses:`"),
            ("      - uses: acme/x@v1\n        with: {a: [1]}\n", "steps[0].with.a", "expected a string"),
            ("      - uses: acme/x@v1\n        with: {a: '${{ nope.x }}'}\n", "steps[0].with.a", "nope"),
            (
                "      - uses: acme/x@v1\n        with: {a: \"${{ secrets.T || 'x' }}\"}\n",
                "steps[0].with.a",
                "a secret is read alone",
            ),
        ] {
            let err = read(steps).map(|_| ()).expect_err(steps);
            assert!(err.starts_with(&format!("{field}: ")) && err.contains(says), "{steps}: {err}");
        }
        // A secret read alone is put in at claim time, like an env value.
        read("      - uses: acme/x@v1\n        with: {token: '${{ secrets.T }}'}\n").unwrap();
    }

    /// A step's `(shell, working-directory)`.
    type Place = (Option<String>, Option<String>);

    /// The [`Place`] of each step of each job of `yaml`.
    fn shells(yaml: &str) -> Vec<(String, Vec<Place>)> {
        let definition = parse_definition(yaml).unwrap_or_else(|e| panic!("{e}"));
        definition
            .jobs
            .into_iter()
            .map(|job| (job.key, job.steps.into_iter().map(|s| (s.shell, s.working_directory)).collect()))
            .collect()
    }

    fn pair(shell: Option<&str>, dir: Option<&str>) -> Place {
        (shell.map(String::from), dir.map(String::from))
    }

    #[test]
    fn a_steps_fields_override_its_jobs_defaults_which_override_the_workflows_field_by_field() {
        let found = shells(
            "defaults:\n  run: {shell: sh, working-directory: app}\njobs:\n  plain:\n    runs-on: l\n    steps:\n      - run: a\n      - run: b\n        shell: python\n      - run: c\n        working-directory: ${{ baton.job }}/src\n        shell: perl {0}\n      - uses: acme/x@v1\n      - upload: {name: n, path: p}\n  own:\n    runs-on: l\n    defaults:\n      run: {shell: bash}\n    steps:\n      - run: a\n      - run: b\n        working-directory: ./lib\n",
        );
        assert_eq!(
            found,
            [
                (
                    "plain".to_string(),
                    vec![
                        pair(Some("sh"), Some("app")),
                        pair(Some("python"), Some("app")),
                        pair(Some("perl {0}"), Some("${{ baton.job }}/src")),
                        // Defaults are for `run` steps: an action or an upload runs as the runner chooses.
                        pair(None, None),
                        pair(None, None),
                    ]
                ),
                ("own".to_string(), vec![pair(Some("bash"), Some("app")), pair(Some("bash"), Some("./lib"))]),
            ]
        );
        // Without any, a step names neither: it runs as before shells.
        assert_eq!(shells("jobs:\n  a: {runs-on: l, steps: [{run: x}]}\n")[0].1, [pair(None, None)]);
        // Empty defaults are no defaults.
        let found = shells("defaults: {run: {}}\njobs:\n  a: {runs-on: l, defaults: null, steps: [{run: x}]}\n");
        assert_eq!(found[0].1, [pair(None, None)]);
        // Every shell GitHub names is accepted.
        for shell in ["bash", "sh", "pwsh", "python", "cmd", "powershell", "bash -x {0}"] {
            let steps = read(&format!("      - run: x\n        shell: {shell}\n")).unwrap();
            assert_eq!(steps[0].shell.as_deref(), Some(shell));
        }
        // A definition stored before shells reads with none.
        let old: crate::workflows::StepDefinition = serde_json::from_str(r#"{"run": "x", "env": {}}"#).unwrap();
        assert_eq!((old.shell, old.working_directory), (None, None));
    }

    #[test]
    fn a_bad_shell_or_working_directory_is_refused_naming_job_and_field() {
        let job = |body: &str| format!("jobs:\n  build:\n    runs-on: linux\n{body}");
        let steps = |steps: &str| job(&format!("    steps:\n{steps}"));
        for (yaml, field, says) in [
            (steps("      - run: x\n      - run: y\n        shell: zsh\n"), "steps[1].shell", "`zsh` is not a shell"),
            (steps("      - run: x\n        shell: '{0}'\n"), "steps[0].shell", "is not a shell"),
            (steps("      - run: x\n        shell: ''\n"), "steps[0].shell", "is not a shell"),
            (
                steps("      - run: x\n        shell: ${{ inputs.shell }}\n"),
                "steps[0].shell",
                "no `${{ }}` expressions",
            ),
            (steps("      - uses: acme/x@v1\n        shell: bash\n"), "steps[0].shell", "only a `run` step"),
            (
                steps("      - uses: acme/x@v1\n        working-directory: a\n"),
                "steps[0].working-directory",
                "only a `run` step",
            ),
            (
                steps("      - download: {name: n}\n        working-directory: a\n"),
                "steps[0].working-directory",
                "only a `run` step",
            ),
            (
                steps("      - run: x\n        working-directory: ~/x\n"),
                "steps[0].working-directory",
                "`~` is not expanded",
            ),
            (
                steps("      - run: x\n        working-directory: a/../../x\n"),
                "steps[0].working-directory",
                "climbs out",
            ),
            (
                steps("      - run: x\n        working-directory: ../${{ inputs.d }}\n"),
                "steps[0].working-directory",
                "climbs out",
            ),
            (steps("      - run: x\n        working-directory: ''\n"), "steps[0].working-directory", "required"),
            (
                steps("      - run: x\n        working-directory: ${{ needs.z.outputs.d }}\n"),
                "steps[0].working-directory",
                "not among this job's needs",
            ),
            (
                steps("      - run: x\n        working-directory: ${{ secrets.D }}\n"),
                "steps[0].working-directory",
                "secrets are read only",
            ),
            (
                job("    defaults: {run: {shell: fish}}\n    steps: [{run: x}]\n"),
                "defaults.run.shell",
                "is not a shell",
            ),
            (
                job("    defaults: {run: {working-directory: ../srv}}\n    steps: [{run: x}]\n"),
                "defaults.run.working-directory",
                "climbs out",
            ),
            (job("    defaults: {run: {shel: sh}}\n    steps: [{run: x}]\n"), "defaults.run.shel", "unknown field"),
            (job("    defaults: {bash: {}}\n    steps: [{run: x}]\n"), "defaults.bash", "unknown field"),
        ] {
            let err = parse_definition(&yaml).map(|_| ()).expect_err(&yaml);
            assert_eq!((err.job.as_deref(), err.field.as_deref()), (Some("build"), Some(field)), "{yaml}: {err}");
            assert!(err.message.contains(says), "{yaml}: {err}");
        }
        // The workflow's defaults are refused naming their field, no job.
        let err = parse_definition(
            "defaults:\n  run: {shell: '${{ inputs.s }}'}\njobs:\n  a: {runs-on: l, steps: [{run: x}]}\n",
        )
        .map(|_| ())
        .expect_err("an expression in the workflow's shell");
        assert_eq!((err.job, err.field.as_deref()), (None, Some("defaults.run.shell")), "{}", err.message);
        // An approval job runs no steps: it takes no defaults.
        let err = parse_definition("jobs:\n  ok:\n    approval: {}\n    defaults: {run: {shell: sh}}\n")
            .map(|_| ())
            .expect_err("defaults on an approval");
        assert_eq!(err.field.as_deref(), Some("defaults"), "{}", err.message);
    }

    #[test]
    fn any_step_takes_an_if_read_as_written_with_or_without_its_braces() {
        let steps = read(
            "      - id: a\n        run: x\n        continue-on-error: true\n      - if: steps.a.outcome == 'failure'\n        uses: acme/x@v1\n      - if: ${{ !cancelled() && steps.a.outputs.v != '' }}\n        upload: {name: n, path: p}\n      - if: failure()\n        download: {name: n}\n      - if: always()\n        cache: {key: k, path: p}\n      - if: true\n        run: y\n      - if: github.ref == 'refs/heads/main' && runner.os == 'Linux' && steps.A.conclusion != 'x'\n        id: A\n        run: z\n      - run: plain\n",
        );
        // `steps.A` is the step itself: refused; without it, read.
        let err = steps.unwrap_err();
        assert!(err.starts_with("steps[6].if: steps.A.conclusion: step `A` does not run before this one"), "{err}");
        let steps = read(
            "      - id: a\n        run: x\n      - if: steps.a.outcome == 'failure'\n        uses: acme/x@v1\n      - if: ${{ !cancelled() && steps.a.outputs.v != '' }}\n        upload: {name: n, path: p}\n      - if: failure()\n        download: {name: n}\n      - if: always()\n        cache: {key: k, path: p}\n      - if: true\n        run: y\n      - if: github.ref == 'refs/heads/main' && runner.os == 'Linux'\n        run: z\n      - run: plain\n",
        )
        .unwrap();
        let conditions: Vec<Option<&str>> = steps.iter().map(|s| s.condition.as_deref()).collect();
        assert_eq!(
            conditions,
            [
                None,
                Some("steps.a.outcome == 'failure'"),
                Some("${{ !cancelled() && steps.a.outputs.v != '' }}"),
                Some("failure()"),
                Some("always()"),
                Some("true"),
                Some("github.ref == 'refs/heads/main' && runner.os == 'Linux'"),
                None,
            ]
        );
        // A definition stored before step conditions reads with none.
        let old: crate::workflows::StepDefinition = serde_json::from_str(r#"{"run": "x", "env": {}}"#).unwrap();
        assert_eq!(old.condition, None);
    }

    #[test]
    fn a_step_if_reads_earlier_steps_and_what_a_jobs_if_may_and_is_refused_naming_its_field() {
        let yaml = |condition: &str| {
            format!(
                "jobs:\n  build:\n    runs-on: linux\n    outputs: [v]\n    steps: [{{run: x}}]\n  test:\n    needs: build\n    runs-on: linux\n    env: {{JOB: j}}\n    strategy: {{matrix: {{os: [linux, mac]}}}}\n    steps:\n      - {{id: first, run: x}}\n      - {{run: y}}\n      - if: \"{condition}\"\n        env: {{STEP: s}}\n        run: z\n      - {{id: later, run: w}}\n"
            )
        };
        for fine in [
            "needs.build.outputs.v == 'x' && needs.build.result == 'success' && needs.build.outcome != ''",
            "inputs.go && matrix.os == 'linux' && env.JOB && env.STEP && baton.attempt > 1",
            "steps.first.outputs.x || steps.first.outcome || steps.first.conclusion",
            "github.sha != '' || runner.os == 'Linux' || !cancelled() && (failure() || success())",
            "hashFiles('**/Cargo.lock') != ''",
            // Of no env the queue knows: what an earlier step exported.
            "env.pythonLocation != ''",
            // A workspace variable, set or not (unset: empty, as on GitHub).
            "vars.DEPLOY_TARGET == 'production'",
        ] {
            parse_definition(&yaml(fine)).unwrap_or_else(|e| panic!("{fine}: {e}"));
        }
        for (condition, says) in [
            ("steps.later.outcome == 'success'", "steps.later.outcome: step `later` does not run before this one"),
            ("steps.nope.outputs.x", "steps.nope.outputs.x: no step before this one has id `nope`"),
            ("secrets.TOKEN != ''", "secrets are read only in `env`, `run` and `with`"),
            ("needs.other.result", "`other` is not among this job's needs"),
            ("matrix.arch", "no combination of `test` has `arch`"),
            ("needs.build.outputs.w", "declares no output `w`"),
            ("sponge.X", "unknown reference sponge.X"),
            ("", "required: a condition"),
        ] {
            let err = parse_definition(&yaml(condition)).map(|_| ()).expect_err(condition);
            let leg = err.job.as_deref().unwrap_or_default();
            assert!(leg.starts_with("test"), "{condition}: {err}");
            assert_eq!(err.field.as_deref(), Some("steps[2].if"), "{condition}: {err}");
            assert!(err.message.contains(says), "{condition}: {err}");
        }
        // The run's inputs a step's `if:` reads must be given; the needs
        // whose outputs it reads are read when the job is queued.
        let definition = parse_definition(&yaml("inputs.go && needs.build.outputs.v")).unwrap();
        assert!(crate::workflows::references::inputs_used(&definition).contains("go"));
        let leg = &definition.jobs[1];
        assert_eq!(crate::workflows::references::data_needed(&definition, leg), (true, ["build".to_string()].into()));
    }
}
