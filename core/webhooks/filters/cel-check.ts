/**
 * The checks a CEL expression passes before it is planned (@bufbuild/cel has no public type
 * checker): the size of its tree, comprehensions not nested, every identifier declared (or a
 * comprehension's variable), every function known, and a light type inference that refuses what
 * can never evaluate: an operator applied to operands whose types are known (literals, `type`-like
 * string variables) and which it cannot take, and a result known not to be of the type asked for.
 * Whatever comes from `dyn` data is not judged here: it fails (or not) when evaluated.
 *
 * Every refusal is a CelCompileError with the offset of the node at fault.
 */
import type { parse } from '@bufbuild/cel';

type Parsed = ReturnType<typeof parse>;
type Expr = Parsed['expr'];

/** What a refused expression is told: the message and where (offset, line and column, 1-based). */
export class CelCompileError extends Error {
  readonly offset: number | null;
  readonly line: number | null;
  readonly column: number | null;
  constructor(reason: string, source: string, offset: number | null) {
    const at = offset === null ? null : lineColumn(source, offset);
    super(at ? `line ${at.line}, column ${at.column} (offset ${offset}): ${reason}` : reason);
    this.name = 'CelCompileError';
    this.offset = offset;
    this.line = at?.line ?? null;
    this.column = at?.column ?? null;
  }
}

function lineColumn(source: string, offset: number): { line: number; column: number } {
  let line = 1;
  let start = 0;
  for (let i = 0; i < offset && i < source.length; i++)
    if (source[i] === '\n') {
      line++;
      start = i + 1;
    }
  return { line, column: offset - start + 1 };
}

/** A type the checker knows, or dyn (not known until evaluated). */
export type Kind = 'bool' | 'int' | 'uint' | 'double' | 'string' | 'bytes' | 'null' | 'list' | 'map' | 'dyn';

export interface CheckOptions {
  /** Declared variables: names, or names with their kinds (undeclared kinds are dyn). */
  variables: readonly string[] | Readonly<Record<string, Kind>>;
  maxNodes: number;
  /** Whether a comprehension may hold another (false: refused). */
  nestedComprehensions: boolean;
  /** The kind the whole expression must have (refused when known to be another). */
  resultType?: Kind;
  isFunction(name: string): boolean;
}

const NUMERIC = new Set<Kind>(['int', 'uint', 'double']);
const RELATIONS = new Set(['_<_', '_<=_', '_>_', '_>=_']);
const EQUALITY = new Set(['_==_', '_!=_']);
const ARITHMETIC = new Set(['_-_', '_*_', '_/_', '_%_']);
const STRING_TESTS = new Set(['contains', 'startsWith', 'endsWith', 'matches']);
/** Operators the planner evaluates itself, with no function behind them. */
const BUILT_IN = new Set([
  '_&&_',
  '_||_',
  '_?_:_',
  '_[_]',
  '_[?_]',
  '_?._',
  '@not_strictly_false',
  '__not_strictly_false__',
]);
const BOOL_RESULT = new Set([...RELATIONS, ...EQUALITY, ...STRING_TESTS, '!_', '@in', '_&&_', '_||_']);

const known = (k: Kind) => k !== 'dyn';
const comparable = (a: Kind, b: Kind) =>
  !known(a) || !known(b) || a === b || a === 'null' || b === 'null' || (NUMERIC.has(a) && NUMERIC.has(b));

export function checkExpression(parsed: Parsed, source: string, opts: CheckOptions): void {
  const positions = parsed.sourceInfo?.positions ?? {};
  const declared: Record<string, Kind> = Array.isArray(opts.variables)
    ? Object.fromEntries((opts.variables as string[]).map((v) => [v, 'dyn' as Kind]))
    : { ...(opts.variables as Record<string, Kind>) };
  const fail = (e: Expr, reason: string): never => {
    const at = positions[String(e.id)];
    throw new CelCompileError(reason, source, typeof at === 'number' ? at : null);
  };
  let nodes = 0;
  const scopes: string[][] = [];
  const inScope = (name: string) => scopes.some((s) => s.includes(name));

  const visit = (e: Expr | undefined, depth: number): Kind => {
    if (!e) return 'dyn';
    if (++nodes > opts.maxNodes) fail(e, `the expression has more than ${opts.maxNodes} nodes`);
    const k = e.exprKind;
    switch (k.case) {
      case 'constExpr':
        return constKind(k.value.constantKind.case);
      case 'identExpr': {
        const name = k.value.name;
        if (inScope(name)) return 'dyn';
        if (name in declared) return declared[name];
        // The first part of a qualified name declared whole (`a.b.c`): the planner resolves it.
        if (Object.keys(declared).some((v) => v.startsWith(`${name}.`))) return 'dyn';
        return fail(e, `undeclared reference to '${name}' (the variables are ${Object.keys(declared).join(', ')})`);
      }
      case 'selectExpr': {
        const operand = visit(k.value.operand, depth);
        if (known(operand) && operand !== 'map')
          fail(e, `cannot select field '${k.value.field}' from a value of type ${operand}`);
        return k.value.testOnly ? 'bool' : 'dyn';
      }
      case 'listExpr':
        for (const el of k.value.elements) visit(el, depth);
        return 'list';
      case 'structExpr':
        if (k.value.messageName !== '') fail(e, `message types (${k.value.messageName}) are not available`);
        for (const entry of k.value.entries) {
          if (entry.keyKind.case === 'mapKey') visit(entry.keyKind.value, depth);
          visit(entry.value, depth);
        }
        return 'map';
      case 'comprehensionExpr': {
        const c = k.value;
        if (depth > 0 && !opts.nestedComprehensions)
          fail(e, 'a macro (all, exists, exists_one, map, filter) inside another one is not allowed');
        visit(c.iterRange, depth);
        visit(c.accuInit, depth);
        scopes.push([c.iterVar, c.iterVar2, c.accuVar].filter((v) => v !== ''));
        visit(c.loopCondition, depth + 1);
        visit(c.loopStep, depth + 1);
        visit(c.result, depth + 1);
        scopes.pop();
        return 'dyn';
      }
      case 'callExpr':
        return visitCall(e, k.value, depth);
      default:
        return fail(e, 'an expression of an unknown kind');
    }
  };

  const visitCall = (e: Expr, call: Extract<Expr['exprKind'], { case: 'callExpr' }>['value'], depth: number): Kind => {
    const name = call.function;
    const target = call.target ? visit(call.target, depth) : undefined;
    const args = call.args.map((a) => visit(a, depth));
    if (!BUILT_IN.has(name) && !opts.isFunction(name)) fail(e, `unknown function '${name}'`);
    const mismatch = () =>
      fail(e, `'${opName(name)}' cannot take ${[target, ...args].filter((a) => a !== undefined).join(' and ')}`);
    if (EQUALITY.has(name) || RELATIONS.has(name)) {
      if (!comparable(args[0], args[1])) mismatch();
      if (RELATIONS.has(name) && (args.includes('null') || args.includes('map') || args.includes('list'))) mismatch();
    } else if (name === '_&&_' || name === '_||_' || name === '!_') {
      if (args.some((a) => known(a) && a !== 'bool')) mismatch();
    } else if (name === '_?_:_') {
      if (known(args[0]) && args[0] !== 'bool') mismatch();
      return args[1] === args[2] ? args[1] : 'dyn';
    } else if (name === '_+_') {
      const [a, b] = args;
      if (known(a) && known(b) && (a !== b || a === 'bool' || a === 'null' || a === 'map')) mismatch();
      return known(a) ? a : b;
    } else if (ARITHMETIC.has(name) || name === '-_') {
      if (args.some((a) => known(a) && !NUMERIC.has(a))) mismatch();
      return args.every((a) => a === args[0]) ? args[0] : 'dyn';
    } else if (STRING_TESTS.has(name)) {
      if (
        (target !== undefined && known(target) && target !== 'string') ||
        args.some((a) => known(a) && a !== 'string')
      )
        mismatch();
    } else if (name === 'size') return 'int';
    return BOOL_RESULT.has(name) ? 'bool' : 'dyn';
  };

  const result = visit(parsed.expr, 0);
  if (opts.resultType && known(result) && result !== opts.resultType)
    fail(parsed.expr, `the expression must be a ${opts.resultType}; this one is a ${result}`);
}

function constKind(c: string | undefined): Kind {
  switch (c) {
    case 'boolValue':
      return 'bool';
    case 'int64Value':
      return 'int';
    case 'uint64Value':
      return 'uint';
    case 'doubleValue':
      return 'double';
    case 'stringValue':
      return 'string';
    case 'bytesValue':
      return 'bytes';
    case 'nullValue':
      return 'null';
    default:
      return 'dyn';
  }
}

/** `_==_` as `==`, `!_` as `!`: the operator as it was written. */
const opName = (fn: string): string => (fn === '@in' ? 'in' : fn.replace(/_/g, ''));
