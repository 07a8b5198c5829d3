//! Actions (`uses:`) run by a real `baton-runner` the way GitHub's runner
//! runs them: actions of this test's own, in the shapes of well-known ones
//! (a JavaScript action with `pre`, `post`, inputs and an output; a
//! composite action nesting it; a local `./` action), served from git
//! repositories made in the test's directory and pinned by tag, branch and
//! commit sha.

use std::path::Path;
use std::process::Command;

use crate::support::*;
use baton_tests::runs::{job_in, Identified};
use baton_tests::TestStack;

/// A JavaScript action: `pre` saves state, `main` reads it and its
/// inputs, writes an output, an env variable and a PATH entry with plain
/// file appends (as `@actions/core` does), masks a value and warns; `post`
/// records that it ran, with the state and input it saw.
const JS_ACTION: &[(&str, &str)] = &[
    (
        "action.yml",
        "name: greet\ninputs:\n  who:\n    description: whom to greet\n    required: true\n  greeting:\n    description: how\n    default: Hello\noutputs:\n  message:\n    description: what was said\nruns:\n  using: node20\n  pre: pre.js\n  main: main.js\n  post: post.js\n",
    ),
    ("pre.js", "require('fs').appendFileSync(process.env.GITHUB_STATE, 'started=yes\\n');\n"),
    (
        "main.js",
        r#"const fs = require('fs');
const env = process.env;
if (env.STATE_started !== 'yes') { console.error('no state from pre'); process.exit(1); }
const message = `${env.INPUT_GREETING}, ${env.INPUT_WHO}!`;
fs.appendFileSync(env.GITHUB_OUTPUT, `message=${message}\n`);
fs.appendFileSync(env.GITHUB_ENV, `GREETED=${env.INPUT_WHO}\n`);
const bin = `${env.RUNNER_TEMP}/greet-bin`;
fs.mkdirSync(bin, { recursive: true });
fs.writeFileSync(`${bin}/greet-tool`, '#!/bin/sh\necho tool ran\n', { mode: 0o755 });
fs.appendFileSync(env.GITHUB_PATH, `${bin}\n`);
console.log('::add-mask::sekrit-42');
console.log('the token is sekrit-42');
console.log('::warning file=main.js::careful now');
console.log(`ci=${env.CI} actions=${env.GITHUB_ACTIONS} workspace=${env.GITHUB_WORKSPACE === process.cwd()}`);
"#,
    ),
    (
        "post.js",
        "require('fs').appendFileSync(`${process.env.SHARED}/order`, `post ${process.env.STATE_started} ${process.env.INPUT_WHO}\\n`);\n",
    ),
];

/// A composite action: nests the JavaScript action (by commit sha) and
/// maps its output, with one of its own steps', to its own output.
const COMPOSITE_ACTION: &str = "name: wrap
inputs:
  name:
    required: true
outputs:
  shout:
    value: ${{ steps.inner.outputs.message }} / ${{ steps.up.outputs.upper }}
runs:
  using: composite
  steps:
    - id: inner
      uses: JS_URL@JS_SHA
      with:
        who: ${{ inputs.name }}
    - id: up
      shell: bash
      run: echo \"upper=$(echo '${{ inputs.name }}' | tr a-z A-Z)\" >> \"$GITHUB_OUTPUT\"
    - if: failure()
      shell: sh
      run: exit 1
";

/// A git repository at `dir` holding `files`, committed on `main` and
/// tagged `v1`, with a branch `release`: its commit sha.
fn repository(dir: &Path, files: &[(&str, &str)]) -> String {
    std::fs::create_dir_all(dir).unwrap();
    for (name, contents) in files {
        std::fs::write(dir.join(name), contents).unwrap();
    }
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(["-c", "user.name=test", "-c", "user.email=test@example.com"])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
        text(&out.stdout).trim().to_string()
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "the action"]);
    git(&["tag", "v1"]);
    git(&["branch", "release"]);
    git(&["rev-parse", "HEAD"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_from_git_and_the_work_directory_run_as_on_github_and_hand_on_outputs_env_and_path() {
    let stack = TestStack::start().await;
    let (ws, token) = stack.new_workspace().await;
    let shared = scratch();
    let js_dir = shared.join("js-action");
    let js_sha = repository(&js_dir, JS_ACTION);
    let js_url = format!("file://{}", js_dir.display());
    let composite = COMPOSITE_ACTION.replace("JS_URL", &js_url).replace("JS_SHA", &js_sha);
    let composite_dir = shared.join("composite-action");
    repository(&composite_dir, &[("action.yml", &composite)]);
    let composite_url = format!("file://{}", composite_dir.display());
    let docker_dir = shared.join("docker-action");
    repository(&docker_dir, &[("action.yml", "runs:\n  using: docker\n  image: Dockerfile\n")]);

    let yaml = format!(
        r#"name: actions
{env}jobs:
  build:
    runs-on: linux
    outputs:
      message: ${{{{ steps.greet.outputs.message }}}}
      shout: ${{{{ steps.wrap.outputs.shout }}}}
    steps:
      - id: greet
        uses: {js_url}@v1
        with:
          who: world
      - run: |
          test "$GREETED" = world
          greet-tool > "$SHARED/tool.out"
          echo "the secret again: sekrit-42"
      - id: wrap
        uses: {composite_url}@release
        with: {{name: baton}}
      - run: |
          mkdir -p my-action
          printf 'runs:\n  using: node20\n  main: index.js\n' > my-action/action.yml
          echo "require('fs').writeFileSync(process.env.SHARED + '/local.out', process.env.INPUT_X)" > my-action/index.js
      - uses: ./my-action
        with: {{x: 7}}
      - run: echo last >> "$SHARED/order"
  use:
    needs: build
    runs-on: linux
    steps:
      - run: echo "${{{{ needs.build.outputs.message }}}}|${{{{ needs.build.outputs.shout }}}}" > "$SHARED/use.out"
  refused:
    runs-on: linux
    steps:
      - uses: file://{docker}@v1
        continue-on-error: true
      - uses: {js_url}@v1
        continue-on-error: true
      - run: echo refused-ran > "$SHARED/refused.out"
"#,
        env = shared_env(&shared),
        docker = docker_dir.display(),
    );
    let mut runner = Runner::start(&stack, &token, "linux", &[]);
    let run_id = stack.create_run(&ws, &yaml).await.id();
    let view = stack
        .wait_view(&ws, &run_id, "the run to end", |v| matches!(v["status"].as_str(), Some("succeeded" | "failed")))
        .await;
    let logs = baton(&stack, &["run", "logs", "--workspace", &ws, &run_id]).await;
    let logs = text(&logs.stdout);
    assert_eq!(view["status"], "succeeded", "{view:#}\n{logs}");

    // Outputs: a JavaScript action's, and a composite's mapped from its
    // nested action's, reach the job's outputs and a dependent job.
    let build = job_in(&view, 1, "build");
    assert_eq!(build["outputs"]["message"], "Hello, world!", "{build:#}");
    assert_eq!(build["outputs"]["shout"], "Hello, baton! / BATON", "{build:#}");
    let used = std::fs::read_to_string(shared.join("use.out")).expect("the dependent job ran");
    assert_eq!(used, "Hello, world!|Hello, baton! / BATON\n");
    // $GITHUB_ENV and $GITHUB_PATH reached the next step; the local action got its input.
    assert_eq!(std::fs::read_to_string(shared.join("tool.out")).unwrap(), "tool ran\n");
    assert_eq!(std::fs::read_to_string(shared.join("local.out")).unwrap(), "7");
    // Each `post` ran after the job's last step, newest first, with its
    // state and inputs.
    let order = std::fs::read_to_string(shared.join("order")).unwrap();
    assert_eq!(order.lines().collect::<Vec<_>>(), ["last", "post yes baton", "post yes world"], "{order}");

    // The masked value is nowhere in the log; workflow commands read as lines.
    assert!(!logs.contains("sekrit-42"), "{logs}");
    assert!(logs.contains("the token is ***") && logs.contains("the secret again: ***"), "{logs}");
    assert!(logs.contains("warning (file=main.js): careful now"), "{logs}");
    assert!(logs.contains("ci=true actions=true workspace=true"), "{logs}");
    // What cannot run fails its step saying why (forgiven here).
    assert!(logs.contains("Docker actions need Docker"), "{logs}");
    assert!(logs.contains("input `who` is required"), "{logs}");
    assert_eq!(std::fs::read_to_string(shared.join("refused.out")).unwrap(), "refused-ran\n");
    let refused = job_in(&view, 1, "refused");
    let soft: Vec<_> =
        refused["executions"][0]["steps"].as_array().unwrap().iter().map(|s| &s["soft_failed"]).collect();
    assert_eq!(soft[..2], [true, true], "{refused:#}");

    // Each repo@ref was fetched once, into the runner's action cache.
    let cached = runner.work_dir.join("_actions");
    let fetched = walk_action_dirs(&cached);
    assert_eq!(fetched.len(), 4, "js@v1, js@sha, composite@release, docker@v1: {fetched:?}");
    runner.stop().await;
}

/// The `@ref` directories under the action cache.
fn walk_action_dirs(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('@') {
            found.push(path.display().to_string());
        } else if path.is_dir() {
            found.extend(walk_action_dirs(&path));
        }
    }
    found
}
