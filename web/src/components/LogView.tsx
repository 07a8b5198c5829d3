// One execution's log: every page read in order until the log is complete
// (never cut), live while the job runs (each read waits up to 10 s for new
// lines, so a shipped line shows within the read's turnaround), steps
// collapsible, ANSI colours (ansi_up escapes the text), per-line timestamps,
// `#L<n>` links that survive a reload, search across the job's steps with a
// count and next/previous, and the raw text for download.
import { AnsiUp } from "ansi_up";
import { useLocation } from "preact-iso";
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { errorText, type Schemas } from "../api/client";
import { useSession } from "../context";
import { rows as rowsOf, search, type Line, type StepInfo } from "../lib/logrows";
import { clock } from "../lib/time";
import { useVirtualizer } from "../lib/virtual";
import { Alert } from "./Alert";

const ROW = 20;
/** A page shorter than this answered everything shipped so far. */
const CAUGHT_UP = 1000;

export function LogView({
  runId,
  job,
  attempt,
  execution,
}: {
  runId: string;
  job: Schemas["JobView"];
  attempt: number;
  execution: Schemas["ExecutionView"];
}) {
  const { api, credentials } = useSession();
  const [version, bump] = useState(0);
  const [complete, setComplete] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const store = useRef({ lines: [] as Line[], byStep: new Map<string, Line[]>(), ansi: new Map<string, AnsiUp>() });
  const [closed, setClosed] = useState<Set<string>>(new Set());
  const [timestamps, setTimestamps] = useState(false);
  // `?q=`: a search across the run's jobs led here; its needle is kept.
  const { query } = useLocation();
  const [needle, setNeedle] = useState(query.q ?? "");
  const [hit, setHit] = useState(0);
  const [target, setTarget] = useState<number | null>(() => lineFromHash());
  const scroller = useRef<HTMLDivElement>(null);

  useEffect(() => {
    let stopped = false;
    store.current = { lines: [], byStep: new Map(), ansi: new Map() };
    setComplete(false);
    setError(null);
    bump((v) => v + 1);
    void (async () => {
      let cursor: string | undefined;
      let idle = false;
      let caughtUp = false;
      while (!stopped) {
        const query: { attempt: number; execution: string; cursor?: string; wait_s: number } = {
          attempt,
          execution: execution.id,
          cursor,
          wait_s: idle || caughtUp ? 10 : 0,
        };
        const read = await api.GET("/v1/workspaces/{ws}/runs/{run_id}/jobs/{job_id}/logs", {
          params: {
            path: { ws: credentials.workspace, run_id: runId, job_id: job.id },
            query,
          },
        });
        if (stopped) return;
        const data: Schemas["LogPage"] | undefined = read.data;
        if (!data) {
          setError(errorText(read.error, read.response));
          await new Promise((r) => setTimeout(r, 2000));
          continue;
        }
        setError(null);
        append(store.current, data.lines);
        cursor = data.next_cursor;
        idle = data.lines.length === 0;
        bump((v) => v + 1);
        if (data.complete) {
          setComplete(true);
          return;
        }
        // Caught up with a running job: the next read waits on the server
        // (`wait_s`) for new lines; a short pause first keeps a chatty step
        // to one read a second instead of one per line it prints.
        caughtUp = data.lines.length < CAUGHT_UP;
        if (!idle && caughtUp) await new Promise((r) => setTimeout(r, 1000));
      }
    })();
    return () => {
      stopped = true;
    };
  }, [api, credentials.workspace, runId, job.id, attempt, execution.id]);

  const steps: StepInfo[] = execution.steps.map((s, i) => ({ id: s.id, name: s.name ?? `step ${i + 1}`, status: s.status }));
  const rows = useMemo(() => rowsOf(steps, store.current.byStep, closed), [version, closed, execution.steps]);
  const hits = useMemo(() => search(store.current.lines, needle), [version, needle]);
  const virtualizer = useVirtualizer(rows.length, () => scroller.current, ROW);

  // A `#L<n>` target (from a link or a reload), or the current search hit:
  // open its step and bring it into view once its line has arrived.
  useEffect(() => {
    if (target == null) return;
    const line = store.current.lines[target - 1];
    if (!line) return;
    if (closed.has(line.stepId)) {
      const next = new Set(closed);
      next.delete(line.stepId);
      setClosed(next);
      return;
    }
    const index = rows.findIndex((r) => r.kind === "line" && r.line.n === target);
    if (index >= 0) virtualizer.scrollToIndex(index, { align: "center" });
  }, [target, rows]);

  // Arriving from a search of the whole run: show its first match once the log has it.
  const [jumped, setJumped] = useState(!query.q);
  useEffect(() => {
    if (jumped || !hits.length) return;
    setJumped(true);
    setTarget(hits[0] ?? null);
  }, [hits, jumped]);

  function goto(delta: number) {
    if (!hits.length) return;
    const next = (hit + delta + hits.length) % hits.length;
    setHit(next);
    setTarget(hits[next] ?? null);
  }

  function toggle(stepId: string) {
    const next = new Set(closed);
    if (next.has(stepId)) next.delete(stepId);
    else next.add(stepId);
    setClosed(next);
  }

  function download() {
    const text = store.current.lines.map((l) => l.text).join("\n") + "\n";
    const url = URL.createObjectURL(new Blob([text], { type: "text/plain" }));
    const a = document.createElement("a");
    a.href = url;
    a.download = `${job.key}.log`;
    a.click();
    URL.revokeObjectURL(url);
  }

  const current = hits[hit];
  return (
    <section class="log" aria-label={`Log of ${job.key}`}>
      <div class="log-tools">
        <label>
          <input type="checkbox" checked={timestamps} onChange={(e) => setTimestamps(e.currentTarget.checked)} /> Timestamps
        </label>
        <label>
          Search this job
          <input
            type="search"
            value={needle}
            onInput={(e) => {
              setNeedle(e.currentTarget.value);
              setHit(0);
            }}
            onKeyDown={(e) => {
              if (e.key === "Enter") {
                e.preventDefault();
                // The first Enter shows the current match; the next ones move on.
                if (!e.shiftKey && current !== undefined && target !== current) setTarget(current);
                else goto(e.shiftKey ? -1 : 1);
              }
            }}
          />
        </label>
        <span class="count" aria-live="polite" data-testid="match-count">
          {needle ? `${hits.length ? hit + 1 : 0} of ${hits.length}` : ""}
        </span>
        <button type="button" onClick={() => goto(-1)} disabled={!hits.length}>
          Previous
        </button>
        <button type="button" onClick={() => goto(1)} disabled={!hits.length}>
          Next
        </button>
        <button type="button" onClick={download} disabled={!complete}>
          Download raw
        </button>
        <span class="muted" data-testid="log-state">
          {store.current.lines.length} lines{complete ? "" : " · live"}
        </span>
      </div>
      <Alert message={error} />
      <div class="log-lines" ref={scroller} tabIndex={0} data-testid="log-lines">
        <div style={{ height: `${virtualizer.getTotalSize()}px`, position: "relative" }}>
          {virtualizer.getVirtualItems().map((item) => {
            const row = rows[item.index];
            if (!row) return null;
            const style = { transform: `translateY(${item.start}px)`, height: `${ROW}px` };
            if (row.kind === "step") {
              const open = !closed.has(row.step.id);
              return (
                <div class="row step-row" style={style}>
                  <button type="button" aria-expanded={open} onClick={() => toggle(row.step.id)}>
                    {open ? "▾" : "▸"} {row.step.name}
                  </button>
                  <span class="muted">
                    {" "}
                    {row.step.status} · {row.lines} lines
                  </span>
                </div>
              );
            }
            const line = row.line;
            return (
              <div
                class={`row line${line.n === current && needle ? " hit" : ""}${line.n === target ? " target" : ""}${line.stream === "stderr" ? " stderr" : ""}`}
                style={style}
                data-line={line.n}
              >
                <a class="ln" href={`#L${line.n}`} onClick={() => setTarget(line.n)}>
                  {line.n}
                </a>
                {timestamps && <time dateTime={line.at}>{clock(line.at)}</time>}
                <span class="text" dangerouslySetInnerHTML={{ __html: line.html }} />
              </div>
            );
          })}
        </div>
      </div>
    </section>
  );
}

function append(store: { lines: Line[]; byStep: Map<string, Line[]>; ansi: Map<string, AnsiUp> }, lines: Schemas["LogLine"][]) {
  for (const l of lines) {
    // One converter a step: a colour set on one line carries to the next, as in a terminal.
    let ansi = store.ansi.get(l.step_id);
    if (!ansi) {
      ansi = new AnsiUp();
      ansi.use_classes = true;
      store.ansi.set(l.step_id, ansi);
    }
    const line: Line = { n: store.lines.length + 1, at: l.at, stepId: l.step_id, stream: l.stream, text: l.text, html: ansi.ansi_to_html(l.text) };
    store.lines.push(line);
    const list = store.byStep.get(l.step_id);
    if (list) list.push(line);
    else store.byStep.set(l.step_id, [line]);
  }
}

function lineFromHash(): number | null {
  const match = /^#L(\d+)$/.exec(window.location.hash);
  return match ? Number(match[1]) : null;
}
