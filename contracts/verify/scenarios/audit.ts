/** Scenarios of the `audit` tag: the compliance log reads and pages. */
import { type Scenario, pagingChecks, tokenFor } from './common.ts';

export const AUDIT_SCENARIOS: Record<string, Scenario> = {
  async listAuditEntries(s, op) {
    await s.probe(op, 'GET → 200', { method: 'GET', path: op.path, headers: await tokenFor(s, op) }, { status: [200] });
    await pagingChecks(s, op);
  },
};
