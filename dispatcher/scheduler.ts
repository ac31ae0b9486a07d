/**
 * Which delivery goes next. Every delivery a consumer hands over waits in its endpoint's queue in
 * memory; endpoints with work are served round-robin, at most `perEndpoint` attempts each and
 * `concurrency` in all, so a tenant's backlog shares the process fairly with everyone else's.
 *
 * Load is not failure: a busy endpoint's deliveries simply wait their turn. The buffer is bounded
 * (`maxBuffered` deliveries queued or in flight); when it is full the consumers pause the
 * partitions that feed it and resume them once it has drained below the low-water mark.
 *
 * Only two kinds of endpoint are diverted to a rung instead of waiting here: one that is slow
 * (its last attempt timed out or took `slowMs` or more: it keeps `perEndpoint` attempts in flight
 * and the rest of its queue goes back through the ladder), and one that asked for time
 * (429/503 with Retry-After: nothing is sent to it before then).
 */

export interface SchedulerOptions {
  concurrency: number;
  perEndpoint: number;
  maxBuffered: number;
  now: () => number;
}

export interface Job<T> {
  endpointId: string;
  /** Where the record came from (`topic\0partition`): a partition taken away drops its queued jobs. */
  origin?: string;
  /** Runs the attempt; the scheduler holds a slot for the endpoint until it settles. */
  run(): Promise<T>;
  /** Called instead of run() when the endpoint is diverted (slow, or asked to wait until `until`). */
  divert(reason: 'slow' | 'retry-after', until: number | null): T;
  resolve(value: T): void;
}

/** What the attempt taught the scheduler about its endpoint. */
export interface EndpointSignal {
  slow: boolean;
  /** Epoch ms before which nothing may be sent (429/503 Retry-After), or null. */
  notBefore: number | null;
}

class EndpointQueue<T> {
  readonly jobs: Job<T>[] = [];
  head = 0;
  active = 0;
  slow = false;
  notBefore = 0;
  inRing = false;
  constructor(readonly id: string) {}
  get queued(): number {
    return this.jobs.length - this.head;
  }
  shift(): Job<T> | undefined {
    if (this.head >= this.jobs.length) return undefined;
    const job = this.jobs[this.head];
    this.jobs[this.head++] = undefined as never;
    // Compact now and then so a long-lived queue does not keep its whole history.
    if (this.head > 1024 && this.head * 2 > this.jobs.length) {
      this.jobs.splice(0, this.head);
      this.head = 0;
    }
    return job;
  }
  drain(): Job<T>[] {
    const rest = this.jobs.slice(this.head);
    this.jobs.length = 0;
    this.head = 0;
    return rest;
  }
}

export class DeliveryScheduler<T> {
  private readonly queues = new Map<string, EndpointQueue<T>>();
  /** Endpoints with queued work and a free slot, served in turn. */
  private ring: EndpointQueue<T>[] = [];
  private ringHead = 0;
  private inFlight = 0;
  private bufferedCount = 0;
  /** Consumer groups in the middle of a rebalance: no attempt starts until they know their partitions. */
  private readonly frozenBy = new Set<string>();
  private readonly roomWaiters: Array<() => void> = [];
  diverted = 0;

  constructor(
    private readonly opts: SchedulerOptions,
    private readonly observe: (job: Job<T>, value: T) => EndpointSignal,
  ) {}

  /** Deliveries queued or in flight in this process. */
  get buffered(): number {
    return this.bufferedCount;
  }

  get active(): number {
    return this.inFlight;
  }

  /** How many more deliveries the buffer takes before consumers must pause. */
  get room(): number {
    return Math.max(0, this.opts.maxBuffered - this.bufferedCount);
  }

  /** Calls `resume` once the buffer has drained to half; used to resume paused partitions. */
  whenRoom(resume: () => void): void {
    this.roomWaiters.push(resume);
  }

  submit(job: Job<T>): void {
    let q = this.queues.get(job.endpointId);
    if (!q) {
      q = new EndpointQueue<T>(job.endpointId);
      this.queues.set(job.endpointId, q);
    }
    if (this.mustDivert(q)) {
      this.diverted++;
      job.resolve(
        job.divert(
          q.notBefore > this.opts.now() ? 'retry-after' : 'slow',
          q.notBefore > this.opts.now() ? q.notBefore : null,
        ),
      );
      this.forgetIfIdle(q);
      return;
    }
    q.jobs.push(job);
    this.bufferedCount++;
    this.enlist(q);
    this.pump();
  }

  /** True when a new delivery for this endpoint must not wait here. */
  private mustDivert(q: EndpointQueue<T>): boolean {
    if (q.notBefore > this.opts.now()) return true;
    return q.slow && q.active + q.queued >= this.opts.perEndpoint;
  }

  private enlist(q: EndpointQueue<T>): void {
    if (!q.inRing && q.queued > 0 && q.active < this.opts.perEndpoint) {
      q.inRing = true;
      this.ring.push(q);
    }
  }

  /**
   * Holds back new attempts while `group` rebalances: what is delivered then could not be
   * committed and would be sent again by the partition's next owner. `thaw` (or 60 s) ends it.
   */
  freeze(group: string): void {
    this.frozenBy.add(group);
    setTimeout(() => this.thaw(group), 60_000).unref();
  }

  thaw(group: string): void {
    if (this.frozenBy.delete(group)) this.pump();
  }

  private pump(): void {
    if (this.frozenBy.size > 0) return;
    while (this.inFlight < this.opts.concurrency && this.ringHead < this.ring.length) {
      const q = this.ring[this.ringHead++];
      q.inRing = false;
      const job = q.shift();
      if (job) this.start(q, job);
      this.enlist(q);
    }
    if (this.ringHead > 1024 && this.ringHead * 2 > this.ring.length) {
      this.ring = this.ring.slice(this.ringHead);
      this.ringHead = 0;
    }
  }

  private start(q: EndpointQueue<T>, job: Job<T>): void {
    q.active++;
    this.inFlight++;
    job.run().then(
      (value) => this.settle(q, job, value),
      // run() reports failures as values; a throw here is a bug, and the job must still settle.
      () => this.settle(q, job, job.divert('slow', null)),
    );
  }

  private settle(q: EndpointQueue<T>, job: Job<T>, value: T): void {
    q.active--;
    this.inFlight--;
    this.bufferedCount--;
    const signal = this.observe(job, value);
    q.slow = signal.slow;
    if (signal.notBefore !== null) q.notBefore = Math.max(q.notBefore, signal.notBefore);
    job.resolve(value);
    if (q.notBefore > this.opts.now() || (q.slow && q.queued > 0)) this.divertQueued(q);
    this.enlist(q);
    this.forgetIfIdle(q);
    this.pump();
    this.wakeIfRoom();
  }

  /**
   * Forgets queued (not started) jobs whose origin is in `origins`, without resolving them: their
   * partitions were assigned elsewhere and are consumed again from the last commit there.
   */
  dropQueued(origins: Set<string>): number {
    let dropped = 0;
    for (const q of this.queues.values()) {
      const rest = q.drain();
      for (const job of rest) {
        if (job.origin !== undefined && origins.has(job.origin)) dropped++;
        else q.jobs.push(job);
      }
      this.forgetIfIdle(q);
    }
    this.bufferedCount -= dropped;
    this.wakeIfRoom();
    return dropped;
  }

  /** Sends an endpoint's waiting deliveries back through the ladder (it is slow or asked for time). */
  private divertQueued(q: EndpointQueue<T>): void {
    const keep = q.notBefore > this.opts.now() ? 0 : Math.max(0, this.opts.perEndpoint - q.active);
    const rest = q.drain();
    const until = q.notBefore > this.opts.now() ? q.notBefore : null;
    for (let i = 0; i < rest.length; i++) {
      if (i < keep) {
        q.jobs.push(rest[i]);
        continue;
      }
      this.bufferedCount--;
      this.diverted++;
      rest[i].resolve(rest[i].divert(until === null ? 'slow' : 'retry-after', until));
    }
  }

  private forgetIfIdle(q: EndpointQueue<T>): void {
    if (q.active === 0 && q.queued === 0 && !q.slow && q.notBefore <= this.opts.now()) this.queues.delete(q.id);
  }

  private wakeIfRoom(): void {
    if (this.roomWaiters.length === 0 || this.bufferedCount > this.opts.maxBuffered / 2) return;
    const waiters = this.roomWaiters.splice(0);
    for (const resume of waiters) resume();
  }
}
