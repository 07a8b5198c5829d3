// The attempt's jobs as a graph: `needs` are the edges, a matrix's legs are
// one node (a 256-leg fan-out stays one box that lists its legs when
// opened). Laid out by dagre; nodes are links, so the graph is reachable
// from the keyboard and read by screen readers like any list of links.
import dagre from "@dagrejs/dagre";
import { useMemo } from "preact/hooks";
import type { Schemas } from "../api/client";
import { groupJobs, tally, type JobGroup } from "../lib/jobs";
import { Status } from "./Status";

const NODE_W = 200;
const NODE_H = 56;

export function Graph({
  jobs,
  href,
  selected,
  open,
  onToggle,
}: {
  jobs: Schemas["JobView"][];
  href: (job: Schemas["JobView"]) => string;
  selected?: string;
  open: Set<string>;
  onToggle: (group: string) => void;
}) {
  const groups = useMemo(() => groupJobs(jobs), [jobs]);
  const layout = useMemo(() => {
    const g = new dagre.graphlib.Graph();
    g.setGraph({ rankdir: "LR", nodesep: 16, ranksep: 48, marginx: 8, marginy: 8 });
    g.setDefaultEdgeLabel(() => ({}));
    for (const group of groups) g.setNode(group.name, { width: NODE_W, height: NODE_H });
    for (const group of groups) for (const need of group.needs) if (g.hasNode(need)) g.setEdge(need, group.name);
    dagre.layout(g);
    const graph = g.graph();
    return {
      width: (graph.width ?? 0) + 16,
      height: (graph.height ?? 0) + 16,
      nodes: groups.map((group) => {
        const { x, y } = g.node(group.name) as { x: number; y: number };
        return { group, x, y };
      }),
      edges: g.edges().map((e) => ((g.edge(e) as { points?: { x: number; y: number }[] }).points ?? [])),
    };
  }, [groups]);

  return (
    <div class="graph-wrap">
      <div class="graph" style={{ width: `${layout.width}px`, height: `${layout.height}px` }} data-testid="graph">
        <svg width={layout.width} height={layout.height} aria-hidden="true">
          {layout.edges.map((points) => (
            <polyline class="edge" points={points.map((p) => `${p.x},${p.y}`).join(" ")} />
          ))}
        </svg>
        <ul aria-label="Jobs">
          {layout.nodes.map(({ group, x, y }) => (
            <li
              class={`node status-${group.status}`}
              style={{ left: `${x - NODE_W / 2}px`, top: `${y - NODE_H / 2}px`, width: `${NODE_W}px`, height: `${NODE_H}px` }}
              data-group={group.name}
              data-legs={group.jobs.length}
            >
              <Node group={group} href={href} selected={selected} open={open.has(group.name)} onToggle={onToggle} />
            </li>
          ))}
        </ul>
      </div>
      {layout.nodes
        .filter(({ group }) => group.jobs.length > 1 && open.has(group.name))
        .map(({ group }) => (
          <section class="legs" aria-label={`${group.name}: its ${group.jobs.length} legs`}>
            <h3>
              {group.name}: {group.jobs.length} legs
            </h3>
            <ul>
              {group.jobs.map((job) => (
                <li>
                  <a href={href(job)} aria-current={job.id === selected ? "true" : undefined}>
                    <Status status={job.status} /> {job.key}
                  </a>
                </li>
              ))}
            </ul>
          </section>
        ))}
    </div>
  );
}

function Node({
  group,
  href,
  selected,
  open,
  onToggle,
}: {
  group: JobGroup;
  href: (job: Schemas["JobView"]) => string;
  selected?: string;
  open: boolean;
  onToggle: (group: string) => void;
}) {
  const only = group.jobs.length === 1 ? group.jobs[0] : undefined;
  if (only) {
    return (
      <a href={href(only)} aria-current={only.id === selected ? "true" : undefined} title={only.name ?? undefined}>
        <span class="name">{only.key}</span>
        <Status status={only.status} soft={only.soft_failed} />
      </a>
    );
  }
  const counts = Object.entries(tally(group.jobs))
    .map(([status, n]) => `${n} ${status}`)
    .join(", ");
  return (
    <button type="button" aria-expanded={open} onClick={() => onToggle(group.name)}>
      <span class="name">
        {group.name} ×{group.jobs.length}
      </span>
      <Status status={group.status} />
      <span class="visually-hidden"> ({counts})</span>
    </button>
  );
}
