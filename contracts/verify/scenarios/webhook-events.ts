/** Scenarios of the `webhooks` tag, events: publish one, publish a batch, list the published types. */
import type { Json, Operation } from '../../contract.ts';
import { send, type Exchange } from '../http.ts';
import type { Session } from '../session.ts';
import { type Scenario, body, names, pagingChecks, postJson, probeGet, tokenFor, validBody } from './common.ts';

/** An ordering key of `bytes` bytes as UTF-8 (two-byte characters, so a character count would pass it). */
const orderingKey = (bytes: number) => 'é'.repeat(Math.floor(bytes / 2)) + (bytes % 2 ? 'k' : '');

/**
 * listEventTypes: the type publishEvent published shows within 20 s (the fan-out counts an event as it
 * reads it and reports every 5 s), as last published no earlier than it was sent (30 s allowed for clocks).
 */
async function publishedTypeListed(s: Session, op: Operation): Promise<void> {
  const type = s.state.publishedType;
  const what = 'a type published by publishEvent is listed, as last published no earlier, within 20 s';
  if (!type || !s.state.publishedAt) {
    s.record(op, what, 'skip', 'publishEvent published nothing');
    return;
  }
  // The fan-out counts an event as it reads it and reports every 5 s; the clocks may differ by a little.
  const since = Number(s.state.publishedAt) - 30_000;
  const listed = (ex: Exchange) => {
    const t = (body(ex)?.data ?? []).find((d: Json) => d.type === type);
    return t !== undefined && Date.parse(t.last_published_at) >= since;
  };
  // Read, unrecorded, until it is listed or the time is up; then the one recorded check.
  const deadline = Date.now() + 20_000;
  const read = async () =>
    send(s.opts.baseUrl, { method: 'GET', path: op.path, headers: await tokenFor(s, op) }).catch(() => null);
  for (let ex = await read(); !(ex?.status === 200 && listed(ex)) && Date.now() < deadline; ex = await read())
    await new Promise((r) => setTimeout(r, 500));
  const waited = ((Date.now() - Number(s.state.publishedAt)) / 1000).toFixed(1);
  await probeGet(s, op, op.path, what, (ex) =>
    listed(ex)
      ? []
      : [`${type}, published ${waited} s ago, is not listed as published since (is a dispatcher running?)`],
  );
}

/** The most pages typePagesWalked reads. */
const WALK_PAGES = 12;

/**
 * listEventTypes, paged: one full read (limit=1000), then a walk by next_cursor with pages of a tenth
 * of it (limit=1 for up to 10 types) lists every type of the full read, each once, by name, with
 * next_cursor null on the last page. A type that appears during the walk may show too.
 */
async function typePagesWalked(s: Session, op: Operation): Promise<void> {
  const what = 'pages walked by next_cursor list every type of one full read, each once, by name';
  const headers = await tokenFor(s, op);
  const full = await send(s.opts.baseUrl, { method: 'GET', path: `${op.path}?limit=1000`, headers }).catch(() => null);
  const all: string[] = full?.status === 200 ? body(full).data.map((d: Json) => d.type) : [];
  if (full?.status !== 200 || all.length === 0 || body(full).next_cursor !== null) {
    const why = full?.status !== 200 ? `the full read answered ${full?.status ?? 'nothing'}` : 'not one page of types';
    s.record(op, what, 'skip', `${why} (${all.length} types)`);
    return;
  }
  const limit = Math.max(1, Math.ceil(all.length / 10));
  const walked: string[] = [];
  const faults: string[] = [];
  let cursor: string | null = null;
  let last: Exchange | null = null;
  for (let i = 0; i < WALK_PAGES; i++) {
    const path = `${op.path}?limit=${limit}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
    last = await s.probe(
      op,
      `page ${i + 1} of the walk (limit=${limit}) → 200`,
      { method: 'GET', path, headers },
      {
        status: [200],
        then: (ex) => (body(ex).data.length <= limit ? [] : [`${body(ex).data.length} types for limit=${limit}`]),
      },
    );
    if (last?.status !== 200) return;
    walked.push(...body(last).data.map((d: Json) => d.type));
    cursor = body(last).next_cursor;
    if (cursor === null) break;
  }
  if (cursor !== null) faults.push(`more than ${WALK_PAGES} pages of ${limit} for ${all.length} types`);
  if (walked.some((t, i) => i > 0 && t <= walked[i - 1])) faults.push('the pages are not by name, each type once');
  const missing = all.filter((t) => !walked.includes(t));
  if (missing.length > 0) faults.push(`the walk missed ${missing.slice(0, 5).join(', ')}`);
  s.record(op, what, faults.length ? 'fail' : 'pass', faults.join('; '), last?.status);
}

export const EVENT_SCENARIOS: Record<string, Scenario> = {
  async publishEvent(s, op) {
    const id = `evt_contract_${Date.now().toString(36)}`;
    const event = { ...validBody(s, op.operationId), id };
    const sentAt = Date.now();
    const first = await s.probe(op, 'valid event → 202', await postJson(s, op, event), {
      status: [202],
      then: (ex) => (body(ex).id === id ? [] : [`id is ${body(ex).id}, sent ${id}`]),
    });
    if (first?.status === 202) {
      s.state.publishedType = (event as Json).type;
      s.state.publishedAt = String(sentAt);
      await s.probe(op, 'same id again → 202 (idempotent)', await postJson(s, op, event), {
        status: [202],
        then: (ex) => (body(ex).id === id ? [] : ['a different id']),
      });
    }
    const accepted = { status: [202] };
    const refused = { status: [400], then: names('$.ordering_key') };
    for (const [what, key, expect] of [
      ['ordering_key → 202', 'contract-probe-key', accepted],
      ['ordering_key of 128 bytes (64 two-byte characters) → 202', orderingKey(128), accepted],
      ['ordering_key null → 202', null, accepted],
      ['ordering_key of 129 bytes → 400 naming it', orderingKey(129), refused],
      ['ordering_key of 65 two-byte characters (130 bytes) → 400 naming it', orderingKey(130), refused],
      ['empty ordering_key → 400 naming it', '', refused],
    ] as const)
      await s.probe(op, what, await postJson(s, op, { ...validBody(s, op.operationId), ordering_key: key }), expect);
  },

  async publishEventBatch(s, op) {
    const id = `evt_contract_batch_${Date.now().toString(36)}`;
    const events = [
      { type: 'inference.completed', data: { n: 1 }, id },
      { type: 'ping', data: null },
      { type: 'pipeline.failed', data: { n: 2 } },
      { type: 'inference.completed', data: { n: 3 }, id },
    ];
    await s.probe(
      op,
      'mixed batch → 202, the invalid item refused alone, a repeated id answered once',
      await postJson(s, op, { events }),
      {
        status: [202],
        then: (ex) => {
          const b = body(ex);
          const faults: string[] = [];
          if (b.accepted !== 3 || b.rejected !== 1)
            faults.push(`accepted ${b.accepted}, rejected ${b.rejected}; expected 3 and 1`);
          if (b.results?.[1]?.error?.code !== 'INVALID_REQUEST') faults.push('item 1 (type ping) was not refused');
          if (b.results?.[0]?.id !== id || b.results?.[3]?.id !== id)
            faults.push('the repeated id did not answer with the same id');
          return faults;
        },
      },
    );
    await s.probe(op, 'every item invalid → 400', await postJson(s, op, { events: [{ type: 'ping', data: null }] }), {
      status: [400],
    });
    await s.probe(
      op,
      'an item with a 129-byte ordering_key → refused alone, naming it',
      await postJson(s, op, {
        events: [
          { type: 'inference.completed', data: { n: 1 }, ordering_key: orderingKey(128) },
          { type: 'inference.completed', data: { n: 2 }, ordering_key: orderingKey(129) },
        ],
      }),
      {
        status: [202],
        then: (ex) => {
          const b = body(ex);
          if (b.accepted !== 1 || b.rejected !== 1)
            return [`accepted ${b.accepted}, rejected ${b.rejected}; expected 1 and 1`];
          const paths = (b.results?.[1]?.error?.errors ?? []).map((e: Json) => e.path);
          return paths.includes('$.events[1].ordering_key') ? [] : [`item 1's errors name ${paths.join(', ')}`];
        },
      },
    );
    await s.probe(
      op,
      '1,001 events → 400',
      await postJson(s, op, {
        events: Array.from({ length: 1001 }, () => ({ type: 'inference.completed', data: null })),
      }),
      { status: [400] },
    );
  },

  async listEventTypes(s, op) {
    await probeGet(s, op, op.path, 'GET → 200, by name, each type once', (ex) => {
      const data = body(ex).data as Json[];
      const faults: string[] = [];
      if (data.some((d, i) => i > 0 && d.type <= data[i - 1].type)) faults.push('types are not by name, each once');
      return faults;
    });
    await publishedTypeListed(s, op);
    await pagingChecks(s, op);
    await s.probe(
      op,
      'a cursor not of next_cursor form → 400',
      { method: 'GET', path: `${op.path}?cursor=not%20a%20cursor`, headers: await tokenFor(s, op) },
      { status: [400] },
    );
    await typePagesWalked(s, op);
  },
};
