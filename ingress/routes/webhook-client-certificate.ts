/**
 * `GET /v1/webhooks/client-certificate` (public, like the JWKS): the client certificate Sluice
 * presents to receivers (SLUICE_DELIVERY_CLIENT_CERT) with its chain, its SHA-256 thumbprint, its
 * subject, issuer and validity, so a tenant can pin it. 404 NOT_FOUND when none is configured.
 * The answer is made once: the certificate is read at start-up and never changes in a process.
 */
import { createHash } from 'node:crypto';
import type { DeliveryClientCertificate } from '../../core/config/readers.ts';
import { SluiceError } from '../../core/errors.ts';
import { json, type Reply, type Route } from '../types.ts';

/** The route's JSON body (DeliveryClientCertificate in contracts/openapi.yaml). */
export function describeClientCertificate(cert: DeliveryClientCertificate) {
  const leaf = cert.chain[0];
  return {
    pem: cert.chainPem,
    sha256: createHash('sha256').update(leaf.raw).digest('hex'),
    subject: leaf.subject,
    issuer: leaf.issuer,
    not_before: new Date(leaf.validFrom).toISOString(),
    not_after: new Date(leaf.validTo).toISOString(),
  };
}

export function webhookClientCertificateRoutes(cert: DeliveryClientCertificate | null): Route[] {
  const reply: Reply | null = cert && json(200, describeClientCertificate(cert), { 'cache-control': 'max-age=300' });
  const handler = (): Reply => {
    if (reply) return reply;
    throw new SluiceError(
      'NOT_FOUND',
      'Sluice presents no client certificate to receivers (SLUICE_DELIVERY_CLIENT_CERT is not set)',
    );
  };
  return [{ method: 'GET', pattern: '/v1/webhooks/client-certificate', scope: null, body: 'none', handler }];
}
