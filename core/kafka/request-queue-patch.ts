/**
 * A fix for kafkajs 2.2.4's request queue, applied once when core/kafka/client.ts loads.
 *
 * After any response, every broker connection's queue schedules its next check of pending
 * requests with `setTimeout(check, throttledUntil - Date.now())`. Unthrottled, that delay is
 * negative (throttledUntil is -1), so the check runs again 1 ms later, and again, for as long as
 * the connection is open, pending requests or not: about a thousand timer callbacks a second per
 * connection, the largest part of an idle node's CPU (kafkajs issues #1556 and #1704, unmerged
 * fix #1667). Here the check is scheduled only when requests wait: after the throttle if there is
 * one, else in 10 ms as kafkajs does; with none waiting, nothing is scheduled, and the next push
 * or response checks again.
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

const RequestQueue = kafkajsClass<{ scheduleCheckPendingRequests: () => void }>('network/requestQueue/index.js', [
  'scheduleCheckPendingRequests',
  'checkPendingRequests',
]);
RequestQueue.prototype.scheduleCheckPendingRequests = scheduleCheckPendingRequests;
