/**
 * CEL on @bufbuild/cel, made safe to run on a tenant's words: an expression is compiled once
 * (parsed, checked by `checkExpression` against the limits below and the declared variables,
 * planned), then evaluated many times, each evaluation metered against a cost budget.
 *
 * Compiling refuses, with a CelCompileError naming the offset (and line and column) at fault:
 * a syntax error; a source over MAX_SOURCE_BYTES or a tree over MAX_NODES; a comprehension (the
 * macros all/exists/exists_one/map/filter) inside another one (its cost would be the product of
 * two lists' sizes); an undeclared variable or an unknown function; an operator whose operands are
 * known (literals, declared variables) to be of types it cannot take.
 *
 * Evaluating charges the meter: per function call 1, and 1 per 64 characters or bytes of every
 * string and bytes argument and result, and the size of every list or map argument (`in`, `==`;
 * not `size()`; for a list appended with `+` only the appended one, so `map` stays linear); per
 * comprehension the size of the list or map it walks, before it walks it. Strings and lists grow
 * only through calls, so what an evaluation builds is charged too. A charge over the budget stops
 * the evaluation with an error (`budgetExceeded` on the result), whatever branch of a `||` or `&&`
 * it was in.
 *
 *   const p = compileCel('data.total > 100', { variables: ['data'] });
 *   const r = p.evaluate({ data: { total: 150 } }, new CelMeter(10_000)); // { value: true }
 */
import type { CelEnv, CelInput, CelValue, parse } from '@bufbuild/cel';
import { cel } from './cel-lib.ts';
import { checkExpression, type CheckOptions, CelCompileError } from './cel-check.ts';

export { CelCompileError };

/** The longest source accepted (UTF-8 bytes). */
export const MAX_SOURCE_BYTES = 4096;
/** The most nodes of the expression tree (after macros are expanded). */
export const MAX_NODES = 512;

/** Counts what an evaluation (or several sharing a budget) spent. */
export class CelMeter {
  spent = 0;
  exceeded = false;
  constructor(readonly budget: number) {}

  /** Adds `units`; past the budget it throws (the evaluation ends with an error). */
  charge(units: number): void {
    this.spent += units;
    if (this.spent > this.budget) {
      this.exceeded = true;
      throw new BudgetExceeded(this.budget);
    }
  }
}

class BudgetExceeded extends Error {
  constructor(budget: number) {
    super(`cost budget of ${budget} units exceeded`);
  }
}

export type CelOutcome = { value: CelValue } | { error: string; budgetExceeded: boolean };

export interface CelProgram {
  readonly source: string;
  evaluate(bindings: Record<string, CelInput>, meter: CelMeter): CelOutcome;
}

export interface CompileOptions extends Partial<Omit<CheckOptions, 'isFunction'>> {
  /** The variables the expression may use (besides comprehension variables): names, or names and kinds. */
  variables: CheckOptions['variables'];
}

/** The meter of the evaluation running now (evaluation is synchronous: one at a time per thread). */
let running: CelMeter | undefined;

const BYTES_PER_UNIT = 64;

function sizeUnits(v: unknown): number {
  if (typeof v === 'string') return Math.floor(v.length / BYTES_PER_UNIT);
  if (v instanceof Uint8Array) return Math.floor(v.byteLength / BYTES_PER_UNIT);
  return 0;
}

const collectionSize = (v: unknown): number => (cel().isCelList(v) || cel().isCelMap(v) ? v.size : 0);

/** What a call costs beyond its 1: the strings and bytes it reads and makes, the lists and maps it reads. */
function callUnits(name: string, target: unknown, args: unknown[], result: unknown): number {
  let units = 1 + sizeUnits(target) + sizeUnits(result);
  for (const a of args) units += sizeUnits(a);
  if (name === 'size') return units;
  if (name === '_+_') return units + (args.length === 2 ? collectionSize(args[1]) : 0);
  units += collectionSize(target);
  for (const a of args) units += collectionSize(a);
  return units;
}

/** The function a comprehension's range is wrapped in (`meterRanges`): charges its size, answers it. */
const RANGE = '@sluice_range';

const rangeGroup = {
  name: RANGE,
  [Symbol.iterator]: () => [][Symbol.iterator](),
  call(_id: number, _target: CelValue | undefined, args: CelValue[]) {
    running?.charge(1 + collectionSize(args[0]));
    return args[0];
  },
};

type Resolver = CelEnv['funcs'];
type Group = NonNullable<ReturnType<Resolver['find']>>;

/** The environment's functions, each call charged to the running meter. */
function meteredFuncs(funcs: Resolver): Resolver {
  const groups = new Map<string, Group | undefined>();
  const wrap = (g: Group): Group =>
    ({
      name: g.name,
      [Symbol.iterator]: () => g[Symbol.iterator](),
      call(id: number, target: CelValue | undefined, args: CelValue[]) {
        running?.charge(1); // before: a call over the budget does no work
        const result = g.call(id, target, args);
        running?.charge(callUnits(g.name, target, args, result) - 1);
        return result;
      },
    }) as Group;
  return {
    [Symbol.iterator]: () => funcs[Symbol.iterator](),
    find(name: string) {
      if (name === RANGE) return rangeGroup as unknown as Group;
      if (!groups.has(name)) {
        const g = funcs.find(name);
        groups.set(name, g && wrap(g));
      }
      return groups.get(name);
    },
  } as Resolver;
}

let sharedEnv: CelEnv | undefined;

/** The standard environment with metered functions (one for every program: planning caches per env). */
function meteredEnv(): CelEnv {
  if (sharedEnv) return sharedEnv;
  const base = cel().celEnv();
  const funcs = meteredFuncs(base.funcs);
  // Everything else (namespace, registry, variables) read through the base environment.
  sharedEnv = Object.create(base, { funcs: { get: () => funcs } }) as CelEnv;
  return sharedEnv;
}

type Expr = ReturnType<typeof parse>['expr'];

/**
 * Wraps the range of every comprehension in a call of RANGE, so the walk is charged before it
 * starts (@bufbuild/cel copies the whole list first: a budget checked only inside the loop would
 * come too late for a long one). The wrapper node is a plain object: the planner reads only `id`
 * and `exprKind`.
 */
function meterRanges(e: Expr | undefined, ids = { next: 1n << 40n }): void {
  if (!e) return;
  const k = e.exprKind;
  switch (k.case) {
    case 'selectExpr':
      meterRanges(k.value.operand, ids);
      return;
    case 'callExpr':
      meterRanges(k.value.target, ids);
      for (const a of k.value.args) meterRanges(a, ids);
      return;
    case 'listExpr':
      for (const el of k.value.elements) meterRanges(el, ids);
      return;
    case 'structExpr':
      for (const entry of k.value.entries) {
        if (entry.keyKind.case === 'mapKey') meterRanges(entry.keyKind.value, ids);
        meterRanges(entry.value, ids);
      }
      return;
    case 'comprehensionExpr': {
      const c = k.value;
      for (const part of [c.iterRange, c.accuInit, c.loopCondition, c.loopStep, c.result]) meterRanges(part, ids);
      if (c.iterRange) {
        const id = ids.next++;
        c.iterRange = {
          id,
          exprKind: { case: 'callExpr', value: { function: RANGE, args: [c.iterRange], target: undefined } },
        } as unknown as Expr;
      }
      return;
    }
    default:
      return;
  }
}

/** Parses, checks and plans `source`; throws CelCompileError. */
export function compileCel(source: string, options: CompileOptions): CelProgram {
  const bytes = Buffer.byteLength(source, 'utf8');
  if (bytes > MAX_SOURCE_BYTES)
    throw new CelCompileError(`is ${bytes} bytes long; at most ${MAX_SOURCE_BYTES} are allowed`, source, null);
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = cel().parse(source);
  } catch (err) {
    const e = err as { location?: { start?: { offset?: number } }; rawMessage?: string; message?: string };
    const message = e.rawMessage ?? e.message ?? 'syntax error';
    throw new CelCompileError(`syntax error: ${message}`, source, e.location?.start?.offset ?? null);
  }
  const env = meteredEnv();
  checkExpression(parsed, source, {
    variables: options.variables,
    maxNodes: options.maxNodes ?? MAX_NODES,
    nestedComprehensions: options.nestedComprehensions ?? false,
    resultType: options.resultType,
    isFunction: (name) => env.funcs.find(name) !== undefined,
  });
  meterRanges(parsed.expr);
  let run: (bindings: Record<string, CelInput>) => unknown;
  try {
    run = cel().plan(env, parsed) as (bindings: Record<string, CelInput>) => unknown;
  } catch (err) {
    throw new CelCompileError(`cannot be planned: ${(err as Error).message}`, source, null);
  }
  return {
    source,
    evaluate(bindings, meter) {
      const outer = running;
      running = meter;
      let out: unknown;
      try {
        if (meter.spent > meter.budget) throw new BudgetExceeded(meter.budget);
        out = run(bindings);
      } catch (err) {
        out = err instanceof Error ? err : new Error(String(err));
      } finally {
        running = outer;
      }
      if (meter.exceeded) return { error: `cost budget of ${meter.budget} units exceeded`, budgetExceeded: true };
      if (cel().isCelError(out) || out instanceof Error)
        return { error: (out as Error).message, budgetExceeded: false };
      return { value: out as CelValue };
    },
  };
}
