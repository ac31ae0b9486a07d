/**
 * Webhook endpoints, materialized from the compacted `sluice.endpoints` topic into the process's
 * view store (core/store), not the heap: a tenant may hold 100,000 endpoints, and every process
 * holds every tenant's. Tables:
 *
 *   records  id → the record                  order  [tenant, created_at, id] (list order)
 *   kinds    [tenant, kind, id] ('*' too)     states state → how many (the operator's gauge)
 *
 * so a list page, a publish's match and a fan-out read only the tenant's matching endpoints. The
 * records the dispatcher signs with are read per delivery; the most recent few thousand stay
 * parsed in a bounded cache, with their unsealed secrets.
 */
import type { StateRecord, StoredView } from '../kafka/state-consumer.ts';
import { parseJson } from '../kafka/state-consumer.ts';
import { addToCount, type Table, type ViewStore } from '../store/view-store.ts';
import type { Position } from '../paging.ts';
import { LruMap } from '../lru.ts';
import { unseal } from '../secrets.ts';
import type { EndpointRecord } from './records.ts';
import type { SigningSecrets } from '../../outbound/signing.ts';

/** Parsed records (and their secrets) kept in the heap: the endpoints deliveries are going to now. */
const CACHED = 4096;
/** (tenant, event kind) pairs whose matching endpoint ids are kept: the kinds events are published to now. */
const MATCHES_CACHED = 1024;
/** Tenants whose list order is kept in the heap, and how many endpoints a tenant may have for it. */
const LISTS_CACHED = 1024;
const LIST_KEPT_UP_TO = 64;

type OrderKey = [string, number, string];

interface Cached {
  rec: EndpointRecord;
  secret?: string;
  previous?: string;
  /** The unsealed ed25519 private keys (`whsk_`): the current one, the previous one. */
  key?: string;
  previousKey?: string;
}

export class EndpointRegistry implements StoredView {
  private records!: Table<EndpointRecord, string>;
  private order!: Table<0, [string, number, string]>;
  private kinds!: Table<0, [string, string, string]>;
  private states!: Table<number, string>;
  readonly compacted = true;
  private readonly cache = new LruMap<string, Cached>(CACHED);
  /** "tenant kind" → the ids `matching` returns; emptied by any change (changes are rare, events are not). */
  private readonly matches = new LruMap<string, string[]>(MATCHES_CACHED);
  /**
   * Tenant → its endpoints' keys in list order, for tenants with at most LIST_KEPT_UP_TO (null: more,
   * read from the store); emptied by any change. A list of a small tenant, the edge's hottest read
   * (GET /v1/webhooks/endpoints), was a store query every time: a third of its CPU.
   */
  private readonly lists = new LruMap<string, OrderKey[] | null>(LISTS_CACHED);
  /** Endpoint records read by list and match calls: what a call costs, for tests and metrics. */
  touched = 0;
  /** Called after every change (the dispatcher releases held deliveries when one turns ACTIVE). */
  readonly listeners = new Set<(id: string, rec: EndpointRecord | null) => void>();
  /** Writes of this process waiting to learn their fate: write_id → applied (true), refused (false), not read yet. */
  private readonly awaited = new Map<string, boolean | undefined>();

  constructor(
    readonly topic: string,
    private readonly masterKey: Buffer,
  ) {}

  attach(store: ViewStore): void {
    this.records = store.table('endpoints.records');
    this.order = store.table('endpoints.order');
    this.kinds = store.table('endpoints.kinds');
    this.states = store.table('endpoints.states');
  }

  /**
   * Runs inside the state consumer's store transaction. A record made from an older version than
   * the one held is refused (compare-and-set, see `follows`): every node reads the topic in the same
   * order, so every node keeps the same record and refuses the same ones.
   */
  apply(r: StateRecord): void {
    const rec = parseJson<EndpointRecord>(r.value);
    const old = this.records.get(r.key);
    if (rec && old && !follows(old, rec)) {
      this.settle(rec.write_id, false);
      return;
    }
    this.settle(rec?.write_id, true);
    if (old) this.unindex(old);
    if (rec) {
      this.index(rec);
      this.records.put(r.key, rec);
    } else if (old) this.records.remove(r.key);
    this.cache.delete(r.key);
    this.matches.clear();
    this.lists.clear();
    for (const l of this.listeners) l(r.key, rec);
  }

  /**
   * Announces that the view will say whether the write `writeId` was applied or refused: call
   * before sending it, then read `settled` (after the view has read it) and `forget` it.
   */
  expect(writeId: string): void {
    this.awaited.set(writeId, undefined);
  }

  /** True: the write was applied; false: refused (made from an older version); undefined: not read yet. */
  settled(writeId: string): boolean | undefined {
    return this.awaited.get(writeId);
  }

  forget(writeId: string): void {
    this.awaited.delete(writeId);
  }

  private settle(writeId: string | undefined, applied: boolean): void {
    if (writeId !== undefined && this.awaited.has(writeId)) this.awaited.set(writeId, applied);
  }

  /** How many endpoints the tenant has, counting no further than `upTo` (reads at most that many index keys). */
  countTenant(tenantId: string, upTo: number): number {
    let n = 0;
    for (const _ of this.order.getKeys({ start: [tenantId], end: [tenantId, Number.POSITIVE_INFINITY], limit: upTo }))
      n++;
    return n;
  }

  private index(rec: EndpointRecord): void {
    this.order.put([rec.tenant_id, rec.created_at, rec.id], 0);
    for (const kind of rec.events) this.kinds.put([rec.tenant_id, kind, rec.id], 0);
    addToCount(this.states, rec.state, 1);
  }

  private unindex(rec: EndpointRecord): void {
    this.order.remove([rec.tenant_id, rec.created_at, rec.id]);
    for (const kind of rec.events) this.kinds.remove([rec.tenant_id, kind, rec.id]);
    addToCount(this.states, rec.state, -1);
  }

  /** How many endpoints are in each state (the operator's gauge). */
  countByState(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const { key, value } of this.states.getRange()) out[key] = value;
    return out;
  }

  get(id: string): EndpointRecord | undefined {
    return this.cached(id)?.rec;
  }

  private cached(id: string): Cached | undefined {
    const c = this.cache.get(id);
    if (c) return c;
    const rec = this.records.get(id);
    return rec ? this.cache.set(id, { rec }) : undefined;
  }

  /** The endpoint only when it belongs to `tenantId` (another tenant's endpoint does not exist for the caller). */
  forTenant(id: string, tenantId: string): EndpointRecord | undefined {
    const rec = this.get(id);
    return rec && rec.tenant_id === tenantId ? rec : undefined;
  }

  /** The tenant's endpoints, oldest first (created_at, then id), from `after` on; reads only those it yields. */
  *listTenant(tenantId: string, after: Position | null = null): Generator<EndpointRecord> {
    const kept = this.keptList(tenantId);
    const keys = kept
      ? kept.filter((k) => after === null || k[1] > after.key || (k[1] === after.key && k[2] >= after.id))
      : this.order.getKeys({
          start: after ? [tenantId, after.key, after.id] : [tenantId],
          end: [tenantId, Number.POSITIVE_INFINITY],
        });
    for (const key of keys) {
      // A small tenant's records go through the record cache; a large tenant's pages would flush it.
      const rec = kept ? this.get(key[2]) : this.records.get(key[2]);
      this.touched++;
      if (rec) yield rec;
    }
  }

  /** A small tenant's keys in list order, kept until the next change; null for a larger one. */
  private keptList(tenantId: string): OrderKey[] | null {
    const held = this.lists.get(tenantId);
    if (held !== undefined) return held;
    const end = [tenantId, Number.POSITIVE_INFINITY];
    const keys = [...this.order.getKeys({ start: [tenantId], end, limit: LIST_KEPT_UP_TO + 1 })];
    return this.lists.set(tenantId, keys.length > LIST_KEPT_UP_TO ? null : keys);
  }

  /** Endpoints of the tenant whose filter takes this event kind, DISABLED ones left out; reads only those. */
  matching(tenantId: string, eventType: string): EndpointRecord[] {
    const key = `${tenantId} ${eventType}`;
    const ids = this.matches.get(key) ?? this.matches.set(key, this.matchingIds(tenantId, eventType));
    const out: EndpointRecord[] = [];
    for (const id of ids) {
      const rec = this.get(id);
      if (rec) out.push(rec);
    }
    this.touched += out.length;
    return out;
  }

  /** The filter items that take `eventType`: itself, its family (`order.*` takes `order.created`) and `*`. */
  private matchingIds(tenantId: string, eventType: string): string[] {
    const out: string[] = [];
    const seen = new Set<string>();
    const dot = eventType.indexOf('.');
    const items = dot > 0 ? [eventType, `${eventType.slice(0, dot)}.*`, '*'] : [eventType, '*'];
    for (const kind of items) {
      for (const key of this.kinds.getKeys({ start: [tenantId, kind], end: [tenantId, kind, '\uffff'] })) {
        if (seen.has(key[2])) continue; // its filter names the type more than one way
        seen.add(key[2]);
        const rec = this.get(key[2]);
        if (!rec) continue;
        if (rec.state === 'DISABLED') continue; // receives nothing until verified again
        out.push(rec.id);
      }
    }
    return out;
  }

  /** The signing secret in clear, unsealed once and kept while the record is cached. */
  secret(id: string): string | undefined {
    const c = this.cached(id);
    return c && currentSecret(c, this.masterKey);
  }

  /**
   * The secrets that sign a delivery at `nowMs`: the current
   * one, and the previous one while a rotation's overlap lasts.
   */
  signingSecrets(id: string, nowMs: number): SigningSecrets | undefined {
    const c = this.cached(id);
    if (!c) return undefined;
    const current = currentSecret(c, this.masterKey);
    const { previous_secret_sealed: sealed, previous_secret_until: until } = c.rec;
    const overlap = (until ?? 0) > nowMs;
    const out: SigningSecrets = { current, previous: null, ...this.signingKeys(c, overlap) };
    if (!sealed || !overlap) return out;
    c.previous ??= unseal(this.masterKey, sealed);
    return { ...out, previous: c.previous };
  }

  /** The signing mode and, when it signs with ed25519, its private keys (the previous one during the overlap). */
  private signingKeys(c: Cached, overlap: boolean): Pick<SigningSecrets, 'signing' | 'keys'> {
    const signing = c.rec.signing ?? 'hmac';
    if (signing === 'hmac' || !c.rec.signing_key_sealed) return { signing };
    c.key ??= unseal(this.masterKey, c.rec.signing_key_sealed);
    const previous = c.rec.previous_signing_key_sealed;
    if (!previous || !overlap) return { signing, keys: [c.key] };
    c.previousKey ??= unseal(this.masterKey, previous);
    return { signing, keys: [c.key, c.previousKey] };
  }
}

/**
 * Whether `rec` may replace `old`: it was made from `old`'s version (one more), or it is `old`
 * itself sent again (a producer's re-send). Records without a version (written before versions,
 * or by hand) replace and are replaced as before: the last write wins.
 */
export function follows(old: EndpointRecord, rec: EndpointRecord): boolean {
  if (rec.version === undefined || old.version === undefined) return true;
  if (rec.version === old.version + 1) return true;
  return rec.version === old.version && rec.write_id === old.write_id;
}

function currentSecret(c: Cached, masterKey: Buffer): string {
  c.secret ??= unseal(masterKey, c.rec.secret_sealed);
  return c.secret;
}
