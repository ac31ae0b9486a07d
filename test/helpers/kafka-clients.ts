/**
 * A test's own admin and producer on the real broker, connected, and disconnected when the test
 * (or the file, for the top-level `t`) ends.
 *
 *   const { admin, producer } = await connectedClients(t, kafka);
 */
import type { Test } from 'tap';
import type { Admin, Kafka, Producer } from 'kafkajs';

export async function connectedClients(
  t: Pick<Test, 'teardown'>,
  kafka: Kafka,
): Promise<{ admin: Admin; producer: Producer }> {
  const admin = kafka.admin();
  const producer = kafka.producer();
  await admin.connect();
  await producer.connect();
  t.teardown(async () => {
    await producer.disconnect();
    await admin.disconnect();
  });
  return { admin, producer };
}
