/** Spec 8: an access token lives 15 minutes: `expires_in` and `exp - iat` both say 900 s. */
import { decodeJwt } from 'jose';
import { issueToken, result, type LimitCheck } from './types.ts';

export const tokenLifetime: LimitCheck = {
  limit: 'access token lifetime',
  spec: '900 s',
  async run(ctx) {
    const { status, body } = await issueToken(ctx.baseUrl, ctx.clientId, ctx.clientSecret);
    if (status !== 200) return result(this, 'fail', `token endpoint answered ${status}`);
    const claims = decodeJwt(body.access_token);
    const lifetime = claims.exp! - claims.iat!;
    const ok = lifetime === 900 && body.expires_in === 900;
    return result(this, ok ? 'pass' : 'fail', `exp-iat ${lifetime} s, expires_in ${body.expires_in} s`);
  },
};
