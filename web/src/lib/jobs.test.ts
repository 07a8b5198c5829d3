import { describe, expect, it } from "vitest";
import type { Schemas } from "../api/client";
import { aggregate, groupJobs, groupOf, queueMs, shownExecution, whyWaiting } from "./jobs";

type Job = Schemas["JobView"];

function job(key: string, patch: Partial<Job> = {}): Job {
  return {
    id: `id-${key}`,
    key,
    status: "pending",
    labels: ["linux", "x64"],
    needs: [],
    carried_over: false,
    executions: [],
    ...patch,
  };
}

const now = Date.parse("2026-12-06T12:00:00Z");

describe("why a job waits", () => {
  it("names the jobs it needs that have not finished, a matrix's legs included", () => {
    const jobs = [
      job("build", { status: "succeeded" }),
      job("test (a)", { status: "running" }),
      job("test (b)", { status: "succeeded" }),
      job("deploy", { needs: ["build", "test"] }),
    ];
    expect(whyWaiting(jobs[3]!, jobs, now)).toBe("Waits for test to finish.");
  });

  it("says who must approve and how many approvals it has", () => {
    const waiting = job("deploy", {
      status: "waiting",
      approval: {
        required: 2,
        from: ["release"],
        inputs: {},
        on_timeout: "fail",
        decisions: [{ by: "ann", decision: "approve", at: "2026-12-06T11:00:00Z" }],
      },
    });
    expect(whyWaiting(waiting, [waiting], now)).toBe("Waits for approval: 1 of 2 from release.");
  });

  it("tells an unschedulable job from one waiting for capacity, with the queue time", () => {
    const queuedAt = "2026-12-06T11:59:00Z";
    const base = { id: "e", status: "queued" as const, queued_at: queuedAt, steps: [] };
    const nobody = job("gpu", {
      status: "queued",
      executions: [{ ...base, unschedulable: { labels: ["gpu"], fails_at: "2026-12-06T12:10:00Z" } }],
    });
    expect(whyWaiting(nobody, [nobody], now)).toMatch(/^Unschedulable: no runner and no provisioner offers gpu/);
    const busy = job("lint", { status: "queued", executions: [base] });
    expect(whyWaiting(busy, [busy], now)).toBe("Queued for a runner with labels linux, x64: no capacity free yet (1m 00s so far).");
    expect(queueMs(busy, now)).toBe(60_000);
  });

  it("is silent once the job runs or ended", () => {
    expect(whyWaiting(job("a", { status: "running" }), [], now)).toBeNull();
    expect(whyWaiting(job("a", { status: "skipped" }), [], now)).toBeNull();
  });

  it("names a concurrency group that holds it", () => {
    const held = job("deploy", { status: "pending", concurrency: { group: "prod", waiting: true } });
    expect(whyWaiting(held, [held], now)).toBe("Waits for concurrency group “prod”: another run holds it.");
  });
});

describe("matrix legs", () => {
  it("group under their job's name with GitHub's aggregate status", () => {
    const legs = Array.from({ length: 256 }, (_, i) => job(`test (${i})`, { status: i === 7 ? "failed" : "succeeded", needs: ["build"] }));
    const groups = groupJobs([job("build", { status: "succeeded" }), ...legs]);
    expect(groups.map((g) => [g.name, g.jobs.length, g.status])).toEqual([
      ["build", 1, "succeeded"],
      ["test", 256, "failed"],
    ]);
    expect(groups[1]!.needs).toEqual(["build"]);
  });

  it("reads the group from a leg's key and leaves other names alone", () => {
    expect(groupOf("test (x64, stable)")).toBe("test");
    expect(groupOf("deploy")).toBeNull();
    expect(aggregate(["succeeded", "running"])).toBe("running");
    expect(aggregate(["skipped", "skipped"])).toBe("skipped");
  });
});

describe("the try a job's page opens on", () => {
  const tried = (id: string, started?: string) => ({
    id,
    status: (started ? "succeeded" : "waiting") as Schemas["ExecutionView"]["status"],
    started_at: started ?? null,
    steps: [],
  });
  it("is the latest that started, past a listening job's empty try", () => {
    const listening = job("on-review", {
      status: "waiting",
      executions: [tried("1", "2026-12-06T11:00:00Z"), tried("2", "2026-12-06T11:05:00Z"), tried("3")],
    });
    expect(shownExecution(listening)?.id).toBe("2");
  });
  it("is the latest when none started", () => {
    expect(shownExecution(job("new", { executions: [tried("1")] }))?.id).toBe("1");
    expect(shownExecution(job("none"))).toBeUndefined();
  });
});
