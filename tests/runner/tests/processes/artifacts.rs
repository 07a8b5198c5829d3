//! Artifacts end to end with real processes (behaviour.md §17): a build
//! job's `upload:` step sends 20 MB straight to S3 through the runner, the
//! test job's `download:` step gets the same bytes back, and an operator
//! lists and downloads them with the `baton` CLI.

use std::path::Path;

use crate::support::*;
use baton_tests::runs::Identified;
use baton_tests::{workspace, TestStack};
use serde_json::json;
use sha2::{Digest, Sha256};

fn sha256_of(path: &Path) -> String {
    format!("{:x}", Sha256::digest(std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_uploads_20_mb_that_the_test_job_and_an_operator_download_byte_identical() {
    // One part URL an answer: the archive's second part is asked for on its
    // own, as a 50 GiB archive's parts are in windows of 256.
    let one_url = [("BATON_UPLOAD_URLS_PER_ANSWER".to_string(), "1".to_string())];
    let stack = TestStack::start_with(|_| {}, std::collections::HashMap::from(one_url)).await;
    let (ws, token) = stack.new_workspace().await;
    let shared = scratch();
    let yaml = format!(
        r#"name: build-once
{env}jobs:
  build:
    runs-on: linux
    steps:
      - run: |
          mkdir -p dist/docs
          head -c 20000000 /dev/urandom > dist/app.bin
          echo v1 > dist/docs/VERSION
          sha256sum dist/app.bin | cut -d' ' -f1 > "$SHARED/built.sha"
      - upload: {{name: dist, path: [dist/app.bin, "dist/*/VERSION"]}}
  test:
    needs: build
    runs-on: linux
    steps:
      - download: {{name: dist, path: from-build}}
      - run: |
          sha256sum from-build/dist/app.bin | cut -d' ' -f1 > "$SHARED/tested.sha"
          test "$(cat from-build/dist/docs/VERSION)" = v1
"#,
        env = shared_env(&shared)
    );
    let mut runner = Runner::start(&stack, &token, "linux", &[]);
    let run_id = stack.create_run(&ws, &yaml).await.id();
    let view = stack
        .wait_view(&ws, &run_id, "the run to end", |v| matches!(v["status"].as_str(), Some("succeeded" | "failed")))
        .await;
    assert_eq!(view["status"], "succeeded", "{view:#}");
    let built = std::fs::read_to_string(shared.join("built.sha")).expect("build ran");
    let tested = std::fs::read_to_string(shared.join("tested.sha")).expect("test ran");
    assert_eq!(built, tested, "the test job got the build's bytes");
    let artifact = &view["artifacts"][0];
    assert_eq!((artifact["name"].as_str(), artifact["job_key"].as_str()), (Some("dist"), Some("build")));
    assert_eq!(artifact["status"], "stored");
    assert!(artifact["bytes"].as_u64().unwrap() > 20_000_000, "random bytes do not compress: {artifact}");

    // The operator's side: the list, then the archive unpacked here.
    let listed = baton(&stack, &["run", "artifacts", "--workspace", &ws, &run_id]).await;
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let listed = text(&listed.stdout);
    assert!(listed.starts_with("dist  ") && listed.contains("job build (attempt 1)  stored"), "{listed}");
    let into = shared.join("downloaded");
    let into_arg = into.display().to_string();
    let fetched = baton(&stack, &["artifact", "download", "--workspace", &ws, &run_id, "dist", "-o", &into_arg]).await;
    assert!(fetched.status.success(), "{}", text(&fetched.stderr));
    assert_eq!(sha256_of(&into.join("dist/app.bin")), built.trim());
    assert_eq!(std::fs::read_to_string(into.join("dist/docs/VERSION")).unwrap(), "v1\n");
    let missing = baton(&stack, &["artifact", "download", "--workspace", &ws, &run_id, "nope"]).await;
    assert!(!missing.status.success() && text(&missing.stderr).contains("not-found"), "{}", text(&missing.stderr));
    runner.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_of_nothing_or_a_download_of_no_artifact_fails_its_step_saying_why() {
    let stack = TestStack::start().await;
    let (ws, token) = stack.new_workspace().await;
    let yaml = r#"name: mistakes
jobs:
  typo:
    runs-on: linux
    steps:
      - upload: {name: dist, path: "target/*.bin"}
  missing:
    runs-on: linux
    steps:
      - download: {name: never-made}
"#;
    let mut runner = Runner::start(&stack, &token, "linux", &[]);
    let run_id = stack.create_run(&ws, yaml).await.id();
    stack.wait_view(&ws, &run_id, "the run to fail", |v| v["status"] == "failed").await;
    let logs = baton(&stack, &["run", "logs", "--workspace", &ws, &run_id]).await;
    let logs = text(&logs.stdout);
    assert!(logs.contains("target/*.bin: no file matches"), "{logs}");
    assert!(logs.contains("never-made") && logs.contains("not-found"), "{logs}");
    runner.stop().await;
}

/// A one-job run that restores cache `key` (falling back on `deps-`),
/// builds `deps/` only when it was not restored, and records what it found.
fn cached_build(shared: &Path, key: &str) -> String {
    format!(
        r#"name: cached
{env}jobs:
  build:
    runs-on: linux
    steps:
      - cache: {{key: {key}, restore-keys: [deps-], path: deps}}
      - run: |
          if [ -f deps/marker ]; then echo "{key} restored $(cat deps/marker)" >> "$SHARED/seen"
          else mkdir -p deps && echo "made-for-{key}" > deps/marker && echo "{key} built" >> "$SHARED/seen"; fi
"#,
        env = shared_env(shared)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_missed_is_saved_then_hit_by_the_next_run_and_a_new_key_falls_back_on_its_prefix() {
    let stack = TestStack::start().await;
    let (ws, token) = stack.new_workspace().await;
    let shared = scratch();
    let mut runner = Runner::start(&stack, &token, "linux", &[]);
    let mut runs = Vec::new();
    for key in ["deps-v1", "deps-v1", "deps-v2"] {
        let run_id = stack.create_run(&ws, &cached_build(&shared, key)).await.id();
        let view = stack
            .wait_view(&ws, &run_id, "the run to end", |v| matches!(v["status"].as_str(), Some("succeeded" | "failed")))
            .await;
        assert_eq!(view["status"], "succeeded", "{view:#}");
        runs.push(run_id);
    }
    let seen = std::fs::read_to_string(shared.join("seen")).expect("the runs recorded what they found");
    assert_eq!(
        seen.lines().collect::<Vec<_>>(),
        vec!["deps-v1 built", "deps-v1 restored made-for-deps-v1", "deps-v2 restored made-for-deps-v1"],
        "a miss, an exact hit, a prefix hit"
    );
    let mut logs = Vec::new();
    for run in &runs {
        logs.push(text(&baton(&stack, &["run", "logs", "--workspace", &ws, run]).await.stdout));
    }
    let first = &logs[0];
    assert!(first.contains("cache deps-v1: miss") && first.contains("cache deps-v1: saved ("), "{first}");
    let second = &logs[1];
    assert!(second.contains("restored deps-v1") && !second.contains("will be saved"), "{second}");
    let third = &logs[2];
    assert!(third.contains("cache deps-v2: restored deps-v1") && third.contains("cache deps-v2: saved ("), "{third}");

    // Another workspace does not see this one's caches.
    let other = workspace();
    let other_token = stack.registration_token(&other, json!({})).await;
    let mut other_runner = Runner::start(&stack, &other_token, "linux", &[]);
    let elsewhere = scratch();
    let run_id = stack.create_run(&other, &cached_build(&elsewhere, "deps-v1")).await.id();
    stack.wait_view(&other, &run_id, "the run to succeed", |v| v["status"] == "succeeded").await;
    assert_eq!(std::fs::read_to_string(elsewhere.join("seen")).unwrap(), "deps-v1 built\n");
    other_runner.stop().await;
    runner.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_release_example_builds_once_tests_that_build_and_deploys_it_with_a_secret_set_through_the_cli() {
    let stack = TestStack::start().await;
    let (ws, token) = stack.new_workspace().await;
    let secret = "tok-release-4711";
    let mut set = tokio::process::Command::new(env!("CARGO_BIN_EXE_baton-under-test"))
        .args(["secret", "set", "DEPLOY_TOKEN", "--workspace", &ws])
        .env("BATON_API", &stack.api)
        .env("BATON_ADMIN_TOKEN", &stack.admin_token)
        .stdin(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("baton runs");
    use tokio::io::AsyncWriteExt;
    set.stdin.take().expect("stdin").write_all(secret.as_bytes()).await.expect("the secret is written");
    assert!(set.wait().await.expect("baton ends").success());
    let var = baton(&stack, &["var", "set", "deploy_target", "production", "--workspace", &ws]).await;
    assert!(var.status.success(), "{}", text(&var.stderr));
    assert_eq!(text(&var.stdout).trim(), format!("variable DEPLOY_TARGET set in workspace {ws}"));

    let mut runner = Runner::start(&stack, &token, "linux", &[]);
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/release.yml");
    let example = example.display().to_string();
    let submitted = baton(&stack, &["run", "submit", "--workspace", &ws, &example]).await;
    assert!(submitted.status.success(), "{}", text(&submitted.stderr));
    let run_id = text(&submitted.stdout).trim().to_string();
    let view = stack
        .wait_view(&ws, &run_id, "the release to end", |v| matches!(v["status"].as_str(), Some("succeeded" | "failed")))
        .await;
    assert_eq!(view["status"], "succeeded", "{view:#}");
    assert_eq!(view["artifacts"][0]["name"], "app");
    let logs = text(&baton(&stack, &["run", "logs", "--workspace", &ws, &run_id]).await.stdout);
    assert!(logs.contains("toolchain built") && logs.contains("cache toolchain-v1: saved ("), "{logs}");
    assert!(
        logs.contains("to production with token ***"),
        "the deploy had the variable and the secret, masked: {logs}"
    );
    assert_eq!(view["title"], "release to production", "run-name read the variable");
    assert!(!logs.contains(secret), "{logs}");
    assert!(!view.to_string().contains(secret));
    // Nowhere at all but the secret store: no fact, outbox or other table
    // item, no log chunk, artifact or cache archive.
    assert!(!serde_json::to_string(&stack.all_facts()).unwrap().contains(secret));
    assert_eq!(stack.stored_anywhere(secret).await, Vec::<String>::new(), "the secret was stored outside SSM");
    let app_text = "stamped by baton";
    assert!(!stack.stored_anywhere(app_text).await.is_empty(), "the scan does read what the jobs stored (a log line)");
    let artifacts_stored = stack.provisioned.buckets["BATON_ARTIFACTS_BUCKET"].clone();
    let listed = stack.clients.s3().list_objects_v2().bucket(&artifacts_stored).send().await.unwrap();
    assert!(listed.contents().len() >= 2, "the scan read the artifact and the cache entry too");
    runner.stop().await;
}

/// An upload longer than the lease's remaining time: the URLs the server
/// signs are valid no longer than the lease as it stood when asked, and
/// heartbeats extend the lease, not the URLs. Here leases last 10 s (a
/// heartbeat every 2 s) and the runner sends at 2 MB/s, so the 40 MB
/// archive takes about 20 s and its last parts start well after its first
/// URLs ran out: the local stack refuses an expired URL as S3 does (403),
/// and the runner asks again for fresh URLs of the same upload before they
/// run out. (With 3 s leases a loaded machine let the lease itself lapse
/// between two heartbeats, and the upload was refused for that instead.)
///
/// `make chaos` runs it once more at full size (`BATON_SLOW_UPLOAD_BYTES`,
/// `_RATE`, `_LEASE_S`: 1 GiB at 4 MB/s under 60 s leases, about 4.5
/// minutes of sending) and prints how long it took.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_slower_than_its_lease_renews_its_urls_and_arrives_byte_identical() {
    let setting = |name: &str, default: u64| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let bytes = setting("BATON_SLOW_UPLOAD_BYTES", 40_000_000);
    let rate = setting("BATON_SLOW_UPLOAD_RATE", 2_000_000);
    let lease_s = setting("BATON_SLOW_UPLOAD_LEASE_S", 10);
    let stack = TestStack::start_with(
        |_| {},
        std::collections::HashMap::from([
            ("BATON_HEARTBEAT_INTERVAL_S".into(), (lease_s / 5).max(1).to_string()),
            ("BATON_LEASE_DURATION_S".into(), lease_s.to_string()),
            ("BATON_FIRST_HEARTBEAT_GRACE_S".into(), lease_s.to_string()),
        ]),
    )
    .await;
    let (ws, token) = stack.new_workspace().await;
    let shared = scratch();
    let yaml = format!(
        r#"name: slow-link
{env}jobs:
  build:
    runs-on: linux
    steps:
      - run: |
          head -c {bytes} /dev/urandom > big.bin
          sha256sum big.bin | cut -d' ' -f1 > "$SHARED/built.sha"
      - upload: {{name: big, path: [big.bin]}}
  check:
    needs: build
    runs-on: linux
    steps:
      - download: {{name: big}}
      - run: sha256sum big.bin | cut -d' ' -f1 > "$SHARED/fetched.sha"
"#,
        env = shared_env(&shared)
    );
    let slow = [("BATON_UPLOAD_BYTES_PER_S", rate.to_string())];
    let mut runner = Runner::start_with_env(&stack, &token, "linux", &[], &slow);
    let started = std::time::Instant::now();
    let run_id = stack.create_run(&ws, &yaml).await.id();
    // A ceiling, not a figure: three times the sending time, and two minutes.
    let within = std::time::Duration::from_secs(120 + 3 * bytes / rate);
    let ended = |v: &serde_json::Value| matches!(v["status"].as_str(), Some("succeeded" | "failed"));
    let view = stack.wait_view_within(&ws, &run_id, "the run to end", within, ended).await;
    assert_eq!(view["status"], "succeeded", "{view:#}");
    let built = std::fs::read_to_string(shared.join("built.sha")).expect("build ran");
    let fetched = std::fs::read_to_string(shared.join("fetched.sha")).expect("check ran");
    assert_eq!(built, fetched, "the download is the bytes built");
    let stored = view["artifacts"][0]["bytes"].as_u64().unwrap();
    assert!(stored > bytes, "random bytes do not compress: {view}");
    println!(
        "slow upload: {stored} bytes at {rate} B/s under {lease_s} s leases, run done in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    runner.stop().await;
}

/// GitHub's own artifact actions, as their READMEs use them: a build
/// uploads `dist/` and two reports, a test job downloads `dist` back where
/// it was, a report job takes every `report-*` merged into one directory.
/// They run as Baton's artifact commands (bytes to S3 under the lease).
fn github_artifacts(shared: &Path) -> String {
    format!(
        r#"name: github-artifacts
{env}jobs:
  build:
    runs-on: linux
    strategy:
      matrix:
        part: [unit, lint]
    steps:
      - run: mkdir -p dist/bin reports && echo app > dist/bin/app && echo "<${{{{ matrix.part }}}}/>" > reports/${{{{ matrix.part }}}}.xml
      - uses: actions/upload-artifact@v4
        if: matrix.part == 'unit'
        with:
          name: dist
          path: dist/
      - uses: actions/upload-artifact@v4
        with:
          name: report-${{{{ matrix.part }}}}
          path: |
            reports/*.xml
            coverage/missing-*.txt
      - uses: actions/upload-artifact@v4
        with:
          name: nothing-${{{{ matrix.part }}}}
          path: no-such-dir/
  test:
    needs: build
    runs-on: linux
    steps:
      - uses: actions/download-artifact@v4
        with:
          name: dist
          path: dist
      - uses: actions/download-artifact@v4
        with:
          pattern: report-*
          merge-multiple: true
          path: all-reports
      - uses: actions/download-artifact@v4
        with:
          path: every
      - run: |
          cat dist/bin/app > "$SHARED/app"
          ls all-reports > "$SHARED/merged"
          ls every > "$SHARED/every"
"#,
        env = shared_env(shared)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn githubs_upload_and_download_artifact_actions_run_as_batons_own_steps() {
    let stack = TestStack::start().await;
    let (ws, token) = stack.new_workspace().await;
    let shared = scratch();
    let mut runner = Runner::start(&stack, &token, "linux", &[]);
    let run_id = stack.create_run(&ws, &github_artifacts(&shared)).await.id();
    let view = stack
        .wait_view(&ws, &run_id, "the run to end", |v| matches!(v["status"].as_str(), Some("succeeded" | "failed")))
        .await;
    assert_eq!(view["status"], "succeeded", "{view:#}");
    let read = |name: &str| std::fs::read_to_string(shared.join(name)).unwrap_or_default();
    assert_eq!(read("app"), "app\n", "dist/ went up as its contents and came back into dist/");
    assert_eq!(read("merged").lines().collect::<Vec<_>>(), ["lint.xml", "unit.xml"], "merged, the reports' root");
    assert_eq!(
        read("every").lines().collect::<Vec<_>>(),
        ["dist", "report-lint", "report-unit"],
        "without a name: every artifact, each in its own directory (the empty uploads made none)"
    );
    let logs = text(&baton(&stack, &["run", "logs", "--workspace", &ws, &run_id]).await.stdout);
    assert!(logs.contains("warning: No files were found with the provided path: no-such-dir/"), "{logs}");
    runner.stop().await;
}

/// `actions/cache` as its README uses it: `cache-hit` tells a later step
/// whether the key itself was restored.
fn github_cache(shared: &Path) -> String {
    format!(
        r#"name: github-cache
{env}jobs:
  build:
    runs-on: linux
    steps:
      - id: deps
        uses: actions/cache@v4
        with:
          path: deps
          key: deps-${{{{ hashFiles('lock.txt') }}}}
          restore-keys: deps-
      - if: steps.deps.outputs.cache-hit != 'true'
        run: mkdir -p deps && echo built > deps/marker
      - run: echo "hit=[${{{{ steps.deps.outputs.cache-hit }}}}] $(cat deps/marker)" >> "$SHARED/seen"
"#,
        env = shared_env(shared)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn githubs_cache_action_restores_saves_and_says_cache_hit() {
    let stack = TestStack::start().await;
    let (ws, token) = stack.new_workspace().await;
    let shared = scratch();
    let mut runner = Runner::start(&stack, &token, "linux", &[]);
    for _ in 0..2 {
        let run_id = stack.create_run(&ws, &github_cache(&shared)).await.id();
        let view = stack
            .wait_view(&ws, &run_id, "the run to end", |v| matches!(v["status"].as_str(), Some("succeeded" | "failed")))
            .await;
        assert_eq!(view["status"], "succeeded", "{view:#}");
    }
    let seen = std::fs::read_to_string(shared.join("seen")).expect("the runs recorded what they found");
    assert_eq!(seen.lines().collect::<Vec<_>>(), ["hit=[] built", "hit=[true] built"], "a miss, then the key itself");
    runner.stop().await;
}
