import { useLocation } from "preact-iso";
import { useState } from "preact/hooks";
import { errorText, settled, type Schemas } from "../api/client";
import { Graph } from "../components/Graph";
import { LogView } from "../components/LogView";
import { RunSearch } from "../components/RunSearch";
import { Status } from "../components/Status";
import { TableHead } from "../components/TableHead";
import { useSession } from "../context";
import { queueMs, shownExecution, TERMINAL, whyWaiting } from "../lib/jobs";
import { usePoll } from "../lib/poll";
import { duration, ms, when } from "../lib/time";
import { Alert } from "../components/Alert";

type RunView = Schemas["RunView"];
type Job = Schemas["JobView"];

/** A run: its graph, jobs, why they wait, actions, logs, artifacts and every attempt. */
export function RunPage({ runId, jobId }: { runId: string; jobId?: string }) {
  const { api, credentials } = useSession();
  const ws = credentials.workspace;
  const { query, route } = useLocation();
  const [live, setLive] = useState(true);
  const run = usePoll<RunView>(
    async () => {
      const { data, error, response } = await api.GET("/v1/workspaces/{ws}/runs/{run_id}", {
        params: { path: { ws, run_id: runId } },
      });
      // A run that ended changes only when someone reruns it (from here,
      // which refreshes): polling it further would cost for nothing.
      if (data) setLive(!TERMINAL.has(data.status));
      return settled({ data, error, response });
    },
    2000,
    [ws, runId],
    live,
  );
  const [open, setOpen] = useState<Set<string>>(new Set());
  const data = run.data;
  if (!data) {
    return <section>{run.error ? <Alert message={run.error} /> : <p>Loading…</p>}</section>;
  }
  const attemptNo = Number(query.attempt ?? data.current_attempt);
  const attempt = data.attempts.find((a) => a.attempt === attemptNo) ?? data.attempts[data.attempts.length - 1];
  if (!attempt) return <section>No attempt yet.</section>;
  const jobs = attempt.jobs;
  const selected = jobs.find((j) => j.id === jobId);
  const suffix = attempt.attempt !== data.current_attempt ? `?attempt=${attempt.attempt}` : "";
  const href = (job: Job) => `/runs/${runId}/jobs/${job.id}${suffix}`;
  const refresh = async () => {
    setLive(true);
    await run.refresh();
  };

  return (
    <section class="run">
      <h1>
        {data.title ?? data.name} #{data.number} <Status status={data.status} />
      </h1>
      <p class="muted">
        {data.title ? `${data.name} · ` : ""}
        {data.trigger ? `${data.trigger.kind}${data.trigger.ref ? ` of ${data.trigger.ref}` : ""}${data.trigger.actor ? ` by ${data.trigger.actor}` : ""}` : ""}
        {data.pipeline ? ` · pipeline ${data.pipeline.name}` : ""} · created {when(data.created_at)}
        {data.created_by ? ` by ${data.created_by}` : ""} · queued {duration(ms(data.created_at, data.started_at))} · ran{" "}
        {duration(ms(data.started_at, data.finished_at))}
      </p>
      <RunActions run={data} onDone={refresh} />
      <label class="attempt">
        Attempt{" "}
        <select value={attempt.attempt} onChange={(e) => route(`/runs/${runId}${jobId ? `/jobs/${jobId}` : ""}?attempt=${e.currentTarget.value}`)}>
          {data.attempts.map((a) => (
            <option value={a.attempt}>
              {a.attempt} ({a.status}
              {a.rerun_mode ? `, rerun ${a.rerun_mode}` : ""})
            </option>
          ))}
        </select>
      </label>
      <Graph
        jobs={jobs}
        href={href}
        selected={jobId}
        open={open}
        onToggle={(name) => {
          const next = new Set(open);
          if (next.has(name)) next.delete(name);
          else next.add(name);
          setOpen(next);
        }}
      />
      <JobTable jobs={jobs} href={href} />
      <RunSearch runId={runId} attempt={attempt.attempt} jobs={jobs} href={href} />
      {selected && <JobDetail run={data} attempt={attempt.attempt} job={selected} onDone={refresh} />}
      <Artifacts run={data} />
    </section>
  );
}

function RunActions({ run, onDone }: { run: RunView; onDone: () => Promise<void> }) {
  const { api, credentials } = useSession();
  const [error, setError] = useState<string | null>(null);
  const path = { ws: credentials.workspace, run_id: run.id };
  const ended = TERMINAL.has(run.status);

  async function act(what: "cancel" | "failed" | "all") {
    setError(null);
    const { error: failure, response } =
      what === "cancel"
        ? await api.POST("/v1/workspaces/{ws}/runs/{run_id}/cancel", { params: { path } })
        : await api.POST("/v1/workspaces/{ws}/runs/{run_id}/rerun", { params: { path }, body: { mode: what } });
    if (!response.ok) setError(errorText(failure, response));
    await onDone();
  }

  return (
    <div class="actions">
      <button type="button" disabled={ended} onClick={() => act("cancel")}>
        Cancel run
      </button>
      <button type="button" disabled={!ended || run.status === "succeeded"} onClick={() => act("failed")}>
        Rerun failed jobs
      </button>
      <button type="button" disabled={!ended} onClick={() => act("all")}>
        Rerun all jobs
      </button>
      <Alert message={error} />
    </div>
  );
}

function JobTable({ jobs, href }: { jobs: Job[]; href: (job: Job) => string }) {
  const now = Date.now();
  return (
    <table class="jobs">
      <caption class="visually-hidden">Jobs of this attempt</caption>
      <TableHead columns={["Job", "Status", "Queue time", "Duration", "Tries", "Why it waits"]} />
      <tbody>
        {jobs.map((job) => (
          <tr data-job={job.key}>
            <td>
              <a href={href(job)}>{job.key}</a>
              {job.name && job.name !== job.key ? <span class="muted"> {job.name}</span> : null}
            </td>
            <td>
              <Status status={job.status} soft={job.soft_failed} />
              {job.status_reason ? <span class="muted"> ({job.status_reason.replace(/_/g, " ")})</span> : null}
              {job.status_message ? <div class="muted">{job.status_message}</div> : null}
            </td>
            <td>{duration(queueMs(job, now))}</td>
            <td>{duration(job.duration_ms)}</td>
            <td>{job.executions.length}</td>
            <td class="why">{whyWaiting(job, jobs, now) ?? ""}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function JobDetail({ run, attempt, job, onDone }: { run: RunView; attempt: number; job: Job; onDone: () => Promise<void> }) {
  const [executionId, setExecutionId] = useState<string | null>(null);
  const execution = job.executions.find((e) => e.id === executionId) ?? shownExecution(job);
  const outputs = Object.entries(job.outputs ?? {});
  return (
    <section class="job" aria-label={`Job ${job.key}`}>
      <h2>
        {job.key} <Status status={job.status} soft={job.soft_failed} />
      </h2>
      {job.name && job.name !== job.key ? <p class="muted">{job.name}</p> : null}
      <p class="why">{whyWaiting(job, [job]) ?? ""}</p>
      {job.environment && (
        <p data-testid="environment">
          Environment: <strong>{job.environment.name}</strong>
          {job.environment.url ? (
            /^https?:\/\//.test(job.environment.url) ? (
              <>
                {" "}
                · <a href={job.environment.url} rel="noopener noreferrer">{job.environment.url}</a>
              </>
            ) : (
              <span class="muted"> · {job.environment.url}</span>
            )
          ) : null}
        </p>
      )}
      {job.approval && <Approval run={run} job={job} onDone={onDone} />}
      {job.listening && <Listening run={run} job={job} onDone={onDone} />}
      {job.executions.length > 1 && (
        <label>
          Try{" "}
          <select value={execution?.id} onChange={(e) => setExecutionId(e.currentTarget.value)}>
            {job.executions.map((e, i) => (
              <option value={e.id}>
                {i + 1} ({e.status})
              </option>
            ))}
          </select>
        </label>
      )}
      {outputs.length > 0 && (
        <dl class="outputs">
          {outputs.map(([name, value]) => (
            <>
              <dt>{name}</dt>
              <dd>{typeof value === "string" ? value : JSON.stringify(value)}</dd>
            </>
          ))}
        </dl>
      )}
      {execution && execution.steps.length > 0 && (
        <ol class="steps">
          {execution.steps.map((step) => (
            <li>
              <Status status={step.status} soft={step.soft_failed} /> {step.name ?? "step"} · {duration(step.duration_ms)}
              {step.exit_code != null && step.exit_code !== 0 ? ` · exit ${step.exit_code}` : ""}
            </li>
          ))}
        </ol>
      )}
      {/* An approval job runs on no runner: it has no log. */}
      {execution && execution.status !== "pending" && !job.approval && (
        <LogView key={execution.id} runId={run.id} job={job} attempt={attempt} execution={execution} />
      )}
    </section>
  );
}

function Approval({ run, job, onDone }: { run: RunView; job: Job; onDone: () => Promise<void> }) {
  const { api, credentials } = useSession();
  const approval = job.approval;
  const [comment, setComment] = useState("");
  const [values, setValues] = useState<Record<string, unknown>>({});
  const [error, setError] = useState<string | null>(null);
  if (!approval) return null;
  const approvals = approval.decisions.filter((d) => d.decision === "approve").length;

  async function decide(decision: Schemas["Decision"]) {
    setError(null);
    const { error: failure, response } = await api.POST("/v1/workspaces/{ws}/runs/{run_id}/jobs/{job_id}/approval", {
      params: { path: { ws: credentials.workspace, run_id: run.id, job_id: job.id } },
      body: { decision, comment: comment || null, inputs: values },
    });
    if (!response.ok) setError(errorText(failure, response));
    await onDone();
  }

  return (
    <section class="approval" aria-label="Approval">
      <h3>
        Approval: {approvals} of {approval.required}
        {approval.from.length ? ` from ${approval.from.join(", ")}` : " from any operator but the run's creator"}
      </h3>
      <ul>
        {approval.decisions.map((d) => (
          <li>
            {d.by} {d.decision === "approve" ? "approved" : "rejected"} at {when(d.at)}
            {d.comment ? `: “${d.comment}”` : ""}
          </li>
        ))}
      </ul>
      {job.status === "waiting" && (
        <form onSubmit={(e) => e.preventDefault()}>
          {Object.entries(approval.inputs).map(([name, input]) => (
            <label>
              {name}
              {input.description ? ` (${input.description})` : ""}
              {input.type === "choice" ? (
                <select onChange={(e) => setValues({ ...values, [name]: e.currentTarget.value })}>
                  <option value="">choose…</option>
                  {(input.options ?? []).map((o) => (
                    <option value={o}>{o}</option>
                  ))}
                </select>
              ) : input.type === "boolean" ? (
                <input type="checkbox" onChange={(e) => setValues({ ...values, [name]: e.currentTarget.checked })} />
              ) : (
                <input onInput={(e) => setValues({ ...values, [name]: e.currentTarget.value })} />
              )}
            </label>
          ))}
          <label>
            Comment
            <input value={comment} onInput={(e) => setComment(e.currentTarget.value)} />
          </label>
          <button type="button" onClick={() => decide("approve")}>
            Approve
          </button>
          <button type="button" onClick={() => decide("reject")}>
            Reject
          </button>
        </form>
      )}
      <Alert message={error} />
    </section>
  );
}

function Listening({ run, job, onDone }: { run: RunView; job: Job; onDone: () => Promise<void> }) {
  const { api, credentials } = useSession();
  const listening = job.listening;
  const [name, setName] = useState(listening?.events[0] ?? "");
  const [ref, setRef] = useState("");
  const [payload, setPayload] = useState("");
  const [disposition, setDisposition] = useState<Schemas["Disposition"]>("fire");
  const [message, setMessage] = useState<string | null>(null);
  if (!listening) return null;

  async function send(event: Event) {
    event.preventDefault();
    let parsed: unknown;
    try {
      parsed = payload.trim() ? JSON.parse(payload) : null;
    } catch {
      setMessage("The payload must be JSON.");
      return;
    }
    const { error, response } = await api.POST("/v1/workspaces/{ws}/runs/{run_id}/jobs/{job_id}/events", {
      params: { path: { ws: credentials.workspace, run_id: run.id, job_id: job.id } },
      body: { name, disposition, ref: ref || crypto.randomUUID(), payload: parsed },
    });
    setMessage(response.ok ? "Sent." : errorText(error, response));
    await onDone();
  }

  return (
    <form class="listening" onSubmit={send} aria-label="Send an event">
      <label>
        Event
        <select value={name} onChange={(e) => setName(e.currentTarget.value)}>
          {listening.events.map((e) => (
            <option value={e}>{e}</option>
          ))}
        </select>
      </label>
      <label>
        Ref (its own id; a repeat is delivered once)
        <input value={ref} onInput={(e) => setRef(e.currentTarget.value)} />
      </label>
      <label>
        Disposition
        <select value={disposition} onChange={(e) => setDisposition(e.currentTarget.value === "resolve" ? "resolve" : "fire")}>
          <option value="fire">fire: run the job for it</option>
          <option value="resolve">resolve: end the listening</option>
        </select>
      </label>
      <label>
        Payload (JSON)
        <input value={payload} onInput={(e) => setPayload(e.currentTarget.value)} />
      </label>
      <button type="submit">Send event</button>
      {message && <p role="status">{message}</p>}
    </form>
  );
}

function Artifacts({ run }: { run: RunView }) {
  const { api, credentials } = useSession();
  const [error, setError] = useState<string | null>(null);
  const artifacts = run.artifacts ?? [];
  if (!artifacts.length) return null;

  async function download(name: string) {
    setError(null);
    const { data, error: failure, response } = await api.GET("/v1/workspaces/{ws}/runs/{run_id}/artifacts/{name}", {
      params: { path: { ws: credentials.workspace, run_id: run.id, name } },
    });
    if (data) window.location.assign(data.url);
    else setError(errorText(failure, response));
  }

  return (
    <section class="artifacts">
      <h2>Artifacts</h2>
      <table>
        <TableHead columns={["Name", "Size", "Job", "Status", "Expires"]} hidden="Download" />
        <tbody>
          {artifacts.map((a) => (
            <tr>
              <td>{a.name}</td>
              <td>{a.bytes.toLocaleString()} bytes</td>
              <td>{a.job_key}</td>
              <td>{a.status}</td>
              <td>{when(a.expires_at)}</td>
              <td>
                <button type="button" disabled={a.status !== "stored"} onClick={() => download(a.name)}>
                  Download {a.name}
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <Alert message={error} />
    </section>
  );
}
