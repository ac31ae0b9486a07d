import { loadConfig } from '../../core/config.ts';
import { ensureKafkaJars, jarCount, startLocalKafka, writeClassArchive } from '../../core/kafka/local-broker.ts';
import { parse, UsageError } from '../args.ts';
import { say, untilSignal } from '../runtime.ts';
import type { Command } from '../command.ts';

const USAGE =
  'usage: sluice kafka [--port 9092] [--controller-port P] [--brokers N] [--data-dir DIR] [--fresh] [--fetch-only]' +
  `

Runs a real Apache Kafka cluster (KRaft; each broker also a controller) on 127.0.0.1 in the
foreground. The jars come from Maven Central once into SLUICE_CACHE_DIR (default .cache/); later
starts reuse them.
  --port        first broker's port; broker i uses port+2i, its controller port+2i+1;
                default SLUICE_KAFKA_PORT or 9092
  --controller-port  first controller's port (controller i uses it+i) instead of port+2i+1;
                a busy port is named in the error either way
  --brokers     brokers in the cluster (default 1). 3 is what a deployment runs on: topics get
                replication factor 3 and min.insync.replicas 2, so one broker can be lost
  --data-dir    log directory; default <cache>/kafka-data-<port>
  --fresh       wipe the data directory first
  --fetch-only  resolve the jars (and the broker's class archive) into the cache and exit`;

export const kafka: Command = {
  async run(argv) {
    const { values } = parse(
      argv,
      {
        port: { type: 'string' },
        'controller-port': { type: 'string' },
        brokers: { type: 'string' },
        'data-dir': { type: 'string' },
        fresh: { type: 'boolean' },
        'fetch-only': { type: 'boolean' },
      },
      USAGE,
    );
    const config = loadConfig();
    if (values['fetch-only']) {
      const libs = ensureKafkaJars(config.cacheDir, say);
      say(`Kafka jars ready: ${jarCount(libs)} jars in ${libs}`);
      const archive = await writeClassArchive(config.cacheDir, say);
      if (archive) say(`Kafka class archive ready: ${archive}`);
      return 0;
    }
    const port = values.port ? Number(values.port) : config.kafkaPort;
    if (!Number.isInteger(port) || port < 1 || port > 65534) {
      throw new UsageError(`--port must be a port number, got "${values.port}"`);
    }
    const controllerPort = values['controller-port'] !== undefined ? Number(values['controller-port']) : undefined;
    const isPort = (p: number) => Number.isInteger(p) && p >= 1 && p <= 65535;
    if (controllerPort !== undefined && !isPort(controllerPort)) {
      throw new UsageError(`--controller-port must be a port number, got "${values['controller-port']}"`);
    }
    const nodes = values.brokers ? Number(values.brokers) : 1;
    if (!Number.isInteger(nodes) || nodes < 1 || nodes > 9) {
      throw new UsageError(`--brokers must be a whole number from 1 to 9, got "${values.brokers}"`);
    }
    const k = await startLocalKafka({
      cacheDir: config.cacheDir,
      port,
      controllerPort,
      nodes,
      dataDir: values['data-dir'],
      fresh: values.fresh,
      log: say,
    });
    say(
      `Kafka ${nodes > 1 ? `cluster of ${nodes} brokers` : 'broker'} ready at ${k.brokers.join(',')}  ` +
        `(KAFKA_BROKERS=${k.brokers.join(',')}); data in ${k.dataDir}; Ctrl-C stops it`,
    );
    await untilSignal();
    say('stopping Kafka');
    await k.stop();
    return 0;
  },
};
