// Search across every job of an attempt: each job's whole log is read (page
// by page, as the log view does) and its matches counted; a result links to
// the job's log with the search filled in, where previous/next walk them.
import { useState } from "preact/hooks";
import { errorText, type Schemas } from "../api/client";
import { useSession } from "../context";
import { shownExecution } from "../lib/jobs";
import { Alert } from "./Alert";

interface Found {
  job: Schemas["JobView"];
  matches: number;
}

/** Jobs searched at once: a wide fan-out must not open hundreds of reads. */
const PARALLEL = 4;

export function RunSearch({ runId, attempt, jobs, href }: { runId: string; attempt: number; jobs: Schemas["JobView"][]; href: (job: Schemas["JobView"]) => string }) {
  const { api, credentials } = useSession();
  const [needle, setNeedle] = useState("");
  const [found, setFound] = useState<Found[] | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  async function count(job: Schemas["JobView"], lower: string): Promise<number> {
    const execution = shownExecution(job);
    if (!execution || execution.status === "pending") return 0;
    let cursor: string | undefined;
    let matches = 0;
    for (;;) {
      const read = await api.GET("/v1/workspaces/{ws}/runs/{run_id}/jobs/{job_id}/logs", {
        params: { path: { ws: credentials.workspace, run_id: runId, job_id: job.id }, query: { attempt, execution: execution.id, cursor } },
      });
      const page: Schemas["LogPage"] | undefined = read.data;
      if (!page) throw new Error(`${job.key}: ${errorText(read.error, read.response)}`);
      for (const line of page.lines) if (line.text.toLowerCase().includes(lower)) matches += 1;
      // A running job's log so far: what is stored now is what is searched.
      if (page.complete || page.lines.length === 0) return matches;
      cursor = page.next_cursor;
    }
  }

  async function search(event: Event) {
    event.preventDefault();
    const lower = needle.trim().toLowerCase();
    if (!lower) return;
    setBusy(true);
    setError(null);
    setFound(null);
    try {
      const results: Found[] = [];
      const queue = [...jobs];
      await Promise.all(
        Array.from({ length: PARALLEL }, async () => {
          for (let job = queue.shift(); job; job = queue.shift()) {
            const matches = await count(job, lower);
            if (matches > 0) results.push({ job, matches });
          }
        }),
      );
      results.sort((a, b) => jobs.indexOf(a.job) - jobs.indexOf(b.job));
      setFound(results);
    } catch (e) {
      setError(String((e as Error).message ?? e));
    } finally {
      setBusy(false);
    }
  }

  const total = found?.reduce((sum, f) => sum + f.matches, 0) ?? 0;
  return (
    <form class="run-search" role="search" onSubmit={search}>
      <label>
        Search every job's log
        <input type="search" value={needle} onInput={(e) => setNeedle(e.currentTarget.value)} />
      </label>
      <button type="submit" disabled={busy}>
        {busy ? "Searching…" : "Search"}
      </button>
      {found && (
        <p role="status" data-testid="run-search-count">
          {total} match{total === 1 ? "" : "es"} in {found.length} job{found.length === 1 ? "" : "s"}
        </p>
      )}
      {found && found.length > 0 && (
        <ul>
          {found.map(({ job, matches }) => (
            <li>
              <a href={`${href(job)}${href(job).includes("?") ? "&" : "?"}q=${encodeURIComponent(needle.trim())}`}>
                {job.key}: {matches} match{matches === 1 ? "" : "es"}
              </a>
            </li>
          ))}
        </ul>
      )}
      <Alert message={error} />
    </form>
  );
}
