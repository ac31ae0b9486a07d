/**
 * Requests are validated by the contract (contracts/requests.ts): what the hand-written checks
 * (core/validate.ts, the routes' queryInt, queryString and queryId, MAX_PATH_PARAM) refused is
 * still refused, through the new path, with the same status and the same field paths. And the
 * limits the code still holds for its own use are the contract's numbers.
 */
import t from 'tap';
import { startTestNode, call } from '../helpers/sluice.ts';
import { loadContract, pointer } from '../../contracts/contract.ts';
import { MAX_TARGET_URL_LENGTH } from '../../outbound/target-guard.ts';
import { MAX_SECRET_OVERLAP_MS } from '../../core/webhooks/endpoint-service.ts';
import { EVENT_ID_PATTERN, EVENT_TYPE_PATTERN } from '../../core/webhooks/deliveries.ts';
import { KNOWN_EVENT_KINDS } from '../../core/webhooks/records.ts';
import { CURSOR_PATTERN } from '../../core/paging.ts';

const doc = loadContract();
const long = (n: number) => 'x'.repeat(n);
const schema = (name: string) => pointer(doc, `#/components/schemas/${name}`);

t.test('the limits core/ keeps for its own checks are the contract numbers', async (t) => {
  const create = schema('EndpointCreate').properties;
  t.equal(create.url.maxLength, MAX_TARGET_URL_LENGTH, 'target URL length (the SSRF guard re-checks it at delivery)');
  t.equal(schema('SecretRotation').properties.overlap_seconds.maximum, MAX_SECRET_OVERLAP_MS / 1000, 'secret overlap');
  t.equal(schema('EventType').pattern, EVENT_TYPE_PATTERN.source, 'event type pattern (records read from Kafka)');
  t.equal(schema('EventPublish').properties.id.pattern, EVENT_ID_PATTERN.source, 'event id pattern');
  t.same(schema('EventKind').enum, [...KNOWN_EVENT_KINDS], 'the known event kinds');
  const cursor = new RegExp(pointer(doc, '#/components/parameters/Cursor').schema.pattern);
  const samples = ['0', '1732245000000.dlq_ab12', '1234567890123456', '1.', '.x', 'bm9wZQ', `1.${long(129)}`, '1.a.b'];
  for (const c of samples) {
    t.equal(cursor.test(c), CURSOR_PATTERN.test(c), `the cursor "${c.slice(0, 20)}" is read alike`);
  }
});

const node = await startTestNode();
t.teardown(() => node.close());
const token = await node.token(await node.client('admin', 'acme'));

type Case = [name: string, method: string, path: string, body: unknown, status: number, paths: string[] | null];

const url = 'https://hooks.example.com/sluice';
const event = { type: 'inference.completed', data: { model: 'm-1' } };
const kinds = (n: number) => Array.from({ length: n }, () => 'ping');
const keys = (n: number) => Object.fromEntries(kinds(n).map((_, i) => [`k${i}`, i]));
const EP = '/v1/webhooks/endpoints';
const PUB = '/v1/webhooks/events';
const BATCH = '/v1/webhooks/events/batch';
const REPLAY = '/v1/webhooks/dlq/replay';
const REVOKE = '/v1/auth/revocations';
const ROTATE = `${EP}/ep_x/rotate-secret`;
const ATT = `${EP}/ep_x/attempts`;
const DLQ = '/v1/webhooks/dlq';
const STATS = '/v1/webhooks/stats';

// The cases the hand-written checks refused, written from them before they were deleted.
const cases: Case[] = [
  // Fields.object / only / string / stringArray / object on POST /v1/webhooks/endpoints
  ['create: not an object', 'POST', EP, [1, 2], 400, ['$']],
  ['create: a string', 'POST', EP, 'x', 400, ['$']],
  ['create: nothing', 'POST', EP, {}, 400, ['$.url', '$.events']],
  ['create: unknown member', 'POST', EP, { url, events: ['ping'], secret: 'mine' }, 400, ['$.secret']],
  ['create: url not a string', 'POST', EP, { url: 42, events: ['ping'] }, 400, ['$.url']],
  ['create: url null', 'POST', EP, { url: null, events: ['ping'] }, 400, ['$.url']],
  ['create: url empty', 'POST', EP, { url: '', events: ['ping'] }, 400, ['$.url']],
  ['create: url too long', 'POST', EP, { url: `${url}/${long(2048)}`, events: ['ping'] }, 400, ['$.url']],
  ['create: url not absolute', 'POST', EP, { url: 'hooks.example.com/x', events: ['ping'] }, 400, ['$.url']],
  ['create: events missing', 'POST', EP, { url }, 400, ['$.events']],
  ['create: events empty', 'POST', EP, { url, events: [] }, 400, ['$.events']],
  ['create: events not an array', 'POST', EP, { url, events: 'ping' }, 400, ['$.events']],
  ['create: 65 kinds', 'POST', EP, { url, events: kinds(65) }, 400, ['$.events']],
  ['create: not an event type', 'POST', EP, { url, events: ['nope.happened.twice'] }, 400, ['$.events[0]']],
  ['create: a family of no word', 'POST', EP, { url, events: ['.*'] }, 400, ['$.events[0]']],
  ['create: upper case', 'POST', EP, { url, events: ['Order.Created'] }, 400, ['$.events[0]']],
  ['create: kind listed twice', 'POST', EP, { url, events: ['ping', 'ping'] }, 400, ['$.events[1]']],
  ['create: kind not a string', 'POST', EP, { url, events: ['ping', 7] }, 400, ['$.events[1]']],
  ['create: kind over 128 characters', 'POST', EP, { url, events: [long(129)] }, 400, ['$.events[0]']],
  ['create: metadata an array', 'POST', EP, { url, events: ['ping'], metadata: ['x'] }, 400, ['$.metadata']],
  ['create: metadata a string', 'POST', EP, { url, events: ['ping'], metadata: 'team' }, 400, ['$.metadata']],
  ['create: metadata of 65 keys', 'POST', EP, { url, events: ['ping'], metadata: keys(65) }, 400, ['$.metadata']],
  [
    'create: metadata over 4096 bytes',
    'POST',
    EP,
    { url, events: ['ping'], metadata: { b: long(5e3) } },
    400,
    ['$.metadata'],
  ],
  // rotate-secret's overlap_seconds, and the body-less operations' refuseBody
  ['rotate: overlap negative', 'POST', ROTATE, { overlap_seconds: -5 }, 400, ['$.overlap_seconds']],
  ['rotate: overlap over 7 days', 'POST', ROTATE, { overlap_seconds: 604801 }, 400, ['$.overlap_seconds']],
  ['rotate: overlap not an integer', 'POST', ROTATE, { overlap_seconds: 1.5 }, 400, ['$.overlap_seconds']],
  ['rotate: overlap a string', 'POST', ROTATE, { overlap_seconds: '10' }, 400, ['$.overlap_seconds']],
  ['rotate: overlap null', 'POST', ROTATE, { overlap_seconds: null }, 400, ['$.overlap_seconds']],
  ['rotate: unknown member', 'POST', ROTATE, { overlap: 5 }, 400, ['$.overlap']],
  ['rotate: not an object', 'POST', ROTATE, [5], 400, ['$']],
  ['delete: a body', 'DELETE', `${EP}/ep_x`, { force: true }, 400, ['$']],
  ['verify: a body', 'POST', `${EP}/ep_x/verify`, { now: true }, 400, ['$']],
  // parsePublish on POST /v1/webhooks/events
  ['publish: not an object', 'POST', PUB, [event], 400, ['$']],
  ['publish: type missing', 'POST', PUB, { data: {} }, 400, ['$.type']],
  ['publish: type ping', 'POST', PUB, { type: 'ping', data: {} }, 400, ['$.type']],
  ['publish: type endpoint.disabled', 'POST', PUB, { type: 'endpoint.disabled', data: {} }, 400, ['$.type']],
  ['publish: type not a kind', 'POST', PUB, { type: 'Not A Kind', data: {} }, 400, ['$.type']],
  ['publish: type over 65', 'POST', PUB, { type: `a.${long(64)}`, data: {} }, 400, ['$.type']],
  ['publish: type a number', 'POST', PUB, { type: 5, data: {} }, 400, ['$.type']],
  ['publish: data missing', 'POST', PUB, { type: 'inference.completed' }, 400, ['$.data']],
  ['publish: id empty', 'POST', PUB, { ...event, id: '' }, 400, ['$.id']],
  ['publish: id with spaces', 'POST', PUB, { ...event, id: 'bad id' }, 400, ['$.id']],
  ['publish: id over 128', 'POST', PUB, { ...event, id: long(129) }, 400, ['$.id']],
  ['publish: id a number', 'POST', PUB, { ...event, id: 5 }, 400, ['$.id']],
  ['publish: unknown member', 'POST', PUB, { ...event, extra: 1 }, 400, ['$.extra']],
  ['publish: two faults', 'POST', PUB, { type: 'ping', id: 'a b' }, 400, ['$.data', '$.type', '$.id']],
  ['publish: data over 256 KiB', 'POST', PUB, { ...event, data: long(256 * 1024) }, 413, null],
  ['publish: a field fault beside large data: 400', 'POST', PUB, { type: 'ping', data: long(262144) }, 400, ['$.type']],
  // parseBatch and its items on POST /v1/webhooks/events/batch
  ['batch: events missing', 'POST', BATCH, {}, 400, ['$.events']],
  ['batch: events not an array', 'POST', BATCH, { events: 'x' }, 400, ['$.events']],
  ['batch: events empty', 'POST', BATCH, { events: [] }, 400, ['$.events']],
  ['batch: 1001 events', 'POST', BATCH, { events: Array.from({ length: 1001 }, () => event) }, 400, ['$.events']],
  ['batch: unknown member', 'POST', BATCH, { events: [event], other: 1 }, 400, ['$.other']],
  ['batch: every item invalid', 'POST', BATCH, { events: [{ data: 1 }, 5] }, 400, ['$.events[0].type', '$.events[1]']],
  ['batch: every item too large', 'POST', BATCH, { events: [{ ...event, data: long(300_000) }] }, 413, null],
  ['batch: over 1 MiB', 'POST', BATCH, { events: kinds(5).map(() => ({ ...event, data: long(250_000) })) }, 413, null],
  // replayBulk on POST /v1/webhooks/dlq/replay
  ['replay: no body', 'POST', REPLAY, undefined, 400, ['$']],
  ['replay: ids empty', 'POST', REPLAY, { ids: [] }, 400, ['$.ids']],
  ['replay: 1001 ids', 'POST', REPLAY, { ids: Array.from({ length: 1001 }, (_, i) => `d${i}`) }, 400, ['$.ids']],
  ['replay: an empty id', 'POST', REPLAY, { ids: [''] }, 400, ['$.ids[0]']],
  ['replay: an id over 128', 'POST', REPLAY, { ids: ['a', long(129)] }, 400, ['$.ids[1]']],
  ['replay: an id a number', 'POST', REPLAY, { ids: [5] }, 400, ['$.ids[0]']],
  ['replay: endpoint_id empty', 'POST', REPLAY, { endpoint_id: '' }, 400, ['$.endpoint_id']],
  ['replay: endpoint_id over 128', 'POST', REPLAY, { endpoint_id: long(129) }, 400, ['$.endpoint_id']],
  ['replay: event_type not a kind', 'POST', REPLAY, { event_type: 'Bad' }, 400, ['$.event_type']],
  // the path moved from $.ids to $: "not both" is a rule of the whole body in the contract
  ['replay: ids and a filter', 'POST', REPLAY, { ids: ['a'], endpoint_id: 'ep_x' }, 400, ['$']],
  ['replay: unknown member', 'POST', REPLAY, { id: 'a' }, 400, ['$.id']],
  // POST /v1/auth/revocations
  ['revoke: nothing', 'POST', REVOKE, {}, 400, ['$.client_id', '$.reason']],
  ['revoke: client_id over 128', 'POST', REVOKE, { client_id: long(129), reason: 'r' }, 400, ['$.client_id']],
  ['revoke: client_id empty', 'POST', REVOKE, { client_id: '', reason: 'r' }, 400, ['$.client_id']],
  ['revoke: reason empty', 'POST', REVOKE, { client_id: 'cl_x', reason: '' }, 400, ['$.reason']],
  ['revoke: reason over 1000', 'POST', REVOKE, { client_id: 'cl_x', reason: long(1001) }, 400, ['$.reason']],
  ['revoke: reason null', 'POST', REVOKE, { client_id: 'cl_x', reason: null }, 400, ['$.reason']],
  ['revoke: unknown member', 'POST', REVOKE, { client_id: 'cl_x', reason: 'r', when: 'now' }, 400, ['$.when']],
  // queryInt, readCursor, queryString, queryId
  ...['0', '1001', 'abc', '1.5', '1e2', '-1', '', ' 5'].flatMap((limit): Case[] =>
    [EP, DLQ, '/v1/audit', `${EP}/ep_x/attempts`].map((p) => {
      const path = `${p}?limit=${encodeURIComponent(limit)}`;
      return [path, 'GET', path, undefined, 400, ['query.limit']];
    }),
  ),
  ...[EP, DLQ, '/v1/audit'].map((p): Case => {
    const path = `${p}?cursor=bm9wZQ`;
    return [path, 'GET', path, undefined, 400, ['query.cursor']];
  }),
  ['dlq: endpoint_id empty', 'GET', '/v1/webhooks/dlq?endpoint_id=', undefined, 400, ['query.endpoint_id']],
  ['dlq: endpoint_id over 128', 'GET', `${DLQ}?endpoint_id=${long(129)}`, undefined, 400, ['query.endpoint_id']],
  ['dlq: event_type not a kind', 'GET', '/v1/webhooks/dlq?event_type=Bad', undefined, 400, ['query.event_type']],
  ['dlq: event_type over 65', 'GET', `/v1/webhooks/dlq?event_type=a.${long(64)}`, undefined, 400, ['query.event_type']],
  ['attempts: delivery_id with a space', 'GET', `${ATT}?delivery_id=a%20b`, undefined, 400, ['query.delivery_id']],
  ['attempts: delivery_id over 128', 'GET', `${ATT}?delivery_id=${long(129)}`, undefined, 400, ['query.delivery_id']],
  ['attempts: event_id not an id', 'GET', `${EP}/ep_x/attempts?event_id=-x`, undefined, 400, ['query.event_id']],
  ['stats: endpoint_id with a space', 'GET', `${STATS}?endpoint_id=a%20b`, undefined, 400, ['query.endpoint_id']],
  ['stats: endpoint_id empty', 'GET', '/v1/webhooks/stats?endpoint_id=', undefined, 400, ['query.endpoint_id']],
  // MAX_PATH_PARAM: every named path parameter is 1 to 128 characters
  ['path: endpoint id over 128', 'GET', `${EP}/${long(129)}`, undefined, 400, ['path.id']],
  ['path: dlq id over 128', 'POST', `/v1/webhooks/dlq/${long(129)}/replay`, undefined, 400, ['path.id']],
  ['path: client id over 128', 'GET', `/v1/auth/clients/${long(129)}/secret`, undefined, 400, ['path.id']],
];

t.test('every case the hand-written checks refused is refused by the contract, at the same paths', async (t) => {
  for (const [name, method, path, body, status, paths] of cases) {
    const res = await call(node.base, method, path, { token, body });
    t.equal(res.status, status, `${name}: ${status}`);
    if (status === 413) {
      t.equal(res.json?.code, 'PAYLOAD_TOO_LARGE', `${name}: PAYLOAD_TOO_LARGE`);
      t.type(res.json?.max_bytes, 'number', `${name}: names the limit`);
      continue;
    }
    t.equal(res.json?.code, 'INVALID_REQUEST', `${name}: INVALID_REQUEST`);
    t.same(
      res.json?.errors?.map((e: { path: string }) => e.path),
      paths,
      `${name}: paths ${res.text.slice(0, 200)}`,
    );
  }
});

t.test('what the hand-written checks let through still passes', async (t) => {
  const nullId = await call(node.base, 'POST', PUB, { token, body: { ...event, id: null } });
  t.equal(nullId.status, 202, 'a null id is no id');
  const zeros = await call(node.base, 'GET', '/v1/webhooks/endpoints?limit=007', { token });
  t.equal(zeros.status, 200, 'limit 007 is 7');
  const unknownQuery = await call(node.base, 'GET', '/v1/audit?subject=x&limit=1000', { token });
  t.equal(unknownQuery.status, 200, 'unknown query parameters are ignored');
  const emptyBody = await call(node.base, 'POST', `${EP}/ep_x/verify`, { token, body: {} });
  t.equal(emptyBody.status, 404, '{} on a body-less operation is no body');
  const nullFilter = await call(node.base, 'POST', REPLAY, { token, body: { ids: ['a'], endpoint_id: null } });
  const got = { status: nullFilter.status, body: nullFilter.json };
  t.same(got, { status: 202, body: { replayed: 0 } }, 'a null filter is no filter');
  const batch = await call(node.base, 'POST', BATCH, { token, body: { events: [event, { type: 'ping', data: 1 }] } });
  t.equal(batch.status, 202, 'a batch with one invalid item publishes the others');
  const itemPaths = batch.json?.results?.[1]?.error?.errors?.map((e: { path: string }) => e.path);
  t.same(itemPaths, ['$.events[1].type'], 'the refused item names its path');
  const ftp = { url: 'ftp://hooks.example.com/x', events: ['ping'] };
  const farUrl = await call(node.base, 'POST', EP, { token, body: ftp });
  t.same([farUrl.status, farUrl.json?.reason], [422, 'scheme'], "another scheme is still the target guard's 422");
});
