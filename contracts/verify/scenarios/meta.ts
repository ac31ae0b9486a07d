/** Scenarios of the `meta` tag: the contract serves itself. */
import { type Scenario, probeOpenGet } from './common.ts';

export const META_SCENARIOS: Record<string, Scenario> = {
  async getContract(s, op) {
    await probeOpenGet(s, op, 'GET without a token → 200, the same contract', (ex) =>
      JSON.stringify(ex.json) === JSON.stringify(s.doc)
        ? []
        : ['the served contract differs from contracts/openapi.yaml'],
    );
  },
};
