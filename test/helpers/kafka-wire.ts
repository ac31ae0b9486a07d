/**
 * A tap on the connections of one kafkajs client to the real broker, given to kafkajs as its
 * `socketFactory`: it logs each request the client writes, by API name (and, for a fetch, the wait
 * it asks of the broker), and it can cut the client's connections the way a dying broker does (a
 * reset) or swallow requests the way an unreachable one does (no answer, no error), so a test sees
 * on the wire what kafkajs (and Sluice's fixes in it) did about it.
 */
import { connect, type Socket } from 'node:net';
import type { ISocketFactory } from 'kafkajs';

/** Kafka API keys by name, for the requests a consumer, producer or admin writes. */
const API_NAMES: Record<number, string> = {
  0: 'Produce',
  1: 'Fetch',
  2: 'ListOffsets',
  3: 'Metadata',
  8: 'OffsetCommit',
  9: 'OffsetFetch',
  10: 'FindCoordinator',
  11: 'JoinGroup',
  12: 'Heartbeat',
  13: 'LeaveGroup',
  14: 'SyncGroup',
  18: 'ApiVersions',
  19: 'CreateTopics',
  22: 'InitProducerId',
  24: 'AddPartitionsToTxn',
  26: 'EndTxn',
};

/** A request as kafkajs writes it: one buffer, size, API key, version, correlation id, client id. */
function apiOf(chunk: unknown): string | null {
  if (!Buffer.isBuffer(chunk) || chunk.length < 8) return null;
  const key = chunk.readInt16BE(4);
  return API_NAMES[key] ?? `api ${key}`;
}

/**
 * The wait a fetch request asks of the broker (max_wait_ms). kafkajs sends Fetch up to v11, whose
 * header (v1) ends with the client id and whose body starts with replica_id, then max_wait_ms.
 */
export function fetchMaxWait(chunk: Buffer): number {
  const clientIdLength = chunk.readInt16BE(12);
  return chunk.readInt32BE(14 + Math.max(clientIdLength, 0) + 4);
}

/** The bytes a Fetch request (v3 and later) asks the broker to wait for: the int32 after max_wait_ms. */
export function fetchMinBytes(chunk: Buffer): number {
  const clientIdLength = chunk.readInt16BE(12);
  return chunk.readInt32BE(14 + Math.max(clientIdLength, 0) + 8);
}

export class KafkaWire {
  /** Each request written, in order, by API name, with the test's own notes between them. */
  readonly log: string[] = [];
  /** The wait of each fetch written, in order. */
  readonly fetchWaits: number[] = [];
  /** The min bytes of each fetch written, in order (beside fetchWaits). */
  readonly fetchMinBytes: number[] = [];
  private readonly open = new Set<Socket>();
  private cut: { api: string; done: () => void } | null = null;
  /** Requests of these APIs are not written while held: they wait for an answer that never comes. */
  private held = new Set<string>();

  readonly socketFactory: ISocketFactory = ({ host, port, onConnect }) => {
    const socket = connect({ host, port }, onConnect);
    socket.setKeepAlive(true, 60_000);
    this.open.add(socket);
    socket.once('close', () => this.open.delete(socket));
    const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
    socket.write = ((chunk: unknown, ...rest: unknown[]) => {
      const api = apiOf(chunk);
      if (api !== null && this.cut?.api === api) {
        const { done } = this.cut;
        this.cut = null;
        this.log.push(`cut at ${api}`);
        socket.once('close', done);
        socket.destroy(reset());
        return false;
      }
      if (api !== null && this.held.has(api)) {
        this.log.push(`held ${api}`);
        return true;
      }
      if (api !== null) this.log.push(api);
      if (api === 'Fetch') {
        this.fetchWaits.push(fetchMaxWait(chunk as Buffer));
        this.fetchMinBytes.push(fetchMinBytes(chunk as Buffer));
      }
      return write(chunk, ...rest);
    }) as typeof socket.write;
    return socket;
  };

  /** Adds a note to the log (an event the test saw), to place it among the requests. */
  note(what: string): void {
    this.log.push(what);
  }

  /** What was logged after the last `entry`, in order (everything when it is not there). */
  after(entry: string): string[] {
    return this.log.slice(this.log.lastIndexOf(entry) + 1);
  }

  /**
   * Resets the connection about to write the next request of `api` instead of writing it (the
   * request fails as one to a broker that just died would); resolves once that connection closed.
   */
  cutAtNext(api: string): Promise<void> {
    return new Promise((done) => {
      this.cut = { api, done };
    });
  }

  /** Swallows every request of `apis` from now on until release(): the broker never hears of them. */
  hold(apis: string[]): void {
    this.held = new Set(apis);
  }

  /** Writes requests of every API again (those swallowed stay unanswered: kafkajs times them out). */
  release(): void {
    this.held = new Set();
  }

  /** Resets every open connection of the client, as a broker that died; resolves once all closed. */
  async cutAll(): Promise<void> {
    const sockets = [...this.open];
    await Promise.all(
      sockets.map(
        (socket) =>
          new Promise<void>((closed) => {
            socket.once('close', () => closed());
            socket.destroy(reset());
          }),
      ),
    );
    // kafkajs marks a connection disconnected in its error handler, a few promise steps later.
    await new Promise((r) => setImmediate(r));
  }
}

function reset(): Error {
  return Object.assign(new Error('read ECONNRESET (cut by the test)'), { code: 'ECONNRESET' });
}
