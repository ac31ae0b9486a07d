/**
 * Writes generated records straight into a topic through DurableProducers (acks=all: the producer
 * Sluice itself uses), one chunk per send, one send in flight per producer.
 */
import type { DurableProducer, OutRecord } from '../../core/kafka/producers.ts';
import { say } from '../../harness/cli.ts';
import { fmt } from '../../harness/stats.ts';

const CHUNK = 2000;

/** Produces records 0 … total-1 made by `make`, saying how far it got every 5 s; a line for the section. */
export async function fill(
  producers: DurableProducer[],
  topic: string,
  total: number,
  make: (i: number) => OutRecord,
  what: string,
): Promise<string> {
  const startedAt = Date.now();
  let next = 0;
  let done = 0;
  let reportedAt = startedAt;
  const progress = () => {
    const s = Math.max(Date.now() - startedAt, 1) / 1000;
    reportedAt = Date.now();
    say(`  ${what}: ${fmt(done)} / ${fmt(total)}, ${fmt(done / s)}/s, ${fmt(s, 0)} s`);
    return `${fmt(total)} ${what} in ${fmt(s, 1)} s (${fmt(total / s)}/s)`;
  };
  const worker = async (producer: DurableProducer) => {
    while (next < total) {
      const from = next;
      const to = Math.min(total, from + CHUNK);
      next = to;
      const records: OutRecord[] = [];
      for (let i = from; i < to; i++) records.push(make(i));
      await producer.send(topic, records);
      done += records.length;
      if (Date.now() - reportedAt >= 5000) progress();
    }
  };
  await Promise.all(producers.map(worker));
  return progress();
}
