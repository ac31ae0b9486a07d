/** Time is injected everywhere it matters so tests can run 30 days in a second. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock the caller moves by hand; starts at real time unless told otherwise. */
export class ManualClock implements Clock {
  private t: number;
  constructor(start = Date.now()) {
    this.t = start;
  }
  now(): number {
    return this.t;
  }
  advance(ms: number): void {
    this.t += ms;
  }
  set(ms: number): void {
    this.t = ms;
  }
}

export const nowSeconds = (clock: Clock): number => Math.floor(clock.now() / 1000);
