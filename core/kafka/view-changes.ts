/**
 * How a caller waits for a view to show a write: a state consumer announces every batch it
 * applied, and a waiter re-checks its condition on each announcement instead of polling.
 * An announcement with nobody waiting costs one size check (it runs for every batch).
 *
 *   const shown = await changes.until(() => view.get(id) !== undefined, 10_000);  // false: timed out
 *
 * Several consumers may announce into one ViewChanges (a node's attempt history has its own).
 */
export class ViewChanges {
  private readonly waiters = new Set<() => void>();

  /** Called by a state consumer after it applied records or moved a position. */
  announce(): void {
    if (this.waiters.size === 0) return;
    for (const wake of this.waiters) wake();
  }

  /**
   * Resolves true once `check()` holds (checked now and after every announcement), false when
   * `timeoutMs` passed first (checked once more then). Rejects when `check` throws.
   */
  until(check: () => boolean, timeoutMs: number): Promise<boolean> {
    // Most calls find the view caught up already: they need no timer and no waiter.
    try {
      if (check()) return Promise.resolve(true);
    } catch (err) {
      return Promise.reject(err);
    }
    return new Promise((resolve, reject) => {
      const done = () => {
        this.waiters.delete(wake);
        clearTimeout(timer);
      };
      const attempt = (last: boolean) => {
        let holds: boolean;
        try {
          holds = check();
        } catch (err) {
          done();
          reject(err);
          return;
        }
        if (holds || last) {
          done();
          resolve(holds);
        }
      };
      const wake = () => attempt(false);
      const timer = setTimeout(() => attempt(true), Math.max(0, timeoutMs));
      this.waiters.add(wake);
    });
  }

  /** Waiters right now (for tests and gauges). */
  get waiting(): number {
    return this.waiters.size;
  }
}
