/**
 * Bounds on deliveries in flight: a permit pool for the process and a gate per endpoint, shared
 * by every consumer of this dispatcher. An endpoint whose last attempt was slow (or timed out)
 * gets no queue: its deliveries take a free permit at once or are handed back (re-queued to a
 * rung), so a slow endpoint never holds up the deliveries of others on the same partition.
 */
export class Semaphore {
  private free: number;
  private readonly waiters: Array<() => void> = [];
  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`semaphore size must be a positive integer, got ${size}`);
    this.free = size;
  }
  get inUse(): number {
    return this.size - this.free;
  }
  get idle(): boolean {
    return this.free === this.size && this.waiters.length === 0;
  }
  tryAcquire(): boolean {
    if (this.free === 0) return false;
    this.free--;
    return true;
  }
  /** Resolves true with a permit, or false when `timeoutMs` passed first. */
  acquire(timeoutMs: number): Promise<boolean> {
    if (this.tryAcquire()) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const waiter = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        resolve(false);
      }, timeoutMs);
      this.waiters.push(waiter);
    });
  }
  release(): void {
    const next = this.waiters.shift();
    if (next) next();
    else this.free++;
  }
}

interface Gate {
  sem: Semaphore;
  slow: boolean;
}

export type Permit = { release(slow: boolean): void };

export class DeliveryLimits {
  readonly process: Semaphore;
  private readonly gates = new Map<string, Gate>();
  constructor(processLimit: number, private readonly perEndpoint: number, private readonly waitBudgetMs: number) {
    this.process = new Semaphore(processLimit);
  }

  get inFlight(): number {
    return this.process.inUse;
  }

  isSlow(endpointId: string): boolean {
    return this.gates.get(endpointId)?.slow ?? false;
  }

  /** A permit for one attempt at `endpointId`, or null: hand the delivery back instead of waiting. */
  async acquire(endpointId: string): Promise<Permit | null> {
    let gate = this.gates.get(endpointId);
    if (!gate) {
      gate = { sem: new Semaphore(this.perEndpoint), slow: false };
      this.gates.set(endpointId, gate);
    }
    const g = gate;
    const started = Date.now();
    const gotEndpoint = g.slow ? g.sem.tryAcquire() : await g.sem.acquire(this.waitBudgetMs);
    if (!gotEndpoint) return null;
    const left = Math.max(1, this.waitBudgetMs - (Date.now() - started));
    if (!(await this.process.acquire(left))) {
      this.releaseGate(endpointId, g);
      return null;
    }
    let done = false;
    return {
      release: (slow) => {
        if (done) return;
        done = true;
        g.slow = slow;
        this.process.release();
        this.releaseGate(endpointId, g);
      },
    };
  }

  private releaseGate(endpointId: string, g: Gate): void {
    g.sem.release();
    if (g.sem.idle && !g.slow) this.gates.delete(endpointId);
  }
}
