/**
 * Creates many clients in one process for the edge-from-outside bench (forked with IPC by
 * bench/edge-outside.ts, before any case runs): what `sluice admin create-client` does (the same
 * context and createClient), once per client, in one context instead of one process each (about
 * 1-2 s per run; concurrent runs do not help, every creation appends to the audit log and its
 * writers fence each other). Spec as argv[2] (JSON); answers with one message and exits.
 */
import { createClient } from '../../core/clients/provisioning.ts';
import { withContext } from '../../cli/runtime.ts';
import type { Credentials } from '../../harness/load.ts';

export interface ProvisionSpec {
  /** KAFKA_BROKERS, SLUICE_TOPIC_PREFIX, SLUICE_DATA_DIR... as the Sluice processes have them. */
  env: Record<string, string>;
  tenant: string;
  role: string;
  count: number;
}

const spec = JSON.parse(process.argv[2]) as ProvisionSpec;
Object.assign(process.env, spec.env);
const clients = await withContext(
  'admin',
  async (ctx) => {
    const out: Credentials[] = [];
    for (let i = 0; i < spec.count; i++) {
      const c = await createClient(ctx, { tenant: spec.tenant, role: spec.role, actor: 'bench:edge-outside' });
      out.push({ client_id: c.client_id, client_secret: c.client_secret });
    }
    return out;
  },
  { views: 'admin' },
);
process.send!({ clients }, () => process.exit(0));
