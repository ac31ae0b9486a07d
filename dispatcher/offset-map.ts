/**
 * The offsets of a partition finished beyond its commit point, as the string Kafka keeps beside a
 * committed offset (its metadata; brokers keep up to `offset.metadata.max.bytes`, 4096 by
 * default). After a crash or a rebalance, the partition's next owner reads from the commit point
 * and skips these: it repeats only what was in flight, not everything a slow delivery held back.
 * The idea and its run-length form are confluentinc/parallel-consumer's (OffsetMapCodecManager).
 *
 * Form: `r1:` then the lengths of alternating runs, in base 36, separated by `.`, starting at the
 * commit point with a run of unfinished offsets (the commit point itself is unfinished), then a
 * run of finished ones, and so on, ending with a finished run. `r1:` alone: none finished.
 *
 *   encodeFinished(100, [102, 103, 107])  // 'r1:2.2.3.1' (100-101 open, 102-103 done, 104-106 open, 107 done)
 *   decodeFinished(100, 'r1:2.2.3.1')      // [102, 103, 107]
 */

const PREFIX = 'r1:';
/** Below the brokers' default limit, with room for the prefix. */
export const MAX_METADATA_CHARS = 4000;

/**
 * `finished`: offsets above `base`, ascending. What does not fit MAX_METADATA_CHARS is left out
 * (from the highest down): those offsets are merely delivered again after a crash.
 */
export function encodeFinished(base: number, finished: readonly number[]): string {
  let out = PREFIX;
  let at = base;
  let i = 0;
  while (i < finished.length) {
    const start = finished[i];
    let end = start;
    while (i + 1 < finished.length && finished[i + 1] === end + 1) end = finished[++i];
    i++;
    if (start <= at) continue; // not beyond the point (never expected): skipped
    const runs = `${out === PREFIX ? '' : '.'}${(start - at).toString(36)}.${(end - start + 1).toString(36)}`;
    if (out.length + runs.length > MAX_METADATA_CHARS) break;
    out += runs;
    at = end + 1;
  }
  return out;
}

/** The finished offsets a committed `metadata` records above `base`; empty for anything else. */
export function decodeFinished(base: number, metadata: string | null): number[] {
  if (metadata === null || !metadata.startsWith(PREFIX) || metadata.length > MAX_METADATA_CHARS + 100) return [];
  const body = metadata.slice(PREFIX.length);
  if (body === '') return [];
  const runs = body.split('.').map((r) => (/^[0-9a-z]{1,8}$/.test(r) ? Number.parseInt(r, 36) : Number.NaN));
  if (runs.length % 2 !== 0 || runs.some((n) => !Number.isSafeInteger(n) || n <= 0)) return [];
  const out: number[] = [];
  let at = base;
  for (let i = 0; i < runs.length; i += 2) {
    at += runs[i];
    for (let k = 0; k < runs[i + 1]; k++) out.push(at++);
    if (out.length > 1_000_000) return [];
  }
  return out;
}
