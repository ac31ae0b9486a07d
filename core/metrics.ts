/** Counters and gauges rendered in the Prometheus text format on the admin port. */
export class Metrics {
  private readonly counters = new Map<string, number>();
  private readonly gauges = new Map<string, () => number>();

  inc(name: string, labels: Record<string, string | number> = {}, by = 1): void {
    const key = name + labelText(labels);
    this.counters.set(key, (this.counters.get(key) ?? 0) + by);
  }

  gauge(name: string, read: () => number): void {
    this.gauges.set(name, read);
  }

  get(name: string, labels: Record<string, string | number> = {}): number {
    return this.counters.get(name + labelText(labels)) ?? 0;
  }

  render(): string {
    const lines: string[] = [];
    for (const [k, v] of [...this.counters].sort()) lines.push(`${k} ${v}`);
    for (const [k, read] of [...this.gauges].sort()) lines.push(`${k} ${read()}`);
    return lines.join('\n') + '\n';
  }
}

function labelText(labels: Record<string, string | number>): string {
  const entries = Object.entries(labels);
  if (entries.length === 0) return '';
  return '{' + entries.map(([k, v]) => `${k}="${String(v).replace(/["\\\n]/g, '_')}"`).join(',') + '}';
}
