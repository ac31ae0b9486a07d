/** The verifier's results: a table per operation for people, JUnit XML for CI. */

export type Outcome = 'pass' | 'fail' | 'skip' | 'not-implemented';

export interface CheckResult {
  operationId: string;
  method: string;
  path: string;
  check: string;
  outcome: Outcome;
  /** The status the check saw, when it sent a request. */
  status?: number;
  detail: string;
  ms: number;
}

export interface Report {
  baseUrl: string;
  results: CheckResult[];
  allowUnimplemented: boolean;
}

export function isFailure(r: CheckResult, allowUnimplemented: boolean): boolean {
  return r.outcome === 'fail' || (r.outcome === 'not-implemented' && !allowUnimplemented);
}

export function failed(report: Report): CheckResult[] {
  return report.results.filter((r) => isFailure(r, report.allowUnimplemented));
}

function groups(results: CheckResult[]): Map<string, CheckResult[]> {
  const byOp = new Map<string, CheckResult[]>();
  for (const r of results) {
    const key = `${r.method} ${r.path}  (${r.operationId})`;
    byOp.set(key, [...(byOp.get(key) ?? []), r]);
  }
  return byOp;
}

const LABEL: Record<Outcome, string> = { pass: 'PASS', fail: 'FAIL', skip: 'SKIP', 'not-implemented': 'TODO' };

export function formatTable(report: Report): string {
  const lines: string[] = [];
  const width = Math.min(64, Math.max(...report.results.map((r) => r.check.length), 10));
  for (const [op, rows] of groups(report.results)) {
    lines.push(op);
    for (const r of rows) {
      const label = r.outcome === 'not-implemented' ? (report.allowUnimplemented ? 'TODO' : 'FAIL') : LABEL[r.outcome];
      const status = r.status === undefined ? '   ' : String(r.status);
      lines.push(
        `  ${label}  ${r.check.padEnd(width)}  ${status}  ${String(r.ms).padStart(5)} ms` +
          `${r.detail ? `  ${r.detail}` : ''}`,
      );
    }
  }
  const count = (o: Outcome) => report.results.filter((r) => r.outcome === o).length;
  const ops = groups(report.results).size;
  lines.push('');
  lines.push(
    `${count('pass')} passed, ${failed(report).length} failed, ${count('skip')} skipped, ` +
      `${count('not-implemented')} not implemented; ${ops} operations against ${report.baseUrl}`,
  );
  return lines.join('\n');
}

function xml(s: string): string {
  return s
    .replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c]!)
    .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f]/g, '');
}

export function formatJUnit(report: Report): string {
  const suites: string[] = [];
  let total = 0;
  let failures = 0;
  let skipped = 0;
  for (const [op, rows] of groups(report.results)) {
    const cases = rows.map((r) => {
      const name = `<testcase classname="${xml(op)}" name="${xml(r.check)}" time="${(r.ms / 1000).toFixed(3)}"`;
      if (isFailure(r, report.allowUnimplemented)) {
        const message = r.outcome === 'not-implemented' ? `not implemented: ${r.detail}` : r.detail;
        return `${name}><failure message="${xml(message)}" type="${r.outcome}"/></testcase>`;
      }
      if (r.outcome === 'skip' || r.outcome === 'not-implemented')
        return `${name}><skipped message="${xml(r.detail)}"/></testcase>`;
      return `${name}/>`;
    });
    const f = rows.filter((r) => isFailure(r, report.allowUnimplemented)).length;
    const s = rows.filter((r) => !isFailure(r, report.allowUnimplemented) && r.outcome !== 'pass').length;
    total += rows.length;
    failures += f;
    skipped += s;
    suites.push(
      `  <testsuite name="${xml(op)}" tests="${rows.length}" failures="${f}" skipped="${s}">\n` +
        `    ${cases.join('\n    ')}\n  </testsuite>`,
    );
  }
  return (
    '<?xml version="1.0" encoding="UTF-8"?>\n' +
    `<testsuites name="sluice contract verify" tests="${total}" failures="${failures}" skipped="${skipped}">\n` +
    `${suites.join('\n')}\n</testsuites>\n`
  );
}
