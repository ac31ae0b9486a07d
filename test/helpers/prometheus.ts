/** Parses a /metrics page with parse-prometheus-text-format (a parser nobody here wrote). */
import parse from 'parse-prometheus-text-format';

export interface Family {
  name: string;
  help: string;
  type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
  metrics: Array<{
    value?: string;
    labels?: Record<string, string>;
    buckets?: Record<string, string>;
    count?: string;
    sum?: string;
  }>;
}

export function parseMetrics(text: string): Map<string, Family> {
  return new Map((parse(text) as Family[]).map((f) => [f.name, f]));
}

/**
 * The value of the series of `name` whose labels include `labels` (summed), 0 when none; a
 * histogram's is its count. The parser folds a labelled histogram's series into one (buckets only,
 * labels dropped), so a labelled histogram is read as its +Inf bucket, for a workload that
 * touches one of its series.
 */
export function sample(families: Map<string, Family>, name: string, labels: Record<string, string> = {}): number {
  const f = families.get(name);
  if (!f) return 0;
  let sum = 0;
  for (const m of f.metrics) {
    if (f.type === 'HISTOGRAM') {
      sum += Number(m.count ?? m.buckets?.['+Inf'] ?? 0);
      continue;
    }
    if (!Object.entries(labels).every(([k, v]) => m.labels?.[k] === v)) continue;
    sum += Number(m.value);
  }
  return sum;
}
