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
import { readFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import type { Config } from '../core/config.ts';

/**
 * The V8 flags every long-running Sluice process should start with (V8 reads them when it sets up
 * the heap, so they cannot be set at run time). Without the memory reducer: once allocation slows
 * down (an idle node, a light load), V8 runs full collections, in incremental steps, to give
 * memory back; on an idle `sluice start` worker these were most of its CPU, about a third of the
 * whole node's (`sluice start`, 2 workers, 30 s from /proc after a 40 s warm-up, alternated:
 * 3.43-4.53 % of a core with it, 2.30-2.53 % without). The heap still shrinks at the next full
 * collection that allocation starts, and the growth factor (below) still bounds it.
 */
export const IDLE_V8_FLAGS = ['--no-memory-reducer'];

/**
 * The Node flags on the `#!` line of a `sluice` executable (bin/sluice.js gives IDLE_V8_FLAGS to
 * every process started as `sluice …`): what a harness that runs `node <bin> …` adds to run the
 * process the way an operator's `sluice` command does.
 */
export function shebangNodeFlags(binPath: string): string[] {
  const first = readFileSync(binPath, 'utf8').split('\n', 1)[0];
  if (!first.startsWith('#!')) return [];
  let words = first.slice(2).trim().split(/\s+/);
  if (words[0]?.endsWith('/env')) words = words.slice(words[1] === '-S' ? 2 : 1);
  const [interpreter, ...flags] = words;
  return interpreter === 'node' || interpreter?.endsWith('/node') ? flags.filter((w) => w.startsWith('--')) : [];
}

/**
 * The V8 flags of a worker process that dispatches (`sluice start`'s workers; a single-process
 * `sluice dispatcher` takes them from NODE_OPTIONS, docs/operations.md). A young generation of up
 * to 32 MB per semi-space instead of 16: a delivery's objects (parsed records, requests, outcomes)
 * live for the milliseconds of an attempt, and with twice the room most of them die before a
 * scavenge has to copy them. f10-single, back to back: 0.084 → 0.076 CPU-s per 1,000 deliveries,
 * for ~90 MB more RSS (bench/RESULTS.md).
 */
export const DISPATCHER_V8_FLAGS = ['--max-semi-space-size=32', ...IDLE_V8_FLAGS];

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
