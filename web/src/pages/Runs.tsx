import { useLocation } from "preact-iso";
import { useState } from "preact/hooks";
import { errorText, settled, type Schemas } from "../api/client";
import { Status } from "../components/Status";
import { useSession } from "../context";
import { usePoll } from "../lib/poll";
import { duration, ms, when } from "../lib/time";
import { Alert } from "../components/Alert";

const STATUSES: Schemas["RunStatus"][] = ["pending", "running", "succeeded", "failed", "cancelled"];
const PAGE = 25;

/** The runs, newest first, refreshed every 2 s while the tab is visible. */
export function RunsPage() {
  const { api, credentials } = useSession();
  const ws = credentials.workspace;
  const { query, route } = useLocation();
  const status = STATUSES.find((s) => s === query.status);
  const workflow = query.workflow ?? "";
  // The cursors of the pages before this one, for "Newer".
  const [cursors, setCursors] = useState<string[]>([]);
  const cursor = cursors[cursors.length - 1];

  const runs = usePoll<Schemas["RunList"]>(
    async () =>
      settled(
        await api.GET("/v1/workspaces/{ws}/runs", {
          params: { path: { ws }, query: { status, workflow: workflow || undefined, limit: PAGE, cursor } },
        }),
      ),
    2000,
    [ws, status, workflow, cursor],
  );

  function filter(next: { status?: string; workflow?: string }) {
    const params = new URLSearchParams();
    const s = next.status ?? status ?? "";
    const w = next.workflow ?? workflow;
    if (s) params.set("status", s);
    if (w) params.set("workflow", w);
    setCursors([]);
    route(`/runs${params.size ? `?${params}` : ""}`, true);
  }

  // Filtered by the API, so a page is a page of matching runs.
  const items = runs.data?.items ?? [];
  const now = Date.now();

  return (
    <section>
      <h1>Runs</h1>
      <NewRun />
      <div class="filters" role="search">
        <label>
          Status
          <select value={status ?? ""} onChange={(e) => filter({ status: e.currentTarget.value })}>
            <option value="">any</option>
            {STATUSES.map((s) => (
              <option value={s}>{s}</option>
            ))}
          </select>
        </label>
        <label>
          Workflow
          <input type="search" value={workflow} onInput={(e) => filter({ workflow: e.currentTarget.value })} />
        </label>
      </div>
      <Alert message={runs.error} />
      <table class="runs">
        <caption class="visually-hidden">Runs, newest first</caption>
        <thead>
          <tr>
            <th scope="col">Status</th>
            <th scope="col">Workflow</th>
            <th scope="col">Number</th>
            <th scope="col">Trigger</th>
            <th scope="col">Created</th>
            <th scope="col">Queue time</th>
            <th scope="col">Duration</th>
            <th scope="col">Attempt</th>
          </tr>
        </thead>
        <tbody>
          {items.map((run) => (
            <tr data-run={run.id}>
              <td>
                <Status status={run.status} />
              </td>
              <td>
                <a href={`/runs/${run.id}`}>{run.title ?? run.name}</a>
                {run.title ? <span class="muted"> · {run.name}</span> : null}
                {run.pipeline ? <span class="muted"> · {run.pipeline}</span> : null}
              </td>
              <td>#{run.number}</td>
              <td>{run.trigger ?? "api"}</td>
              <td>{when(run.created_at)}</td>
              <td>{duration(ms(run.created_at, run.started_at, now))}</td>
              <td>{duration(ms(run.started_at, run.finished_at, now))}</td>
              <td>{run.current_attempt}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {runs.data && items.length === 0 && <p class="muted">No runs here yet.</p>}
      <nav class="pager" aria-label="Pages of runs">
        <button type="button" disabled={cursors.length === 0} onClick={() => setCursors(cursors.slice(0, -1))}>
          Newer
        </button>
        <button
          type="button"
          disabled={!runs.data?.next_cursor}
          onClick={() => runs.data?.next_cursor && setCursors([...cursors, runs.data.next_cursor])}
        >
          Older
        </button>
      </nav>
    </section>
  );
}

/** A workflow file and its inputs, submitted as a new run. */
function NewRun() {
  const { api, credentials } = useSession();
  const { route } = useLocation();
  const [definition, setDefinition] = useState("");
  const [inputs, setInputs] = useState("");
  const [error, setError] = useState<string | null>(null);

  async function submit(event: Event) {
    event.preventDefault();
    setError(null);
    let parsed: Record<string, unknown> | undefined;
    if (inputs.trim()) {
      try {
        parsed = JSON.parse(inputs) as Record<string, unknown>;
      } catch {
        setError("Inputs must be a JSON object, e.g. {\"target\": \"staging\"}.");
        return;
      }
    }
    const { data, error: failure, response } = await api.POST("/v1/workspaces/{ws}/runs", {
      params: { path: { ws: credentials.workspace } },
      body: { definition, inputs: parsed ?? null },
    });
    if (data) route(`/runs/${data.id}`);
    else setError(errorText(failure, response));
  }

  return (
    <details class="new-run">
      <summary>New run</summary>
      <form onSubmit={submit}>
        <label>
          Workflow file (YAML)
          <textarea name="definition" rows={10} required value={definition} onInput={(e) => setDefinition(e.currentTarget.value)} />
        </label>
        <label>
          Inputs (JSON object, optional)
          <input name="inputs" value={inputs} onInput={(e) => setInputs(e.currentTarget.value)} />
        </label>
        <button type="submit">Start the run</button>
        <Alert message={error} />
      </form>
    </details>
  );
}
