import { loadConfig } from '../../core/config.ts';
import { createKafka } from '../../core/kafka/client.ts';
import { topicNames } from '../../core/topics.ts';
import { verifyAuditLog } from '../../core/audit/verify.ts';
import { parse } from '../args.ts';
import { kafkaFor, say } from '../runtime.ts';
import { actionCommand, type Command } from '../command.ts';

const USAGE = `usage: sluice audit verify [--tenant T] [--json]      (needs KAFKA_BROKERS)

Re-reads the whole compliance log (sluice.audit) and proves every tenant's hash chain (each
tenant's entries are numbered 1, 2, 3, ... and linked on their own). Prints the first broken link
and exits 1 if there is one. --tenant prints that tenant's head: its entry count and last hash,
which the tenant's own check of its GET /v1/audit pages must end on.`;

async function verify(rest: string[]): Promise<number> {
  const { values } = parse(rest, { json: { type: 'boolean' }, tenant: { type: 'string' } }, USAGE);
  const config = loadConfig();
  const { brokers } = await kafkaFor(config, { embedded: false });
  const topic = topicNames(config.topicPrefix).audit;
  const r = await verifyAuditLog(createKafka(brokers, config.kafkaClientId), topic, config.topicPrefix);
  const tenants = Object.keys(r.heads).length;
  const tenantHead = values.tenant === undefined ? undefined : (r.heads[values.tenant] ?? null);
  if (values.json)
    say(
      JSON.stringify({
        ok: r.broken === null,
        ...r,
        tenants,
        ...(tenantHead === undefined ? {} : { tenant_head: tenantHead }),
      }),
    );
  else if (r.broken) {
    say(
      `BROKEN: ${topic} offset ${r.broken.offset} ` +
        `(seq ${r.broken.seq ?? '?'}, id ${r.broken.id ?? '?'}): ${r.broken.problem}`,
    );
    say(`${r.entries} records read; the chain holds only up to the record before offset ${r.broken.offset}.`);
  } else {
    say(`OK: ${r.entries} entries, the chains of ${tenants} tenants verified${r.entries === 0 ? ' (empty log)' : ''}`);
    if (tenantHead === null) say(`tenant ${values.tenant}: no entries`);
    else if (tenantHead) say(`tenant ${values.tenant}: ${tenantHead.seq} entries, head hash ${tenantHead.hash}`);
  }
  return r.broken ? 1 : 0;
}

export const audit: Command = actionCommand('audit', USAGE, { verify });
