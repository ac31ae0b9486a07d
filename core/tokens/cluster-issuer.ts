/**
 * The issuer (`iss`) is a fact of the cluster, not of a node: every node must mint and accept the
 * same one. It is kept in the compacted `sluice.keys` topic beside the signing keys, under the key
 * `issuer:<url>`; the record with the lowest offset wins, so two nodes starting at once on a new
 * cluster still agree. A node without SLUICE_ISSUER adopts the cluster's; a node whose
 * SLUICE_ISSUER differs refuses to start, naming the variable.
 */
import type { Config } from '../config.ts';
import { ConfigError } from '../errors.ts';
import type { DurableProducer } from '../kafka/producers.ts';
import { parseJson, type StateRecord, type StateView } from '../kafka/state-consumer.ts';

export const ISSUER_KEY_PREFIX = 'issuer:';

interface IssuerRecord {
  issuer: string;
  recorded_at: number;
}

export class IssuerView implements StateView {
  private first: { offset: bigint; issuer: string } | null = null;
  constructor(readonly topic: string) {}

  apply(r: StateRecord): void {
    if (!r.key.startsWith(ISSUER_KEY_PREFIX)) return;
    const rec = parseJson<IssuerRecord>(r.value);
    if (rec === null || typeof rec.issuer !== 'string') return;
    const offset = BigInt(r.offset);
    if (this.first === null || offset < this.first.offset) this.first = { offset, issuer: rec.issuer };
  }

  /** The cluster's issuer, or null while none is recorded. */
  get issuer(): string | null {
    return this.first?.issuer ?? null;
  }
}

/**
 * The issuer this node uses: the cluster's (recording this node's first when there is none yet).
 * Throws a ConfigError naming SLUICE_ISSUER when it was set to something else.
 */
export async function agreeOnIssuer(
  config: Readonly<Config>,
  view: IssuerView,
  producer: DurableProducer,
  waitFor: (check: () => boolean, what: string) => Promise<void>,
): Promise<string> {
  if (view.issuer === null) {
    const rec: IssuerRecord = { issuer: config.issuer, recorded_at: Date.now() };
    await producer.sendJson(view.topic, `${ISSUER_KEY_PREFIX}${config.issuer}`, rec);
    await waitFor(() => view.issuer !== null, "the cluster's issuer");
  }
  const cluster = view.issuer!;
  if (cluster === config.issuer || config.issuerIsDefault) return cluster;
  throw new ConfigError(
    'SLUICE_ISSUER',
    `this node's issuer is "${config.issuer}" but the cluster's (recorded in ${view.topic}) is "${cluster}": ` +
      'every node must mint and accept one issuer. ' +
      `Set SLUICE_ISSUER=${cluster} on this node, or leave it unset to adopt the cluster's`,
  );
}
