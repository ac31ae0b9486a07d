/**
 * Spec 6.2/8: payloads older than 300 s are rejected. Measured on a live delivery: a local target
 * registered with the Sluice receives a real signed delivery and verifies it with the package's
 * `verifyWebhook` (signature and timestamp, against real time); then the very same bytes (body and
 * headers) are replayed to that target with its clock moved (a ManualClock, the clock facility
 * Sluice's own tests use) to 300 s after the delivery's timestamp, where they must still be
 * accepted, and to 301 s after it, where they must be refused as TIMESTAMP_OUT_OF_WINDOW.
 */
import { ManualClock } from '../../core/clock.ts';
import { verifyWebhook, WebhookVerificationError } from '../../receiver-sdk/verify.ts';
import { api, register, startTarget } from './webhook-target.ts';
import { result, type LimitCheck } from './types.ts';

const WINDOW_S = 300;
const REPLAYED_HEADERS = [
  'content-type',
  'x-service-signature-256',
  'x-service-timestamp',
  'x-service-event-id',
  'x-service-event-type',
  'x-service-delivery-attempt',
];

interface Received {
  raw: Buffer;
  headers: Record<string, string>;
  arrivedAt: number;
  verdict: string;
}

export const replayWindow: LimitCheck = {
  limit: 'replay window',
  spec: '300 s',
  async run(ctx) {
    const state = { secret: '', clock: null as ManualClock | null };
    const received: Received[] = [];
    const target = await startTarget((req, res, raw) => {
      // Real time for live deliveries; the guard's clock once it replays.
      const now = state.clock ? state.clock.now() : Date.now();
      let verdict = 'ok';
      try {
        verifyWebhook(raw, req.headers, state.secret, { now });
      } catch (err) {
        verdict = err instanceof WebhookVerificationError ? err.code : (err as Error).message;
      }
      const headers: Record<string, string> = {};
      for (const h of REPLAYED_HEADERS) if (typeof req.headers[h] === 'string') headers[h] = req.headers[h] as string;
      received.push({ raw, headers, arrivedAt: Date.now(), verdict });
      res
        .writeHead(verdict === 'ok' ? 200 : 400, { 'content-type': 'application/json' })
        .end(JSON.stringify({ verdict }));
    });
    let endpointId: string | null = null;
    try {
      // Its own event kind, so events other guards publish for the tenant do not reach this target.
      const ep = await register(ctx, target.url, ['pipeline.started']);
      if ('fail' in ep) return result(this, 'fail', '-', ep.fail);
      endpointId = ep.id;
      state.secret = ep.secret;
      if (ep.state !== 'ACTIVE')
        return result(this, 'fail', '-', `the target answered its ping but the endpoint is ${ep.state}`);
      const published = await api(ctx, 'POST', '/v1/webhooks/events', {
        type: 'pipeline.started',
        data: { guard: 'replay-window' },
      });
      if (published.status !== 202) return result(this, 'fail', '-', `publishing answered ${published.status}`);
      const deadline = Date.now() + 30_000;
      while (received.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      const live = received[0];
      if (!live) return result(this, 'fail', '-', 'no delivery arrived within 30 s (is a dispatcher running?)');
      const ts = Number(live.headers['x-service-timestamp']);
      const lag = ((live.arrivedAt - ts * 1000) / 1000).toFixed(1);
      if (live.verdict !== 'ok')
        return result(
          this,
          'fail',
          `live delivery refused: ${live.verdict}`,
          'a real delivery must verify with its endpoint secret when it arrives',
        );

      // The same bytes again, to the same receiver, with its clock at `age` seconds after the signature.
      const replay = async (age: number): Promise<string> => {
        state.clock = new ManualClock(ts * 1000 + age * 1000 + 500);
        const res = await fetch(target.url, { method: 'POST', headers: live.headers, body: new Uint8Array(live.raw) });
        const body = (await res.json().catch(() => ({}))) as { verdict?: string };
        return res.status === 200 ? 'ok' : (body.verdict ?? `HTTP ${res.status}`);
      };
      const atWindow = await replay(WINDOW_S);
      const past = await replay(WINDOW_S + 1);
      const measured =
        `live delivery verified (signed ${lag} s before it arrived); ` +
        `the same bytes replayed ${WINDOW_S} s after signing: ${atWindow}, ${WINDOW_S + 1} s after: ${past}`;
      return result(this, atWindow === 'ok' && past === 'TIMESTAMP_OUT_OF_WINDOW' ? 'pass' : 'fail', measured);
    } finally {
      if (endpointId) await api(ctx, 'DELETE', `/v1/webhooks/endpoints/${endpointId}`).catch(() => {});
      await target.close();
    }
  },
};
