/**
 * A Map bounded to `max` entries that drops the least recently used one when full: `get` and `set`
 * make an entry the most recent (a Map keeps insertion order, so the first key is the oldest).
 *
 *   const recent = new LruMap<string, Rec>(4096);
 *   recent.get(id) ?? recent.set(id, load(id));
 */
export class LruMap<K, V> {
  private readonly map = new Map<K, V>();

  constructor(private readonly max: number) {}

  get size(): number {
    return this.map.size;
  }

  get(key: K): V | undefined {
    const v = this.map.get(key);
    if (v !== undefined) {
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }

  /** Stores `value` as the most recent entry and returns it. */
  set(key: K, value: V): V {
    if (!this.map.delete(key) && this.map.size >= this.max) {
      const oldest = this.map.keys().next();
      if (!oldest.done) this.map.delete(oldest.value);
    }
    this.map.set(key, value);
    return value;
  }

  delete(key: K): void {
    this.map.delete(key);
  }

  clear(): void {
    this.map.clear();
  }
}
