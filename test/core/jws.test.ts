/**
 * A token has one form (issue 31 item 7): Sluice signs ES256 with s in the lower half of the
 * curve order and accepts nothing else, so a token malleated to (r, n - s), valid ECDSA as it is,
 * is refused; and a part spelt with stray bits in its last base64url character is not a token.
 */
import { createVerify, generateKeyPairSync } from 'node:crypto';
import t from 'tap';
import { decodeJws, signJws, verifyJwsSignature } from '../../core/tokens/jws.ts';

const N = BigInt('0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551');
const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });

function malleate(token: string): string {
  const [h, p, s] = token.split('.');
  const sig = Buffer.from(s, 'base64url');
  const high = N - BigInt(`0x${sig.subarray(32).toString('hex')}`);
  Buffer.from(high.toString(16).padStart(64, '0'), 'hex').copy(sig, 32);
  return `${h}.${p}.${sig.toString('base64url')}`;
}

t.test('every signature issued has s in the lower half and verifies', async (t) => {
  for (let i = 0; i < 200; i++) {
    const token = signJws({ sub: 'cl_x', n: i }, 'k1', privateKey);
    const decoded = decodeJws(token)!;
    t.ok(BigInt(`0x${decoded.signature.subarray(32).toString('hex')}`) <= N >> 1n);
    if (!verifyJwsSignature(decoded, publicKey)) t.fail(`token ${i} does not verify`);
  }
});

t.test('the malleated twin, valid ECDSA, is refused', async (t) => {
  const token = signJws({ sub: 'cl_x' }, 'k1', privateKey);
  const twin = malleate(token);
  t.not(twin, token);
  const decoded = decodeJws(twin)!;
  const ecdsa = createVerify('SHA256')
    .update(decoded.signingInput)
    .verify({ key: publicKey, dsaEncoding: 'ieee-p1363' }, decoded.signature);
  t.ok(ecdsa, 'plain ECDSA accepts the twin');
  t.notOk(verifyJwsSignature(decoded, publicKey), 'Sluice does not');
});

t.test('a part spelt with stray bits in its last character is not a token', async (t) => {
  const token = signJws({ sub: 'cl_x' }, 'k1', privateKey);
  const [h, p, s] = token.split('.');
  // 64 bytes are 86 base64url characters: the last carries 2 bits of padding.
  const last = s.at(-1)!;
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const twin = alphabet[alphabet.indexOf(last) ^ 1];
  const spelt = `${h}.${p}.${s.slice(0, -1)}${twin}`;
  t.same(Buffer.from(spelt.split('.')[2], 'base64url'), Buffer.from(s, 'base64url'), 'the same bytes');
  t.equal(decodeJws(spelt), null, 'refused');
  t.ok(decodeJws(token), 'the canonical spelling is read');
});
