/**
 * Which event types each tenant published in the last 7 days, and how often: what
 * `GET /v1/webhooks/event-types` answers (the console offers them when a filter is edited).
 * Events reach `sluice.events` through the API or straight from data-plane producers, so the one
 * place that sees them all is the fan-out. It notes each event in a TypeCountWindow, which every
 * 5 s sends what it gathered as one small record (per tenant and type: how many, the newest at) on
 * `sluice.event-types`, best effort and never waited for. Every ingress node reads that topic whole
 * into EventTypeCounts, kept in its store (beside the attempt history) by UTC day:
 *
 *   event_types.types [tenant, type]       → [day, count, last_at][]  (the days of the last 7 days)
 *   event_types.quiet [newest day, tenant, type] → 0                  (sweeps types quiet for 7 days)
 *   event_types.held  [tenant]             → how many types it holds   (10,000 at most)
 *
 *   const reports = await startTypeCountReports(ctx);  // dispatcher: reports.note(tenant, type, now)
 *   counts.page('acme', null, 100);                    // ingress: by name, { data, next }
 *
 * The counts are a guide, not a ledger: a fan-out repeated after a crash counts its events again, a
 * record Kafka did not take is missed, and a day counts whole while its newest event is within the
 * window (so a count may hold up to a day more than 7 days). A type whose newest event is older than
 * 7 days is gone from the list.
 */
import type { Context } from '../context.ts';
import { systemClock, type Clock } from '../clock.ts';
import { BestEffortProducer } from '../kafka/producers.ts';
import { encodeCursor, type Position } from '../paging.ts';
import { EVENT_TYPE_PATTERN } from './deliveries.ts';
import type { StateRecord, StoredView } from '../kafka/state-consumer.ts';
import { addToCount, type Table, type ViewStore } from '../store/view-store.ts';

export const EVENT_TYPES_WINDOW_DAYS = 7;
const DAY_MS = 24 * 3600_000;
const WINDOW_MS = EVENT_TYPES_WINDOW_DAYS * DAY_MS;
/** How long the fan-out gathers counts before it sends them. */
export const TYPE_COUNTS_WINDOW_MS = 5000;
/** A window holding this many (tenant, type) pairs is sent at once (a bound on what it holds). */
const WINDOW_MAX_PAIRS = 5000;
/** Pairs per record (~60 B each): a node applies a record in one store transaction. */
const PAIRS_PER_RECORD = 500;
/** The most types a node lists for one tenant; the others are counted as ignored. */
export const MAX_TYPES_PER_TENANT = 10_000;
const SWEEP_PER_RECORD = 16;
const MAX_NAME = 200;

/** One pair of a record on `sluice.event-types`: [tenant, type, how many events, the newest one's time (ms)]. */
export type TypeCountEntry = [tenant: string, type: string, count: number, last_at: number];

export interface TypeCountRecord {
  counts: TypeCountEntry[];
}

/** A type as the list answers it. */
export interface EventTypeCount {
  type: string;
  count: number;
  last_at: number;
}

/** [UTC day (ms / DAY_MS), events that day, the newest one's time (ms)] */
type Day = [day: number, count: number, last_at: number];

/**
 * Gathers the fan-out's events by tenant and type over TYPE_COUNTS_WINDOW_MS, then hands
 * `send` the window as records of PAIRS_PER_RECORD pairs at most (JSON TypeCountRecord).
 */
export class TypeCountWindow {
  private tenants = new Map<string, Map<string, { count: number; last_at: number }>>();
  private pairs = 0;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly send: (value: string) => void,
    private readonly windowMs = TYPE_COUNTS_WINDOW_MS,
  ) {}

  note(tenant: string, type: string, at: number): void {
    let types = this.tenants.get(tenant);
    if (!types) {
      types = new Map();
      this.tenants.set(tenant, types);
    }
    const held = types.get(type);
    if (held) {
      held.count++;
      if (at > held.last_at) held.last_at = at;
    } else {
      types.set(type, { count: 1, last_at: at });
      this.pairs++;
    }
    if (this.pairs >= WINDOW_MAX_PAIRS) this.flush();
    else if (!this.timer) {
      this.timer = setTimeout(() => this.flush(), this.windowMs);
      this.timer.unref();
    }
  }

  /** Sends what the window holds now (also at stop). */
  flush(): void {
    clearTimeout(this.timer ?? undefined);
    this.timer = null;
    let counts: TypeCountEntry[] = [];
    for (const [tenant, types] of this.tenants)
      for (const [type, c] of types) {
        counts.push([tenant, type, c.count, c.last_at]);
        if (counts.length >= PAIRS_PER_RECORD) {
          this.send(JSON.stringify({ counts } satisfies TypeCountRecord));
          counts = [];
        }
      }
    if (counts.length > 0) this.send(JSON.stringify({ counts } satisfies TypeCountRecord));
    this.tenants = new Map();
    this.pairs = 0;
  }
}

/** What the fan-out calls per event, and the dispatcher at stop. */
export interface TypeCountReports {
  note(tenant: string, type: string, at: number): void;
  /** Sends the window now and disconnects the producer. */
  stop(): Promise<void>;
}

/** What the type count reports read of the process's context. */
export type TypeCountDeps = Pick<Context, 'kafka' | 'log' | 'metrics' | 'topics'>;

/** A TypeCountWindow sending on `sluice.event-types` through a best-effort producer of its own. */
export async function startTypeCountReports(ctx: TypeCountDeps): Promise<TypeCountReports> {
  const producer = new BestEffortProducer(ctx.kafka, (count, err) => {
    ctx.metrics.eventTypeReportsDropped.inc(count);
    if (err)
      ctx.log.warn('event type counts could not be written; GET /v1/webhooks/event-types misses them', {
        count,
        error: err.message,
      });
  });
  await producer.connect();
  const window = new TypeCountWindow((value) => producer.add(ctx.topics.eventTypes, { key: 'event-types', value }));
  return {
    note: (tenant, type, at) => window.note(tenant, type, at),
    async stop() {
      window.flush();
      await producer.disconnect();
    },
  };
}

const isName = (s: unknown): s is string => typeof s === 'string' && s.length > 0 && s.length <= MAX_NAME;

function isEntry(e: unknown): e is TypeCountEntry {
  return (
    Array.isArray(e) &&
    isName(e[0]) &&
    typeof e[1] === 'string' &&
    EVENT_TYPE_PATTERN.test(e[1]) &&
    Number.isSafeInteger(e[2]) &&
    (e[2] as number) > 0 &&
    typeof e[3] === 'number' &&
    Number.isFinite(e[3])
  );
}

/**
 * The view an ingress node keeps of `sluice.event-types`: per tenant and type, the counts of the
 * last 7 days by day. `onIgnored(tenant, first)` is called for each count of a type past the
 * tenant's MAX_TYPES_PER_TENANT (`first`: the first time for that tenant in this process).
 */
export class EventTypeCounts implements StoredView {
  private types!: Table<Day[], [string, string]>;
  private quiet!: Table<0, [number, string, string]>;
  private held!: Table<number, string>;
  private readonly overflowed = new Set<string>();

  constructor(
    readonly topic: string,
    private readonly clock: Clock = systemClock,
    private readonly onIgnored: (tenant: string, first: boolean) => void = () => {},
    private readonly maxTypes = MAX_TYPES_PER_TENANT,
  ) {}

  attach(store: ViewStore): void {
    this.types = store.table('event_types.types');
    this.quiet = store.table('event_types.quiet');
    this.held = store.table('event_types.held');
  }

  /** Runs inside the state consumer's store transaction. */
  apply(r: StateRecord): void {
    const cut = this.clock.now() - WINDOW_MS;
    this.sweep(cut);
    if (r.value === null) return;
    let v: Partial<TypeCountRecord>;
    try {
      v = JSON.parse(r.value.toString('utf8'));
    } catch {
      return;
    }
    if (typeof v !== 'object' || v === null || !Array.isArray(v.counts)) return;
    for (const e of v.counts) if (isEntry(e) && e[3] >= cut) this.add(e, cut);
  }

  private add([tenant, type, count, at]: TypeCountEntry, cut: number): void {
    const day = Math.floor(at / DAY_MS);
    const key: [string, string] = [tenant, type];
    const held = this.types.get(key);
    if (!held) {
      if ((this.held.get(tenant) ?? 0) >= this.maxTypes) {
        this.onIgnored(tenant, !this.overflowed.has(tenant));
        this.overflowed.add(tenant);
        return;
      }
      addToCount(this.held, tenant, 1);
      this.types.put(key, [[day, count, at]]);
      this.quiet.put([day, tenant, type], 0);
      return;
    }
    const newest = held[held.length - 1][0];
    const days = held.filter((d) => d[2] >= cut);
    const same = days.find((d) => d[0] === day);
    if (same) {
      same[1] += count;
      same[2] = Math.max(same[2], at);
    } else {
      days.push([day, count, at]);
      days.sort((a, b) => a[0] - b[0]);
    }
    this.types.put(key, days);
    const now = days[days.length - 1][0];
    if (now !== newest) {
      this.quiet.remove([newest, tenant, type]);
      this.quiet.put([now, tenant, type], 0);
    }
  }

  /** Forgets up to SWEEP_PER_RECORD types whose newest event is older than `cut` (a whole day older). */
  private sweep(cut: number): void {
    const end = [Math.floor(cut / DAY_MS)];
    for (const [day, tenant, type] of [...this.quiet.getKeys({ end, limit: SWEEP_PER_RECORD })]) {
      this.quiet.remove([day, tenant, type]);
      this.types.remove([tenant, type]);
      addToCount(this.held, tenant, -1);
    }
  }

  /**
   * One page of the tenant's types of the last 7 days in name order: the first `limit` named after
   * `after` (null: from the first), and the name to pass as `after` for the next page (null on the
   * last). Names are a stable order; counts are not (a type whose count grew between two pages
   * would move across the cursor and be missed), so the pages go by name.
   */
  page(tenant: string, after: string | null, limit: number): { data: EventTypeCount[]; next: string | null } {
    const data: EventTypeCount[] = [];
    for (const t of this.byName(tenant, after)) {
      if (data.length === limit) return { data, next: data[data.length - 1].type };
      data.push(t);
    }
    return { data, next: null };
  }

  /** The tenant's types with events in the window, in name order, after `after` (exclusive). */
  private *byName(tenant: string, after: string | null): Generator<EventTypeCount> {
    const cut = this.clock.now() - WINDOW_MS;
    for (const { key, value } of this.types.getRange({ start: [tenant, after ?? ''], end: [tenant, '\uffff'] })) {
      if (after !== null && key[1] <= after) continue;
      let count = 0;
      let last = 0;
      for (const [, n, at] of value)
        if (at >= cut) {
          count += n;
          last = Math.max(last, at);
        }
      if (count > 0) yield { type: key[1], count, last_at: last };
    }
  }
}

/**
 * The cursor of a page of types: a keyset position (core/paging.ts) whose id is the last type's
 * name with its `.` written `-` (a type is `<word>.<word>` of `[a-z0-9_]`, so no name holds a `-`
 * and the spelling keeps the order): `0.order-created`.
 */
export const typeCursor = (type: string): string => encodeCursor({ key: 0, id: type.replaceAll('.', '-') });

/** The type a cursor of typeCursor names (any cursor is a position: its id read back the same way). */
export const typeAfter = (p: Position | null): string | null => (p === null ? null : p.id.replaceAll('-', '.'));
