// Live data by polling: the read runs at once, then every `everyMs` while the
// tab is visible (a hidden tab costs no requests), and again when it comes
// back into view. `active` false stops it (a run that ended changes no more).
import { useCallback, useEffect, useRef, useState } from "preact/hooks";

export interface Polled<T> {
  data: T | undefined;
  error: string | null;
  refresh: () => Promise<void>;
}

export function usePoll<T>(
  read: () => Promise<{ data?: T; error?: string }>,
  everyMs: number,
  deps: unknown[],
  active = true,
): Polled<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<string | null>(null);
  const generation = useRef(0);

  const refresh = useCallback(async () => {
    const mine = generation.current;
    const result = await read();
    if (mine !== generation.current) return; // the inputs changed meanwhile
    if (result.data !== undefined) setData(result.data);
    setError(result.error ?? null);
  }, deps);

  useEffect(() => {
    generation.current += 1;
    setData(undefined);
    setError(null);
  }, deps);

  useEffect(() => {
    void refresh();
    if (!active) return;
    const tick = () => {
      if (document.visibilityState === "visible") void refresh();
    };
    const timer = window.setInterval(tick, everyMs);
    document.addEventListener("visibilitychange", tick);
    return () => {
      window.clearInterval(timer);
      document.removeEventListener("visibilitychange", tick);
    };
  }, [refresh, everyMs, active]);

  return { data, error, refresh };
}
