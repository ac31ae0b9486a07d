/**
 * What an endpoint filter costs per delivery decision: a typical filter compiled once (as the
 * fan-out's cache keeps it) and evaluated many times on one event, against no filter at all; a
 * filter that walks a list; and the worst one event can cost (every filter spending its budget
 * until the event's budget is spent). In-process, no Kafka.
 *
 *   npm run bench:filters [-- --seconds 2 --write]   (--write: its section of bench/RESULTS.md)
 */
import { join } from 'node:path';
import { ROOT, say, writeResults } from '../harness/cli.ts';
import { provenance, table } from '../harness/report.ts';
import { benchCommand } from '../harness/results-section.ts';
import { compileFilter, eventBudget, filterInput, runFilter } from '../core/webhooks/filters/endpoint-filter.ts';
import { selectByFilter } from '../core/webhooks/filters/filter-cache.ts';
import type { EndpointRecord } from '../core/webhooks/records.ts';

const startedAt = new Date();
const seconds = Number(process.argv[process.argv.indexOf('--seconds') + 1]) || 2;

const event = {
  id: 'evt_bench',
  tenant_id: 'acme',
  type: 'order.created',
  created_at: Date.now(),
  data: {
    order_id: 'o-123',
    total: 150,
    currency: 'EUR',
    customer: { id: 'c-9', tier: 'gold', country: 'DE' },
    items: Array.from({ length: 20 }, (_, i) => ({ sku: `sku-${i}`, qty: 1 + (i % 3), price: 7.5 })),
  },
};

/** ns per call of `f`, measured over `seconds` after a warm-up. */
function nsPer(f: () => unknown): number {
  for (let i = 0; i < 20_000; i++) f();
  let n = 0;
  const start = process.hrtime.bigint();
  const end = start + BigInt(Math.round(seconds * 1e9));
  let now = start;
  while (now < end) {
    for (let i = 0; i < 1000; i++) f();
    n += 1000;
    now = process.hrtime.bigint();
  }
  return Number(now - start) / n;
}

const cases: [string, string][] = [
  ['typical: type and a number', 'type == "order.created" && data.total > 100'],
  [
    'three fields, a string test',
    'data.customer.tier == "gold" && data.total >= 100.0 && data.currency in ["EUR", "USD"]',
  ],
  ['a walk of 20 items', 'data.items.exists(i, i.sku == "sku-19" && i.qty > 1)'],
];

const input = filterInput(event);
const rows: [string, number][] = [
  [
    'no filter (selectByFilter, one endpoint)',
    nsPer(() => selectByFilter([{ id: 'ep_0', filter: null } as EndpointRecord], event)),
  ],
  // Per event (once, whatever the number of endpoints with filters): the variables, data converted.
  [
    "the event's variables (once per event with any filtered endpoint; data of 20 items)",
    nsPer(() => filterInput(event)),
  ],
  // Per endpoint: one evaluation on the event's budget.
  ...cases.map(([name, source]): [string, number] => {
    const program = compileFilter(source);
    const matched = runFilter(program, input, eventBudget()).matched;
    return [`${name}: \`${source}\` (${matched})`, nsPer(() => runFilter(program, input, eventBudget()))];
  }),
  ['compiling the typical filter (once per endpoint and filter text)', nsPer(() => compileFilter(cases[0][1]))],
];

// The worst case of one event: 100 endpoints whose filters each walk a long list to their budget.
const long = { ...event, data: { items: Array.from({ length: 100_000 }, (_, i) => i) } };
const heavy = Array.from(
  { length: 100 },
  (_, i) => ({ id: `ep_heavy_${i}`, filter: 'data.items.exists(x, x == -1)' }) as EndpointRecord,
);
selectByFilter(heavy, long); // warm
const t0 = process.hrtime.bigint();
const WORST_RUNS = 20;
for (let i = 0; i < WORST_RUNS; i++) selectByFilter(heavy, long);
const worst = Number(process.hrtime.bigint() - t0) / WORST_RUNS;

const lines = [
  '## Endpoint filters (`npm run bench:filters`, issue 35)',
  '',
  ...provenance({ command: benchCommand('bench:filters', ROOT, null), sluiceDir: ROOT, startedAt }),
  '',
  `${seconds} s a case. A filter is compiled once per endpoint and text, then evaluated per event ` +
    "and matching endpoint on the event's variables, made once per event.",
  '',
  ...table(
    ['case', 'ns'],
    rows.map(([name, ns]) => [name, ns.toFixed(0)]),
  ),
  '',
  `The worst one event can cost the fan-out: 100 filters each walking a 100,000-item list ` +
    `(each charged the length before the walk, so refused at once; the event's budget bounds the rest): ` +
    `${(worst / 1e6).toFixed(2)} ms.`,
];
say(lines.join('\n'));
if (process.argv.includes('--write')) writeResults(join(ROOT, 'bench/RESULTS.md'), 'filters', lines.join('\n'));
