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
 *
 * Likewise each connection checks its requests in flight for timeouts every 100 ms from connect to
 * close, in flight or not: a dozen clients per process made that a steady stream of wake-ups on an
 * idle node. Here the check runs only while a request is in flight: armed when one is sent, stopped
 * at the first check that finds none.
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

export interface TimeoutCheckState {
  enforceRequestTimeout: boolean;
  requestTimeout: number;
  inflight: Map<number, { sentAt: number; requestTimeout: number; timeoutRequest(): void }>;
  requestTimeoutIntervalId: NodeJS.Timeout | null;
  isConnected(): boolean;
  destroy(): void;
}

/** At connect: nothing yet (kafkajs starts its 100 ms check here, for the connection's life). */
export function scheduleRequestTimeoutCheck(this: TimeoutCheckState): void {
  if (this.requestTimeoutIntervalId) clearInterval(this.requestTimeoutIntervalId);
  this.requestTimeoutIntervalId = null;
}

/** Once a request is in flight: kafkajs's check, every 100 ms until nothing is in flight. */
export function armRequestTimeoutCheck(this: TimeoutCheckState): void {
  if (!this.enforceRequestTimeout || this.requestTimeoutIntervalId || this.inflight.size === 0) return;
  this.requestTimeoutIntervalId = setInterval(
    () => {
      for (const request of this.inflight.values())
        if (Date.now() - request.sentAt > request.requestTimeout) request.timeoutRequest();
      if (!this.isConnected()) this.destroy();
      if (!this.isConnected() || this.inflight.size === 0) {
        clearInterval(this.requestTimeoutIntervalId!);
        this.requestTimeoutIntervalId = null;
      }
    },
    Math.min(this.requestTimeout, 100),
  );
}

type Queue = {
  scheduleCheckPendingRequests: () => void;
  scheduleRequestTimeoutCheck: () => void;
  sendSocketRequest: (this: TimeoutCheckState, request: unknown) => void;
};
const RequestQueue = kafkajsClass<Queue>('network/requestQueue/index.js', [
  'scheduleCheckPendingRequests',
  'checkPendingRequests',
  'scheduleRequestTimeoutCheck',
  'sendSocketRequest',
  'destroy',
]);
RequestQueue.prototype.scheduleCheckPendingRequests = scheduleCheckPendingRequests;
RequestQueue.prototype.scheduleRequestTimeoutCheck = scheduleRequestTimeoutCheck;
const sendSocketRequest = RequestQueue.prototype.sendSocketRequest;
RequestQueue.prototype.sendSocketRequest = function (this: TimeoutCheckState, request: unknown) {
  sendSocketRequest.call(this, request);
  armRequestTimeoutCheck.call(this);
};
