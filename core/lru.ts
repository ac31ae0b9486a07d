/**
 * A Map bounded to `max` entries that keeps the recently used ones, in two generations: new and
 * read entries go to the young one; when it holds max/2, it becomes the old one and the previous
 * old one is dropped. A read of a young entry is one Map lookup (a strict LRU moves the entry on
 * every read: a delete and a set, several times per delivery on the dispatcher's caches); an entry
 * read or written since the last turn survives the next one, and one unused for two turns is gone.
 *
 *   const recent = new LruMap<string, Rec>(4096);
 *   recent.get(id) ?? recent.set(id, load(id));
 */
export class LruMap<K, V> {
  private young = new Map<K, V>();
  private old = new Map<K, V>();
  private readonly half: number;

  constructor(max: number) {
    this.half = Math.max(1, Math.floor(max / 2));
  }

  get size(): number {
    return this.young.size + this.old.size;
  }

  get(key: K): V | undefined {
    const v = this.young.get(key);
    if (v !== undefined) return v;
    const o = this.old.get(key);
    if (o !== undefined) {
      this.old.delete(key);
      this.put(key, o);
    }
    return o;
  }

  /** Stores `value` as a recent entry and returns it. */
  set(key: K, value: V): V {
    this.old.delete(key);
    this.put(key, value);
    return value;
  }

  delete(key: K): void {
    this.young.delete(key);
    this.old.delete(key);
  }

  clear(): void {
    this.young.clear();
    this.old.clear();
  }

  private put(key: K, value: V): void {
    if (!this.young.has(key) && this.young.size >= this.half) {
      this.old = this.young;
      this.young = new Map();
    }
    this.young.set(key, value);
  }
}
