/**
 * The bounds of an endpoint's `filter` (docs/webhooks.md, "Payload filters"), through
 * `POST /v1/webhooks/filters/test`, which compiles a filter as a registration would and evaluates
 * it with the fan-out's budget: 4,096 bytes of UTF-8 taken and one more refused (400 naming
 * `$.filter`), 511 nodes taken and 515 refused, a macro inside a macro refused, and a walk longer
 * than the budget answered as an evaluation error (no match), not a hang.
 */
import type { Json } from '../contract.ts';
import { api } from './webhook-target.ts';
import { result, type LimitCheck } from './types.ts';

/** `data.a == "x…x"` of exactly `bytes` bytes. */
const ofBytes = (bytes: number) => `data.a == "${'x'.repeat(bytes - 'data.a == ""'.length)}"`;
/** `1==1||…` of n terms: 3n + (n - 1) nodes. */
const ofTerms = (n: number) => Array.from({ length: n }, () => '1==1').join('||');

/** 200 (with `error` when the evaluation failed), or 400 when errors[] names $.filter. */
function answer(r: { status: number; body: Json }): string {
  if (r.status === 200) return r.body?.error ? `200 error` : '200';
  const paths: string[] = Array.isArray(r.body?.errors) ? r.body.errors.map((e: Json) => e.path) : [];
  return r.status === 400 && paths.includes('$.filter') ? '400' : `${r.status} naming ${paths.join(', ') || 'nothing'}`;
}

export const filterBounds: LimitCheck = {
  limit: 'endpoint filter bounds',
  spec: 'filter 4096 bytes → 200, 4097 → 400; 511 nodes → 200, 515 → 400; nested macro → 400; over budget → no match',
  async run(ctx) {
    const items = Array.from({ length: 20_000 }, (_, i) => i);
    const cases: [string, string, unknown, string][] = [
      ['4096 bytes', ofBytes(4096), { a: 'x' }, '200'],
      ['4097 bytes', ofBytes(4097), { a: 'x' }, '400'],
      ['511 nodes', ofTerms(128), null, '200'],
      ['515 nodes', ofTerms(129), null, '400'],
      ['nested macro', 'data.a.all(x, data.b.exists(y, y == x))', { a: [1], b: [1] }, '400'],
      ['a walk of 20,000 items', 'data.items.exists(x, x == -1)', { items }, '200 error'],
    ];
    const got: string[] = [];
    for (const [, filter, data] of cases)
      got.push(
        answer(await api(ctx, 'POST', '/v1/webhooks/filters/test', { filter, event: { type: 'limits.filter', data } })),
      );
    const measured = cases.map(([what], i) => `${what} → ${got[i]}`).join(', ');
    const wrong = cases
      .filter(([, , , want], i) => got[i] !== want)
      .map(([what, , , want]) => `${what} should be ${want}`);
    return result(this, wrong.length ? 'fail' : 'pass', measured, wrong.join('; ') || undefined);
  },
};
