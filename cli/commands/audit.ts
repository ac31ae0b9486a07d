import { loadConfig } from '../../core/config.ts';
import { createKafka } from '../../core/kafka/client.ts';
import { topicNames } from '../../core/topics.ts';
import { verifyAuditLog } from '../../core/audit/verify.ts';
import { parse } from '../args.ts';
import { kafkaFor, say } from '../runtime.ts';
import { actionCommand, type Command } from '../command.ts';

const USAGE = `usage: sluice audit verify [--json]      (needs KAFKA_BROKERS)

Re-reads the whole compliance log (sluice.audit) and proves its hash chain. Prints the first
broken link and exits 1 if there is one.`;

async function verify(rest: string[]): Promise<number> {
  const { values } = parse(rest, { json: { type: 'boolean' } }, USAGE);
  const config = loadConfig();
  const { brokers } = await kafkaFor(config, { embedded: false });
  const topic = topicNames(config.topicPrefix).audit;
  const r = await verifyAuditLog(createKafka(brokers, config.kafkaClientId), topic, config.topicPrefix);
  if (values.json) say(JSON.stringify({ ok: r.broken === null, ...r }));
  else if (r.broken) {
    say(
      `BROKEN: ${topic} offset ${r.broken.offset} ` +
        `(seq ${r.broken.seq ?? '?'}, id ${r.broken.id ?? '?'}): ${r.broken.problem}`,
    );
    say(`${r.entries} records read; the chain holds only up to the record before offset ${r.broken.offset}.`);
  } else {
    const upTo = r.head ? ` up to seq ${r.head.seq}, head hash ${r.head.hash}` : ' (empty log)';
    say(`OK: ${r.entries} entries, chain verified${upTo}`);
  }
  return r.broken ? 1 : 0;
}

export const audit: Command = actionCommand('audit', 'verify the hash chain of the compliance log', USAGE, { verify });
