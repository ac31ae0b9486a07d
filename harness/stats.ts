/** Percentiles, medians and number formatting of the benches. */
export function percentile(sorted: number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

export interface Latency {
  count: number;
  p50: number | null;
  p99: number | null;
  max: number | null;
}

/** Count, p50, p99 and max of `values` (ms). */
export function latency(values: number[]): Latency {
  const sorted = Array.from(Float64Array.from(values).sort());
  const max = sorted.length ? sorted[sorted.length - 1] : null;
  return { count: sorted.length, p50: percentile(sorted, 50), p99: percentile(sorted, 99), max };
}

/** The middle of the finite values; of an even count, the mean of the two middle ones (NaN: none). */
export function median(xs: number[]): number {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** 12,345.6 with `digits` decimals; — for null, undefined, NaN, ±Infinity. */
export const fmt = (n: number | null | undefined, digits = 0) =>
  n === null || n === undefined || !Number.isFinite(n)
    ? '—'
    : n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
