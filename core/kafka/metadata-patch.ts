/**
 * A client that targets no topic yet asks Kafka for none, for kafkajs 2.2.4, applied once when
 * core/kafka/client.ts loads.
 *
 * kafkajs refreshes its metadata for the topics a client targets, and encodes an empty list as
 * null, which Kafka reads as "every topic of the cluster". Every admin, and every producer and
 * consumer before its first send or subscription, so fetched the metadata of the whole cluster:
 * seven times for each Sluice process started, each answer growing with the cluster (a broker
 * holding 3,400 topics spent 0.09 CPU-s on one, the client 0.03). Here such a refresh asks for
 * no topic (an empty array, not null): the brokers and the controller, which is what it is for.
 * Asking for every topic on purpose (admin.listTopics, fetchTopicMetadata without topics) does not
 * go through this refresh and still gets them all.
 */
import { kafkajsClass } from './kafkajs-internals.ts';

/** The empty topic list that is sent as an empty array; kafkajs sends any other one as null. */
export const NO_TOPICS: readonly string[] = Object.freeze([]);

interface BrokerPool {
  refreshMetadata(topics: readonly string[]): Promise<void>;
}
interface Encoder {
  writeNullableArray(array: readonly unknown[], type?: string): Encoder;
  writeArray(array: readonly unknown[], type?: string, length?: number): Encoder;
}

// refreshMetadata hands its list to broker.metadata, whose shuffle returns a list shorter than two
// as it is: NO_TOPICS reaches the request's encoder itself.
const Pool = kafkajsClass<BrokerPool>('cluster/brokerPool.js', ['refreshMetadata'], {
  refreshMetadata: 'await broker.metadata(topics)',
});
const Enc = kafkajsClass<Encoder>('protocol/encoder.js', ['writeNullableArray', 'writeArray'], {
  writeNullableArray: 'array.length !== 0 ? array.length : -1',
});
kafkajsClass('broker/index.js', ['metadata'], { metadata: 'shuffle(topics)' });

const refreshMetadata = Pool.prototype.refreshMetadata;
Pool.prototype.refreshMetadata = function (this: BrokerPool, topics: readonly string[]) {
  return refreshMetadata.call(this, topics.length === 0 ? NO_TOPICS : topics);
};

const writeNullableArray = Enc.prototype.writeNullableArray;
Enc.prototype.writeNullableArray = function (this: Encoder, array: readonly unknown[], type?: string) {
  return array === NO_TOPICS ? this.writeArray(array, type, 0) : writeNullableArray.call(this, array, type);
};
