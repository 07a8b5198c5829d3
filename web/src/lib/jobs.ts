// What the run page says about a job, derived from the run view alone:
// why it waits, its queue time, and how matrix legs group. Pure functions
// over the API's types, unit-tested in jobs.test.ts.
import type { Schemas } from "../api/client";
import { duration, ms, when } from "./time";

type Job = Schemas["JobView"];
type Execution = Schemas["ExecutionView"];

export const TERMINAL = new Set(["succeeded", "failed", "cancelled", "skipped"]);

export function latestExecution(job: Job): Execution | undefined {
  return job.executions[job.executions.length - 1];
}

/**
 * The try whose log a job's page opens on: the latest that started. A
 * listening job waits for its next event in a new, empty try, and a retry
 * waits out its backoff: until it starts, the log worth reading is the
 * previous one's. The latest when none started.
 */
export function shownExecution(job: Job): Execution | undefined {
  return [...job.executions].reverse().find((e) => e.started_at) ?? latestExecution(job);
}

/** From the latest execution's queueing to its start (so far, while it waits). */
export function queueMs(job: Job, now = Date.now()): number | null {
  const execution = latestExecution(job);
  if (!execution?.queued_at) return null;
  return ms(execution.queued_at, execution.started_at ?? (TERMINAL.has(job.status) ? execution.finished_at : null), now);
}

/**
 * Why a job that has not started waits, in words; `null` once it runs or
 * ended. `jobs` is the attempt's jobs, for what its `needs` wait on.
 */
export function whyWaiting(job: Job, jobs: Job[], now = Date.now()): string | null {
  if (job.status === "running" || TERMINAL.has(job.status)) return null;
  if (job.approval) {
    const approvals = job.approval.decisions.filter((d) => d.decision === "approve").length;
    const from = job.approval.from.length ? ` from ${job.approval.from.join(", ")}` : "";
    const deadline = job.approval.deadline ? `; the wait ends ${when(job.approval.deadline)} (${job.approval.on_timeout})` : "";
    return `Waits for approval: ${approvals} of ${job.approval.required}${from}${deadline}.`;
  }
  if (job.listening) {
    const until = job.listening.until ? ` until ${when(job.listening.until)}` : "";
    return `Listens for ${job.listening.events.join(", ")}${until}.`;
  }
  if (job.concurrency?.waiting) {
    return `Waits for concurrency group “${job.concurrency.group}”: another run holds it.`;
  }
  const execution = latestExecution(job);
  if (job.status === "pending") {
    const open = job.needs.filter((need) => {
      const legs = jobs.filter((other) => other.key === need || groupOf(other.key) === need);
      return legs.length > 0 && legs.some((leg) => !TERMINAL.has(leg.status));
    });
    if (open.length) return `Waits for ${open.join(", ")} to finish.`;
    return "Pending: due to be queued.";
  }
  if (execution?.not_before && Date.parse(execution.not_before) > now) {
    return `Retry ${job.executions.length - 1} of ${job.max_retries} backs off until ${when(execution.not_before)}.`;
  }
  if (execution?.unschedulable) {
    return `Unschedulable: no runner and no provisioner offers ${execution.unschedulable.labels.join(", ")}; it fails at ${when(execution.unschedulable.fails_at)} unless a runner claims it.`;
  }
  const queued = queueMs(job, now);
  return `Queued for a runner with labels ${job.labels.join(", ") || "(none)"}: no capacity free yet${queued != null ? ` (${duration(queued)} so far)` : ""}.`;
}

/** `test (x64, stable)` → `test`; a job that is no matrix leg → null. */
export function groupOf(key: string): string | null {
  const match = /^(.*) \((.*)\)$/.exec(key);
  return match?.[1] ?? null;
}

export interface JobGroup {
  /** The job's name as `needs` names it. */
  name: string;
  /** One job, or a matrix's legs. */
  jobs: Job[];
  needs: string[];
  /** The group's status as its dependants see it (GitHub's rule for matrices). */
  status: Job["status"];
}

/** The attempt's jobs as the graph draws them: a matrix's legs in one node. */
export function groupJobs(jobs: Job[]): JobGroup[] {
  const groups = new Map<string, JobGroup>();
  for (const job of jobs) {
    const name = groupOf(job.key) ?? job.key;
    const group = groups.get(name);
    if (group) {
      group.jobs.push(job);
      for (const need of job.needs) if (!group.needs.includes(need)) group.needs.push(need);
    } else {
      groups.set(name, { name, jobs: [job], needs: [...job.needs], status: job.status });
    }
  }
  for (const group of groups.values()) group.status = aggregate(group.jobs.map((job) => job.status));
  return [...groups.values()];
}

/** Failed if a leg failed, else cancelled, else running/queued while one is, else skipped if all were. */
export function aggregate(statuses: Job["status"][]): Job["status"] {
  if (statuses.length === 1) return statuses[0] ?? "pending";
  if (statuses.includes("failed")) return "failed";
  if (statuses.includes("cancelled")) return "cancelled";
  for (const live of ["running", "queued", "waiting", "pending"] as const) if (statuses.includes(live)) return live;
  if (statuses.length && statuses.every((s) => s === "skipped")) return "skipped";
  return "succeeded";
}

/** Counts of a group's legs by status, for its label: `3 ✓ 1 ✗ 2 …`. */
export function tally(jobs: Job[]): Partial<Record<Job["status"], number>> {
  const counts: Partial<Record<Job["status"], number>> = {};
  for (const job of jobs) counts[job.status] = (counts[job.status] ?? 0) + 1;
  return counts;
}
