/** What the benches' load generators share: an access token over their pool, and counting answers. */
import type { Pool } from 'undici';

/** POST /v1/auth/token with client credentials over `pool`. */
export async function tokenFor(pool: Pool, clientId: string, clientSecret: string): Promise<string> {
  const res = await pool.request({
    path: '/v1/auth/token',
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret }),
  });
  const body = (await res.body.json()) as { access_token?: string };
  if (res.statusCode !== 200 || !body.access_token) throw new Error(`token request answered ${res.statusCode}`);
  return body.access_token;
}

/** Counts one more `k` in `m` (responses by status, errors by code). */
export const bump = (m: Record<string, number>, k: string | number): void => {
  m[k] = (m[k] ?? 0) + 1;
};
