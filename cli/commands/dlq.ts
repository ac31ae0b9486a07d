import { replayDlq } from '../../core/webhooks/dlq-replay.ts';
import type { DlqEntry } from '../../core/webhooks/records.ts';
import { parse, required, UsageError } from '../args.ts';
import { say, withContext } from '../runtime.ts';
import { actionCommand, type Command } from '../command.ts';

const USAGE = `usage: sluice dlq <list|replay> --tenant T [options]      (needs KAFKA_BROKERS)

  list   --tenant T [--endpoint-id ID] [--event-type KIND] [--json]
      the tenant's dead-lettered deliveries, oldest first
  replay --tenant T [--endpoint-id ID] [--event-type KIND] [--ids ID,ID,...] [--reason TEXT]
      puts the matching entries (or the listed ids) back into delivery with a fresh attempt
      count and takes them out of the DLQ, printing progress; audited as action dlq.replayed`;

const OPTIONS = {
  tenant: { type: 'string' },
  'endpoint-id': { type: 'string' },
  'event-type': { type: 'string' },
  ids: { type: 'string' },
  reason: { type: 'string' },
  json: { type: 'boolean' },
} as const;

async function run(action: 'list' | 'replay', rest: string[]): Promise<number> {
  const { values } = parse(rest, OPTIONS, USAGE);
  const tenant = required(values, 'tenant', USAGE);
  const filter = { endpoint_id: values['endpoint-id'], event_type: values['event-type'] };
  const ids = values.ids
    ? values.ids
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    : undefined;
  if (ids && (filter.endpoint_id || filter.event_type))
    throw new UsageError(`--ids goes alone, without --endpoint-id or --event-type\n\n${USAGE}`);
  return withContext(
    'dlq',
    async (ctx) => {
      const now = ctx.clock.now();
      const found = ids
        ? ids.map((id) => ctx.dlq.get(tenant, id, now)).filter((e): e is DlqEntry => e !== undefined)
        : null;
      // A filter is streamed from the store: a DLQ of millions is never held in memory.
      const entries: Iterable<DlqEntry> = found ?? ctx.dlq.stream(tenant, filter, now);
      const total = found ? found.length : ctx.dlq.count(tenant, filter, now);
      if (action === 'list') {
        if (values.json) {
          let first = true;
          say('[');
          for (const e of entries) {
            say(`${first ? '' : ','}${JSON.stringify(e)}`);
            first = false;
          }
          say(']');
        } else {
          for (const e of entries)
            say(
              `${e.id}  ${e.dead_lettered_at}  ${e.endpoint_id}  ${e.event_type.padEnd(22)} ${e.event_id}  ` +
                `attempts=${e.attempts}  last=${e.last_status ?? e.last_error ?? ''}`,
            );
          say(`${total} entr${total === 1 ? 'y' : 'ies'}`);
        }
        return 0;
      }
      if (ids && total < ids.length)
        say(`${ids.length - total} of the given ids are not in the tenant's DLQ; skipping them`);
      if (total === 0) {
        say('nothing to replay');
        return 0;
      }
      const started = Date.now();
      const n = await replayDlq(ctx, tenant, entries, total, {
        actor: 'operator:cli',
        reason: values.reason ?? null,
        subject: found
          ? `dlq ids: ${found.map((e) => e.id).join(',')}`.slice(0, 1000)
          : `dlq filter: ${JSON.stringify(filter)}`,
        onProgress: (done, total) => say(`replayed ${done}/${total} (${Math.round((done / total) * 100)}%)`),
      });
      say(
        `done: ${n} entr${n === 1 ? 'y' : 'ies'} back in delivery in ${((Date.now() - started) / 1000).toFixed(1)} s`,
      );
      return 0;
    },
    { views: 'dlq' },
  );
}

export const dlq: Command = actionCommand('dlq', USAGE, {
  list: (a) => run('list', a),
  replay: (a) => run('replay', a),
});
