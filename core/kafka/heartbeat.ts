/**
 * Proof that this node's revocation view is current, for nodes that read a local replica (a rack:
 * `SLUICE_KAFKA_RACK`). A fetch answered by the broker next door proves nothing when that broker
 * is cut off from the rest of the cluster: it keeps answering, empty, from a log that no longer
 * grows. So every `everyMs` the node writes a heartbeat record (key `~heartbeat:<node>`, the time
 * it was sent) to the revocations topic with acks=all, and counts itself in contact with Kafka as
 * of that time once it reads the record back from its own replica: every revocation committed
 * before the heartbeat is then in its view (one partition, read in order). A cut-off region can
 * neither commit the write (min.insync.replicas 2, and its broker cannot shrink the ISR alone) nor
 * read it, so its staleness grows until it fails closed (`SLUICE_KAFKA_STALE_MS`).
 *
 *   const hb = new Heartbeat(producer, topics.revocations, nodeName, 1000, (sentAt) => state.heard(sentAt));
 *   revocations.onHeartbeat = (key, value) => hb.read(key, value);
 *   hb.start();  …  await hb.stop();   // stop() leaves a tombstone, so compaction drops the key
 */
import type { DurableProducer } from './producers.ts';

export const HEARTBEAT_PREFIX = '~heartbeat:';

export class Heartbeat {
  private timer: NodeJS.Timeout | null = null;
  private inFlight = false;
  readonly key: string;
  /** Heartbeats written and read back, and the last round trip (write until read back), in ms. */
  sent = 0;
  readBack = 0;
  lastRoundTripMs = 0;

  constructor(
    private readonly producer: DurableProducer,
    private readonly topic: string,
    node: string,
    private readonly everyMs: number,
    private readonly heard: (sentAt: number) => void,
  ) {
    this.key = `${HEARTBEAT_PREFIX}${node}`;
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.beat(), this.everyMs);
    this.timer.unref();
    void this.beat();
  }

  private async beat(): Promise<void> {
    if (this.inFlight) return;
    this.inFlight = true;
    try {
      this.sent++;
      const value = JSON.stringify({ sent_at: Date.now() });
      await this.producer.send(this.topic, [{ key: this.key, value }], { timeoutMs: Math.max(5000, this.everyMs * 5) });
    } catch {
      // Not written: no proof of contact this time; staleness grows until a later one gets through.
    } finally {
      this.inFlight = false;
    }
  }

  /** Called with every heartbeat record the revocation view reads (other nodes' too). */
  read(key: string, value: Buffer | null): void {
    if (key !== this.key || value === null) return;
    try {
      const sentAt = Number((JSON.parse(value.toString()) as { sent_at?: unknown }).sent_at);
      if (!Number.isFinite(sentAt)) return;
      this.readBack++;
      this.lastRoundTripMs = Date.now() - sentAt;
      this.heard(sentAt);
    } catch {
      /* not ours to judge */
    }
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.producer.send(this.topic, [{ key: this.key, value: null }], { timeoutMs: 2000 }).catch(() => {});
  }
}
