import t from 'tap';
import {
  certificateMatches,
  normalizeSubjectDn,
  parseThumbprint,
  thumbprintOfX5t,
  x5tS256,
} from '../../core/clients/certificate-auth.ts';
import { clientCertThumbprint, presentedCertificate } from '../../ingress/client-cert.ts';
import { CidrSet } from '../../core/net/cidr.ts';
import type { IncomingRequest } from '../../ingress/types.ts';

const SHA = 'ab'.repeat(32);

t.test('subject DNs: one spelling of the same name', async (t) => {
  t.equal(normalizeSubjectDn('CN=billing,O=Acme,C=FR'), 'CN=billing,O=Acme,C=FR');
  t.equal(normalizeSubjectDn(' cn = billing , o=Acme,c=FR '), 'CN=billing,O=Acme,C=FR');
  t.equal(normalizeSubjectDn('CN=Smith\\, J,O=Acme'), 'CN=Smith\\, J,O=Acme');
  t.equal(normalizeSubjectDn('CN=Smith\\2C J,O=Acme'), 'CN=Smith\\, J,O=Acme', '\\2C is an escaped comma');
  t.equal(normalizeSubjectDn('CN=Zo\\C3\\AB'), normalizeSubjectDn('CN=Zoë'), 'UTF-8 as \\XX or as text');
  t.equal(normalizeSubjectDn('OU=b+CN=a,O=x'), 'CN=a+OU=b,O=x', 'multi-valued RDN sorted');
  t.equal(normalizeSubjectDn('CN=\\ padded\\ '), 'CN=\\ padded\\ ');
  t.not(normalizeSubjectDn('CN=billing'), normalizeSubjectDn('CN=Billing'), 'values keep their case');
  for (const bad of ['', '/O=Acme/CN=billing', 'CN', 'CN=', '=x', 'CN=a\\', 'C N=x'])
    t.equal(normalizeSubjectDn(bad), null, `"${bad}" is not a DN`);
});

t.test('thumbprints and x5t#S256', async (t) => {
  t.equal(parseThumbprint(SHA.toUpperCase()), SHA);
  t.equal(parseThumbprint(SHA.match(/../g)!.join(':')), SHA, 'openssl -fingerprint form');
  t.equal(parseThumbprint('ab'), null);
  t.equal(parseThumbprint(`${SHA}0`), null);
  const x5t = x5tS256(SHA);
  t.equal(x5t.length, 43);
  t.equal(thumbprintOfX5t(x5t), SHA);
  t.equal(thumbprintOfX5t(`${x5t}=`), null);
  t.equal(thumbprintOfX5t(x5t.slice(1)), null);
  t.equal(thumbprintOfX5t(42), null);
});

t.test('a registered certificate matches only itself', async (t) => {
  const selfSigned = {
    token_endpoint_auth_method: 'self_signed_tls_client_auth' as const,
    tls_client_auth_sha256: SHA,
  };
  t.ok(certificateMatches(selfSigned, { sha256: SHA, subjectDn: null }));
  t.notOk(certificateMatches(selfSigned, { sha256: 'cd'.repeat(32), subjectDn: null }));
  t.notOk(certificateMatches(selfSigned, null));
  const named = { token_endpoint_auth_method: 'tls_client_auth' as const, tls_client_auth_subject_dn: 'CN=a,O=x' };
  t.ok(certificateMatches(named, { sha256: SHA, subjectDn: 'CN=a,O=x' }));
  t.notOk(certificateMatches(named, { sha256: SHA, subjectDn: 'CN=b,O=x' }));
  t.notOk(certificateMatches(named, { sha256: SHA, subjectDn: null }), 'no verified subject: no match');
  t.notOk(certificateMatches({}, { sha256: SHA, subjectDn: 'CN=a,O=x' }), 'a secret client has no certificate');
});

t.test('the proxy headers count only from a trusted peer, and only well formed', async (t) => {
  const req = (remoteAddress: string, headers: Record<string, string>) =>
    ({ remoteAddress, headers }) as unknown as IncomingRequest;
  const trusted = CidrSet.parse('127.0.0.2,10.0.0.0/8');
  const h = { 'x-client-cert-sha256': SHA.toUpperCase(), 'x-client-cert-subject': 'cn=a, O=x' };
  t.equal(clientCertThumbprint(req('127.0.0.2', h), trusted), SHA, 'lower-cased');
  t.equal(clientCertThumbprint(req('0000:0000:0000:0000:0000:ffff:7f00:0002', h), trusted), SHA, 'mapped peer');
  t.same(presentedCertificate(req('10.1.1.1', h), trusted), { sha256: SHA, subjectDn: 'CN=a,O=x' });
  t.equal(clientCertThumbprint(req('127.0.0.1', h), trusted), null, 'an untrusted peer is ignored');
  t.equal(presentedCertificate(req('127.0.0.1', h), trusted), null);
  t.equal(clientCertThumbprint(req('127.0.0.2', h), CidrSet.parse('')), null, 'no trusted proxies: nobody');
  for (const v of [SHA.slice(1), `${SHA}, ${SHA}`, `sha256=${SHA}`, ` ${SHA}`])
    t.equal(clientCertThumbprint(req('127.0.0.2', { 'x-client-cert-sha256': v }), trusted), null, `"${v}"`);
  t.same(
    presentedCertificate(req('127.0.0.2', { 'x-client-cert-subject': 'CN=a' }), trusted),
    null,
    'a subject without a thumbprint is nothing',
  );
  t.same(
    presentedCertificate(req('127.0.0.2', { 'x-client-cert-sha256': SHA }), trusted),
    { sha256: SHA, subjectDn: null },
    'a thumbprint without a subject (a certificate the front door did not verify)',
  );
});
