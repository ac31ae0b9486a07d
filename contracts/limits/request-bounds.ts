/**
 * The bounds of the delivery policy's inputs, as the API enforces them: an event's `ordering_key`
 * (1..128 bytes as UTF-8, not characters) and an endpoint's `rate_limit_per_second` (1..10000) and
 * `max_in_flight` (1..1000): each bound taken (201/200/202), one past it refused with 400 naming the field.
 */
import type { Json } from '../contract.ts';
import { api, register, startTarget } from './webhook-target.ts';
import { result, type LimitCheck } from './types.ts';

/** A key of `bytes` bytes as UTF-8 in two-byte characters (a count of characters would take 65 of them). */
const key = (bytes: number) => 'é'.repeat(Math.floor(bytes / 2)) + (bytes % 2 ? 'k' : '');

/** `status`, and `named` when a 400's errors[] names `path`. */
function answer(r: { status: number; body: Json }, path: string): string {
  const paths: string[] = Array.isArray(r.body?.errors) ? r.body.errors.map((e: Json) => e.path) : [];
  return r.status === 400 && !paths.includes(path) ? `400 naming ${paths.join(', ') || 'nothing'}` : String(r.status);
}

export const orderingKeySize: LimitCheck = {
  limit: 'ordering key size',
  spec: '1..128 bytes (UTF-8): 128 → 202, 129 → 400',
  async run(ctx) {
    // Its own type: no endpoint of another guard matches these events.
    const publish = async (k: string) => {
      const r = await api(ctx, 'POST', '/v1/webhooks/events', {
        type: 'limits.ordering_key',
        data: { guard: 'ordering-key-size' },
        ordering_key: k,
      });
      return answer(r, '$.ordering_key');
    };
    const cases: [string, string, string][] = [
      ['128 bytes', key(128), '202'],
      ['129 bytes', key(129), '400'],
      ['65 characters of 2 bytes', key(130), '400'],
      ['1 byte', 'k', '202'],
      ['empty', '', '400'],
    ];
    const got: string[] = [];
    for (const [, k] of cases) got.push(await publish(k));
    const measured = cases.map(([what], i) => `${what} → ${got[i]}`).join(', ');
    const wrong = cases.filter(([, , want], i) => got[i] !== want).map(([what, , want]) => `${what} should be ${want}`);
    return result(this, wrong.length ? 'fail' : 'pass', measured, wrong.join('; ') || undefined);
  },
};

const REFUSED: [string, number][] = [
  ['rate_limit_per_second', 0],
  ['rate_limit_per_second', 10001],
  ['max_in_flight', 0],
  ['max_in_flight', 1001],
];

export const endpointLimitBounds: LimitCheck = {
  limit: 'endpoint limit bounds',
  spec: 'rate_limit_per_second 1..10000, max_in_flight 1..1000 (0 and one over → 400)',
  async run(ctx) {
    const target = await startTarget((_, res) => res.writeHead(200).end());
    let endpointId: string | null = null;
    try {
      // The upper bounds taken at registration, the lower ones by an update.
      const ep = await register(ctx, target.url, ['limits.bounds'], {
        rate_limit_per_second: 10000,
        max_in_flight: 1000,
      });
      if ('fail' in ep) return result(this, 'fail', '-', ep.fail);
      endpointId = ep.id;
      const path = `/v1/webhooks/endpoints/${ep.id}`;
      const lower = await api(ctx, 'PATCH', path, { rate_limit_per_second: 1, max_in_flight: 1 });
      const taken = [
        `10000/1000 at registration → 201 showing ${ep.body.rate_limit_per_second}/${ep.body.max_in_flight}`,
        `1/1 by PATCH → ${lower.status}` +
          (lower.status === 200 ? ` showing ${lower.body.rate_limit_per_second}/${lower.body.max_in_flight}` : ''),
      ];
      const faults: string[] = [];
      if (ep.body.rate_limit_per_second !== 10000 || ep.body.max_in_flight !== 1000)
        faults.push('the registration does not show 10000/1000');
      if (lower.status !== 200 || lower.body.rate_limit_per_second !== 1 || lower.body.max_in_flight !== 1)
        faults.push('the update to 1/1 was not taken');
      const refused: string[] = [];
      for (const [field, value] of REFUSED) {
        const created = await api(ctx, 'POST', '/v1/webhooks/endpoints', {
          url: target.url,
          events: ['limits.bounds'],
          [field]: value,
        });
        if (created.status === 201) await api(ctx, 'DELETE', `/v1/webhooks/endpoints/${created.body.id}`);
        const patched = await api(ctx, 'PATCH', path, { [field]: value });
        const got = [answer(created, `$.${field}`), answer(patched, `$.${field}`)];
        refused.push(`${field} ${value} → ${got.join('/')}`);
        if (got.some((g) => g !== '400')) faults.push(`${field} ${value} should be 400 at registration and update`);
      }
      const measured = `${taken.join('; ')}; ${refused.join(', ')} (registration/update)`;
      return result(this, faults.length ? 'fail' : 'pass', measured, faults.join('; ') || undefined);
    } finally {
      if (endpointId) await api(ctx, 'DELETE', `/v1/webhooks/endpoints/${endpointId}`).catch(() => {});
      await target.close();
    }
  },
};
