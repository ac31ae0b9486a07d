/**
 * Where the fan-out group of a topic prefix stands on its events topic, partition by partition:
 * what it committed and where the topic ends (a partition nothing was published to, with no
 * commit, reads 0 and 0). A stopped node that fanned everything out has committed == end.
 *
 *   for (const p of await fanOutOffsets(prefix)) t.equal(p.committed, p.end, `partition ${p.partition}`);
 */
import { createKafka } from '../../core/kafka/client.ts';
import { brokers } from '../helpers/sluice.ts';

export async function fanOutOffsets(
  prefix: string,
): Promise<{ partition: number; committed: string | undefined; end: string }[]> {
  const admin = createKafka(brokers(), 'fan-out-offsets-test').admin();
  await admin.connect();
  try {
    const topic = `${prefix}.events`;
    const ends = await admin.fetchTopicOffsets(topic);
    const [committed] = await admin.fetchOffsets({ groupId: `${prefix}.fan-out`, topics: [topic] });
    return ends.map((e) => {
      const got = committed.partitions.find((p) => p.partition === e.partition)?.offset;
      return { partition: e.partition, committed: got === '-1' ? '0' : got, end: e.offset };
    });
  } finally {
    await admin.disconnect();
  }
}
