/**
 * `GET /v1/openapi.json`: the contract (contracts/openapi.yaml) as JSON, without a token. The
 * caller parses the file once at start-up (cli/assemble.ts), so a node with a broken contract
 * fails before it serves.
 */
import type { Route } from '../types.ts';

export function openapiRoutes(contract: unknown): Route[] {
  const body = JSON.stringify(contract);
  const reply = { status: 200, headers: { 'content-type': 'application/json', 'cache-control': 'no-cache' }, body };
  return [{ method: 'GET', pattern: '/v1/openapi.json', scope: null, body: 'none', handler: () => reply }];
}
