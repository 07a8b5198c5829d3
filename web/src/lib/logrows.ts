// A job's log as the viewer's rows: each step a header row, then (when the
// step is open) its lines. Pure, so the row model and the search are tested
// without a browser (logrows.test.ts).
export interface Line {
  /** 1-based position in the job's whole log: `#L<n>` links to it. */
  n: number;
  at: string;
  stepId: string;
  stream: string;
  text: string;
  html: string;
}

export interface StepInfo {
  id: string;
  name: string;
  status: string;
}

export type Row = { kind: "step"; step: StepInfo; lines: number } | { kind: "line"; line: Line };

export function rows(steps: StepInfo[], byStep: Map<string, Line[]>, closed: Set<string>): Row[] {
  const out: Row[] = [];
  const known = new Set(steps.map((s) => s.id));
  const extra: StepInfo[] = [...byStep.keys()].filter((id) => !known.has(id)).map((id) => ({ id, name: "other output", status: "" }));
  for (const step of [...steps, ...extra]) {
    const lines = byStep.get(step.id) ?? [];
    out.push({ kind: "step", step, lines: lines.length });
    if (!closed.has(step.id)) for (const line of lines) out.push({ kind: "line", line });
  }
  return out;
}

/** The line numbers whose text holds `needle` (case-insensitive), in order. */
export function search(lines: Line[], needle: string): number[] {
  if (!needle) return [];
  const lower = needle.toLowerCase();
  const hits: number[] = [];
  for (const line of lines) if (line.text.toLowerCase().includes(lower)) hits.push(line.n);
  return hits;
}
