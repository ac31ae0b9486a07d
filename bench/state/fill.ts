/**
 * Writes generated records straight into a topic through DurableProducers (acks=all: the
 * producer Sluice itself uses), one chunk per send, one send in flight per producer.
 */
import type { DurableProducer, OutRecord } from '../../core/kafka/producers.ts';

const CHUNK = 2000;

export interface FillProgress {
  what: string;
  done: number;
  total: number;
  startedAt: number;
}

/** Produces records 0 … total-1 made by `make`; `onProgress` is called at most every `everyMs`. */
export async function fill(
  producers: DurableProducer[],
  topic: string,
  total: number,
  make: (i: number) => OutRecord,
  what: string,
  onProgress: (p: FillProgress) => void,
  everyMs = 5000,
): Promise<{ ms: number; perSec: number }> {
  const startedAt = Date.now();
  let next = 0;
  let done = 0;
  let reportedAt = startedAt;
  const worker = async (producer: DurableProducer) => {
    while (next < total) {
      const from = next;
      const to = Math.min(total, from + CHUNK);
      next = to;
      const records: OutRecord[] = [];
      for (let i = from; i < to; i++) records.push(make(i));
      await producer.send(topic, records);
      done += to - from;
      if (Date.now() - reportedAt >= everyMs) {
        reportedAt = Date.now();
        onProgress({ what, done, total, startedAt });
      }
    }
  };
  await Promise.all(producers.map(worker));
  onProgress({ what, done, total, startedAt });
  const ms = Date.now() - startedAt;
  return { ms, perSec: total / (Math.max(1, ms) / 1000) };
}
