/**
 * When the next delivery of a lane endpoint may go (dispatcher/lanes.ts reads `sluice.lanes`; this
 * process owns the partitions it was given, so what it decides here holds for the whole cluster).
 * It decides *when*, never *whether there is a slot*: a delivery that may go becomes a ticket in
 * the process's one DeliveryScheduler (scheduler.ts), which gives it a slot under the same tenant
 * share, process concurrency and slow-endpoint rule as every other delivery. A lane has at most one
 * ticket waiting for a slot, so its spacing counts from the moment an attempt really starts.
 *
 * - **rate**: two requests to an endpoint start at least `spacingMs` apart (1 s / the rate), so no
 *   1 s window holds more than the rate plus one;
 * - **in flight**: at most `maxInFlight` requests are open to it;
 * - **order**: the deliveries of one ordering key go one at a time, in the order they came; a
 *   failing one stays at the head of its key (retried in place when `retryAt` comes) and holds
 *   back only that key;
 * - **Retry-After**: nothing goes to the endpoint before its `notBefore`;
 * - **waiting** (paused or not verified): an ordered endpoint's deliveries wait here until it
 *   may receive again (`wake`); others never reach the scheduler then (they wait on the hold rung).
 *
 * Load is not failure: a delivery over a limit waits its turn here, uncounted. The memory it takes
 * is shared out by tenant: `admits` says whether a tenant's next delivery may be held here (under
 * its share of `maxBuffered`, and, for one that would only wait, under `waitAllowance`); the
 * consumer leaves the rest in Kafka and reads it again once `hasRoom` says so.
 */
import type { EndpointSignal, Job } from './scheduler.ts';

export interface LanePolicy {
  spacingMs: number;
  maxInFlight: number;
  ordered: boolean;
  /** The endpoint may not receive now (paused or PENDING). */
  waiting: boolean;
}

/** What an attempt left to do: nothing (the job is finished) or another attempt of it at `retryAt`. */
export interface LaneStep {
  done: boolean;
  /** For an unfinished ordered job: when to try again (epoch ms). */
  retryAt?: number;
  /** The receiver asked for time (Retry-After): nothing goes to the endpoint before this. */
  notBefore?: number | null;
  /** The attempt was slow (or timed out): the process scheduler halves the endpoint's limit. */
  slow?: boolean;
}

export interface LaneJob {
  endpointId: string;
  tenantId: string;
  /** The ordering key when its endpoint orders by key; null: no order. */
  key: string | null;
  /** `topic\0partition` of the record: a partition taken away drops its jobs. */
  origin: string;
  /** Held only to wait (its ordered endpoint was paused or PENDING when it came): counts against waitAllowance. */
  waiting?: boolean;
  /** Runs one attempt; `onRetryAfter` takes an answer's Retry-After before the attempt settles. */
  run(onRetryAfter: (notBefore: number) => void): Promise<LaneStep>;
  /** Called when the endpoint is gone or the job's time ran out while waiting; the job is finished. */
  expire(reason: 'gone' | 'waited'): void;
  /** Asked while the endpoint is waiting: true when the job must stop waiting (expire('waited')). */
  waitedTooLong?(): boolean;
}

/** Where a lane's ticket gets its slot: the process's DeliveryScheduler. */
export interface Slots {
  submit(job: Job<EndpointSignal>): void;
}

interface KeyQueue {
  jobs: LaneJob[];
  busy: boolean;
  readyAt: number;
}

interface Ticket {
  job: LaneJob;
  queue: KeyQueue | null;
}

class Lane {
  /** Jobs without order, first come first served. */
  readonly free: LaneJob[] = [];
  /** Ordered jobs by key; a key is here while it has jobs. */
  readonly keys = new Map<string, KeyQueue>();
  active = 0;
  /** The job waiting for a slot in the process scheduler, if any (at most one per lane). */
  ticket: Ticket | null = null;
  /** Whether the free jobs have the next turn (they alternate with the keys). */
  freeTurn = false;
  spacingMs = 0;
  nextAt = 0;
  notBefore = 0;
  /** Takes a Retry-After (epoch ms); one function per lane, handed to each of its attempts. */
  readonly holdUntil = (at: number): void => {
    this.notBefore = Math.max(this.notBefore, at);
  };
  timer: NodeJS.Timeout | null = null;
  timerAt = 0;
  constructor(readonly id: string) {}
  get queued(): number {
    let n = this.free.length;
    for (const q of this.keys.values()) n += q.jobs.length;
    return n;
  }
}

/** One tenant's use of the lane buffer. */
interface TenantHeld {
  held: number;
  waiting: number;
}

export interface LaneSchedulerOptions {
  /** The process's delivery scheduler: every attempt takes one of its slots. */
  slots: Slots;
  /** Deliveries held here in all, shared out by tenant (SLUICE_DISPATCH_BUFFER). */
  maxBuffered: number;
  /** Deliveries one tenant may hold here only to wait (paused or PENDING ordered endpoints). */
  waitAllowance: number;
  now(): number;
  /** The endpoint's policy now; null when it is gone. */
  policyOf(endpointId: string): LanePolicy | null;
  /** How often a waiting endpoint is looked at again when nothing wakes it (ms). */
  recheckMs: number;
  /** Called whenever a delivery leaves the buffer (a consumer may read what it left in Kafka). */
  onRelease?(): void;
}

const HEALTHY: EndpointSignal = { slow: false, notBefore: null };

export class LaneScheduler {
  private readonly lanes = new Map<string, Lane>();
  private readonly tenants = new Map<string, TenantHeld>();
  private inFlight = 0;
  private count = 0;
  private tickets = 0;
  private frozen = false;
  private readonly roomWaiters: Array<() => void> = [];
  /** Running heads whose partition went to another member (dropQueued): never tried here again. */
  private readonly orphans = new WeakSet<LaneJob>();

  constructor(private readonly opts: LaneSchedulerOptions) {}

  /** Deliveries held here (queued, waiting for a slot, or in flight). */
  get buffered(): number {
    return this.count;
  }

  /** Lane attempts in flight (each also holds a slot of the process scheduler). */
  get active(): number {
    return this.inFlight;
  }

  /** Tickets waiting for a slot in the process scheduler (counted there too). */
  get ticketed(): number {
    return this.tickets;
  }

  /** What one tenant holds here. */
  heldBy(tenantId: string): { held: number; waiting: number } {
    const t = this.tenants.get(tenantId);
    return { held: t?.held ?? 0, waiting: t?.waiting ?? 0 };
  }

  /**
   * Whether a delivery of `tenantId` may be held here now: its tenant is under its share of the
   * buffer (`maxBuffered / n`, n the tenants holding deliveries here, itself included) and, when it
   * would only wait, under `waitAllowance`. With `slack` 0.5: whether it has room again (half).
   */
  admits(tenantId: string, waiting: boolean, slack = 1): boolean {
    const t = this.tenants.get(tenantId);
    const busy = this.tenants.size + (t ? 0 : 1);
    if ((t?.held ?? 0) >= (this.opts.maxBuffered / busy) * slack) return false;
    return !waiting || (t?.waiting ?? 0) < Math.max(1, this.opts.waitAllowance * slack);
  }

  /** Whether a tenant that was refused (`admits` false) has drained enough to be read again. */
  hasRoom(tenantId: string, waiting: boolean): boolean {
    return this.admits(tenantId, waiting, 0.5);
  }

  submit(job: LaneJob): void {
    let lane = this.lanes.get(job.endpointId);
    if (!lane) {
      lane = new Lane(job.endpointId);
      this.lanes.set(job.endpointId, lane);
    }
    this.count++;
    let t = this.tenants.get(job.tenantId);
    if (!t) {
      t = { held: 0, waiting: 0 };
      this.tenants.set(job.tenantId, t);
    }
    t.held++;
    if (job.waiting) t.waiting++;
    if (job.key === null) lane.free.push(job);
    else {
      let q = lane.keys.get(job.key);
      if (!q) {
        q = { jobs: [], busy: false, readyAt: 0 };
        lane.keys.set(job.key, q);
      }
      q.jobs.push(job);
    }
    this.pump(lane);
  }

  /** Stops every lane's timer (the dispatcher stops; nothing queued here starts again). */
  close(): void {
    this.frozen = true;
    for (const lane of this.lanes.values()) {
      if (lane.timer !== null) clearTimeout(lane.timer);
      lane.timer = null;
    }
  }

  /** The endpoint changed (resumed, verified, limits changed): look at its lane now. */
  wake(endpointId: string): void {
    const lane = this.lanes.get(endpointId);
    if (lane) this.pump(lane);
  }

  /** No ticket is issued while frozen (a rebalance is under way); `thaw` (or 60 s) ends it. */
  freeze(): void {
    this.frozen = true;
    setTimeout(() => this.thaw(), 60_000).unref();
  }

  thaw(): void {
    if (!this.frozen) return;
    this.frozen = false;
    for (const lane of [...this.lanes.values()]) this.pump(lane);
  }

  /** Calls `resume` once the buffer has drained to `low` or below. */
  whenBelow(low: number, resume: () => void): void {
    this.roomWaiters.push(() => {
      if (this.count <= low) resume();
      else this.whenBelow(low, resume);
    });
  }

  /**
   * Forgets the queued (not running) jobs whose origin is in `origins`, without finishing them:
   * their partitions went to another member, which reads them again from the last commit. A
   * ticket of such a job is forgotten too: the caller drops it from the process scheduler.
   */
  dropQueued(origins: Set<string>): number {
    const gone: LaneJob[] = [];
    for (const lane of this.lanes.values()) {
      const ticket = lane.ticket;
      if (ticket && origins.has(ticket.job.origin)) {
        lane.ticket = null;
        this.tickets--;
        if (ticket.queue) ticket.queue.busy = false;
        else gone.push(ticket.job);
      }
      const keep = lane.free.filter((j) => !origins.has(j.origin) || !gone.push(j));
      lane.free.length = 0;
      lane.free.push(...keep);
      for (const [key, q] of lane.keys) {
        // A running head finishes here (its attempt, not a retry in place: the partition's next owner
        // has it from the last commit); everything else of a moved partition goes.
        const start = q.busy ? 1 : 0;
        if (q.busy && origins.has(q.jobs[0].origin)) this.orphans.add(q.jobs[0]);
        q.jobs = q.jobs.filter((j, i) => i < start || !origins.has(j.origin) || !gone.push(j));
        if (q.jobs.length === 0) lane.keys.delete(key);
      }
      this.forgetIfIdle(lane);
    }
    for (const j of gone) this.release(j);
    this.notifyRoom();
    return gone.length;
  }

  private pump(lane: Lane): void {
    if (this.frozen || lane.ticket !== null) return;
    const policy = this.opts.policyOf(lane.id);
    if (policy === null) {
      this.expireAll(lane, 'gone');
      return;
    }
    if (policy.waiting) {
      this.expireWaited(lane);
      if (lane.queued > 0) this.wakeAt(lane, this.opts.now() + this.opts.recheckMs);
      return;
    }
    if (lane.active >= policy.maxInFlight || lane.queued === 0) return;
    const now = this.opts.now();
    const at = Math.max(lane.nextAt, lane.notBefore);
    if (at > now) {
      this.wakeAt(lane, at);
      return;
    }
    // Takes a free job off its queue; a keyed job stays at its key's head until it is done.
    const pick = this.next(lane, policy.ordered, now);
    if (pick === null) return;
    if (pick.readyAt > now) {
      this.wakeAt(lane, pick.readyAt);
      return;
    }
    lane.spacingMs = policy.spacingMs;
    this.issue(lane, { job: pick.job, queue: pick.queue }, policy.maxInFlight);
  }

  /**
   * The job to start next and its readiness: each ready key in turn, taking turns with the free
   * jobs (first come first served), so neither starves the other.
   */
  private next(
    lane: Lane,
    ordered: boolean,
    now: number,
  ): { job: LaneJob; queue: KeyQueue | null; readyAt: number } | null {
    lane.freeTurn = !lane.freeTurn;
    if (lane.freeTurn && lane.free.length > 0) return { job: lane.free.shift()!, queue: null, readyAt: 0 };
    let best: { job: LaneJob; queue: KeyQueue | null; readyAt: number } | null = null;
    for (const [key, q] of lane.keys) {
      if (q.busy || q.jobs.length === 0) continue;
      if (!ordered) {
        // The endpoint stopped ordering: its keyed jobs become free jobs.
        lane.free.push(...q.jobs);
        lane.keys.delete(key);
        continue;
      }
      if (q.readyAt <= now) {
        // Round robin: the key goes to the back of the map's order.
        lane.keys.delete(key);
        lane.keys.set(key, q);
        return { job: q.jobs[0], queue: q, readyAt: q.readyAt };
      }
      if (best === null || q.readyAt < best.readyAt) best = { job: q.jobs[0], queue: q, readyAt: q.readyAt };
    }
    if (lane.free.length > 0) return { job: lane.free.shift()!, queue: null, readyAt: 0 };
    return best;
  }

  /** Hands the job to the process scheduler as the lane's one ticket; it runs when given a slot. */
  private issue(lane: Lane, ticket: Ticket, maxInFlight: number): void {
    lane.ticket = ticket;
    this.tickets++;
    if (ticket.queue) ticket.queue.busy = true;
    this.opts.slots.submit({
      endpointId: lane.id,
      tenantId: ticket.job.tenantId,
      origin: ticket.job.origin,
      patient: true,
      ceiling: maxInFlight,
      run: async () => {
        if (lane.ticket !== ticket) return HEALTHY; // dropped meanwhile (its partition moved)
        // A Retry-After read while the ticket waited for its slot: it waits for that here.
        if (lane.notBefore > this.opts.now()) {
          this.putBack(lane, ticket, lane.notBefore);
          return HEALTHY;
        }
        return this.start(lane, ticket);
      },
      // A patient job is never diverted; should it be, the job goes back to wait its turn here.
      divert: () => {
        if (lane.ticket === ticket) this.putBack(lane, ticket, this.opts.now() + this.opts.recheckMs);
        return HEALTHY;
      },
      resolve: () => {},
    });
  }

  /** A ticket that did not start goes back to wait its turn in its lane, looked at again at `at`. */
  private putBack(lane: Lane, ticket: Ticket, at: number): void {
    lane.ticket = null;
    this.tickets--;
    if (ticket.queue) {
      ticket.queue.busy = false;
      ticket.queue.readyAt = at;
    } else lane.free.unshift(ticket.job);
    this.wakeAt(lane, at);
  }

  private start(lane: Lane, { job, queue }: Ticket): Promise<EndpointSignal> {
    lane.ticket = null;
    this.tickets--;
    lane.active++;
    this.inFlight++;
    lane.nextAt = this.opts.now() + lane.spacingMs;
    // The next ticket of this lane, once this attempt is under way (not nested in the scheduler's loop).
    queueMicrotask(() => this.pump(lane));
    const settle = (attempted: LaneStep): EndpointSignal => {
      // An orphan is not retried in place: it leaves its key unfinished (its offset uncommitted here).
      const step = !attempted.done && this.orphans.has(job) ? { ...attempted, done: true } : attempted;
      lane.active--;
      this.inFlight--;
      if (step.notBefore) lane.holdUntil(step.notBefore);
      // A free job that did not finish (its run failed unexpectedly) goes back to the front.
      if (!queue && !step.done) lane.free.unshift(job);
      if (queue) {
        queue.busy = false;
        if (step.done) {
          queue.jobs.shift();
          queue.readyAt = 0;
        } else queue.readyAt = step.retryAt ?? 0;
        if (queue.jobs.length === 0 && job.key !== null) lane.keys.delete(job.key);
      }
      if (step.done) {
        this.release(job);
        this.notifyRoom();
      }
      this.pump(lane);
      this.forgetIfIdle(lane);
      return { slow: step.slow === true, notBefore: step.notBefore ?? null };
    };
    return job
      .run(lane.holdUntil)
      .then(settle, () => settle({ done: false, retryAt: this.opts.now() + this.opts.recheckMs }));
  }

  /** A job leaves the buffer (finished, expired or left to another member). */
  private release(job: LaneJob): void {
    this.count--;
    const t = this.tenants.get(job.tenantId);
    if (t) {
      t.held--;
      if (job.waiting) t.waiting--;
      if (t.held <= 0) this.tenants.delete(job.tenantId);
    }
    this.opts.onRelease?.();
  }

  private wakeAt(lane: Lane, at: number): void {
    if (lane.timer !== null && lane.timerAt <= at) return;
    if (lane.timer !== null) clearTimeout(lane.timer);
    lane.timerAt = at;
    lane.timer = setTimeout(
      () => {
        lane.timer = null;
        this.pump(lane);
        this.forgetIfIdle(lane);
      },
      Math.max(0, Math.min(at - this.opts.now(), 2 ** 31 - 1)),
    );
  }

  private expireAll(lane: Lane, reason: 'gone' | 'waited'): void {
    const jobs = [...lane.free];
    lane.free.length = 0;
    for (const [key, q] of lane.keys) {
      // A running head (or one holding the lane's ticket) finishes on its own; the rest goes.
      jobs.push(...q.jobs.slice(q.busy ? 1 : 0));
      if (q.busy) q.jobs.length = 1;
      else lane.keys.delete(key);
    }
    for (const j of jobs) this.release(j);
    for (const j of jobs) j.expire(reason);
    this.notifyRoom();
    this.forgetIfIdle(lane);
  }

  /** Jobs that waited (paused, PENDING) past their deadline are finished; the key's next one moves up. */
  private expireWaited(lane: Lane): void {
    const out: LaneJob[] = [];
    const keepFree = lane.free.filter((j) => !(j.waitedTooLong?.() && out.push(j)));
    lane.free.length = 0;
    lane.free.push(...keepFree);
    for (const [key, q] of lane.keys) {
      const start = q.busy ? 1 : 0;
      const kept = q.jobs.filter((j, i) => i < start || !(j.waitedTooLong?.() && out.push(j)));
      q.jobs = kept;
      if (kept.length === 0) lane.keys.delete(key);
    }
    if (out.length === 0) return;
    for (const j of out) this.release(j);
    for (const j of out) j.expire('waited');
    this.notifyRoom();
  }

  private forgetIfIdle(lane: Lane): void {
    if (lane.active > 0 || lane.ticket !== null || lane.queued > 0 || lane.timer !== null) return;
    // Remember a lane that must still space its next request or wait for a Retry-After.
    if (Math.max(lane.nextAt, lane.notBefore) > this.opts.now()) return;
    this.lanes.delete(lane.id);
  }

  private notifyRoom(): void {
    if (this.roomWaiters.length === 0) return;
    const waiters = this.roomWaiters.splice(0);
    for (const w of waiters) w();
  }
}
