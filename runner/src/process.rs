//! Process groups: every step runs as the leader of its own group, so a
//! step's children (and theirs) are stopped together with it.

use std::process::ExitStatus;
use std::time::Duration;

use tokio::process::Child;

/// Sends `signal` to every process of group `pgid`. Returns false when the
/// group no longer exists.
pub fn signal_group(pgid: i32, signal: i32) -> bool {
    if pgid <= 1 {
        return false;
    }
    // SAFETY: kill(2) has no memory-safety preconditions; a negative pid
    // addresses the process group.
    unsafe { libc::kill(-pgid, signal) == 0 }
}

/// Stops the group led by `child`: SIGTERM, then SIGKILL if the leader is
/// still alive after `grace`; stragglers get SIGKILL in any case. Returns the
/// leader's exit status.
pub async fn terminate_group(child: &mut Child, pgid: i32, grace: Duration) -> Option<ExitStatus> {
    signal_group(pgid, libc::SIGTERM);
    let status = match tokio::time::timeout(grace, child.wait()).await {
        Ok(status) => status.ok(),
        Err(_) => {
            signal_group(pgid, libc::SIGKILL);
            child.wait().await.ok()
        }
    };
    signal_group(pgid, libc::SIGKILL);
    status
}

/// The exit code a shell would show: the code, or 128 + the signal.
pub fn exit_code(status: &ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.code().or_else(|| status.signal().map(|s| 128 + s))
}

/// The processes of group `pgid` that are still alive (zombies excluded),
/// read from /proc. For tests and diagnostics.
pub fn live_members(pgid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut members = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // pid (comm) state ppid pgrp …; comm may contain spaces and parens.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else { continue };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[0] != "Z" && fields[2].parse::<i32>().ok() == Some(pgid) {
            members.push(pid);
        }
    }
    members
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits (10 s at most) until `holds`.
    async fn eventually(what: &str, holds: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !holds() {
            assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    #[tokio::test]
    async fn terminating_a_group_stops_the_leader_and_its_children() {
        let mut child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg("sleep 600 & sleep 600")
            .process_group(0)
            .spawn()
            .expect("sh runs");
        let pgid = child.id().expect("running") as i32;
        eventually("both sleeps", || live_members(pgid).len() >= 3).await;
        let status = terminate_group(&mut child, pgid, Duration::from_secs(5)).await.expect("an exit status");
        assert_eq!(exit_code(&status), Some(128 + libc::SIGTERM));
        eventually("the group to be gone", || live_members(pgid).is_empty()).await;
    }

    #[tokio::test]
    async fn a_leader_that_ignores_sigterm_is_killed_after_the_grace() {
        let mut child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg("trap '' TERM; echo ready; while true; do sleep 1; done")
            .stdout(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("sh runs");
        let pgid = child.id().expect("running") as i32;
        let mut out = child.stdout.take().expect("piped");
        let mut buf = [0u8; 6];
        tokio::io::AsyncReadExt::read_exact(&mut out, &mut buf).await.expect("the trap is set");
        let status = terminate_group(&mut child, pgid, Duration::from_millis(300)).await.expect("an exit status");
        assert_eq!(exit_code(&status), Some(128 + libc::SIGKILL));
    }
}
