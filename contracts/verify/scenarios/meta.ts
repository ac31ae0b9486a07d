/** Scenarios of the `meta` tag: the contract serves itself. */
import type { Scenario } from './common.ts';

export const META_SCENARIOS: Record<string, Scenario> = {
  async getContract(s, op) {
    await s.probe(
      op,
      'GET without a token → 200, the same contract',
      { method: 'GET', path: op.path },
      {
        status: [200],
        then: (ex) =>
          JSON.stringify(ex.json) === JSON.stringify(s.doc)
            ? []
            : ['the served contract differs from contracts/openapi.yaml'],
      },
    );
  },
};
