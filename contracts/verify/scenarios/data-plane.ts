/**
 * Scenarios of the `data-plane` tag: every proxied operation passes the edge with a token of its
 * scope (a node without an upstream for the family answers 502 UPSTREAM_UNAVAILABLE: a skip).
 */
import { concretePath } from '../session.ts';
import { type Scenario, tokenFor } from './common.ts';

const dataPlane: Scenario = async (s, op) => {
  const path = concretePath(op, s);
  const hasBody = op.requestBody !== null;
  await s.probe(
    op,
    `scoped token (${op.scopes![0]}) → passes the edge`,
    {
      method: op.method,
      path,
      headers: { ...(await tokenFor(s, op)), ...(hasBody ? { 'content-type': 'application/json' } : {}) },
      body: hasBody ? '{"probe":true}' : undefined,
    },
    {
      status: [200, 201, 202, 204, 400, 404, 409, 422],
      upstreamMayBeAbsent: true,
    },
  );
};

export const DATA_PLANE_SCENARIOS: Record<string, Scenario> = {
  inferenceGet: dataPlane,
  inferencePost: dataPlane,
  inferencePut: dataPlane,
  inferencePatch: dataPlane,
  inferenceDelete: dataPlane,
  pipelinesGet: dataPlane,
  pipelinesPost: dataPlane,
  pipelinesPut: dataPlane,
  pipelinesPatch: dataPlane,
  pipelinesDelete: dataPlane,
  telemetryGet: dataPlane,
  telemetryPost: dataPlane,
  telemetryPut: dataPlane,
  telemetryPatch: dataPlane,
  telemetryDelete: dataPlane,
  telemetryExportGet: dataPlane,
  telemetryExportPost: dataPlane,
  telemetryExportPathGet: dataPlane,
  telemetryExportPathPost: dataPlane,
  telemetryExportPut: dataPlane,
  telemetryExportPatch: dataPlane,
  telemetryExportDelete: dataPlane,
  telemetryExportPathPut: dataPlane,
  telemetryExportPathPatch: dataPlane,
  telemetryExportPathDelete: dataPlane,
};
