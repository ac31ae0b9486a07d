/**
 * An endpoint's `filter`: a CEL expression (cel-program.ts) over the event, which the endpoint
 * receives only when it evaluates to true. Its variables:
 *
 *   type      string  the event type, e.g. "order.created"
 *   data      dyn     the event's `data` as published (JSON: numbers are doubles, compare with ints as usual)
 *   metadata  map     the event's envelope: id, tenant_id, created_at (RFC 3339 string), ordering_key (when set)
 *
 * Compiled when written (`checkFilter`: 400 INVALID_REQUEST at `$.filter` naming the position);
 * evaluated per event and matching endpoint with a budget of FILTER_COST_BUDGET units, all the
 * filters of one event together with at most EVENT_FILTER_BUDGET. An evaluation that fails (a
 * missing field, a type mismatch, the budget spent, a result that is not a bool) is no match.
 *
 *   const verdict = runFilter(compileFilter('data.total > 100'), filterInput(event), eventBudget());
 */
import type { CelInput } from '@bufbuild/cel';
import { cel } from './cel-lib.ts';
import { SluiceError } from '../../errors.ts';
import type { EventRecord } from '../records.ts';
import { CelCompileError, CelMeter, type CelProgram, compileCel } from './cel-program.ts';

/** Units one filter may spend on one event (see cel-program.ts for what a unit is). */
export const FILTER_COST_BUDGET = 10_000;
/** Units all the filters of one event may spend together: a tenant's filters bound its own fan-out. */
export const EVENT_FILTER_BUDGET = 100_000;
/** The longest filter accepted, in characters (the contract's maxLength; 4 KiB of UTF-8 is checked too). */
export const FILTER_MAX_CHARS = 4096;

const VARIABLES = { type: 'string', data: 'dyn', metadata: 'map' } as const;

/** Compiles a filter; throws CelCompileError. */
export function compileFilter(source: string): CelProgram {
  return compileCel(source, { variables: VARIABLES, resultType: 'bool' });
}

/** 400 INVALID_REQUEST for a filter that does not compile, at `$.filter` (or the path given). */
export function filterRefused(err: CelCompileError, path = '$.filter'): SluiceError {
  const message = `the filter does not compile: ${err.message}`;
  const position = { offset: err.offset, line: err.line, column: err.column };
  return new SluiceError('INVALID_REQUEST', `${path}: ${message}`, {
    errors: [{ path, message }],
    filter_error: { message: err.message, ...position },
  });
}

/** Compiles `filter` (null: none) or throws the 400 that names its fault. */
export function checkFilter(filter: string | null | undefined, path?: string): void {
  if (filter === null || filter === undefined) return;
  try {
    compileFilter(filter);
  } catch (err) {
    if (err instanceof CelCompileError) throw filterRefused(err, path);
    throw err;
  }
}

export type FilterInput = Record<string, CelInput>;

/** The variables of an event, made once per event for all its endpoints. */
export function filterInput(
  event: Pick<EventRecord, 'id' | 'tenant_id' | 'type' | 'data' | 'created_at' | 'ordering_key'>,
): FilterInput {
  const metadata: Record<string, string> = {
    id: event.id,
    tenant_id: event.tenant_id,
    created_at: new Date(event.created_at).toISOString(),
  };
  if (event.ordering_key !== undefined) metadata.ordering_key = event.ordering_key;
  return { type: event.type, data: celData(event.data), metadata };
}

/**
 * The event's data as CEL values, converted once per event for all its filters (the library would
 * convert a JSON object again at every access, unmetered). undefined (no data) is null.
 */
export function celData(v: unknown): CelInput {
  if (v === undefined || v === null) return null;
  if (Array.isArray(v)) return cel().celList(v.map(celData));
  if (typeof v === 'object') {
    const m = new Map<string, CelInput>();
    for (const [k, x] of Object.entries(v)) m.set(k, celData(x));
    return cel().celMap(m);
  }
  return v as CelInput;
}

/** What is left of one event's budget for its filters. */
export function eventBudget(units = EVENT_FILTER_BUDGET): CelMeter {
  return new CelMeter(units);
}

export interface FilterVerdict {
  matched: boolean;
  /** Why the filter could not decide (no match then); null when it did. */
  error: string | null;
}

/** Evaluates one filter on one event, charging `event` (the event's budget) what it spent. */
export function runFilter(program: CelProgram, input: FilterInput, event: CelMeter): FilterVerdict {
  const left = event.budget - event.spent;
  if (left <= 0) return { matched: false, error: `the event's filter budget of ${event.budget} units is spent` };
  const meter = new CelMeter(Math.min(FILTER_COST_BUDGET, left));
  const out = program.evaluate(input, meter);
  event.spent += meter.spent;
  if ('error' in out) return { matched: false, error: out.error };
  if (typeof out.value !== 'boolean')
    return { matched: false, error: `the filter's result is not a bool (${typeof out.value})` };
  return { matched: out.value, error: null };
}

/** A sample event to try a filter on (`POST /v1/webhooks/filters/test`). */
export interface SampleEvent {
  type: string;
  data?: unknown;
}

/**
 * Compiles `filter` (a fault is the 400 a registration would get) and evaluates it on the sample
 * as the fan-out would, with the same budget; the metadata is made as for a published event.
 */
export function tryFilter(filter: string, sample: SampleEvent, tenantId: string, nowMs: number): FilterVerdict {
  let program: CelProgram;
  try {
    program = compileFilter(filter);
  } catch (err) {
    if (err instanceof CelCompileError) throw filterRefused(err);
    throw err;
  }
  const event = { id: 'evt_sample', tenant_id: tenantId, type: sample.type, data: sample.data, created_at: nowMs };
  return runFilter(program, filterInput(event), eventBudget());
}
