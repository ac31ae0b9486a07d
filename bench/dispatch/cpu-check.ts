/**
 * `bench:dispatch --check`: Sluice's CPU per 1,000 deliveries (CPU per delivery, not a rate, so a busy
 * machine does not fail it) against the figure a `dispatch:<label>` section of bench/RESULTS.md recorded.
 */
import { existsSync, readFileSync } from 'node:fs';

/** How far above the recorded figure a run may come before --check fails. */
export const CPU_TOLERANCE = 1.25;

/**
 * The recorded CPU-s per 1,000 deliveries in `scenario`: the per-process table's column of all Sluice
 * processes (in a section older than that column, its `sluice start` column); null when none is recorded.
 */
export function recordedCpu(file: string, label: string, scenario: string): number | null {
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
  const marker = (edge: string) => text.indexOf(`<!-- dispatch:${label}:${edge} -->`);
  const [begin, end] = [marker('begin'), marker('end')];
  if (begin < 0 || end < begin) return null;
  const lines = text.slice(begin, end).split('\n');
  const header = lines.findIndex((l) => l.startsWith('| scenario | deliveries |'));
  if (header < 0) return null;
  const cols = lines[header].split('|').map((c) => c.trim());
  const all = cols.indexOf('all Sluice processes');
  const col = all >= 0 ? all : cols.findIndex((c) => c.startsWith('sluice start'));
  const row = lines.slice(header).find((l) => l.startsWith(`| ${scenario} |`));
  // `686 MB · 0.14 s` in a process's column, `0.14 s` in the column of all.
  const m = col < 0 || !row ? null : /([\d.]+)\s*s$/.exec((row.split('|')[col] ?? '').trim());
  return m ? Number(m[1]) : null;
}

/** Whether `measured` passes against `recorded`, and the line saying so. */
export function judgeCpu(recorded: number | null, measured: number, scenario = 'f10-single') {
  const none = `--check: no recorded figure to compare ${measured.toFixed(3)} s with`;
  if (recorded === null) return { recorded, measured, ok: false, line: none };
  const limit = recorded * CPU_TOLERANCE;
  const ok = measured <= limit;
  const line =
    `--check: Sluice ${measured.toFixed(3)} CPU-s per 1,000 deliveries in ${scenario}, recorded ` +
    `${recorded.toFixed(2)}, limit ${limit.toFixed(3)} (+${Math.round((CPU_TOLERANCE - 1) * 100)} %): ` +
    (ok ? 'ok' : 'FAILED');
  return { recorded, measured, ok, line };
}
