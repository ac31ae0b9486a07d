/** Storage settings: the cache directory (Kafka jars, local Kafka data) and each process's data directory. */
import { join } from 'node:path';
import { projectPath } from '../paths.ts';
import { dirPath } from './readers.ts';
import type { Setting, Values } from './schema.ts';

export const STORAGE_SETTINGS = {
  cacheDir: {
    section: 'storage',
    vars: [
      {
        env: 'SLUICE_CACHE_DIR',
        default: '`<repo>/.cache`',
        doc: 'Kafka jars (`kafka-4.1.1/libs`) and local Kafka data',
      },
    ],
    read: (env) => env.SLUICE_CACHE_DIR || projectPath('.cache'),
  },
} satisfies Record<string, Setting>;

/** The storage settings that depend on others. */
export const STORAGE_DERIVED_SETTINGS = {
  /**
   * Where each process keeps its on-disk views (endpoints, DLQ, audit; on an ingress, the attempt history
   * and event type counts too), under `<topic prefix>/<process name>`.
   */
  dataDir: {
    section: 'storage',
    vars: [
      {
        env: 'SLUICE_DATA_DIR',
        default: '`<SLUICE_CACHE_DIR>/state`',
        doc:
          "each process's on-disk views (endpoints, DLQ, audit log, attempt history: a SQLite file) in " +
          '`<dir>/<SLUICE_TOPIC_PREFIX>/<process>` (`worker-<i>` under `--workers`, else `ingress`, ' +
          "`dispatcher`, `dlq`…); must be a directory (created if missing). Deleting a stopped process's " +
          'directory makes it rebuild from Kafka',
      },
    ],
    read: (env, base) => dirPath(env, 'SLUICE_DATA_DIR', join(base.cacheDir, 'state')),
  },
} satisfies Record<string, Setting<Pick<Values<typeof STORAGE_SETTINGS>, 'cacheDir'>>>;
