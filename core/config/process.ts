/**
 * Process settings: production or not, the time scale of tests and demos, V8's heap growth, and the
 * number of workers (read by the commands themselves).
 */
import { ConfigError } from '../errors.ts';
import { int, num } from './readers.ts';
import { numSetting, type Setting } from './schema.ts';

export const PROCESS_SETTINGS = {
  production: {
    section: 'process',
    vars: [
      {
        env: 'NODE_ENV',
        default: 'unset',
        doc: '`production` enforces a master key and refuses the dev target flag',
      },
    ],
    read: (env) => env.NODE_ENV === 'production',
  },
  timeScale: numSetting(
    'process',
    'SLUICE_TIME_SCALE',
    1,
    1,
    1_000_000,
    'divides retry delays and DLQ retention (tests and demos); never network timeouts',
  ),
  /**
   * V8's heap growth after a full collection, in percent of the live heap (0: V8's own factor);
   * null: chosen by the node's roles (cli/heap.ts).
   */
  heapGrowthPercent: {
    section: 'process',
    vars: [
      {
        env: 'SLUICE_HEAP_GROWTH_PERCENT',
        default: 'by role: `25` for an ingress-only node, `50` where the dispatcher runs',
        doc:
          "how far V8 lets a node's heap grow past its live size before a full collection (0: V8's own " +
          'factor, several times the live size). Lower keeps RSS near the live heap (mostly the endpoint ' +
          'view, about 1 KB per endpoint) at the cost of more full collections: 25 costs a dispatcher ~30 ' +
          '% more CPU per delivery (`bench/RESULTS.md`)',
      },
    ],
    read: (env) => (env.SLUICE_HEAP_GROWTH_PERCENT ? int(env, 'SLUICE_HEAP_GROWTH_PERCENT', 0, 0, 400) : null),
  },
} satisfies Record<string, Setting>;

/** Settings a command reads itself, before (or without) loading the configuration. */
export const CLI_SETTINGS = {
  /**
   * The processes `sluice start` and `sluice ingress` fork (cli/workers.ts): a fixed number, or
   * `auto` (one to the cores, as load asks: cli/worker-scaling.ts); null: the command's default.
   */
  workers: {
    section: 'process',
    vars: [
      {
        env: 'SLUICE_WORKERS',
        default: '`auto` (`start`), `1` (`ingress`)',
        doc:
          'processes `sluice start` / `sluice ingress` fork (`--workers N`), each a whole node on the ' +
          "shared port; worker i's admin port is the admin port + 1 + i. `auto`: one worker, and more " +
          '(up to the cores) while their event loops are busy, retired when the load falls (`docs/operations.md`)',
      },
    ],
    read(env): number | 'auto' | null {
      const v = env.SLUICE_WORKERS;
      if (v === undefined || v === '') return null;
      if (v === 'auto') return 'auto';
      if (!/^\d{1,2}$/.test(v) || Number(v) < 1 || Number(v) > 64)
        throw new ConfigError('SLUICE_WORKERS', `must be auto or a whole number from 1 to 64, got "${v}"`);
      return Number(v);
    },
  },
  /** When `--workers auto` forks a worker and when it retires one (cli/worker-scaling.ts). */
  workerScaling: {
    section: 'process',
    vars: [
      {
        env: 'SLUICE_WORKERS_MAX',
        default: 'cores',
        doc: '`--workers auto`: the most workers the node runs',
      },
      {
        env: 'SLUICE_WORKERS_GROW_BUSY',
        default: '`0.6`',
        doc:
          "`--workers auto`: a worker is added when the workers' event loops were busy more than this " +
          'share of the time, on average, over `SLUICE_WORKERS_GROW_AFTER_MS`',
      },
      {
        env: 'SLUICE_WORKERS_SHRINK_BUSY',
        default: '`0.4`',
        doc:
          '`--workers auto`: the last worker is retired when one fewer would each have been busy less than ' +
          'this share over `SLUICE_WORKERS_SHRINK_AFTER_MS`. Keep it below the grow share, or the node ' +
          'grows and shrinks by turns',
      },
      { env: 'SLUICE_WORKERS_GROW_AFTER_MS', default: '`5000`', doc: 'the window of the grow share' },
      {
        env: 'SLUICE_WORKERS_SHRINK_AFTER_MS',
        default: '`60000`',
        doc: 'the window of the shrink share; no change is made sooner than a window after the last',
      },
    ],
    read: (env) => ({
      max: env.SLUICE_WORKERS_MAX ? int(env, 'SLUICE_WORKERS_MAX', 1, 1, 64) : null,
      growBusy: num(env, 'SLUICE_WORKERS_GROW_BUSY', 0.6, 0, 1),
      shrinkBusy: num(env, 'SLUICE_WORKERS_SHRINK_BUSY', 0.4, 0, 1),
      growAfterMs: int(env, 'SLUICE_WORKERS_GROW_AFTER_MS', 5000, 1000, 3_600_000),
      shrinkAfterMs: int(env, 'SLUICE_WORKERS_SHRINK_AFTER_MS', 60_000, 1000, 86_400_000),
    }),
  },
} satisfies Record<string, Setting>;
