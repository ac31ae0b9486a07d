/** Small, explicit request validation that collects every fault with its JSON path. */
import { invalidRequest, type FieldError } from './errors.ts';

export class Fields {
  readonly errors: FieldError[] = [];
  constructor(readonly value: Record<string, unknown>, readonly base = '$') {}

  static object(value: unknown, base = '$'): Fields {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw invalidRequest([{ path: base, message: 'must be a JSON object' }]);
    }
    return new Fields(value as Record<string, unknown>, base);
  }

  /**
   * A member of the object, own members only: a name inherited from Object.prototype
   * (`constructor`, `toString`, ...) or hidden behind `__proto__` is absent, never a value.
   */
  get(name: string): unknown {
    return Object.hasOwn(this.value, name) ? this.value[name] : undefined;
  }

  fail(path: string, message: string): void {
    this.errors.push({ path: `${this.base}.${path}`, message });
  }

  /** Refuses members not in `allowed` (closed request shapes). */
  only(allowed: string[]): this {
    for (const k of Object.keys(this.value)) if (!allowed.includes(k)) this.fail(k, 'is not a known field');
    return this;
  }

  string(name: string, opts: { required?: boolean; max?: number; min?: number; pattern?: RegExp } = {}): string | undefined {
    const v = this.get(name);
    if (v === undefined || v === null) {
      if (opts.required) this.fail(name, 'is required');
      return undefined;
    }
    if (typeof v !== 'string') return void this.fail(name, 'must be a string');
    if (opts.min !== undefined && v.length < opts.min) return void this.fail(name, `must be at least ${opts.min} characters`);
    if (opts.max !== undefined && v.length > opts.max) return void this.fail(name, `must be at most ${opts.max} characters`);
    if (opts.pattern && !opts.pattern.test(v)) return void this.fail(name, `must match ${opts.pattern}`);
    return v;
  }

  stringArray(name: string, opts: { required?: boolean; minItems?: number; maxItems?: number; minLength?: number; maxLength?: number } = {}): string[] | undefined {
    const v = this.get(name);
    if (v === undefined) {
      if (opts.required) this.fail(name, 'is required');
      return undefined;
    }
    if (!Array.isArray(v)) return void this.fail(name, 'must be an array of strings');
    if (opts.minItems !== undefined && v.length < opts.minItems) return void this.fail(name, `must have at least ${opts.minItems} item(s)`);
    if (opts.maxItems !== undefined && v.length > opts.maxItems) return void this.fail(name, `must have at most ${opts.maxItems} items`);
    let ok = true;
    v.forEach((item, i) => {
      if (typeof item !== 'string') {
        this.fail(`${name}[${i}]`, 'must be a string');
        ok = false;
      } else if (opts.minLength !== undefined && item.length < opts.minLength) {
        this.fail(`${name}[${i}]`, `must be at least ${opts.minLength} character(s)`);
        ok = false;
      } else if (opts.maxLength !== undefined && item.length > opts.maxLength) {
        this.fail(`${name}[${i}]`, `must be at most ${opts.maxLength} characters`);
        ok = false;
      }
    });
    return ok ? (v as string[]) : undefined;
  }

  object(name: string, opts: { required?: boolean; maxBytes?: number } = {}): Record<string, unknown> | undefined {
    const v = this.get(name);
    if (v === undefined) {
      if (opts.required) this.fail(name, 'is required');
      return undefined;
    }
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return void this.fail(name, 'must be a JSON object');
    if (opts.maxBytes !== undefined && Buffer.byteLength(JSON.stringify(v)) > opts.maxBytes) return void this.fail(name, `must be at most ${opts.maxBytes} bytes as JSON`);
    return v as Record<string, unknown>;
  }

  /** Throws 400 with every collected fault. */
  done(): void {
    if (this.errors.length > 0) throw invalidRequest(this.errors);
  }
}

/** Query-string integer within bounds, or a 400 naming the parameter. */
export function queryInt(query: URLSearchParams, name: string, def: number, min: number, max: number): number {
  const raw = query.get(name);
  if (raw === null) return def;
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw invalidRequest([{ path: `query.${name}`, message: `must be an integer between ${min} and ${max}` }]);
  }
  return Number(raw);
}
