/**
 * When a rung record may go: a retry rung hands out its records in order while the head is due,
 * then pauses the partition until the head's due time (never sleeping in the consumer); the hold
 * rung goes through a whole batch as soon as one record in it may go (due, or its endpoint left
 * PENDING), re-holding the others at the tail, and is woken at once when an endpoint changes.
 */
import type { DeliveryRecord } from '../core/webhooks/records.ts';

/** main: `sluice.deliveries`; rung and hold: the retry rungs and the hold rung; lane: `sluice.lanes`. */
export type TopicMode = 'main' | 'rung' | 'hold' | 'lane';

export interface Gated {
  rec: DeliveryRecord | null;
}

/** How many records of the batch to hand out now, and when to look again if not all. */
export function gate<T extends Gated>(
  mode: TopicMode,
  items: T[],
  now: number,
  released: (rec: DeliveryRecord) => boolean,
): { take: number; wakeAt: number | null } {
  if (mode === 'main' || mode === 'lane') return { take: items.length, wakeAt: null };
  const ready = (it: T) => it.rec === null || it.rec.due_at <= now || (mode === 'hold' && released(it.rec));
  if (mode === 'rung') {
    const i = items.findIndex((it) => !ready(it));
    return i < 0 ? { take: items.length, wakeAt: null } : { take: i, wakeAt: items[i].rec!.due_at };
  }
  if (items.some(ready)) return { take: items.length, wakeAt: null };
  return { take: 0, wakeAt: Math.min(...items.map((it) => it.rec!.due_at)) };
}

/** Resume timers of paused partitions. */
export class PauseTimers {
  private readonly timers = new Map<string, { timer: NodeJS.Timeout; resume: () => void; topic: string; at: number }>();

  set(topic: string, partition: number, delayMs: number, resume: () => void): void {
    const key = `${topic}\0${partition}`;
    const old = this.timers.get(key);
    if (old) clearTimeout(old.timer);
    const delay = Math.max(0, Math.min(delayMs, 2 ** 31 - 1));
    const timer = setTimeout(() => {
      this.timers.delete(key);
      resume();
    }, delay);
    this.timers.set(key, { timer, resume, topic, at: Date.now() + delay });
  }

  /** Milliseconds until the next timer resumes a partition; null with none set. */
  nextInMs(): number | null {
    let at = Number.POSITIVE_INFINITY;
    for (const t of this.timers.values()) at = Math.min(at, t.at);
    return at === Number.POSITIVE_INFINITY ? null : Math.max(0, at - Date.now());
  }

  /** Resumes every paused partition of `topic` now. */
  wake(topic: string): void {
    for (const [key, t] of this.timers) {
      if (t.topic !== topic) continue;
      clearTimeout(t.timer);
      this.timers.delete(key);
      t.resume();
    }
  }

  clear(): void {
    for (const t of this.timers.values()) clearTimeout(t.timer);
    this.timers.clear();
  }
}
