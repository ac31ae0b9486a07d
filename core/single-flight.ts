/**
 * One run per key at a time: a caller for a key whose run is under way joins it instead of
 * starting another (two revocations of one client write one record).
 */
export class SingleFlight<T> {
  private readonly running = new Map<string, Promise<T>>();

  /** The run under way for `key`, if any. */
  current(key: string): Promise<T> | undefined {
    return this.running.get(key);
  }

  async run(key: string, task: () => Promise<T>): Promise<T> {
    const p = task();
    this.running.set(key, p);
    try {
      return await p;
    } finally {
      this.running.delete(key);
    }
  }
}
