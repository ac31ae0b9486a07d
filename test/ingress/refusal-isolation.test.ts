/**
 * A framing refusal closes the connection that sent the bad request and no other: clients behind
 * the same address (127.0.0.1 here, a NAT or a proxy in production) keep every answer.
 */
import t from 'tap';
import { connect, type Socket } from 'node:net';
import { spawn, type ChildProcess } from 'node:child_process';
import { startTestNode } from '../helpers/sluice.ts';
import { rawHttp } from '../helpers/raw-http.ts';

const node = await startTestNode();
t.teardown(() => node.close());
const port = node.ingress!.port;

const GOOD = 'GET /v1/auth/jwks HTTP/1.1\r\nhost: x\r\n\r\n';
const BAD =
  'POST /v1/webhooks/events HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n' +
  'content-length: 2\r\ncontent-length: 3\r\n\r\n{}';

/** A keep-alive HTTP/1.1 connection that sends one request at a time and reads its whole answer. */
class KeepAlive {
  private buffer = Buffer.alloc(0);
  private waiting: (() => void) | null = null;
  closed = false;

  private constructor(readonly socket: Socket) {
    socket.on('data', (d) => {
      this.buffer = Buffer.concat([this.buffer, d]);
      this.waiting?.();
    });
    const end = () => {
      this.closed = true;
      this.waiting?.();
    };
    socket.on('close', end);
    socket.on('error', end);
  }

  static open(): Promise<KeepAlive> {
    return new Promise((resolve, reject) => {
      const s = connect(port, '127.0.0.1', () => resolve(new KeepAlive(s)));
      s.once('error', reject);
    });
  }

  /** Writes the request now (the kernel has it when this returns); `answer()` reads the reply. */
  send(raw: string): void {
    this.socket.write(raw);
  }

  /** The next response's status, or null when the connection closed before a whole one arrived. */
  async answer(): Promise<number | null> {
    for (;;) {
      const head = this.buffer.indexOf('\r\n\r\n');
      if (head >= 0) {
        const text = this.buffer.subarray(0, head).toString('latin1');
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(text)?.[1] ?? 0);
        if (this.buffer.length >= head + 4 + length) {
          this.buffer = this.buffer.subarray(head + 4 + length);
          return Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]);
        }
      }
      if (this.closed) return null;
      await new Promise<void>((r) => (this.waiting = r));
      this.waiting = null;
    }
  }

  close(): void {
    this.socket.destroy();
  }
}

/**
 * Blocks this process (the node runs in it) so that requests already written by both clients sit
 * in the kernel until the server reads them: they are then read in one turn of its event loop,
 * which is when a refusal keyed by address took the other client's request with it.
 */
function holdEventLoop(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

t.test(
  "a bad request and another connection's good one read in the same turn: only the bad one is refused",
  async (t) => {
    const good = await KeepAlive.open();
    t.teardown(() => good.close());
    const rounds = 20;
    const statuses: (number | null)[] = [];
    for (let i = 0; i < rounds; i++) {
      // The bad client is a keep-alive client too: a good request first, then one with bad framing.
      const bad = await KeepAlive.open();
      bad.send(GOOD);
      t.equal(await bad.answer(), 200, `round ${i}: the bad client's good request is answered`);
      bad.send(BAD);
      good.send(GOOD);
      holdEventLoop(40);
      statuses.push(await good.answer());
      t.equal(await bad.answer(), 400, `round ${i}: the bad request gets its 400`);
      t.equal(await bad.answer(), null, `round ${i}: and its connection is closed`);
      bad.close();
    }
    t.same(statuses, new Array(rounds).fill(200), 'every good request is answered, on the same connection');
    t.notOk(good.closed, 'the good connection is still open');
  },
);

/** Another process sending bad requests from 127.0.0.1 on `parallel` connections until killed. */
function attacker(parallel: number): ChildProcess {
  const script = `
    const { connect } = require('node:net');
    const bad = ${JSON.stringify(BAD + GOOD)};
    let refused = 0;
    setInterval(() => process.send(refused), 50);
    function loop() {
      const s = connect(${port}, '127.0.0.1', () => s.write(bad));
      s.on('error', () => {});
      s.on('close', () => { refused++; loop(); });
    }
    for (let i = 0; i < ${parallel}; i++) loop();`;
  return spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
}

t.test('a steady stream of bad requests from one address costs another connection from it nothing', async (t) => {
  const bad = attacker(4);
  let refused = 0;
  bad.on('message', (n) => (refused = Number(n)));
  const exited = new Promise((r) => bad.once('exit', r));
  t.teardown(() => void bad.kill());
  // Under way before the good client starts: it has had bad requests refused already.
  await new Promise<void>((r) => bad.on('message', (n) => Number(n) > 0 && r()));
  const good = await KeepAlive.open();
  t.teardown(() => good.close());
  const total = 500;
  const statuses: (number | null)[] = [];
  for (let i = 0; i < total && !good.closed; i++) {
    good.send(GOOD);
    statuses.push(await good.answer());
  }
  const refusedBefore = refused;
  bad.kill();
  await exited;
  t.ok(refusedBefore > 0, `bad requests were refused meanwhile (${refusedBefore} connections closed)`);
  t.equal(statuses.filter((s) => s === 200).length, total, `all ${total} good requests are answered`);
  t.notOk(good.closed, 'the good connection is still open');
});

t.test('the refused connection itself still answers nothing pipelined behind the bad request', async (t) => {
  const smuggled = 'GET /v1/auth/jwks?smuggled=1 HTTP/1.1\r\nhost: x\r\n\r\n';
  const pipelined = await rawHttp(port, BAD + smuggled);
  t.ok(pipelined.closed, 'closed');
  t.notOk(pipelined.statuses.includes(200), `the smuggled request is not answered (${pipelined.statuses.join(',')})`);
  t.ok(pipelined.statuses.length <= 1, 'at most one answer');
  // Bytes sent after the refusal, in a later packet, are not read either.
  const later = await KeepAlive.open();
  t.teardown(() => later.close());
  later.send(BAD);
  t.equal(await later.answer(), 400);
  later.send(GOOD);
  t.equal(await later.answer(), null, 'nothing more is answered: the connection is closed');
  // A HEAD is refused the same way (its answer has no body, and still closes the connection).
  const head = await rawHttp(
    port,
    'HEAD /v1/auth/jwks HTTP/1.1\r\nhost: x\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n',
  );
  t.same(head.statuses, [400], 'HEAD: a 400');
  t.ok(head.closed, 'HEAD: the connection is closed');
});
