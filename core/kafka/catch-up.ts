/**
 * Reads that every process answers alike: before a read, the view catches up with its topic as
 * the topic is now. Each process (every worker of `--workers N`, every node) keeps its own view
 * and reads the topic at its own pace, so without this one worker can list what another has not
 * read yet, and a refresh served by the other takes it back. With it, what any process answered is
 * on the topic before the next read begins, and that read waits for it: once listed anywhere,
 * listed everywhere after.
 *
 *   const caughtUp = topicCatchUp(ctx.kafka, history, ctx.topics.eventTypes);
 *   await caughtUp();   // 503 UNAVAILABLE when the end cannot be read or reached in time
 *
 * The cost: one ListOffsets request to the broker per read (an admin client kept connected), and
 * the wait for the consumer's next fetch when the topic moved since its last one.
 */
import type { Kafka } from 'kafkajs';
import { keptAdmin } from './kept-admin.ts';
import { unavailable } from '../errors.ts';
import { withDeadline } from '../deadline.ts';

/** How long a read waits for the end of the topic, and for the view to reach it. */
export const CATCH_UP_MS = 5000;

/** The consumer whose view is read: how far it has read (core/kafka/state-consumer.ts). */
export interface Reader {
  reached(topic: string, partition: number, offset: bigint | number, timeoutMs: number): Promise<boolean>;
}

/** A read's wait: resolves once `reader` has read `topic` up to its end at the call. */
export interface CatchUp {
  (): Promise<void>;
  close(): Promise<void>;
}

export function topicCatchUp(kafka: Kafka, reader: Reader, topic: string, timeoutMs = CATCH_UP_MS): CatchUp {
  const admin = keptAdmin(kafka);

  const endOf = async (): Promise<{ partition: number; high: string }[]> => {
    try {
      return await withDeadline(
        admin.use((a) => a.fetchTopicOffsets(topic)),
        timeoutMs,
        () => new Error(`no answer within ${timeoutMs} ms`),
      );
    } catch (err) {
      throw unavailable(`the end of ${topic} could not be read: ${(err as Error).message}`);
    }
  };

  const caughtUp = (async () => {
    const started = Date.now();
    for (const { partition, high } of await endOf()) {
      const left = Math.max(0, timeoutMs - (Date.now() - started));
      if (!(await reader.reached(topic, partition, BigInt(high), left)))
        throw unavailable(`this process's view of ${topic} did not reach offset ${high} within ${timeoutMs} ms`);
    }
  }) as CatchUp;
  caughtUp.close = () => admin.close();
  return caughtUp;
}
