/** Parses a /metrics page with parse-prometheus-text-format (a parser nobody here wrote). */
import parse from 'parse-prometheus-text-format';

export interface Series {
  value?: string;
  labels?: Record<string, string>;
  buckets?: Record<string, string>;
  count?: string;
  sum?: string;
}

export interface Family {
  name: string;
  help: string;
  type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
  metrics: Series[];
  /** A histogram's `_count` series (in `value`), one per label set: the parser folds them into one, labels dropped. */
  counts?: Series[];
}

/**
 * The page's families by name. The parser folds a labelled histogram's series into one and drops
 * their labels, so each histogram's `_count` lines are parsed again as a family of their own and
 * kept, labels and all, in `counts`.
 */
export function parseMetrics(text: string): Map<string, Family> {
  const families = new Map((parse(text) as Family[]).map((f) => [f.name, f]));
  const histograms = [...families.values()].filter((f) => f.type === 'HISTOGRAM');
  if (histograms.length === 0) return families;
  const lines = text.split('\n');
  const counts = histograms.flatMap((f) => [
    `# TYPE ${f.name}_count untyped`,
    ...lines.filter((l) => l.startsWith(`${f.name}_count{`) || l.startsWith(`${f.name}_count `)),
  ]);
  // The parser closes a family on the line after its last, so the text ends with an empty line.
  const parsed = new Map((parse(`${counts.join('\n')}\n`) as Family[]).map((f) => [f.name, f]));
  for (const f of histograms) f.counts = parsed.get(`${f.name}_count`)?.metrics ?? [];
  return families;
}

/** What `sample` answers when no series matches: by default it throws. */
export interface SampleOptions {
  /** The value of a series that is not on the page (a labelled metric nothing has touched yet). */
  missing?: number;
}

/**
 * The value of the series of `name` whose labels include `labels` (summed); a histogram's is its
 * count. Throws when the page has no such family or no series matches, unless `missing` says what
 * an absent series counts as: a typo in a name or label must not read as a zero.
 */
export function sample(
  families: Map<string, Family>,
  name: string,
  labels: Record<string, string> = {},
  options: SampleOptions = {},
): number {
  const f = families.get(name);
  const series = f?.type === 'HISTOGRAM' ? (f.counts ?? []) : (f?.metrics ?? []);
  const matching = series.filter((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  if (matching.length === 0) {
    if (options.missing !== undefined) return options.missing;
    const which = Object.keys(labels).length > 0 ? `${name}${JSON.stringify(labels)}` : name;
    throw new Error(f ? `no series ${which} on the metrics page` : `no metric ${name} on the metrics page`);
  }
  return matching.reduce((sum, m) => sum + Number(m.value), 0);
}

/** The sum of family `name`'s series whose labels include `labels`; NaN when the page has no such family. */
export function sumSeries(text: string, name: string, labels: Record<string, string> = {}): number {
  const f = parseMetrics(text).get(name);
  if (!f) return Number.NaN;
  const wanted = Object.entries(labels);
  return f.metrics
    .filter((m) => wanted.every(([k, v]) => m.labels?.[k] === v))
    .reduce((n, m) => n + Number(m.value ?? m.count ?? 0), 0);
}
