/** Upstream settings: the base URLs behind the data-plane routes (`/v1/inference/*`, …). */
import { url } from './readers.ts';
import type { Setting } from './schema.ts';

export interface Upstreams {
  inference?: string;
  pipelines?: string;
  telemetry?: string;
}

export const UPSTREAM_SETTINGS = {
  upstreams: {
    section: 'upstreams',
    vars: [
      { env: 'SLUICE_UPSTREAM_INFERENCE', default: 'unset', doc: 'base URL behind `/v1/inference/*`' },
      { env: 'SLUICE_UPSTREAM_PIPELINES', default: 'unset', doc: 'base URL behind `/v1/pipelines/*`' },
      { env: 'SLUICE_UPSTREAM_TELEMETRY', default: 'unset', doc: 'base URL behind `/v1/telemetry/*`' },
    ],
    read: (env): Upstreams =>
      Object.freeze({
        inference: url(env, 'SLUICE_UPSTREAM_INFERENCE'),
        pipelines: url(env, 'SLUICE_UPSTREAM_PIPELINES'),
        telemetry: url(env, 'SLUICE_UPSTREAM_TELEMETRY'),
      }),
  },
} satisfies Record<string, Setting>;
