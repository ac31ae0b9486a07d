/**
 * The client factory and the reading of kafkajs's errors. kafkajs is imported in core/kafka/ only:
 * the rest of the product takes its types from here (Kafka, EachBatchPayload, IHeaders...) and
 * calls the clients built in this folder (consumers, producers.ts, topic-admin.ts, the patches),
 * so another client replacing kafkajs (last release 2.2.4, 2023) starts in this folder.
 */
import kafkajs, { Kafka, logLevel } from 'kafkajs';
import type { Producer, Admin, IHeaders, Consumer, ConsumerConfig, EachBatchPayload, ISocketFactory } from 'kafkajs';
import { connect, type Socket } from 'node:net';
import { SluiceBaseError, SluiceError } from '../errors.ts';
import './request-queue-patch.ts';
import './coordinator-patch.ts';
import './fetch-wait.ts';
import './empty-batch-patch.ts';
import './rejoin-patch.ts';
import './metadata-patch.ts';

// kafkajs is CommonJS and spreads its error classes into its exports, out of sight of named imports.
const {
  KafkaJSAggregateError,
  KafkaJSBrokerNotFound,
  KafkaJSConnectionError,
  KafkaJSError,
  KafkaJSGroupCoordinatorNotFound,
  KafkaJSMetadataNotLoaded,
  KafkaJSNonRetriableError,
  KafkaJSNumberOfRetriesExceeded,
  KafkaJSProtocolError,
  KafkaJSRequestTimeoutError,
  KafkaJSTimeout,
} = kafkajs;

export type { Kafka, Consumer, Producer, Admin, IHeaders, EachBatchPayload };

const keyPartitioner = kafkajs.Partitioners.DefaultPartitioner();
/** The partition list the partitioner reads, by partition count (it reads only its length for a keyed record). */
const partitionLists = new Map<
  number,
  { partitionId: number; leader: number; replicas: []; isr: []; partitionErrorCode: 0 }[]
>();
/** The partition kafkajs's default partitioner (Java's murmur2) writes a keyed record to, of `count`. */
export function partitionOfKey(topic: string, key: string, count: number): number {
  let partitionMetadata = partitionLists.get(count);
  if (!partitionMetadata) {
    partitionMetadata = Array.from({ length: count }, (_, partitionId) => ({
      partitionId,
      leader: 0,
      replicas: [] as [],
      isr: [] as [],
      partitionErrorCode: 0 as const,
    }));
    partitionLists.set(count, partitionMetadata);
  }
  return keyPartitioner({ topic, partitionMetadata, message: { key, value: null } });
}

/** The rack (`client.rack`) a client was made for: its consumers fetch from the replica there. */
const racks = new WeakMap<Kafka, string>();

export function createKafka(
  brokers: string[],
  clientId: string,
  rack: string | null = null,
  socketFactory?: ISocketFactory,
): Kafka {
  const kafka = new Kafka({
    clientId,
    brokers,
    logLevel: logLevel.NOTHING,
    retry: { initialRetryTime: 100, retries: 8, maxRetryTime: 5000 },
    connectionTimeout: 3000,
    requestTimeout: 10000,
    ...(socketFactory ? { socketFactory } : {}),
  });
  if (rack) racks.set(kafka, rack);
  return kafka;
}

/**
 * A client whose connections can be let go: after `release()` none of its sockets, open or opened
 * later, keeps the process alive. For consumers whose leave nobody waits for: a view consumer's
 * group is its own and commits nothing, and its leave waits behind its fetch in flight (3-5 s when
 * idle, core/kafka/state-consumer.ts), which held every stopping process that long after its work
 * was done. The sockets are kafkajs's own (plain TCP, keep-alive after 60 s).
 */
export function releasableKafka(
  brokers: string[],
  clientId: string,
  rack: string | null = null,
): { kafka: Kafka; release(): void } {
  const sockets = new Set<Socket>();
  let released = false;
  const socketFactory: ISocketFactory = ({ host, port, onConnect }) => {
    const socket = connect({ host, port }, onConnect);
    socket.setKeepAlive(true, 60_000);
    if (released) socket.unref();
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    return socket;
  };
  return {
    kafka: createKafka(brokers, clientId, rack, socketFactory),
    release() {
      released = true;
      for (const s of sockets) s.unref();
    },
  };
}

export function rackOf(kafka: Kafka): string | null {
  return racks.get(kafka) ?? null;
}

/** Kafka's refusals of a write that no retry can change (protocol error types). */
const PERMANENT_WRITE_TYPES = new Set([
  'MESSAGE_TOO_LARGE',
  'RECORD_LIST_TOO_LARGE',
  'INVALID_RECORD',
  'CORRUPT_MESSAGE',
  'TOPIC_AUTHORIZATION_FAILED',
]);

/** The error and the ones it wraps (`cause`), outermost first. */
function* causes(err: unknown): Generator<unknown> {
  for (let e = err, depth = 0; e !== undefined && e !== null && depth < 10; depth++) {
    yield e;
    e = (e as { cause?: unknown }).cause;
  }
}

/** True when retrying the same write cannot succeed (too large, invalid): the caller must not loop on it. */
export function isPermanentWriteError(err: unknown): boolean {
  for (const e of causes(err)) {
    if (e instanceof SluiceError) return e.code === 'PAYLOAD_TOO_LARGE';
    if (e instanceof KafkaJSProtocolError && PERMANENT_WRITE_TYPES.has(e.type)) return true;
  }
  return false;
}

const TRANSIENT_CLASSES = [
  KafkaJSConnectionError,
  KafkaJSRequestTimeoutError,
  KafkaJSTimeout,
  KafkaJSMetadataNotLoaded,
  KafkaJSBrokerNotFound,
  KafkaJSGroupCoordinatorNotFound,
];

/**
 * Whether a Kafka failure may pass if the operation is tried again, by the error's class and
 * `retriable` flag, never its message: no connection, a request or a wait that timed out, no
 * metadata or leader yet, a coordinator loading or moving (a broker just started or is electing
 * leaders). kafkajs wraps the failure it gave up on (retries exceeded, or a non-retriable wrapper):
 * the original one decides, as kafkajs's own consumer restart decides.
 */
export function isTransientKafkaError(err: unknown): boolean {
  if (err instanceof SluiceBaseError) return err.retriable;
  if (err instanceof KafkaJSAggregateError) return err.errors.length > 0 && err.errors.every(isTransientKafkaError);
  const wrapped = err instanceof KafkaJSError && err.cause !== undefined && err.cause !== err ? err.cause : undefined;
  if (err instanceof KafkaJSNumberOfRetriesExceeded) return wrapped === undefined || isTransientKafkaError(wrapped);
  if (err instanceof KafkaJSNonRetriableError && wrapped !== undefined) return isTransientKafkaError(wrapped);
  if (TRANSIENT_CLASSES.some((c) => err instanceof c)) return true;
  if (err instanceof KafkaJSError) return err.retriable;
  return false;
}

/** TOPIC_ALREADY_EXISTS, alone or for every topic of a createTopics request (kafkajs wraps it). */
export function isTopicAlreadyExists(err: unknown): boolean {
  for (const e of causes(err)) {
    if (e instanceof KafkaJSAggregateError) return e.errors.length > 0 && e.errors.every(isTopicAlreadyExists);
    if (e instanceof KafkaJSProtocolError && e.type === 'TOPIC_ALREADY_EXISTS') return true;
  }
  return false;
}

export function consumer(kafka: Kafka, config: ConsumerConfig): Consumer {
  return kafka.consumer({ allowAutoTopicCreation: false, ...config });
}

export function headerString(headers: IHeaders | undefined, name: string): string | undefined {
  const v = headers?.[name];
  if (v === undefined) return undefined;
  const first = Array.isArray(v) ? v[0] : v;
  return first === undefined ? undefined : first.toString();
}
