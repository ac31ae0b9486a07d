/** The state bench's report helpers. */
import { readFileSync } from 'node:fs';
import { fmt } from '../../harness/stats.ts';

/** "met (…)" / "MISSED (…)" for a value against an upper bound. */
export function verdict(value: number | null, limit: number, unit: string): string {
  if (value === null || !Number.isFinite(value)) return 'not measured';
  const d = (x: number) => fmt(x, Math.abs(x) < 10 ? 1 : 0);
  return value < limit
    ? `met (${d(limit - value)} ${unit} under)`
    : `**MISSED** (${d(value - limit)} ${unit} over, ${fmt(value / limit, 1)}×)`;
}

/** Resident memory of a process by kind (/proc/<pid>/status), in MiB: heap and stacks vs mapped files (code). */
export function rssParts(pid: number | undefined): { anon: number; file: number } | null {
  if (pid === undefined) return null;
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0);
    return { anon: kb('RssAnon') / 1024, file: (kb('RssFile') + kb('RssShmem')) / 1024 };
  } catch {
    return null;
  }
}

/** V8's view of a process's memory, in MiB, from its /metrics (prom-client's process metrics). */
export interface HeapParts {
  used: number;
  total: number;
  external: number;
}

export async function heapParts(adminPort: number): Promise<HeapParts | null> {
  try {
    const text = await fetch(`http://127.0.0.1:${adminPort}/metrics`).then((r) => r.text());
    const mb = (name: string) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? NaN) / 2 ** 20;
    const h = {
      used: mb('nodejs_heap_size_used_bytes'),
      total: mb('nodejs_heap_size_total_bytes'),
      external: mb('nodejs_external_memory_bytes'),
    };
    return Number.isFinite(h.used) ? h : null;
  } catch {
    return null;
  }
}
