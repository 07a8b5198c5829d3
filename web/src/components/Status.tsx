// A status as a badge: an icon and the word, so colour is never the only
// signal (for colour-blind readers and for screen readers alike).
const ICONS: Record<string, string> = {
  pending: "○",
  queued: "◌",
  waiting: "◔",
  running: "●",
  succeeded: "✓",
  failed: "✗",
  cancelled: "⊘",
  skipped: "↷",
  // An instance's states.
  requested: "○",
  booting: "◌",
  terminating: "⊘",
  terminated: "■",
};

export function Status({ status, soft }: { status: string; soft?: boolean }) {
  return (
    <span class={`status status-${status}`} data-status={status}>
      <span aria-hidden="true">{ICONS[status] ?? "?"}</span> {status}
      {soft ? " (failed, allowed)" : ""}
    </span>
  );
}
