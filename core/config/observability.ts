/** Observability settings: the log level, the metrics' tenant label, and tracing (exporter, sampling, endpoint). */
import { ConfigError } from '../errors.ts';
import { oneOf, url } from './readers.ts';
import { boolSetting, numSetting, type Setting } from './schema.ts';

export const OBSERVABILITY_SETTINGS = {
  logLevel: {
    section: 'observability',
    vars: [
      {
        env: 'SLUICE_LOG_LEVEL',
        default: '`info`',
        doc:
          '`debug`, `info`, `warn`, `error` (pino JSON lines on stderr; secret-named fields redacted; ' +
          '`debug` adds a line per request and per delivery outcome)',
      },
    ],
    read(env) {
      const level = env.SLUICE_LOG_LEVEL || 'info';
      if (level !== 'debug' && level !== 'info' && level !== 'warn' && level !== 'error')
        throw new ConfigError('SLUICE_LOG_LEVEL', 'must be debug, info, warn or error');
      return level;
    },
  },
  /** Label request and event metrics by tenant (false: one series for all tenants, bounded cardinality). */
  metricsTenantLabel: boolSetting(
    'observability',
    'SLUICE_METRICS_TENANT_LABEL',
    true,
    'label request and event metrics by tenant; `false` records every tenant as `""` (bounded ' +
      'cardinality for many tenants)',
  ),
  /** Where spans go: nowhere (tracing off), the console (development) or OTLP over HTTP. */
  traceExporter: {
    section: 'observability',
    vars: [
      {
        env: 'SLUICE_TRACE_EXPORTER',
        default: '`none`',
        doc: '`none` (tracing off: no spans made), `console` (development), `otlp` (OTLP over HTTP)',
      },
    ],
    read: (env) => oneOf(env, 'SLUICE_TRACE_EXPORTER', ['none', 'console', 'otlp'] as const, 'none'),
  },
  /** The share of new traces sampled (0..1); a request that arrives with a sampled traceparent is always traced. */
  traceSampleRatio: numSetting(
    'observability',
    'SLUICE_TRACE_SAMPLE_RATIO',
    1,
    0,
    1,
    'share of new traces sampled (0 to 1); a request arriving with a sampled `traceparent` is always ' + 'traced',
  ),
  /** The OTLP/HTTP traces endpoint. */
  otlpEndpoint: {
    section: 'observability',
    vars: [
      {
        env: 'SLUICE_OTLP_ENDPOINT',
        default: '`http://127.0.0.1:4318/v1/traces`',
        doc: 'the OTLP/HTTP traces endpoint for `SLUICE_TRACE_EXPORTER=otlp`',
      },
    ],
    read: (env) => url(env, 'SLUICE_OTLP_ENDPOINT') ?? 'http://127.0.0.1:4318/v1/traces',
  },
} satisfies Record<string, Setting>;
