/** Scenarios of the `auth` tag: tokens, keys, metadata, client secrets and revocation. */
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { listOperations, type Json } from '../../contract.ts';
import { bearer, jsonBody, type Exchange } from '../http.ts';
import { concretePath } from '../session.ts';
import { type Scenario, body, postJson, probeOpenGet, tokenFor, validBody } from './common.ts';

export const AUTH_SCENARIOS: Record<string, Scenario> = {
  async issueToken(s, op) {
    const valid = validBody(s, op.operationId)!;
    await s.probe(
      op,
      'JSON client_credentials → 200, expires_in 900',
      { method: 'POST', path: op.path, ...jsonBody(valid) },
      {
        status: [200],
        then: (ex) => {
          const token = body(ex).access_token as string;
          const claims = decodeJwt(token);
          const header = decodeProtectedHeader(token);
          const faults: string[] = [];
          if (header.typ !== 'at+jwt') faults.push(`typ is ${header.typ}, not at+jwt`);
          if (claims.exp! - claims.iat! !== 900) faults.push(`exp - iat is ${claims.exp! - claims.iat!}, not 900`);
          if (claims.client_id !== s.opts.clientId) faults.push('client_id claim differs');
          return faults;
        },
      },
    );
    const form = new URLSearchParams({ ...valid }).toString();
    await s.probe(
      op,
      'form-encoded client_credentials → 200',
      { method: 'POST', path: op.path, headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: form },
      { status: [200] },
    );
    const basic = Buffer.from(
      `${encodeURIComponent(s.opts.clientId)}:${encodeURIComponent(s.opts.clientSecret)}`,
    ).toString('base64');
    await s.probe(
      op,
      'HTTP Basic client authentication → 200',
      {
        method: 'POST',
        path: op.path,
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${basic}` },
        body: 'grant_type=client_credentials',
      },
      { status: [200] },
    );
    const oauth = (code: string) => (ex: Exchange) =>
      body(ex).error === code ? [] : [`error is ${body(ex).error}, not ${code}`];
    await s.probe(
      op,
      'wrong secret → 401 invalid_client',
      { method: 'POST', path: op.path, ...jsonBody({ ...valid, client_secret: 'wrong-secret' }) },
      { status: [401], then: oauth('invalid_client') },
    );
    await s.probe(
      op,
      'unknown grant_type → 400 unsupported_grant_type',
      { method: 'POST', path: op.path, ...jsonBody({ ...valid, grant_type: 'password' }) },
      { status: [400], then: oauth('unsupported_grant_type') },
    );
    await s.probe(
      op,
      'ungranted scope → 400 invalid_scope',
      { method: 'POST', path: op.path, ...jsonBody({ ...valid, scope: 'nonexistent:scope' }) },
      { status: [400], then: oauth('invalid_scope') },
    );
    const narrow = s.grantedScopes[0];
    if (narrow) {
      await s.probe(
        op,
        'scope parameter narrows the token',
        { method: 'POST', path: op.path, ...jsonBody({ ...valid, scope: narrow }) },
        { status: [200], then: (ex) => (body(ex).scope === narrow ? [] : [`scope is "${body(ex).scope}"`]) },
      );
    }
  },

  async getJwks(s, op) {
    const token = await s.token();
    const kid = decodeProtectedHeader(token).kid;
    await probeOpenGet(s, op, 'GET → 200, holds the signing key', (ex) =>
      body(ex).keys.some((k: Json) => k.kid === kid) ? [] : [`no key with kid ${kid}`],
    );
  },

  async getAuthorizationServerMetadata(s, op) {
    await probeOpenGet(s, op, 'GET → 200, names the token endpoint', (ex) =>
      String(body(ex).token_endpoint).endsWith('/v1/auth/token')
        ? []
        : [`token_endpoint is ${body(ex).token_endpoint}`],
    );
  },

  async getClientSecret(s, op) {
    // 404 is documented until the first rotation (the secret is the one shown at creation).
    await s.probe(
      op,
      'own client → 200, or 404 before its first rotation',
      { method: 'GET', path: concretePath(op, s), headers: await tokenFor(s, op) },
      { status: [200, 404] },
    );
    await s.probe(
      op,
      'unknown client → 404',
      {
        method: 'GET',
        path: concretePath(op, s, { client_id: 'cl_contract_probe_missing' }),
        headers: await tokenFor(s, op),
      },
      { status: [404] },
    );
  },

  async revokeClient(s, op) {
    await s.probe(op, 'unknown client → 404', await postJson(s, op, validBody(s, op.operationId)), { status: [404] });
    const victim = s.opts.revocable;
    if (!victim) {
      s.record(op, 'revoke → 201, its token → 401 TOKEN_REVOKED', 'skip', 'no --revocable-client-id given');
      return;
    }
    const victimToken = await s.token(undefined, victim);
    const request = { client_id: victim.clientId, reason: 'sluice contract verify' };
    const ex = await s.probe(op, 'revoke → 201', await postJson(s, op, request), { status: [201] });
    if (ex?.status !== 201) return;
    await s.probe(op, 'revoke again → 200 or 201 (idempotent)', await postJson(s, op, request), { status: [200, 201] });
    // Auth runs before anything else, so the revoked token can be tried on this very operation.
    const deadline = Date.now() + 2000;
    // The spec gives a revocation 250 ms to reach every node; wait a little longer before judging.
    while (Date.now() < deadline) {
      const r = await fetch(`${s.opts.baseUrl}${op.path}`, { method: 'POST', headers: bearer(victimToken) });
      await r.arrayBuffer();
      if (r.status === 401) break;
      await new Promise((res) => setTimeout(res, 25));
    }
    await s.probe(
      op,
      'revoked token → 401 TOKEN_REVOKED',
      {
        method: 'POST',
        path: op.path,
        ...jsonBody(request),
        headers: { ...bearer(victimToken), 'content-type': 'application/json' },
      },
      {
        status: [401],
        then: (ex) => (body(ex).code === 'TOKEN_REVOKED' ? [] : [`code ${body(ex).code}`]),
      },
    );
    const tokenOp = listOperations(s.doc).find((o) => o.operationId === 'issueToken')!;
    await s.probe(
      tokenOp,
      'revoked client secret → 401 invalid_client',
      {
        method: 'POST',
        path: tokenOp.path,
        ...jsonBody({
          grant_type: 'client_credentials',
          client_id: victim.clientId,
          client_secret: victim.clientSecret,
        }),
      },
      { status: [401] },
    );
  },
};
