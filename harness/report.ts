/**
 * The pieces every bench's section of bench/RESULTS.md is made of: where the figures come from (the
 * command, the commit measured, the date, the machine) and markdown tables.
 */
import { loadavg } from 'node:os';
import { machineLine, measuredCommit } from './results-section.ts';

/**
 * "Command: `…`" and one line of commit, date, machine and load: the first lines of every section.
 * `load1`: the 1-min load average when the run started (BenchRun.load1); without it, the one now.
 */
export function provenance(o: {
  command: string;
  sluiceDir: string;
  startedAt: Date;
  kafka?: string;
  load1?: number;
}): string[] {
  const kafka = o.kafka ? `; ${o.kafka}` : '';
  const load = o.load1 === undefined ? `at the end ${loadavg()[0].toFixed(2)}` : `at start ${o.load1.toFixed(2)}`;
  return [
    `Command: \`${o.command}\``,
    '',
    `Sluice at ${measuredCommit(o.sluiceDir)}; ${o.startedAt.toISOString()}; machine: ${machineLine()}${kafka}; ` +
      `1-min load average ${load}.`,
  ];
}

/**
 * A markdown table. `align` has one letter per column, `l` or `r` (default: the first column left,
 * the others right). A null or undefined cell is shown as "—".
 */
export function table(head: string[], rows: readonly (readonly unknown[])[], align?: string): string[] {
  const a = align ?? `l${'r'.repeat(head.length - 1)}`;
  const cell = (v: unknown) => (v === null || v === undefined || v === '' ? '—' : String(v));
  return [
    `| ${head.join(' | ')} |`,
    `|${head.map((_, i) => (a[i] === 'r' ? '---:' : '---')).join('|')}|`,
    ...rows.map((r) => `| ${r.map(cell).join(' | ')} |`),
  ];
}
