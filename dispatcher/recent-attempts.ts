/**
 * What this process attempted lately, so a record read twice is not sent twice. A fan-out
 * repeated, or an event written twice (a produce sent again after an answer that never came),
 * yields the same delivery id and attempt number, keyed to the same partition, so the same owner
 * reads both: often together, the second while the first still waits its turn or is under way.
 * A copy of an attempt made here (or of a delivery delivered here) is a duplicate: the first's
 * outcome (delivered, its retry record, its DLQ entry) stands for both. Replays and recoveries take
 * fresh delivery ids; a retry carries the next attempt number, so neither is mistaken for a copy.
 * An event id published again after its 24 h window is a new event with the same delivery id: it
 * is told apart by its event's `created_at`, which a copy shares with its first.
 */
import { LruMap } from '../core/lru.ts';
import type { DeliveryRecord } from '../core/webhooks/records.ts';

/** How many deliveries a process remembers. */
export const RECENT_DELIVERIES = 100_000;

const DELIVERED = Number.POSITIVE_INFINITY;

/** How an attempt ended: delivered, made and failed, or not made after all (nothing to remember). */
export type AttemptEnd = 'delivered' | 'failed' | 'not-made';

export class RecentAttempts {
  /** delivery id and event time (key()) → the highest attempt made here, or DELIVERED. */
  private readonly made: LruMap<string, number>;
  /** Attempts under way, by key(), with the copies waiting for them (most have none). */
  private readonly running = new Map<string, Array<() => void>>();

  constructor(size = RECENT_DELIVERIES) {
    this.made = new LruMap(size);
  }

  /** Whether `rec` repeats an attempt made here, or a delivery delivered here. */
  repeats(rec: DeliveryRecord): boolean {
    return this.repeatsKey(key(rec), rec.attempt);
  }

  /**
   * Claims the attempt of `rec`: null when it repeats one made here (waited for while one of the
   * same delivery is under way), else the function to call when the attempt ends. The check and
   * the claim run in one turn, so two copies never both pass.
   */
  async claim(rec: DeliveryRecord): Promise<((end: AttemptEnd) => void) | null> {
    const id = key(rec);
    for (let waiters = this.running.get(id); waiters; waiters = this.running.get(id))
      await new Promise<void>((r) => waiters!.push(r));
    if (this.repeatsKey(id, rec.attempt)) return null;
    this.running.set(id, []);
    return (end) => {
      if (end !== 'not-made')
        this.made.set(id, end === 'delivered' ? DELIVERED : Math.max(rec.attempt, this.made.get(id) ?? 0));
      const waiters = this.running.get(id);
      this.running.delete(id);
      for (const w of waiters ?? []) w();
    };
  }

  private repeatsKey(id: string, attempt: number): boolean {
    const made = this.made.get(id);
    return made !== undefined && attempt <= made;
  }
}

/** One delivery of one event: a copy shares both; a new event under a reused id has another time. */
const key = (rec: DeliveryRecord) => `${rec.delivery_id}\0${rec.event.created_at}`;
