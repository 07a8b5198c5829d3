//! The tools this machine has, for registration (`--tools`, default
//! `auto`): each common tool found on the `PATH` with its version, as
//! `name@version` (`node@20.11.1`). The server turns them into `tool:`
//! labels that jobs' `tools:` match (`baton_domain::runners::tools`).

use std::time::Duration;

/// The tools `auto` looks for, and the arguments that make each print its
/// version.
const COMMON: &[(&str, &[&str])] = &[
    ("docker", &["--version"]),
    ("git", &["--version"]),
    ("node", &["--version"]),
    ("npm", &["--version"]),
    ("python3", &["--version"]),
    ("go", &["version"]),
    ("java", &["-version"]),
    ("cargo", &["--version"]),
    ("rustc", &["--version"]),
    ("make", &["--version"]),
    ("gcc", &["--version"]),
    ("terraform", &["version"]),
    ("kubectl", &["version", "--client"]),
];

/// How long one tool may take to say its version.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// The first `N.N[.N…]` in a tool's version output (`git version 2.47.3`,
/// `v20.20.2`, `go1.22.1`, `gcc (Debian 12.2.0-14) 12.2.0`).
pub fn version_in(output: &str) -> Option<String> {
    let bytes = output.as_bytes();
    let mut start = 0;
    while start < bytes.len() {
        if bytes[start].is_ascii_digit() {
            let mut end = start;
            while end < bytes.len() && (bytes[end].is_ascii_digit() || bytes[end] == b'.') {
                end += 1;
            }
            let found = output[start..end].trim_end_matches('.');
            if found.contains('.') {
                return Some(found.to_string());
            }
            start = end;
        } else {
            start += 1;
        }
    }
    None
}

/// `name@version` of one tool, `name` when it runs but says no version,
/// `None` when it is not there (or hangs).
async fn ask(name: &str, args: &[&str]) -> Option<String> {
    let run =
        tokio::process::Command::new(name).args(args).stdin(std::process::Stdio::null()).kill_on_drop(true).output();
    let output = tokio::time::timeout(ASK_TIMEOUT, run).await.ok()?.ok()?;
    if !output.status.success() {
        return None;
    }
    // `java -version` answers on stderr.
    let text = format!("{}\n{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    Some(match version_in(&text) {
        Some(version) => format!("{name}@{version}"),
        None => name.to_string(),
    })
}

/// The common tools found here, side by side.
pub async fn detect() -> Vec<String> {
    let found = futures::future::join_all(COMMON.iter().map(|(name, args)| ask(name, args))).await;
    found.into_iter().flatten().collect()
}

/// What `--tools` names: `auto` (the default) detects the common tools,
/// `none` advertises none, anything else is advertised as written (and
/// `auto,terraform@1.7` adds to what is detected).
pub async fn resolve(flag: &[String]) -> Vec<String> {
    let wanted: Vec<&str> = flag.iter().map(|t| t.trim()).filter(|t| !t.is_empty()).collect();
    if wanted.contains(&"none") {
        return Vec::new();
    }
    let mut tools: Vec<String> = wanted.iter().filter(|t| **t != "auto").map(|t| t.to_string()).collect();
    if wanted.is_empty() || wanted.contains(&"auto") {
        let named: Vec<String> = tools.iter().map(|t| t.split('@').next().unwrap_or_default().to_string()).collect();
        tools.extend(detect().await.into_iter().filter(|t| !named.iter().any(|n| t.split('@').next() == Some(n))));
    }
    tools
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_the_first_dotted_number_of_the_output() {
        for (output, version) in [
            ("git version 2.47.3", Some("2.47.3")),
            ("v20.20.2\n", Some("20.20.2")),
            ("go version go1.22.1 linux/amd64", Some("1.22.1")),
            ("gcc (Debian 12.2.0-14+deb12u1) 12.2.0", Some("12.2.0")),
            ("Docker version 28.2.2, build e6534b4", Some("28.2.2")),
            ("openjdk version \"17.0.15\" 2025-04-15", Some("17.0.15")),
            ("GNU Make 4.3", Some("4.3")),
            ("build 7 of 2024", None),
        ] {
            assert_eq!(version_in(output).as_deref(), version, "{output}");
        }
    }

    #[tokio::test]
    async fn none_advertises_nothing_and_named_tools_are_kept_as_written() {
        assert!(resolve(&["none".into()]).await.is_empty());
        assert_eq!(resolve(&["terraform@1.7".into()]).await, vec!["terraform@1.7".to_string()]);
    }
}
