//! Workflow files in the shapes real projects write for GitHub Actions
//! (`tests/corpus/github/`), run through the definition reader: how many
//! Baton accepts, and what blocks the others (issue 43).
//!
//! People bring their GitHub workflows to Baton; this measures how far
//! such a file gets, so a change to the reader shows what it did for them.
//! The share and a table of what blocks the refused files are printed
//! (`cargo test -p baton-domain --test github_corpus -- --nocapture`) and
//! written to `target/tmp/github_corpus.txt`. The test fails when fewer
//! files are accepted than [`ACCEPTED_FLOOR`], or when a refusal does not
//! say where it is or reads like a parser's error rather than a user's.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use baton_domain::workflows::reusable::{missing_calls, CalledWorkflows};
use baton_domain::workflows::{parse_definition_with, DefinitionError};

/// How many corpus files the reader accepted when this floor was last set.
/// A ratchet: raise it as Baton accepts more of what GitHub users write.
/// It never goes down, since a file accepted once is one a user may rely on.
const ACCEPTED_FLOOR: usize = 60;

/// Below this many files, the share would say little about real workflows.
const MIN_CORPUS_FILES: usize = 50;

/// Every `.yml` file of the corpus, by name, in name order (so the printed
/// report reads the same from one run to the next).
fn corpus() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/github");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a corpus entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yml"))
        .map(|path| {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, text)
        })
        .collect();
    files.sort();
    files
}

/// The reusable workflows a corpus file calls from its own repository
/// (`uses: ./.github/workflows/<name>.yml`), kept in `called/` as a project
/// keeps them beside its other workflows; Baton calls them as the
/// workspace's pipelines of those names.
fn called_by(text: &str) -> CalledWorkflows {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/github/called");
    let mut called = CalledWorkflows::none();
    loop {
        let mut found = false;
        for name in missing_calls(text, &called) {
            if let Ok(definition) = std::fs::read_to_string(dir.join(format!("{name}.yml"))) {
                called.insert(name, definition);
                found = true;
            }
        }
        if !found {
            return called;
        }
    }
}

/// The construct that blocks a file, with what is particular to the file
/// taken out (job names, step positions, the expression's text, the path
/// after a context's name), so that files blocked by the same thing count
/// together: `jobs.*.steps[].uses: actions are not supported`.
fn blocking_construct(err: &DefinitionError) -> String {
    let field = err.field.as_deref().map(without_positions).unwrap_or_default();
    let place = match (&err.job, field.is_empty()) {
        (Some(_), true) => "jobs.*".to_string(),
        (Some(_), false) => format!("jobs.*.{field}"),
        (None, true) => "the workflow".to_string(),
        (None, false) => field,
    };
    format!("{place}: {}", message_head(&err.message))
}

/// `steps[3].if` → `steps[].if`.
fn without_positions(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut in_index = false;
    for c in field.chars() {
        match c {
            '[' => {
                in_index = true;
                out.push(c);
            }
            ']' => {
                in_index = false;
                out.push(c);
            }
            _ if in_index => {}
            _ => out.push(c),
        }
    }
    out
}

/// The first clause of a message: past the expression or reference it
/// quotes, before the list of what is allowed and the hint.
fn message_head(message: &str) -> String {
    let mut rest = message;
    // "`github.ref == 'x'`: unknown reference …", "matrix.tox: no combination …"
    while let Some((first, after)) = rest.split_once(": ") {
        let quoted = first.starts_with('`') && first.ends_with('`');
        let bare_path = !first.contains(' ') && first.contains('.');
        let in_leg = first.starts_with("in leg ");
        if quoted || bare_path || in_leg {
            rest = after;
        } else {
            break;
        }
    }
    let mut head = rest;
    for cut in [": ", "; "] {
        if let Some((before, _)) = head.split_once(cut) {
            head = before;
        }
    }
    if let Some(index) = head.find(", expected").filter(|index| *index > 0) {
        head = &head[..index];
    }
    // "unknown reference github.event.pull_request.draft" → "… github.*"
    match head.strip_prefix("unknown reference ") {
        Some(reference) => {
            let context = reference.split(['.', '[']).next().unwrap_or(reference);
            format!("unknown reference {context}.*")
        }
        None => head.trim().to_string(),
    }
}

/// What a user gets from a parser rather than from the reader: no place in
/// their file, YAML's own complaint about a file that is valid YAML, or a
/// lone token ("unexpected ','") without the expression it sits in.
fn reads_like_a_parser(err: &DefinitionError) -> bool {
    let message = err.message.trim();
    let lone_token = message.starts_with("unexpected") && !message.contains('`') && message.len() < 40;
    message.starts_with("invalid YAML") || message.contains(" at line ") || lone_token
}

#[test]
fn github_corpus() {
    let files = corpus();
    assert!(
        files.len() >= MIN_CORPUS_FILES,
        "the corpus holds {} files, at least {MIN_CORPUS_FILES} are expected",
        files.len()
    );
    // The corpus itself is well formed: a refusal below is Baton's, never a
    // typo in a test file.
    for (name, text) in &files {
        if let Err(err) = serde_norway::from_str::<serde_norway::Value>(text) {
            panic!("{name} is not valid YAML: {err}");
        }
    }

    let mut accepted = 0;
    let mut refusals: Vec<(&str, DefinitionError)> = Vec::new();
    for (name, text) in &files {
        match parse_definition_with(text, &called_by(text)) {
            Ok(_) => accepted += 1,
            Err(err) => refusals.push((name, err)),
        }
    }

    let mut groups: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for (name, err) in &refusals {
        groups.entry(blocking_construct(err)).or_default().push(name);
    }
    let mut table: Vec<(String, Vec<&str>)> = groups.into_iter().collect();
    table.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.0.cmp(&b.0)));

    let total = files.len();
    let mut report = String::new();
    let share = 100.0 * accepted as f64 / total as f64;
    let _ = writeln!(report, "github corpus: {accepted} of {total} accepted ({share:.1} %)");
    let _ = writeln!(report, "refusals by blocking construct (the first refusal of each file):");
    for (construct, names) in &table {
        let _ = writeln!(report, "{:>4}  {construct}  ({})", names.len(), names.join(", "));
    }
    let _ = writeln!(report, "each refusal:");
    for (name, err) in &refusals {
        let _ = writeln!(report, "  {name}: {err}");
    }
    eprint!("{report}");
    // Kept beside the build so the figures can be read without a rerun.
    let _ = std::fs::write(Path::new(env!("CARGO_TARGET_TMPDIR")).join("github_corpus.txt"), &report);

    let unplaced: Vec<String> = refusals
        .iter()
        .filter(|(_, err)| err.job.is_none() && err.field.is_none())
        .map(|(name, err)| format!("{name}: {err}"))
        .collect();
    assert!(unplaced.is_empty(), "refusals naming neither a job nor a field:\n{}", unplaced.join("\n"));
    let raw: Vec<String> = refusals
        .iter()
        .filter(|(_, err)| reads_like_a_parser(err))
        .map(|(name, err)| format!("{name}: {err}"))
        .collect();
    assert!(raw.is_empty(), "refusals that read like a parser's message:\n{}", raw.join("\n"));
    assert!(
        accepted >= ACCEPTED_FLOOR,
        "{accepted} corpus files accepted, fewer than the {ACCEPTED_FLOOR} accepted before: \
         a GitHub-style file that worked no longer does"
    );
}

#[test]
fn refusals_group_by_construct() {
    let err = |job: Option<&str>, field: Option<&str>, message: &str| DefinitionError {
        job: job.map(str::to_string),
        field: field.map(str::to_string),
        message: message.to_string(),
    };
    assert_eq!(
        blocking_construct(&err(
            Some("build"),
            Some("steps[3].uses"),
            "actions are not supported: a step runs a shell command with `run`"
        )),
        "jobs.*.steps[].uses: actions are not supported"
    );
    assert_eq!(
        blocking_construct(&err(None, Some("defaults"), "unknown field, expected one of: name, env")),
        "defaults: unknown field"
    );
    assert_eq!(
        blocking_construct(&err(
            Some("t"),
            Some("if"),
            "`github.event_name == 'push'`: unknown reference github.event_name: use needs.<job>.outputs.<name>"
        )),
        "jobs.*.if: unknown reference github.*"
    );
    assert_eq!(
        blocking_construct(&err(Some("t"), Some("runs-on"), "in leg `t (a)`: at least one label is required")),
        "jobs.*.runs-on: at least one label is required"
    );
    assert!(reads_like_a_parser(&err(Some("t"), Some("if"), "unexpected ','")));
    assert!(!reads_like_a_parser(&err(Some("t"), Some("if"), "`a(,)`: unexpected ',' in the arguments of `a`")));
}
