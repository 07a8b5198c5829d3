//! `baton run logs`: the jobs' log lines, job after job, followed if asked.

use std::process::ExitCode;

use baton_client::operators::Operator;
use uuid::Uuid;

use super::answer::CliError;

/// How long one read of `run logs --follow` waits for new lines.
const FOLLOW_WAIT_S: u64 = 20;

/// Prints the logs of the attempt's jobs (or of one), job after job: each
/// from its first line to its last, following a running one if asked.
pub(super) async fn logs(
    operator: &Operator,
    workspace: &str,
    run: Uuid,
    only: Option<&str>,
    attempt: Option<u32>,
    follow: bool,
    json: bool,
) -> Result<ExitCode, CliError> {
    let view = operator.get_run(workspace, run).await?;
    let wanted = attempt.unwrap_or(view.header.current_attempt);
    let attempt = view
        .attempts
        .iter()
        .find(|a| a.attempt == wanted)
        .ok_or_else(|| CliError::Usage(format!("run {run} has no attempt {wanted}")))?;
    let jobs: Vec<_> = attempt.jobs.iter().filter(|j| only.is_none_or(|key| j.key == key)).collect();
    if jobs.is_empty() {
        return Err(CliError::Usage(format!("no job {} in attempt {wanted}", only.unwrap_or("at all"))));
    }
    for job in jobs {
        let names: std::collections::HashMap<Uuid, String> = job
            .executions
            .iter()
            .flat_map(|e| e.steps.iter().enumerate())
            .map(|(i, s)| (s.id, s.name.clone().unwrap_or_else(|| format!("step-{}", i + 1))))
            .collect();
        // Every execution's log, oldest first: a retried job's tries, a
        // listening job's events (the last one is followed).
        let executions: Vec<Option<Uuid>> = match job.executions.len() {
            0 | 1 => vec![None],
            _ => job.executions.iter().map(|e| Some(e.id)).collect(),
        };
        let last = executions.len() - 1;
        for (index, execution) in executions.into_iter().enumerate() {
            let follow = follow && index == last;
            let mut cursor = "0.0".to_string();
            loop {
                let wait_s = if follow { FOLLOW_WAIT_S } else { 0 };
                let page = operator.read_logs(workspace, run, job.id, wanted, execution, &cursor, wait_s).await?;
                for line in &page.lines {
                    if json {
                        print_line_json(line);
                    } else {
                        let step = names.get(&line.step_id).map_or("?", String::as_str);
                        println!("[{}/{step}] {}", job.key, line.text);
                    }
                }
                cursor = page.next_cursor.clone();
                if page.complete || (!follow && page.lines.is_empty()) {
                    break;
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_line_json(line: &baton_api::logs::LogLine) {
    match serde_json::to_string(line) {
        Ok(text) => println!("{text}"),
        Err(err) => eprintln!("baton: cannot print a line: {err}"),
    }
}
