import { describe, expect, it } from "vitest";
import { rows, search, type Line } from "./logrows";

const line = (n: number, stepId: string, text: string): Line => ({ n, at: "2026-12-06T12:00:00.000Z", stepId, stream: "stdout", text, html: text });

describe("the log's rows", () => {
  const steps = [
    { id: "s1", name: "build", status: "succeeded" },
    { id: "s2", name: "test", status: "running" },
  ];
  const byStep = new Map([
    ["s1", [line(1, "s1", "compiling"), line(2, "s1", "done")]],
    ["s2", [line(3, "s2", "test a ... ok"), line(4, "s2", "test B ... FAILED")]],
  ]);

  it("put each step's header before its lines, and a closed step hides them", () => {
    expect(rows(steps, byStep, new Set()).map((r) => (r.kind === "step" ? r.step.name : r.line.n))).toEqual(["build", 1, 2, "test", 3, 4]);
    expect(rows(steps, byStep, new Set(["s1"])).map((r) => (r.kind === "step" ? `${r.step.name}:${r.lines}` : r.line.n))).toEqual([
      "build:2",
      "test:2",
      3,
      4,
    ]);
  });

  it("keep lines of a step the view does not know under their own header", () => {
    const extra = new Map([["s9", [line(5, "s9", "orphan")]]]);
    expect(rows(steps, extra, new Set()).map((r) => (r.kind === "step" ? r.step.name : r.line.text))).toEqual(["build", "test", "other output", "orphan"]);
  });

  it("search every step of the job, case-insensitively", () => {
    expect(search([...byStep.values()].flat(), "test b")).toEqual([4]);
    expect(search([...byStep.values()].flat(), "")).toEqual([]);
  });
});
