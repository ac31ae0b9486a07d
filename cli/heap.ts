/**
 * How far V8 lets a node's heap grow past its live size before the next full collection.
 *
 * A node's live heap is mostly its views (the endpoint view: about 1 KB per endpoint); V8 by
 * default lets the old generation grow to several times the live heap between full collections,
 * so a node holding 100 MiB of views showed 410 MiB of anonymous RSS. A smaller factor collects
 * sooner; the price is CPU where much short-lived data is promoted, which is the dispatcher's case.
 * Measured (bench/RESULTS.md, state and dispatch): 25 % keeps that node at 221 MiB but costs the
 * dispatcher ~30 % more CPU per delivery; 50 % gives 240 MiB at no measurable dispatch cost.
 *
 * Allocation-site pretenuring is off. V8 allocates straight into the old generation from every
 * allocation site whose objects mostly survived a young collection. Catching up the views at
 * start is such a time (batches wait for store commits), and the sites it marks are the same ones
 * that later build every fetched record, parsed entry and response: each one went to the old
 * generation, which then filled in a quarter of a second, and the node spent its time in full
 * collections (143 in a 60 s run of the state bench, each with a 4-12 ms pause, the DLQ list's
 * p99 tail). Without it: 12 full collections, and a cold start of 1M DLQ entries took 21 CPU-s, not 37.
 */
import { setFlagsFromString } from 'node:v8';
import type { Config } from '../core/config.ts';

/**
 * The V8 flags of a worker process that dispatches (`sluice start`'s workers; a single-process
 * `sluice dispatcher` takes them from NODE_OPTIONS, docs/operations.md). A young generation of up
 * to 32 MB per semi-space instead of 16: a delivery's objects (parsed records, requests, outcomes)
 * live for the milliseconds of an attempt, and with twice the room most of them die before a
 * scavenge has to copy them. f10-single, back to back: 0.084 → 0.076 CPU-s per 1,000 deliveries,
 * for ~90 MB more RSS (bench/RESULTS.md).
 */
export const DISPATCHER_V8_FLAGS = ['--max-semi-space-size=32'];

/** An ingress-only node holds views and little else: collect tightly. A node that dispatches: 1.5×. */
export const INGRESS_HEAP_GROWTH_PERCENT = 25;
export const DISPATCHER_HEAP_GROWTH_PERCENT = 50;

export function heapGrowthFor(config: Readonly<Config>, roles: { dispatcher: boolean }): number {
  if (config.heapGrowthPercent !== null) return config.heapGrowthPercent;
  return roles.dispatcher ? DISPATCHER_HEAP_GROWTH_PERCENT : INGRESS_HEAP_GROWTH_PERCENT;
}

/**
 * V8 reads both flags at every collection, so setting them at run time, before the views are
 * built, takes effect. Growth 0: V8's own.
 */
export function applyHeapSettings(growthPercent: number): void {
  setFlagsFromString('--no-allocation-site-pretenuring');
  if (growthPercent > 0) setFlagsFromString(`--heap-growing-percent=${growthPercent}`);
}
