//! The shells a `run` step names (`shell:`), run as GitHub's runner runs
//! them: the script written to a file, the shell's template run with `{0}`
//! the file's path. One home for a job's own `run` steps and a composite
//! action's, so that both run a shell the same way.
//!
//! A job's step that names no shell is not run through here: it runs with
//! `sh -c`, as every step did before shells (`step::Exec::shell`).

use std::path::{Path, PathBuf};

/// The command line GitHub's runner uses for `shell` (`{0}` is the
/// script's file): the program and its arguments.
pub(crate) fn command(shell: &str, script: &Path) -> Result<(String, Vec<String>), String> {
    let file = script.display().to_string();
    let words: Vec<String> = match shell.trim() {
        "bash" => ["bash", "--noprofile", "--norc", "-eo", "pipefail", "{0}"].map(String::from).to_vec(),
        "sh" => ["sh", "-e", "{0}"].map(String::from).to_vec(),
        "python" => ["python", "{0}"].map(String::from).to_vec(),
        "pwsh" => ["pwsh", "-command", ". '{0}'"].map(String::from).to_vec(),
        "powershell" => ["powershell", "-command", ". '{0}'"].map(String::from).to_vec(),
        "cmd" => ["cmd", "/D", "/E:ON", "/V:OFF", "/S", "/C", "CALL \"{0}\""].map(String::from).to_vec(),
        // The program is named: the script file itself is no program.
        custom if custom.contains("{0}") && !custom.starts_with("{0}") => {
            custom.split_whitespace().map(String::from).collect()
        }
        other => {
            return Err(format!(
                "`shell: {other}` is not one a Baton runner knows (bash, sh, python, pwsh, powershell, cmd, \
                 or a command with {{0}})"
            ))
        }
    };
    let mut words = words.into_iter().map(|w| w.replace("{0}", &file));
    let program = words.next().filter(|p| !p.is_empty()).ok_or_else(|| "an empty `shell:`".to_string())?;
    Ok((program, words.collect()))
}

/// The extension of the script's file: PowerShell runs only a `.ps1`, and
/// `cmd` only a `.cmd`.
pub(crate) fn extension(shell: &str) -> &'static str {
    match shell.trim() {
        "python" => "py",
        "pwsh" | "powershell" => "ps1",
        "cmd" => "cmd",
        _ => "sh",
    }
}

/// The script's file as GitHub's runner writes it for `shell`: PowerShell
/// stops at the first error and exits with the last command's code, `cmd`
/// does not echo each line; any other shell gets `run` as it is.
pub(crate) fn script(shell: &str, run: &str) -> String {
    match shell.trim() {
        "pwsh" | "powershell" => {
            let exit = r"if ((Test-Path -LiteralPath variable:\LASTEXITCODE)) { exit $LASTEXITCODE }";
            format!("$ErrorActionPreference = 'stop'\n{run}\n{exit}")
        }
        "cmd" => format!("@echo off\n{run}"),
        _ => run.to_string(),
    }
}

/// What to run instead when `program` is not on the step's `PATH`:
/// `python3` for `python`, which Debian and Ubuntu ship only as `python3`
/// (GitHub's images have both; a self-hosted machine often only the one).
pub(crate) fn fallback(program: &str) -> Option<&'static str> {
    (program == "python").then_some("python3")
}

/// Where a step with `working-directory` runs: a relative `dir` under the
/// job's directory `job_dir`, an absolute one where it names (as on GitHub:
/// `${{ runner.temp }}/digests`, `/tmp/out`). The definition refuses a
/// relative path climbing out with `..` when the run is created; what an
/// expression came to is checked here the same way. A directory that is
/// not there fails the step (as on GitHub), saying so.
pub(crate) fn working_dir(job_dir: &Path, dir: &str) -> Result<PathBuf, String> {
    let shown = format!("working-directory `{dir}`");
    if Path::new(dir).is_absolute() {
        return match std::fs::metadata(dir) {
            Ok(meta) if meta.is_dir() => Ok(PathBuf::from(dir)),
            Ok(_) => Err(format!("{shown} is not a directory")),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                Err(format!("{shown} does not exist (an earlier step makes it)"))
            }
            Err(err) => Err(format!("{shown}: {err}")),
        };
    }
    let mut depth = 0usize;
    for part in dir.split('/') {
        match part {
            "" | "." => {}
            ".." if depth == 0 => return Err(format!("{shown} climbs out of the job's directory with `..`")),
            ".." => depth -= 1,
            _ => depth += 1,
        }
    }
    let path = job_dir.join(dir);
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_dir() => Ok(path),
        Ok(_) => Err(format!("{shown} is not a directory")),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            Err(format!("{shown} does not exist in the job's directory (an earlier step makes it, or a checkout)"))
        }
        Err(err) => Err(format!("{shown}: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(shell: &str) -> Vec<String> {
        let (program, args) = command(shell, Path::new("/tmp/s.sh")).unwrap();
        std::iter::once(program).chain(args).collect()
    }

    #[test]
    fn each_shell_runs_with_githubs_template() {
        assert_eq!(line("bash"), ["bash", "--noprofile", "--norc", "-eo", "pipefail", "/tmp/s.sh"]);
        assert_eq!(line("sh"), ["sh", "-e", "/tmp/s.sh"]);
        assert_eq!(line("python"), ["python", "/tmp/s.sh"]);
        assert_eq!(line("pwsh"), ["pwsh", "-command", ". '/tmp/s.sh'"]);
        assert_eq!(line("powershell"), ["powershell", "-command", ". '/tmp/s.sh'"]);
        assert_eq!(line("cmd"), ["cmd", "/D", "/E:ON", "/V:OFF", "/S", "/C", "CALL \"/tmp/s.sh\""]);
        // A custom template, as written, `{0}` wherever it stands.
        assert_eq!(line("perl {0}"), ["perl", "/tmp/s.sh"]);
        assert_eq!(line("  bash -x {0} extra"), ["bash", "-x", "/tmp/s.sh", "extra"]);
        for refused in ["zsh", "", "{0}"] {
            assert!(command(refused, Path::new("/tmp/s.sh")).is_err(), "{refused}");
        }
    }

    #[test]
    fn scripts_are_written_as_github_writes_them() {
        assert_eq!((extension("python"), extension("pwsh"), extension("cmd")), ("py", "ps1", "cmd"));
        assert_eq!((extension("bash"), extension("perl {0}")), ("sh", "sh"));
        assert_eq!(script("bash", "echo hi"), "echo hi");
        assert!(script("pwsh", "Write-Host hi").starts_with("$ErrorActionPreference = 'stop'\nWrite-Host hi\n"));
        assert!(script("pwsh", "x").ends_with("{ exit $LASTEXITCODE }"));
        assert_eq!(script("cmd", "echo hi"), "@echo off\necho hi");
        assert_eq!((fallback("python"), fallback("bash")), (Some("python3"), None));
    }

    #[test]
    fn a_relative_working_directory_is_inside_the_jobs_an_absolute_one_as_is_and_either_must_exist() {
        let job = std::env::temp_dir().join(format!("baton-shell-test-{}", uuid::Uuid::now_v7().simple()));
        std::fs::create_dir_all(job.join("a/b")).unwrap();
        std::fs::write(job.join("file"), "").unwrap();
        assert_eq!(working_dir(&job, "a/b").unwrap(), job.join("a/b"));
        assert_eq!(working_dir(&job, "./a/../a").unwrap(), job.join("./a/../a"));
        let absolute = job.join("a").display().to_string();
        assert_eq!(working_dir(Path::new("/elsewhere"), &absolute).unwrap(), job.join("a"), "an absolute path as is");
        let gone = job.join("gone").display().to_string();
        assert!(working_dir(&job, &gone).unwrap_err().contains("does not exist"));
        for (dir, says) in [
            ("../x", "climbs out"),
            ("a/../../x", "climbs out"),
            ("missing", "does not exist in the job's directory"),
            ("file", "is not a directory"),
        ] {
            let err = working_dir(&job, dir).unwrap_err();
            assert!(err.contains(says) && err.contains(dir), "{dir}: {err}");
        }
        std::fs::remove_dir_all(&job).unwrap();
    }
}
