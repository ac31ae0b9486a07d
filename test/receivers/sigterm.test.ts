/**
 * SIGTERM with deliveries in flight to slow receivers (each answers after ~2 s): the `sluice
 * dispatcher` process exits 0 by itself (how soon is printed, not judged), the attempts in flight
 * at the signal finish (their answers are read, not cut off) and their outcomes are recorded, and
 * whatever it had not finished stays uncommitted: a dispatcher started afterwards delivers every event at least once.
 */
import t from 'tap';
import type { ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { spawnDispatcher } from '../../harness/sluice-cli.ts';
import { startTestNode, uniquePrefix } from '../helpers/sluice.ts';
import { registerEndpoint } from '../dispatcher/receiver.ts';
import { orNullAfter } from '../../core/deadline.ts';

const EVENTS = Number(process.env.SIGTERM_EVENTS ?? 40);
// Under SLUICE_DISPATCH_SLOW_MS (2 s): a slower answer would halve each endpoint's in-flight limit
// down to 1, and the signal is meant to come with a full round of attempts open.
const ANSWER_AFTER_MS = 1500;
/** Only a guard against a hang (then the process is killed and the test fails); not a timing target. */
const HANG_GUARD_MS = 60_000;
const prefix = uniquePrefix('sigterm');
const env = { SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true', SLUICE_TIME_SCALE: '600', SLUICE_TOPIC_PARTITIONS: '3' };
const node = await startTestNode(env, { prefix });
const children: ChildProcess[] = [];
const servers: Server[] = [];
t.teardown(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
  await node.close();
});

interface Request {
  eventId: string;
  attempt: string;
  arrived: number;
  status: number;
  /** 'answered': the whole answer went out; 'cut': the client closed the connection before it. */
  end: 'pending' | 'answered' | 'cut';
}

/** A receiver that answers every event after ANSWER_AFTER_MS; `statusFor` picks the status. */
async function slowReceiver(statusFor: (attempt: string) => number) {
  const requests: Request[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.headers['x-service-event-type'] === 'ping') return void res.writeHead(200).end('ok');
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: string };
      const attempt = String(req.headers['x-service-delivery-attempt']);
      const r: Request = { eventId: body.id, attempt, arrived: Date.now(), status: statusFor(attempt), end: 'pending' };
      requests.push(r);
      res.on('finish', () => (r.end = 'answered'));
      res.on('close', () => {
        if (r.end === 'pending') r.end = 'cut';
      });
      const timer = setTimeout(() => res.writeHead(r.status).end('ok'), ANSWER_AFTER_MS);
      res.on('close', () => clearTimeout(timer));
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`, requests };
}

const output = new Map<ChildProcess, () => string>();

async function startDispatcher(): Promise<ChildProcess> {
  const d = await spawnDispatcher(prefix, env, (c) => children.push(c));
  output.set(d.child, d.output);
  return d.child;
}

async function sigterm(child: ChildProcess): Promise<{ code: number | null; signal: string | null; ms: number }> {
  const sent = Date.now();
  const exited = new Promise<{ code: number | null; signal: string | null }>((r) =>
    child.once('exit', (code, signal) => r({ code, signal })),
  );
  child.kill('SIGTERM');
  const res = await orNullAfter(exited, HANG_GUARD_MS);
  if (res === null) {
    child.kill('SIGKILL');
    return { code: null, signal: 'timeout', ms: Date.now() - sent };
  }
  return { ...res, ms: Date.now() - sent };
}

t.test('SIGTERM with deliveries in flight: exit 0 by itself, nothing lost', async (t) => {
  const token = await node.token(await node.client('admin', 'sigterm'));
  // One receiver succeeds slowly; the other fails every first attempt slowly, so outcomes that
  // need a write (a retry on a rung) are in flight at the signal too.
  const ok = await slowReceiver(() => 200);
  const flaky = await slowReceiver((attempt) => (attempt === '1' ? 500 : 200));
  const receivers = [ok, flaky];
  for (const r of receivers) t.equal((await registerEndpoint(node, token, r.url, ['*'])).state, 'ACTIVE');

  let first = await startDispatcher();
  const ids: string[] = [];
  const records = [];
  for (let i = 0; i < EVENTS; i++) {
    const id = `term-${i}`;
    ids.push(id);
    records.push({
      key: 'sigterm',
      value: JSON.stringify({
        id,
        tenant_id: 'sigterm',
        type: 'pipeline.completed',
        data: { i },
        created_at: Date.now(),
      }),
    });
  }
  await node.ctx.producer.send(node.ctx.topics.events, records);

  const all = () => receivers.flatMap((r) => r.requests);
  const delivered = () =>
    new Set(
      receivers.flatMap((r, i) =>
        r.requests.filter((q) => q.status === 200 && q.end === 'answered').map((q) => `${q.eventId}@${i}`),
      ),
    );
  const total = EVENTS * receivers.length;
  const deadline = Date.now() + 60_000;
  // Signal mid-run: some deliveries done, and a round of attempts waiting on their slow answers.
  while ((delivered().size < 8 || all().filter((q) => q.end === 'pending').length < 8) && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 20));
  const inFlight = all().filter((q) => q.end === 'pending');
  const deliveredAtSignal = delivered().size;
  t.ok(inFlight.length >= 8, `${inFlight.length} attempts in flight at the signal`);
  t.ok(
    deliveredAtSignal >= 8 && deliveredAtSignal < total,
    `the signal came mid-run (${deliveredAtSignal} of ${total} delivered)`,
  );
  const signalledAt = Date.now();
  const exit = await sigterm(first);
  t.equal(exit.signal, null, 'the process exited by itself, not killed');
  t.equal(exit.code, 0, 'exit code 0');
  t.comment(`exited ${exit.ms} ms after SIGTERM`);
  t.match(
    output.get(first)!(),
    /SIGTERM: stopping[\s\S]*dispatcher stopped/,
    'it said it was stopping, then that it stopped',
  );
  t.same(
    inFlight.filter((q) => q.end !== 'answered').map((q) => `${q.eventId} attempt ${q.attempt}: ${q.end}`),
    [],
    'every attempt in flight at the signal finished: its answer was read, not cut off',
  );
  const late = all().filter((q) => q.arrived > signalledAt + 1000);
  t.same(
    late.map((q) => q.eventId),
    [],
    'no new attempt was started during the shutdown',
  );
  t.same(
    all()
      .filter((q) => q.end === 'cut')
      .map((q) => q.eventId),
    [],
    'no attempt at all was cut off',
  );

  // Everything else stayed uncommitted (or was recorded on a rung): another dispatcher finishes it.
  first = await startDispatcher();
  const end = Date.now() + 90_000;
  const want = ids.flatMap((id) => receivers.map((_, i) => `${id}@${i}`));
  let missing = want;
  while (Date.now() < end) {
    const got = delivered();
    missing = want.filter((k) => !got.has(k));
    if (missing.length === 0) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  t.same(
    missing.slice(0, 10),
    [],
    `every event reached every endpoint with a 200 at least once (${missing.length} missing)`,
  );
  // A failed attempt in flight at the signal had its outcome recorded (the retry written to its
  // rung) before the exit: each such first attempt is followed by an attempt 2 of its own, on top
  // of the attempt 2 of any repetition of attempt 1 (a repetition comes from an uncommitted offset).
  const failedAtSignal = inFlight.filter((q) => q.attempt === '1' && q.status === 500).map((q) => q.eventId);
  t.ok(failedAtSignal.length > 0, `${failedAtSignal.length} failing first attempts were in flight at the signal`);
  const count = (id: string, attempt: string) =>
    flaky.requests.filter((q) => q.eventId === id && q.attempt === attempt).length;
  const unrecorded = () => failedAtSignal.filter((id) => count(id, '2') < count(id, '1'));
  const until = Date.now() + 15_000;
  while (unrecorded().length > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
  t.same(
    unrecorded().map((id) => `${id}: ${count(id, '1')} × attempt 1, ${count(id, '2')} × attempt 2`),
    [],
    'every failed attempt 1 got its attempt 2: the outcomes in flight at the signal were recorded',
  );
  const requestsPer = new Map<string, number>();
  for (const [i, r] of receivers.entries())
    for (const q of r.requests)
      if (q.status === 200) requestsPer.set(`${q.eventId}@${i}`, (requestsPer.get(`${q.eventId}@${i}`) ?? 0) + 1);
  const duplicates = [...requestsPer.values()].reduce((n, c) => n + c - 1, 0);
  t.comment(
    `${total} deliveries; ${inFlight.length} in flight and ${deliveredAtSignal} delivered at the signal; ` +
      `exit after ${exit.ms} ms; ${duplicates} repeated 200 deliveries`,
  );
  // A stop that finishes what is in flight and commits it (with the offsets finished beyond each
  // partition's point) leaves the next dispatcher nothing to repeat: a rolling restart repeats nothing.
  t.equal(duplicates, 0, 'no delivery answered 200 was made again by the dispatcher started after the SIGTERM');
  const second = await sigterm(first);
  t.equal(second.code, 0, `the second dispatcher stops cleanly too (${second.ms} ms)`);
});
