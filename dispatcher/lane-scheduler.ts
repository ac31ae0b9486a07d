/**
 * Which delivery of a lane endpoint goes next (dispatcher/lanes.ts reads `sluice.lanes`; this
 * process owns the partitions it was given, so what it does here holds for the whole cluster):
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
 * Load is not failure: a delivery over a limit waits its turn here, uncounted. The buffer is
 * bounded by the caller (`buffered`), which pauses its partitions when it is full.
 */

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
}

export interface LaneJob {
  endpointId: string;
  /** The ordering key when its endpoint orders by key; null: no order. */
  key: string | null;
  /** `topic\0partition` of the record: a partition taken away drops its jobs. */
  origin: string;
  /** Runs one attempt. */
  run(): Promise<LaneStep>;
  /** Called when the endpoint is gone or the job's time ran out while waiting; the job is finished. */
  expire(reason: 'gone' | 'waited'): void;
  /** Asked while the endpoint is waiting: true when the job must stop waiting (expire('waited')). */
  waitedTooLong?(): boolean;
}

interface KeyQueue {
  jobs: LaneJob[];
  busy: boolean;
  readyAt: number;
}

class Lane {
  /** Jobs without order, first come first served. */
  readonly free: LaneJob[] = [];
  /** Ordered jobs by key; a key is here while it has jobs. */
  readonly keys = new Map<string, KeyQueue>();
  active = 0;
  /** Whether the free jobs have the next turn (they alternate with the keys). */
  freeTurn = false;
  nextAt = 0;
  notBefore = 0;
  timer: NodeJS.Timeout | null = null;
  timerAt = 0;
  constructor(readonly id: string) {}
  get queued(): number {
    let n = this.free.length;
    for (const q of this.keys.values()) n += q.jobs.length;
    return n;
  }
}

export interface LaneSchedulerOptions {
  /** Attempts in flight in all lanes of this process. */
  concurrency: number;
  now(): number;
  /** The endpoint's policy now; null when it is gone. */
  policyOf(endpointId: string): LanePolicy | null;
  /** How often a waiting endpoint is looked at again when nothing wakes it (ms). */
  recheckMs: number;
}

export class LaneScheduler {
  private readonly lanes = new Map<string, Lane>();
  /** Lanes with work that could not start for want of a process-wide slot. */
  private readonly starved = new Set<Lane>();
  private inFlight = 0;
  private count = 0;
  private frozen = false;
  private readonly roomWaiters: Array<() => void> = [];
  /** Running heads whose partition went to another member (dropQueued): never tried here again. */
  private readonly orphans = new WeakSet<LaneJob>();

  constructor(private readonly opts: LaneSchedulerOptions) {}

  /** Deliveries queued or in flight here. */
  get buffered(): number {
    return this.count;
  }

  get active(): number {
    return this.inFlight;
  }

  submit(job: LaneJob): void {
    let lane = this.lanes.get(job.endpointId);
    if (!lane) {
      lane = new Lane(job.endpointId);
      this.lanes.set(job.endpointId, lane);
    }
    this.count++;
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

  /** No attempt starts while frozen (a rebalance is under way); `thaw` (or 60 s) ends it. */
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
   * their partitions went to another member, which reads them again from the last commit.
   */
  dropQueued(origins: Set<string>): number {
    let dropped = 0;
    for (const lane of this.lanes.values()) {
      const keep = lane.free.filter((j) => !origins.has(j.origin));
      dropped += lane.free.length - keep.length;
      lane.free.length = 0;
      lane.free.push(...keep);
      for (const [key, q] of lane.keys) {
        // A running head finishes here (its attempt, not a retry in place: the partition's next owner
        // has it from the last commit); everything else of a moved partition goes.
        const start = q.busy ? 1 : 0;
        if (q.busy && origins.has(q.jobs[0].origin)) this.orphans.add(q.jobs[0]);
        const kept = q.jobs.filter((j, i) => i < start || !origins.has(j.origin));
        dropped += q.jobs.length - kept.length;
        q.jobs = kept;
        if (kept.length === 0) lane.keys.delete(key);
      }
      this.forgetIfIdle(lane);
    }
    this.count -= dropped;
    this.notifyRoom();
    return dropped;
  }

  private pump(lane: Lane): void {
    if (this.frozen) return;
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
    for (;;) {
      if (lane.active >= policy.maxInFlight) return;
      if (this.inFlight >= this.opts.concurrency) {
        this.starved.add(lane);
        return;
      }
      if (lane.queued === 0) return;
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
      lane.nextAt = now + policy.spacingMs;
      this.start(lane, pick.job, pick.queue);
    }
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

  private start(lane: Lane, job: LaneJob, queue: KeyQueue | null): void {
    lane.active++;
    this.inFlight++;
    if (queue) queue.busy = true;
    const settle = (attempted: LaneStep) => {
      // An orphan is not retried in place: it leaves its key unfinished (its offset uncommitted here).
      const step = !attempted.done && this.orphans.has(job) ? { ...attempted, done: true } : attempted;
      lane.active--;
      this.inFlight--;
      if (step.notBefore) lane.notBefore = Math.max(lane.notBefore, step.notBefore);
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
        this.count--;
        this.notifyRoom();
      }
      this.pump(lane);
      this.feedStarved();
      this.forgetIfIdle(lane);
    };
    job.run().then(settle, () => settle({ done: false, retryAt: this.opts.now() + this.opts.recheckMs }));
  }

  private feedStarved(): void {
    if (this.starved.size === 0 || this.inFlight >= this.opts.concurrency) return;
    const lanes = [...this.starved];
    this.starved.clear();
    for (const lane of lanes) this.pump(lane);
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
      // A running head finishes on its own; the rest goes.
      jobs.push(...q.jobs.slice(q.busy ? 1 : 0));
      if (q.busy) q.jobs.length = 1;
      else lane.keys.delete(key);
    }
    this.count -= jobs.length;
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
    this.count -= out.length;
    for (const j of out) j.expire('waited');
    this.notifyRoom();
  }

  private forgetIfIdle(lane: Lane): void {
    if (lane.active > 0 || lane.queued > 0 || lane.timer !== null) return;
    // Remember a lane that must still space its next request or wait for a Retry-After.
    if (Math.max(lane.nextAt, lane.notBefore) > this.opts.now()) return;
    this.lanes.delete(lane.id);
    this.starved.delete(lane);
  }

  private notifyRoom(): void {
    if (this.roomWaiters.length === 0) return;
    const waiters = this.roomWaiters.splice(0);
    for (const w of waiters) w();
  }
}
