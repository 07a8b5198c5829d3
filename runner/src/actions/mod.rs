//! Actions: a step's `uses:` run the way GitHub's runner runs them. The
//! action is fetched once per runner and `repo@ref` ([`resolve`]), its
//! `action.yml` read ([`manifest`]), and then:
//!
//! - a JavaScript action (`runs.using: node12|16|20|24`) runs `node
//!   <main>` (its `pre` first, in the same step; its `post` after the
//!   job's last step, newest first, whatever the steps did: `post-if` is
//!   not read);
//! - a composite action runs its `steps` (`run` with their `shell`, or a
//!   nested `uses`), its `outputs` taken from `steps.<id>.outputs.<name>`
//!   with its expressions evaluated here ([`expr`]);
//! - a Docker action (`runs.using: docker`) fails the step: a Baton runner
//!   offers no Docker.
//!
//! An action sees what GitHub gives one: `INPUT_<NAME>` from `with:` and
//! the defaults of its inputs, `GITHUB_ACTION_PATH`, `STATE_*` from its
//! `pre`/`main` in its later parts, and the files and variables every step
//! gets (`job::Exec`).

pub mod expr;
pub mod manifest;
pub mod resolve;
pub mod settings;

pub use settings::ActionSettings;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use tokio::sync::watch;
use uuid::Uuid;

use crate::outputs;
use crate::shell;
use crate::step::{runner_arch, runner_os, Carried, Ended, Exec, Post, ProcFiles};
use crate::Stop;
use manifest::{Kind, Manifest};
use resolve::ActionRef;

/// How deep composite actions may nest (GitHub allows 10).
const MAX_DEPTH: usize = 10;

type Boxed<'a> = Pin<Box<dyn Future<Output = (Ended, Option<i32>)> + Send + 'a>>;

/// Runs the action `uses` with the inputs `with` as the step of `exec`;
/// its outputs go to `files.output`, as a shell step's would.
pub(crate) fn run<'a>(
    exec: &'a Exec<'a>,
    carried: &'a mut Carried,
    uses: &'a str,
    with: &'a BTreeMap<String, String>,
    files: &'a ProcFiles,
    stop_rx: &'a mut watch::Receiver<Stop>,
) -> Boxed<'a> {
    Box::pin(run_at(exec, carried, uses, with, files, stop_rx, 0))
}

async fn run_at(
    exec: &Exec<'_>,
    carried: &mut Carried,
    uses: &str,
    with: &BTreeMap<String, String>,
    files: &ProcFiles,
    stop_rx: &mut watch::Receiver<Stop>,
    depth: usize,
) -> (Ended, Option<i32>) {
    if depth > MAX_DEPTH {
        return failed(format!("{uses}: composite actions nest more than {MAX_DEPTH} deep"));
    }
    let action_dir = match locate(exec, uses).await {
        Ok(dir) => dir,
        Err(why) => return failed(why),
    };
    let manifest = match Manifest::read(&action_dir) {
        Ok(manifest) => manifest,
        Err(why) => return failed(format!("{uses}: {why}")),
    };
    let kind = match manifest.kind() {
        Ok(kind) => kind,
        Err(why) => return failed(format!("{uses}: {why}")),
    };
    exec.say(&format!("run {uses}{}", manifest.name.as_deref().map(|n| format!(" ({n})")).unwrap_or_default()));
    let base = base_context(exec, carried, &action_dir);
    let inputs = match inputs_of(&manifest, with, &base) {
        Ok(inputs) => inputs,
        Err(why) => return failed(format!("{uses}: {why}")),
    };
    for name in with.keys().filter(|name| !manifest.inputs.keys().any(|k| k.eq_ignore_ascii_case(name))) {
        exec.say(&format!("warning: {uses} has no input `{name}`; it is passed on as INPUT_{}", input_var(name)));
    }
    match kind {
        Kind::Docker => failed(format!(
            "{uses} is a Docker action (`runs.using: docker`): Docker actions need Docker, which a Baton runner \
             does not offer"
        )),
        Kind::Node => node(exec, carried, uses, &manifest, &action_dir, &inputs, files, stop_rx).await,
        Kind::Composite => {
            let mut context = base;
            context.inputs = inputs;
            composite(exec, carried, uses, &manifest, &action_dir, context, files, stop_rx, depth).await
        }
    }
}

fn failed(why: String) -> (Ended, Option<i32>) {
    (Ended::Failed(why), None)
}

/// The action's directory: in the job's, or fetched into the runner's cache.
async fn locate(exec: &Exec<'_>, uses: &str) -> Result<PathBuf, String> {
    let settings = &exec.runtime.actions;
    match ActionRef::parse(uses, &settings.default_host)? {
        ActionRef::Local(path) => {
            let dir = exec.dir.join(&path);
            if dir.is_dir() {
                Ok(dir)
            } else {
                Err(format!("{uses}: no such directory in the job's work directory"))
            }
        }
        ActionRef::Remote { url, reference, path } => {
            let cache_root = exec.runtime.work_root.join("_actions");
            let repo = resolve::fetch(&cache_root, &url, &reference).await?;
            let dir = if path.is_empty() { repo } else { repo.join(&path) };
            if dir.is_dir() {
                Ok(dir)
            } else {
                Err(format!("{uses}: the repository has no directory `{path}`"))
            }
        }
    }
}

/// What the action's expressions read before its inputs are known.
fn base_context(exec: &Exec<'_>, carried: &Carried, action_dir: &Path) -> expr::Context {
    let mut context = expr::Context::default();
    context.env.extend(exec.claim.job.work.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    context.env.extend(carried.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    context.env.extend(exec.step.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    context.github.insert("action_path".into(), action_dir.display().to_string());
    context.github.insert("workspace".into(), exec.dir.display().to_string());
    context.runner.insert("os".into(), runner_os().into());
    context.runner.insert("arch".into(), runner_arch().into());
    context.runner.insert("temp".into(), exec.temp_dir().display().to_string());
    context
}

/// The action's inputs: what `with:` gives, else the input's default (its
/// expressions evaluated); a required input with neither is an error.
fn inputs_of(
    manifest: &Manifest,
    with: &BTreeMap<String, String>,
    context: &expr::Context,
) -> Result<BTreeMap<String, String>, String> {
    let mut inputs = BTreeMap::new();
    for (name, spec) in &manifest.inputs {
        let given = with.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone());
        let value = match (given, spec.default.as_ref().and_then(manifest::scalar_text)) {
            (Some(value), _) => value,
            (None, Some(default)) => expr::interpolate(&default, context)?,
            (None, None) if spec.is_required() => {
                return Err(format!("input `{name}` is required and was not given (`with: {{{name}: …}}`)"))
            }
            (None, None) => String::new(),
        };
        inputs.insert(name.clone(), value);
    }
    for (name, value) in with {
        if !inputs.keys().any(|k| k.eq_ignore_ascii_case(name)) {
            inputs.insert(name.clone(), value.clone());
        }
    }
    Ok(inputs)
}

/// `INPUT_<NAME>`'s name part, as GitHub's runner makes it.
fn input_var(name: &str) -> String {
    name.replace(' ', "_").to_uppercase()
}

#[allow(clippy::too_many_arguments)]
async fn node(
    exec: &Exec<'_>,
    carried: &mut Carried,
    uses: &str,
    manifest: &Manifest,
    action_dir: &Path,
    inputs: &BTreeMap<String, String>,
    files: &ProcFiles,
    stop_rx: &mut watch::Receiver<Stop>,
) -> (Ended, Option<i32>) {
    let Some(main) = manifest.runs.main.as_deref() else {
        return failed(format!("{uses}: a JavaScript action names its `runs.main`"));
    };
    let mut env: Vec<(String, String)> =
        inputs.iter().map(|(name, value)| (format!("INPUT_{}", input_var(name)), value.clone())).collect();
    env.push(("GITHUB_ACTION_PATH".into(), action_dir.display().to_string()));
    let mut state = BTreeMap::new();
    for (phase, script) in [("pre", manifest.runs.pre.as_deref()), ("main", Some(main))] {
        let Some(script) = script else { continue };
        if phase == "main" {
            if let Some(post) = manifest.runs.post.as_deref() {
                // Registered once the action has started, as GitHub does:
                // its post runs even when its main fails.
                carried.posts.push(Post {
                    step_id: exec.step.id,
                    script: action_dir.join(post),
                    env: Vec::new(),
                    files: ProcFiles::new(exec.files_dir, &format!("post-{}", Uuid::now_v7().simple())),
                });
            }
        }
        let mut phase_env = env.clone();
        phase_env.extend(state.iter().map(|(k, v): (&String, &String)| (format!("STATE_{k}"), v.clone())));
        let args = [action_dir.join(script).display().to_string()];
        let label = format!("{} ({phase})", exec.name);
        let node = exec.runtime.actions.node.clone();
        let (ended, code) = exec.process(carried, &node, &args, exec.dir, &phase_env, files, &label, stop_rx).await;
        match read_state(&files.state) {
            Ok(values) => state.extend(values),
            Err(why) => return failed(why),
        }
        // The post sees the inputs and the state its pre and main saved.
        if let Some(post) = carried.posts.iter_mut().rev().find(|p| p.step_id == exec.step.id) {
            post.env = env.clone();
            post.env.extend(state.iter().map(|(k, v)| (format!("STATE_{k}"), v.clone())));
        }
        if !matches!(ended, Ended::Exited) || code != Some(0) {
            return (ended, code);
        }
    }
    (Ended::Exited, Some(0))
}

/// What a process saved with `$GITHUB_STATE` (the file emptied after).
fn read_state(file: &Path) -> Result<BTreeMap<String, String>, String> {
    let Ok(text) = std::fs::read_to_string(file) else { return Ok(BTreeMap::new()) };
    let _ = std::fs::write(file, "");
    outputs::parse(&text).map_err(|e| format!("$GITHUB_STATE: {e}"))
}

/// Runs a JavaScript action's `post` (after the job's steps). An error
/// says how it failed.
pub(crate) async fn run_post(
    exec: &Exec<'_>,
    carried: &mut Carried,
    post: &Post,
    stop_rx: &mut watch::Receiver<Stop>,
) -> Result<(), String> {
    let node = exec.runtime.actions.node.clone();
    let args = [post.script.display().to_string()];
    let cwd = exec.dir;
    let (ended, code) = exec.process(carried, &node, &args, cwd, &post.env, &post.files, exec.name, stop_rx).await;
    match ended {
        Ended::Exited if code == Some(0) => Ok(()),
        Ended::Exited => Err(format!("exited with {}", code.map_or("a signal".to_string(), |c| c.to_string()))),
        Ended::StepTimeout(s) => Err(format!("timed out after {s} s")),
        Ended::JobTimeout(s) => Err(format!("job timed out after {s} s")),
        Ended::Stopped(_) => Err("stopped".into()),
        Ended::SpawnFailed(why) => Err(format!("could not start: {why}")),
        Ended::Failed(why) => Err(why),
    }
}

/// A composite action's steps, in order; its outputs written to
/// `files.output` once they ran.
#[allow(clippy::too_many_arguments)]
async fn composite(
    exec: &Exec<'_>,
    carried: &mut Carried,
    uses: &str,
    manifest: &Manifest,
    action_dir: &Path,
    mut context: expr::Context,
    files: &ProcFiles,
    stop_rx: &mut watch::Receiver<Stop>,
    depth: usize,
) -> (Ended, Option<i32>) {
    let mut failure: Option<(Ended, Option<i32>)> = None;
    for (position, step) in manifest.runs.steps.iter().enumerate() {
        let label =
            step.name.clone().or_else(|| step.id.clone()).unwrap_or_else(|| format!("{uses} step {}", position + 1));
        let label = format!("{} / {label}", exec.name);
        // The env the action's later steps see, as they will see it.
        context.env.extend(carried.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        let when = step.when.as_ref().and_then(manifest::scalar_text).unwrap_or_else(|| "success()".into());
        let runs = match expr::condition(&when, &context) {
            Ok(runs) => runs,
            Err(why) => return failed(format!("{uses}: step {}: if: {why}", position + 1)),
        };
        if !runs {
            exec.say(&format!("skipped: {label}"));
            if let Some(id) = &step.id {
                context.steps.insert(id.clone(), expr::StepState { outcome: "skipped".into(), ..Default::default() });
            }
            continue;
        }
        let (ended, code) =
            match composite_step(exec, carried, uses, step, position, action_dir, &context, &label, stop_rx, depth)
                .await
            {
                Ok((ended, code, outputs)) => {
                    if let Some(id) = &step.id {
                        let ok = matches!(ended, Ended::Exited) && code == Some(0);
                        let outcome = if ok { "success" } else { "failure" };
                        context.steps.insert(id.clone(), expr::StepState { outputs, outcome: outcome.into() });
                    }
                    (ended, code)
                }
                Err(why) => (Ended::Failed(why), None),
            };
        match ended {
            Ended::Exited if code == Some(0) => {}
            // Failures the rest may answer (`if: failure()`), unless forgiven.
            Ended::Exited | Ended::Failed(_) | Ended::SpawnFailed(_) => {
                let forgiven = step
                    .continue_on_error
                    .as_ref()
                    .and_then(manifest::scalar_text)
                    .is_some_and(|t| expr::interpolate(&t, &context).is_ok_and(|v| v.trim() == "true"));
                if !forgiven && failure.is_none() {
                    exec.say(&format!("failed: {label}"));
                    context.failed = true;
                    failure = Some((ended, code));
                }
            }
            // A timeout or a stop ends the action here.
            other => return (other, code),
        }
    }
    if let Some(failure) = failure {
        return failure;
    }
    let mut written = String::new();
    for (name, output) in &manifest.outputs {
        let Some(value) = &output.value else { continue };
        match expr::interpolate(value, &context) {
            Ok(value) => written.push_str(&delimited(name, &value)),
            Err(why) => return failed(format!("{uses}: output `{name}`: {why}")),
        }
    }
    if !written.is_empty() {
        use std::io::Write;
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&files.output)
            .and_then(|mut file| file.write_all(written.as_bytes()));
        if let Err(err) = appended {
            return failed(format!("{uses}: cannot write its outputs: {err}"));
        }
    }
    (Ended::Exited, Some(0))
}

/// `name<<DELIMITER`, the value, `DELIMITER`: a value of any lines.
fn delimited(name: &str, value: &str) -> String {
    let mut delimiter = format!("BATON_EOF_{}", Uuid::now_v7().simple());
    while value.contains(&delimiter) {
        delimiter.push('_');
    }
    format!("{name}<<{delimiter}\n{value}\n{delimiter}\n")
}

/// One step of a composite action: its `run` under its `shell`, or its
/// nested `uses`. Returns how it ended and the outputs it wrote.
#[allow(clippy::too_many_arguments)]
async fn composite_step(
    exec: &Exec<'_>,
    carried: &mut Carried,
    uses: &str,
    step: &manifest::CompositeStep,
    position: usize,
    action_dir: &Path,
    context: &expr::Context,
    label: &str,
    stop_rx: &mut watch::Receiver<Stop>,
    depth: usize,
) -> Result<(Ended, Option<i32>, BTreeMap<String, String>), String> {
    let at = |what: &str| format!("{uses}: step {}: {what}", position + 1);
    let mut env: Vec<(String, String)> = Vec::new();
    for (name, value) in &step.env {
        let text = manifest::scalar_text(value).ok_or_else(|| at(&format!("env `{name}` is not text")))?;
        env.push((name.clone(), expr::interpolate(&text, context).map_err(|e| at(&e))?));
    }
    env.push(("GITHUB_ACTION_PATH".into(), action_dir.display().to_string()));
    let files = ProcFiles::new(exec.files_dir, &format!("sub-{}", Uuid::now_v7().simple()));
    let (ended, code) = match (&step.run, &step.uses) {
        (Some(run), None) => {
            let Some(shell) = step.shell.as_deref() else {
                return Err(at("a composite action's `run` step names its `shell` (bash, sh, python, pwsh)"));
            };
            let script = expr::interpolate(run, context).map_err(|e| at(&e))?;
            let extension = shell::extension(shell);
            let file = exec.temp_dir().join(format!("{}.{extension}", Uuid::now_v7().simple()));
            std::fs::write(&file, shell::script(shell, &script))
                .map_err(|e| at(&format!("cannot write its script: {e}")))?;
            let (program, args) = shell::command(shell, &file).map_err(|e| at(&e))?;
            let cwd = match &step.working_directory {
                Some(dir) => exec.dir.join(expr::interpolate(dir, context).map_err(|e| at(&e))?),
                None => exec.dir.to_path_buf(),
            };
            let ran = exec.process(carried, &program, &args, &cwd, &env, &files, label, stop_rx).await;
            let _ = std::fs::remove_file(&file);
            ran
        }
        (None, Some(nested)) => {
            let mut with = BTreeMap::new();
            for (name, value) in &step.with {
                let text = manifest::scalar_text(value).ok_or_else(|| at(&format!("input `{name}` is not text")))?;
                with.insert(name.clone(), expr::interpolate(&text, context).map_err(|e| at(&e))?);
            }
            let nested_exec = exec.renamed(label);
            Box::pin(run_at(&nested_exec, carried, nested, &with, &files, stop_rx, depth + 1)).await
        }
        _ => return Err(at("a step has one of `run` and `uses`")),
    };
    let outputs = match std::fs::read_to_string(&files.output).map(|text| outputs::parse(&text)) {
        Ok(Ok(values)) => values,
        Ok(Err(why)) => return Err(at(&format!("$GITHUB_OUTPUT: {why}"))),
        Err(_) => BTreeMap::new(),
    };
    Ok((ended, code, outputs))
}
