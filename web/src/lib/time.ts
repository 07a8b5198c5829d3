// Times as the pages show them. Pure: `now` is passed in.

export function ms(from?: string | null, to?: string | null, now = Date.now()): number | null {
  if (!from) return null;
  const start = Date.parse(from);
  const end = to ? Date.parse(to) : now;
  return Number.isNaN(start) || Number.isNaN(end) ? null : Math.max(0, end - start);
}

/** `1h 02m`, `3m 07s`, `12s`, `850 ms`; `—` when unknown. */
export function duration(millis: number | null | undefined): string {
  if (millis == null) return "—";
  if (millis < 1000) return `${Math.round(millis)} ms`;
  const s = Math.floor(millis / 1000);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  if (h > 0) return `${h}h ${String(m).padStart(2, "0")}m`;
  if (m > 0) return `${m}m ${String(sec).padStart(2, "0")}s`;
  return `${sec}s`;
}

/** A date as the reader's clock shows it, to the second. */
export function when(iso?: string | null): string {
  if (!iso) return "—";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString(undefined, { hour12: false });
}

/** A log line's time of day with milliseconds (UTC, as runners ship it). */
export function clock(iso: string): string {
  return iso.length >= 23 ? iso.slice(11, 23) : iso;
}
