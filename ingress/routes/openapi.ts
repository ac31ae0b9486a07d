/**
 * `GET /v1/openapi.json`: the contract (contracts/openapi.yaml) as JSON, without a token. The file
 * is read and parsed once at start-up, so a node with a broken contract fails before it serves.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import type { Route } from '../types.ts';

export const CONTRACT_FILE = fileURLToPath(new URL('../../contracts/openapi.yaml', import.meta.url));

export function openapiRoutes(file = CONTRACT_FILE): Route[] {
  const body = JSON.stringify(parse(readFileSync(file, 'utf8')));
  const reply = { status: 200, headers: { 'content-type': 'application/json', 'cache-control': 'no-cache' }, body };
  return [{ method: 'GET', pattern: '/v1/openapi.json', scope: null, body: 'none', handler: () => reply }];
}
