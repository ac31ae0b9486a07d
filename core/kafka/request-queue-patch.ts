/**
 * Two fixes for kafkajs 2.2.4's request queue, applied once when core/kafka/client.ts loads.
 *
 * 1. Pending checks.
 * After any response, every broker connection's queue schedules its next check of pending
 * requests with `setTimeout(check, throttledUntil - Date.now())`. Unthrottled, that delay is
 * negative (throttledUntil is -1), so the check runs again 1 ms later, and again, for as long as
 * the connection is open, pending requests or not: about a thousand timer callbacks a second per
 * connection, the largest part of an idle node's CPU (kafkajs issues #1556 and #1704, unmerged
 * fix #1667). Here the check is scheduled only when requests wait: after the throttle if there is
 * one, else in 10 ms as kafkajs does; with none waiting, nothing is scheduled, and the next push
 * or response checks again.
 *
 * 2. Request timeouts. Each connection's queue runs its own `setInterval` every 100 ms to find
 * requests past their timeout, for as long as the connection is open. A worker holds about 25
 * connections (every consumer group, producer and admin): 250 timer callbacks a second, which woke
 * an idle worker about 40 times a second (issue 33). Here one ticker serves every queue of the
 * process, every TIMEOUT_CHECK_MS, and stops when no queue has a request in flight: a request
 * times out at most that much later than its timeout (10 s or more), as before within 100 ms. An
 * idle node always has a fetch in flight (they wait up to seconds for records), so the ticker runs
 * for good: at 250 ms it was 4 of an idle worker's ~12 timer wake-ups a second.
 */
import { kafkajsClass } from './kafkajs-internals.ts';

/** kafkajs's CHECK_PENDING_REQUESTS_INTERVAL. */
const CHECK_PENDING_MS = 10;

export interface RequestQueueState {
  pending: unknown[];
  throttledUntil: number;
  throttleCheckTimeoutId: NodeJS.Timeout | null;
  checkPendingRequests(): void;
}

export function scheduleCheckPendingRequests(this: RequestQueueState): void {
  if (this.throttleCheckTimeoutId) return;
  const untilUnthrottled = this.throttledUntil - Date.now();
  if (this.pending.length === 0 && untilUnthrottled <= 0) return;
  const delay = untilUnthrottled > 0 ? untilUnthrottled : CHECK_PENDING_MS;
  this.throttleCheckTimeoutId = setTimeout(() => {
    this.throttleCheckTimeoutId = null;
    this.checkPendingRequests();
  }, delay);
}

/** How often the one ticker looks for requests past their timeout. */
export const TIMEOUT_CHECK_MS = 1000;

export interface TimedQueueState {
  enforceRequestTimeout: boolean;
  inflight: Map<unknown, { sentAt: number; requestTimeout: number; timeoutRequest(): void }>;
  isConnected(): boolean;
  destroy(): void;
}

/** The request queues whose in-flight requests the ticker watches. */
const watched = new Set<TimedQueueState>();
let ticker: NodeJS.Timeout | null = null;
/** Marks an in-flight map whose `set` already wakes the ticker. */
const WATCHED = Symbol('sluice.watchedInflight');

/** kafkajs's interval body, for every watched queue; the ticker stops when nothing is in flight. */
export function checkRequestTimeouts(now = Date.now()): void {
  let inflight = 0;
  for (const q of watched) {
    for (const request of q.inflight.values())
      if (now - request.sentAt > request.requestTimeout) request.timeoutRequest();
    if (q.isConnected()) inflight += q.inflight.size;
    else {
      watched.delete(q);
      q.destroy();
    }
  }
  if (inflight === 0 && ticker) {
    clearInterval(ticker);
    ticker = null;
  }
}

/** Replaces kafkajs's per-queue interval (called when a connection opens): the queue joins the ticker. */
export function scheduleRequestTimeoutCheck(this: TimedQueueState): void {
  if (!this.enforceRequestTimeout) return;
  watched.add(this);
  watchInflight(this);
}

/** Starts the ticker if it is stopped: called as a request goes in flight. */
function wake(): void {
  ticker ??= setInterval(checkRequestTimeouts, TIMEOUT_CHECK_MS).unref();
}

/** The queue's in-flight map wakes the ticker when a request is added to it. */
function watchInflight(q: TimedQueueState): void {
  const map = q.inflight as Map<unknown, unknown> & { [WATCHED]?: true };
  if (map[WATCHED]) return;
  map[WATCHED] = true;
  const set = map.set;
  map.set = function (k, v) {
    wake();
    return set.call(this, k, v);
  };
  if (map.size > 0) wake();
}

/** How many queues the ticker watches, and whether it runs (for tests). */
export function timeoutTicker(): { queues: number; running: boolean } {
  return { queues: watched.size, running: ticker !== null };
}

type Patched = { scheduleCheckPendingRequests(): void; scheduleRequestTimeoutCheck(): void; destroy(): void };
const RequestQueue = kafkajsClass<Patched>(
  'network/requestQueue/index.js',
  ['scheduleCheckPendingRequests', 'checkPendingRequests', 'scheduleRequestTimeoutCheck', 'destroy'],
  { scheduleRequestTimeoutCheck: 'this.inflight.forEach', destroy: 'clearInterval(this.requestTimeoutIntervalId)' },
);
RequestQueue.prototype.scheduleCheckPendingRequests = scheduleCheckPendingRequests;
RequestQueue.prototype.scheduleRequestTimeoutCheck = scheduleRequestTimeoutCheck;
const destroy = RequestQueue.prototype.destroy;
RequestQueue.prototype.destroy = function (this: TimedQueueState) {
  watched.delete(this);
  destroy.call(this);
};
