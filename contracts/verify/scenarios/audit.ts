/** Scenarios of the `audit` tag: the compliance log reads and pages. */
import { type Scenario, pagingChecks, probeGet } from './common.ts';

export const AUDIT_SCENARIOS: Record<string, Scenario> = {
  async listAuditEntries(s, op) {
    await probeGet(s, op, op.path, 'GET → 200');
    await pagingChecks(s, op);
  },
};
