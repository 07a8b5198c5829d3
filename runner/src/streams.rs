//! Reads a step's stdout and stderr in one task, so that a secret one stream
//! registers (`::add-mask::`) is in force before any line the other stream
//! printed after it is shown or shipped.
//!
//! Two pipes share no clock, but the writes to them happen in an order: once
//! a line can be read from one pipe, every line written to the other before
//! it is already in that other pipe. So a line read from one stream is held
//! until the other stream has been read to empty after it; the `::add-mask::`
//! lines that reading brings are registered at once, and the held line is
//! masked only when it goes out. Two readers side by side could not promise
//! this: either may be scheduled first, and a busy one yields mid-stream.

use baton_api::logs::LogStream;
use futures::FutureExt;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use uuid::Uuid;

use crate::logs::{self, LogSink};

/// The most lines read from one stream before the other gets its turn.
const READ_BURST: usize = 256;
/// The most lines a stream holds. Past it they go out even though the other
/// stream was not read to empty: that happens only when both streams flood
/// at once, and holding more would cost memory without bound.
const MAX_HELD: usize = 4096;

/// How a step's lines are shown on the runner's terminal.
pub struct Shown {
    /// `job/step`, printed before each line.
    pub prefix: String,
    /// Lines as tracing events (JSON logs) instead of plain lines.
    pub json: bool,
}

/// Prints each line of a step's output with its `[job/step]` prefix and
/// ships it to the job's log, secrets masked in both; an `::add-mask::`
/// line of either stream registers a secret and is shown nowhere. Returns
/// once both streams are closed and every line went out.
pub async fn read_step_output<O, E>(stdout: Option<O>, stderr: Option<E>, shown: Shown, sink: LogSink, step_id: Uuid)
where
    O: AsyncRead + Unpin,
    E: AsyncRead + Unpin,
{
    let mut out = Pipe::new(stdout, LogStream::Stdout);
    let mut err = Pipe::new(stderr, LogStream::Stderr);
    while out.open || err.open {
        // Nothing is held here: wait for the next line of either stream.
        tokio::select! {
            line = out.next_line(), if out.open => out.take(line, &sink),
            line = err.next_line(), if err.open => err.take(line, &sink),
        }
        // Read both streams in turns until every held line could go out.
        while !(out.held.is_empty() && err.held.is_empty()) {
            let out_emptied = out.read_ready(&sink);
            if out_emptied || err.held.len() > MAX_HELD {
                err.show(&shown, &sink, step_id);
            }
            let err_emptied = err.read_ready(&sink);
            if err_emptied || out.held.len() > MAX_HELD {
                out.show(&shown, &sink, step_id);
            }
            // The streams may keep flowing: let the job's other tasks run.
            tokio::task::yield_now().await;
        }
    }
}

/// One of a step's output streams, read a line at a time.
struct Pipe<R> {
    reader: Option<BufReader<R>>,
    stream: LogStream,
    open: bool,
    /// The bytes of a line not read to its end yet.
    partial: Vec<u8>,
    /// Lines read but not shown: the other stream was not read to empty since.
    held: Vec<String>,
}

impl<R: AsyncRead + Unpin> Pipe<R> {
    fn new(reader: Option<R>, stream: LogStream) -> Self {
        let open = reader.is_some();
        Self { reader: reader.map(BufReader::new), stream, open, partial: Vec::new(), held: Vec::new() }
    }

    /// The next line, waiting for it; `None` once the stream is closed.
    /// Cancel-safe: a line cut short stays in `partial` for the next call.
    async fn next_line(&mut self) -> Option<String> {
        let reader = self.reader.as_mut()?;
        let read = reader.read_until(b'\n', &mut self.partial).await;
        self.line_from(read)
    }

    /// Reads the lines that are there now, up to a burst, without waiting.
    /// True if the stream is empty (or closed) after them.
    fn read_ready(&mut self, sink: &LogSink) -> bool {
        for _ in 0..READ_BURST {
            let Some(reader) = self.reader.as_mut().filter(|_| self.open) else { return true };
            // Unconstrained: a task's cooperative budget running out would
            // look like an empty pipe.
            let read = tokio::task::unconstrained(reader.read_until(b'\n', &mut self.partial)).now_or_never();
            match read {
                None => return true,
                Some(read) => {
                    let line = self.line_from(read);
                    self.take(line, sink);
                }
            }
        }
        false
    }

    /// The line a read ended with (the last one may lack its newline).
    fn line_from(&mut self, read: std::io::Result<usize>) -> Option<String> {
        if matches!(read, Ok(0) | Err(_)) && self.partial.is_empty() {
            return None;
        }
        let line = String::from_utf8_lossy(&self.partial).trim_end_matches(['\n', '\r']).to_string();
        self.partial.clear();
        Some(line)
    }

    /// Registers a secret line at once; holds any other line (a workflow
    /// command as a readable line, or not at all).
    fn take(&mut self, line: Option<String>, sink: &LogSink) {
        match line {
            None => self.open = false,
            Some(line) => match line.strip_prefix(logs::ADD_MASK) {
                Some(secret) => sink.add_mask(secret),
                None => match workflow_command(&line) {
                    Some(Some(readable)) => self.held.push(readable),
                    Some(None) => {}
                    None => self.held.push(line),
                },
            },
        }
    }

    /// Masks, prints and ships every held line, in order.
    fn show(&mut self, shown: &Shown, sink: &LogSink, step_id: Uuid) {
        let stream_name = if self.stream == LogStream::Stderr { "stderr" } else { "stdout" };
        for raw in self.held.drain(..) {
            let line = sink.mask(&raw);
            if shown.json {
                tracing::info!(target: "baton_runner::output", step = %shown.prefix, stream = stream_name, line, "output");
            } else {
                println!("[{}] {line}", shown.prefix);
            }
            sink.line(step_id, self.stream, line);
        }
    }
}

/// A GitHub workflow command printed by a step (`::warning file=x::text`),
/// as the line the job's log shows: `Some(None)` for one that shows
/// nothing, `None` for a line that is no such command. Annotations in the
/// run view are not made of them: they are lines of the log.
fn workflow_command(line: &str) -> Option<Option<String>> {
    let rest = line.strip_prefix("::")?;
    let (head, message) = rest.split_once("::")?;
    let (command, properties) = head.split_once(' ').unwrap_or((head, ""));
    let properties = properties.trim();
    let said = |label: &str| {
        let label = if properties.is_empty() { label.to_string() } else { format!("{label} ({properties})") };
        Some(Some(format!("{label}: {message}")))
    };
    match command {
        "group" => Some(Some(format!("> {message}"))),
        "endgroup" => Some(None),
        "debug" => said("debug"),
        "notice" => said("notice"),
        "warning" => said("warning"),
        "error" => said("error"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use super::*;

    /// Reads `stdout` and `stderr`, written in full (and closed) beforehand,
    /// as a step's output; returns what was shipped.
    async fn shipped(stdout: &[u8], stderr: &[u8]) -> Vec<(LogStream, String)> {
        let (sink, mut rx) = logs::test_sink(64 * 1024 * 1024);
        let mut pipes = Vec::new();
        for bytes in [stdout, stderr] {
            let (mut writer, reader) = tokio::io::duplex(bytes.len() + 1);
            writer.write_all(bytes).await.unwrap();
            drop(writer);
            pipes.push(reader);
        }
        let (err, out) = (pipes.pop(), pipes.pop());
        let shown = Shown { prefix: "job/step".into(), json: false };
        read_step_output(out, err, shown, sink, Uuid::nil()).await;
        let mut lines = Vec::new();
        while let Ok(line) = rx.try_recv() {
            lines.push((line.stream, line.text));
        }
        lines
    }

    #[tokio::test]
    async fn a_mask_registered_on_stdout_hides_what_stderr_printed_after_it_even_behind_a_busy_stdout() {
        // Enough stdout before the mask for a reader of its own to exhaust
        // its cooperative budget and yield to a stderr reader.
        let filler = format!("{}\n", "x".repeat(1023));
        let mut stdout = filler.repeat(2048);
        stdout.push_str("::add-mask::s3cret-value\nstdout says s3cret-value\n");
        let lines = shipped(stdout.as_bytes(), b"stderr says s3cret-value\nlast words").await;
        assert!(lines.iter().all(|(_, text)| !text.contains("s3cret")), "a secret leaked");
        let stderr: Vec<&str> =
            lines.iter().filter(|(stream, _)| *stream == LogStream::Stderr).map(|(_, t)| t.as_str()).collect();
        assert_eq!(
            stderr,
            ["stderr says ***", "last words"],
            "every stderr line, in order, the unterminated last one too"
        );
        let stdout_lines = lines.iter().filter(|(stream, _)| *stream == LogStream::Stdout).count();
        assert_eq!(stdout_lines, 2048 + 1, "every stdout line but the mask");
    }

    #[test]
    fn workflow_commands_become_readable_lines_and_other_lines_stay_as_they_are() {
        assert_eq!(workflow_command("::group::Install"), Some(Some("> Install".into())));
        assert_eq!(workflow_command("::endgroup::"), Some(None));
        assert_eq!(workflow_command("::debug::x=1"), Some(Some("debug: x=1".into())));
        assert_eq!(
            workflow_command("::error file=a.rs,line=3::it broke"),
            Some(Some("error (file=a.rs,line=3): it broke".into()))
        );
        assert_eq!(workflow_command("::notice::fyi"), Some(Some("notice: fyi".into())));
        assert_eq!(workflow_command("::warning::careful"), Some(Some("warning: careful".into())));
        assert_eq!(workflow_command("::unknown::x"), None);
        assert_eq!(workflow_command("plain :: line"), None);
    }

    #[tokio::test]
    async fn a_real_steps_pipes_are_read_to_their_last_unterminated_line_with_masks_across_them() {
        let mut child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg("echo '::add-mask::pa55word'; echo 'pw pa55word' >&2; sleep 0.1; echo out; printf 'no newline'")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let (sink, mut rx) = logs::test_sink(1024 * 1024);
        let shown = Shown { prefix: "job/step".into(), json: false };
        read_step_output(child.stdout.take(), child.stderr.take(), shown, sink, Uuid::nil()).await;
        child.wait().await.unwrap();
        let mut lines = Vec::new();
        while let Ok(line) = rx.try_recv() {
            lines.push(line.text);
        }
        lines.sort();
        assert_eq!(lines, ["no newline", "out", "pw ***"]);
    }
}
