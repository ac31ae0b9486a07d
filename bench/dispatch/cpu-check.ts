/**
 * `bench:dispatch --check`: Sluice's CPU per 1,000 deliveries in f10-single against the figure
 * recorded in bench/RESULTS.md (the `dispatch:<label>` section's per-process table, the column of
 * all Sluice processes: `sluice start` and any `sluice dispatcher`/`sluice ingress` beside it).
 * CPU per delivery, not a rate, so a busy machine does not fail it.
 */
import { existsSync, readFileSync } from 'node:fs';

/** How far above the recorded figure a run may come before --check fails. */
export const CPU_TOLERANCE = 1.25;

/**
 * The recorded CPU-s per 1,000 deliveries of every Sluice process in `scenario` (a section older
 * than that column: its `sluice start` column), or null when none is recorded.
 */
export function recordedCpu(file: string, label: string, scenario: string): number | null {
  if (!existsSync(file)) return null;
  const text = readFileSync(file, 'utf8');
  const begin = text.indexOf(`<!-- dispatch:${label}:begin -->`);
  const end = text.indexOf(`<!-- dispatch:${label}:end -->`);
  if (begin < 0 || end < begin) return null;
  const lines = text.slice(begin, end).split('\n');
  const header = lines.findIndex((l) => l.startsWith('| scenario | deliveries |'));
  if (header < 0) return null;
  const cols = lines[header].split('|').map((c) => c.trim());
  const all = cols.indexOf('all Sluice processes');
  const col = all >= 0 ? all : cols.findIndex((c) => c.startsWith('sluice start'));
  const row = lines.slice(header).find((l) => l.startsWith(`| ${scenario} |`));
  if (col < 0 || !row) return null;
  // `686 MB · 0.14 s` in a process's column, `0.14 s` in the column of all.
  const m = /([\d.]+)\s*s$/.exec((row.split('|')[col] ?? '').trim());
  return m ? Number(m[1]) : null;
}

export interface CpuVerdict {
  recorded: number | null;
  measured: number;
  ok: boolean;
  line: string;
}

export function judgeCpu(recorded: number | null, measured: number, scenario = 'f10-single'): CpuVerdict {
  if (recorded === null)
    return {
      recorded,
      measured,
      ok: false,
      line: `--check: no recorded figure to compare ${measured.toFixed(3)} s with`,
    };
  const limit = recorded * CPU_TOLERANCE;
  const ok = measured <= limit;
  return {
    recorded,
    measured,
    ok,
    line:
      `--check: Sluice ${measured.toFixed(3)} CPU-s per 1,000 deliveries in ${scenario}, recorded ` +
      `${recorded.toFixed(2)}, limit ${limit.toFixed(3)} (+${Math.round((CPU_TOLERANCE - 1) * 100)} %): ` +
      (ok ? 'ok' : 'FAILED'),
  };
}
