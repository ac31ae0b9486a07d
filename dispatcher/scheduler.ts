/**
 * Which delivery goes next. Every delivery a consumer hands over waits in its endpoint's queue in
 * memory; endpoints with work are served round-robin, `concurrency` attempts in all. Fairness holds
 * at two levels, so one tenant's slow receivers cannot take the process from everyone else:
 * - **a tenant** has at most `concurrency / (n + 1)` attempts in flight, n being the tenants with
 *   deliveries here: whoever arrives next always finds room (one tenant alone: half the slots);
 * - **an endpoint** has at most its own limit in flight: `perEndpoint` while its attempts are
 *   fast, halved by every slow one (down to 1) and grown back by one with every fast one.
 *
 * Load is not failure: a busy endpoint's deliveries simply wait their turn. The buffer is bounded
 * (`maxBuffered` deliveries queued or in flight). When it is full of one tenant's deliveries the
 * consumers pause the partitions that feed it and resume them once it has drained below the
 * low-water mark; when other tenants have deliveries here too, a tenant over its share of the full
 * buffer (`maxBuffered / n`) has its new deliveries sent back through the first rung instead, so a
 * paused partition never holds another tenant's delivery behind one tenant's backlog.
 *
 * Otherwise only two kinds of endpoint are diverted to a rung instead of waiting here: one that is
 * slow (its last attempt timed out or took `slowMs` or more: it keeps its limit in flight and the
 * rest of its queue goes back through the ladder), and one that asked for time (429/503 with
 * Retry-After: nothing is sent to it before then).
 */

export interface SchedulerOptions {
  concurrency: number;
  perEndpoint: number;
  maxBuffered: number;
  now: () => number;
}

export type DivertReason = 'slow' | 'retry-after' | 'tenant-share';

export interface Job<T> {
  endpointId: string;
  tenantId: string;
  /** Where the record came from (`topic\0partition`): a partition taken away drops its queued jobs. */
  origin?: string;
  /**
   * Runs the attempt; the scheduler holds a slot for the endpoint until it settles. `onRetryAfter`
   * takes an answer's Retry-After before the attempt settles (dispatcher/process.ts).
   */
  run(onRetryAfter?: (notBefore: number) => void): Promise<T>;
  /** Called instead of run() when diverted: slow, asked to wait until `until`, or over its tenant's share. */
  divert(reason: DivertReason, until: number | null): T;
  resolve(value: T): void;
  /**
   * Never diverted: waits here for a slot however slow its endpoint or full the buffer (a lane's
   * ticket: its lane holds the deliveries and decides when the next may go; lane-scheduler.ts).
   */
  patient?: boolean;
  /** The most attempts its endpoint may have in flight (its `max_in_flight`); `perEndpoint` when unset. */
  ceiling?: number;
}

/** What the attempt taught the scheduler about its endpoint. */
export interface EndpointSignal {
  slow: boolean;
  /** Epoch ms before which nothing may be sent (429/503 Retry-After), or null. */
  notBefore: number | null;
}

/** One tenant's use of the process. */
class TenantShare<T> {
  active = 0;
  buffered = 0;
  /** Its endpoints with work, held back while the tenant is at its in-flight cap. */
  parked: EndpointQueue<T>[] = [];
}

class EndpointQueue<T> {
  readonly jobs: Job<T>[] = [];
  head = 0;
  active = 0;
  slow = false;
  notBefore = 0;
  /** Takes a Retry-After (epoch ms); one function per queue, handed to each of its attempts. */
  readonly holdUntil = (at: number): void => {
    this.notBefore = Math.max(this.notBefore, at);
  };
  inRing = false;
  parked = false;
  constructor(
    readonly id: string,
    readonly tenantId: string,
    /** The most it may have in flight when fast: perEndpoint, or the endpoint's own max_in_flight. */
    public ceiling: number,
    /** Attempts it may have in flight: the ceiling while fast, halved by each slow attempt. */
    public limit = ceiling,
  ) {}
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
  private readonly tenants = new Map<string, TenantShare<T>>();
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

  /** Whether a paused partition waits for the buffer to drain (whenRoom). */
  get waitingForRoom(): boolean {
    return this.roomWaiters.length > 0;
  }

  /** Calls `resume` once the buffer has drained to half; used to resume paused partitions. */
  whenRoom(resume: () => void): void {
    this.roomWaiters.push(resume);
  }

  /**
   * False when the consumer must pause before handing over a delivery of `tenantId`: the buffer is
   * full and holds nobody's deliveries but this tenant's (with others' in it, submit diverts the
   * tenant's excess instead, so the partition keeps flowing for them).
   */
  mayTake(tenantId: string): boolean {
    if (this.bufferedCount < this.opts.maxBuffered) return true;
    const mine = this.tenants.get(tenantId)?.buffered ?? 0;
    return mine < this.bufferedCount;
  }

  /** Tenants with deliveries queued or in flight here. */
  get busyTenants(): number {
    return this.tenants.size;
  }

  submit(job: Job<T>): void {
    const ceiling = Math.max(1, job.ceiling ?? this.opts.perEndpoint);
    let q = this.queues.get(job.endpointId);
    if (!q) {
      q = new EndpointQueue<T>(job.endpointId, job.tenantId, ceiling);
      this.queues.set(job.endpointId, q);
    } else if (q.ceiling !== ceiling) {
      // The endpoint's max_in_flight changed.
      q.ceiling = ceiling;
      q.limit = Math.min(q.limit, ceiling);
    }
    let tenant = this.tenants.get(job.tenantId);
    const reason = job.patient ? null : this.divertReason(q, tenant);
    if (reason !== null) {
      this.diverted++;
      job.resolve(job.divert(reason, reason === 'retry-after' ? q.notBefore : null));
      this.forgetIfIdle(q);
      return;
    }
    if (!tenant) {
      tenant = new TenantShare<T>();
      this.tenants.set(job.tenantId, tenant);
    }
    q.jobs.push(job);
    this.bufferedCount++;
    tenant.buffered++;
    this.enlist(q);
    this.pump();
  }

  /** Why a new delivery for this endpoint must not wait here, or null. */
  private divertReason(q: EndpointQueue<T>, tenant: TenantShare<T> | undefined): DivertReason | null {
    if (q.notBefore > this.opts.now()) return 'retry-after';
    if (q.slow && q.active + q.queued >= q.limit) return 'slow';
    if (this.bufferedCount >= this.opts.maxBuffered) {
      const mine = tenant?.buffered ?? 0;
      const busy = this.tenants.size + (tenant ? 0 : 1);
      if (mine < this.bufferedCount && mine >= this.opts.maxBuffered / busy) return 'tenant-share';
    }
    return null;
  }

  /** The most attempts one tenant may have in flight now. */
  private tenantCap(): number {
    return Math.max(1, Math.floor(this.opts.concurrency / (this.tenants.size + 1)));
  }

  private enlist(q: EndpointQueue<T>): void {
    if (!q.inRing && !q.parked && q.queued > 0 && q.active < q.limit) {
      q.inRing = true;
      this.ring.push(q);
    }
  }

  /** Puts a tenant's parked endpoints back in the ring (it has a free slot, or the caps changed). */
  private unpark(tenant: TenantShare<T>): void {
    if (tenant.parked.length === 0) return;
    const parked = tenant.parked;
    tenant.parked = [];
    for (const q of parked) {
      q.parked = false;
      this.enlist(q);
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
      const tenant = this.tenants.get(q.tenantId);
      if (tenant && tenant.active >= this.tenantCap()) {
        q.parked = true;
        tenant.parked.push(q);
        continue;
      }
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
    this.tenants.get(q.tenantId)!.active++;
    job.run(q.holdUntil).then(
      (value) => this.settle(q, job, value),
      // run() reports failures as values; a throw here is a bug, and the job must still settle.
      () => this.settle(q, job, job.divert('slow', null)),
    );
  }

  private settle(q: EndpointQueue<T>, job: Job<T>, value: T): void {
    q.active--;
    this.inFlight--;
    this.bufferedCount--;
    const tenant = this.tenants.get(q.tenantId)!;
    tenant.active--;
    tenant.buffered--;
    const signal = this.observe(job, value);
    q.slow = signal.slow;
    // Additive increase, multiplicative decrease: a slow receiver is sent less at once.
    q.limit = signal.slow ? Math.max(1, q.limit >> 1) : Math.min(q.ceiling, q.limit + 1);
    if (signal.notBefore !== null) q.holdUntil(signal.notBefore);
    job.resolve(value);
    if (q.notBefore > this.opts.now() || (q.slow && q.queued > 0)) this.divertQueued(q);
    this.unpark(tenant);
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
        if (job.origin !== undefined && origins.has(job.origin)) {
          dropped++;
          this.tenants.get(q.tenantId)!.buffered--;
        } else q.jobs.push(job);
      }
      this.forgetIfIdle(q);
    }
    this.bufferedCount -= dropped;
    this.wakeIfRoom();
    return dropped;
  }

  /** Sends an endpoint's waiting deliveries back through the ladder (it is slow or asked for time). */
  private divertQueued(q: EndpointQueue<T>): void {
    const keep = q.notBefore > this.opts.now() ? 0 : Math.max(0, q.limit - q.active);
    const rest = q.drain();
    const until = q.notBefore > this.opts.now() ? q.notBefore : null;
    let kept = 0;
    for (let i = 0; i < rest.length; i++) {
      if (rest[i].patient || kept < keep) {
        if (!rest[i].patient) kept++;
        q.jobs.push(rest[i]);
        continue;
      }
      this.bufferedCount--;
      this.tenants.get(q.tenantId)!.buffered--;
      this.diverted++;
      rest[i].resolve(rest[i].divert(until === null ? 'slow' : 'retry-after', until));
    }
  }

  private forgetIfIdle(q: EndpointQueue<T>): void {
    // An endpoint still below its full limit is remembered, so a slow one is not sent a full burst again.
    const idle = q.active === 0 && q.queued === 0 && !q.slow && q.limit === q.ceiling;
    if (idle && q.notBefore <= this.opts.now()) this.queues.delete(q.id);
    const tenant = this.tenants.get(q.tenantId);
    if (tenant && tenant.buffered === 0) {
      this.tenants.delete(q.tenantId);
      // One tenant fewer: every other tenant's cap grew.
      for (const other of this.tenants.values()) this.unpark(other);
    }
  }

  private wakeIfRoom(): void {
    if (this.roomWaiters.length === 0 || this.bufferedCount > this.opts.maxBuffered / 2) return;
    const waiters = this.roomWaiters.splice(0);
    for (const resume of waiters) resume();
  }
}
