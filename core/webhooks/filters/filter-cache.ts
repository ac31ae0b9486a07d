/**
 * Compiled filters, kept per process and keyed by endpoint id and filter text, so the fan-out and
 * the publish path compile an endpoint's filter once, not per event; a changed filter is a new key
 * (its old program ages out). A stored filter that no longer compiles (limits made stricter since
 * it was written) is kept as its error: every evaluation of it is an error, no match.
 *
 *   const verdict = filterVerdict(endpoint, filterInput(event), eventBudget());
 */
import { LruMap } from '../../lru.ts';
import type { EndpointRecord, EventRecord } from '../records.ts';
import { CelCompileError, type CelMeter, type CelProgram } from './cel-program.ts';
import {
  compileFilter,
  eventBudget,
  type FilterInput,
  filterInput,
  type FilterVerdict,
  runFilter,
} from './endpoint-filter.ts';

/** Programs kept: the endpoints with filters that events are going to now. */
export const PROGRAMS_CACHED = 4096;

const programs = new LruMap<string, CelProgram | CelCompileError>(PROGRAMS_CACHED);
/** Compilations made (a cache miss each): for tests. */
export const compiled = { count: 0 };

/** The endpoint's compiled filter, null without one, a CelCompileError when it does not compile. */
export function filterProgram(rec: Pick<EndpointRecord, 'id' | 'filter'>): CelProgram | CelCompileError | null {
  const filter = rec.filter ?? null;
  if (filter === null) return null;
  const key = `${rec.id}\u0000${filter}`;
  const held = programs.get(key);
  if (held) return held;
  compiled.count++;
  let program: CelProgram | CelCompileError;
  try {
    program = compileFilter(filter);
  } catch (err) {
    if (!(err instanceof CelCompileError)) throw err;
    program = err;
  }
  return programs.set(key, program);
}

const PASS: FilterVerdict = { matched: true, error: null };

/** Whether the event goes to the endpoint as far as its filter says (no filter: it does). */
export function filterVerdict(
  rec: Pick<EndpointRecord, 'id' | 'filter'>,
  input: () => FilterInput,
  budget: CelMeter,
): FilterVerdict {
  const program = filterProgram(rec);
  if (program === null) return PASS;
  if (program instanceof CelCompileError)
    return { matched: false, error: `the filter does not compile: ${program.message}` };
  return runFilter(program, input(), budget);
}

/** What became of one filtered endpoint: passed, or not (with the evaluation's error, if any). */
export type FilterOutcome = (ep: EndpointRecord, verdict: FilterVerdict) => void;

/**
 * The endpoints (already matched by type) whose filters take the event, in order, all filters of
 * the event sharing one budget (EVENT_FILTER_BUDGET). `each` hears every filtered endpoint's verdict.
 * Endpoints without a filter cost nothing; the event's variables are made only if one has one.
 */
export function selectByFilter(
  endpoints: EndpointRecord[],
  event: Pick<EventRecord, 'id' | 'tenant_id' | 'type' | 'data' | 'created_at' | 'ordering_key'>,
  each?: FilterOutcome,
): EndpointRecord[] {
  if (!endpoints.some((ep) => ep.filter)) return endpoints;
  let input: FilterInput | undefined;
  const lazy = () => {
    input ??= filterInput(event);
    return input;
  };
  const budget = eventBudget();
  const out: EndpointRecord[] = [];
  for (const ep of endpoints) {
    if (!ep.filter) {
      out.push(ep);
      continue;
    }
    const verdict = filterVerdict(ep, lazy, budget);
    if (verdict.matched) out.push(ep);
    each?.(ep, verdict);
  }
  return out;
}
