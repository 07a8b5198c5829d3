// @tanstack/virtual-core bound to Preact: only the rows in view (and a few
// around) are in the DOM, so a 100,000-line log costs a few dozen nodes.
import { elementScroll, observeElementOffset, observeElementRect, Virtualizer } from "@tanstack/virtual-core";
import { useEffect, useLayoutEffect, useReducer, useState } from "preact/hooks";

export function useVirtualizer(count: number, scrollElement: () => HTMLElement | null, rowHeight: number) {
  const [, rerender] = useReducer((n: number) => n + 1, 0);
  const options = {
    count,
    getScrollElement: scrollElement,
    estimateSize: () => rowHeight,
    overscan: 30,
    observeElementRect,
    observeElementOffset,
    scrollToFn: elementScroll,
    onChange: () => rerender(undefined),
  };
  const [virtualizer] = useState(() => new Virtualizer<HTMLElement, HTMLElement>(options));
  virtualizer.setOptions(options);
  useEffect(() => virtualizer._didMount(), [virtualizer]);
  useLayoutEffect(() => virtualizer._willUpdate());
  return virtualizer;
}
