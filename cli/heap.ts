/**
 * How far V8 lets a node's heap grow past its live size before the next full collection.
 *
 * A node's live heap is mostly its views (the endpoint view: about 1 KB per endpoint); V8 by
 * default lets the old generation grow to several times the live heap between full collections,
 * so a node holding 100 MiB of views showed 410 MiB of anonymous RSS. A smaller factor collects
 * sooner; the price is CPU where much short-lived data is promoted, which is the dispatcher's case.
 * Measured (bench/RESULTS.md, state and dispatch): 25 % keeps that node at 221 MiB but costs the
 * dispatcher ~30 % more CPU per delivery; 50 % gives 240 MiB at no measurable dispatch cost.
 */
import { setFlagsFromString } from 'node:v8';
import type { Config } from '../core/config.ts';

/** An ingress-only node holds views and little else: collect tightly. A node that dispatches: 1.5×. */
export const INGRESS_HEAP_GROWTH_PERCENT = 25;
export const DISPATCHER_HEAP_GROWTH_PERCENT = 50;

export function heapGrowthFor(config: Readonly<Config>, roles: { dispatcher: boolean }): number {
  if (config.heapGrowthPercent !== null) return config.heapGrowthPercent;
  return roles.dispatcher ? DISPATCHER_HEAP_GROWTH_PERCENT : INGRESS_HEAP_GROWTH_PERCENT;
}

/** V8 reads the flag at every full collection, so setting it at run time takes effect. 0: V8's own. */
export function applyHeapGrowth(percent: number): void {
  if (percent > 0) setFlagsFromString(`--heap-growing-percent=${percent}`);
}
