/**
 * The checks of one incoming webhook delivery against the contract and Sluice's signing rules: the signature
 * (HMAC-SHA256 over the raw body, `sha256=<hex>`, compared in constant time), the timestamp
 * window (300 s) and its agreement with the body, the X-Service-* headers and the body schema.
 *
 *   const v = checkDelivery(rawBody, headers, secret, { schemas, now: Date.now() }); // [] when conformant
 */
import { timingSafeEqual } from 'node:crypto';
import { webhookHmac } from '../../receiver-sdk/schemes/sluice.ts';
import type { Json } from '../contract.ts';
import type { ContractSchemas } from '../schemas.ts';

export interface CheckOptions {
  schemas: ContractSchemas;
  doc: Json;
  now: number; // ms
  toleranceSeconds?: number;
}

const KIND_SCHEMA = (doc: Json, type: string): string | null => {
  const item = doc.webhooks?.[type];
  if (!item) return null;
  const ref: string = item.$ref;
  const post = ref ? doc.components.pathItems[ref.split('/').pop()!].post : item.post;
  return post.requestBody.content['application/json'].schema.$ref;
};

export function signatureMatches(secret: string, rawBody: Buffer, header: string): boolean {
  const m = /^sha256=([0-9a-f]{64})$/.exec(header);
  if (!m) return false;
  const expected = webhookHmac(secret, rawBody);
  return timingSafeEqual(expected, Buffer.from(m[1], 'hex'));
}

export function checkDelivery(
  rawBody: Buffer,
  headers: Record<string, string | undefined>,
  secret: string,
  opts: CheckOptions,
): string[] {
  const v: string[] = [];
  const h = (name: string) => headers[name.toLowerCase()];
  const sig = h('X-Service-Signature-256');
  const ts = h('X-Service-Timestamp');
  const eventId = h('X-Service-Event-Id');
  const eventType = h('X-Service-Event-Type');
  const attempt = h('X-Service-Delivery-Attempt');
  if (!sig) v.push('X-Service-Signature-256 is missing');
  else if (!/^sha256=[0-9a-f]{64}$/.test(sig)) v.push(`X-Service-Signature-256 is not sha256=<64 hex>: "${sig}"`);
  else if (!signatureMatches(secret, rawBody, sig)) v.push('signature does not match HMAC-SHA256(secret, raw body)');
  const tolerance = opts.toleranceSeconds ?? 300;
  if (!ts) v.push('X-Service-Timestamp is missing');
  else if (!/^\d{1,12}$/.test(ts)) v.push(`X-Service-Timestamp is not unix seconds: "${ts}"`);
  else {
    const age = opts.now / 1000 - Number(ts);
    if (Math.abs(age) > tolerance)
      v.push(`timestamp is ${Math.round(age)} s away from now, outside the ${tolerance} s window`);
  }
  if (!eventId) v.push('X-Service-Event-Id is missing');
  if (!eventType) v.push('X-Service-Event-Type is missing');
  if (!attempt) v.push('X-Service-Delivery-Attempt is missing');
  else if (!/^([1-9]|1[0-7])$/.test(attempt)) v.push(`X-Service-Delivery-Attempt is not 1..17: "${attempt}"`);
  const contentType = (h('content-type') ?? '').split(';')[0].trim().toLowerCase();
  if (contentType !== 'application/json') v.push(`Content-Type is "${contentType}", not application/json`);
  let body: Json;
  try {
    body = JSON.parse(rawBody.toString('utf8'));
  } catch {
    v.push('body is not JSON');
    return v;
  }
  const kindSchema = typeof body?.type === 'string' ? KIND_SCHEMA(opts.doc, body.type) : null;
  for (const e of opts.schemas.errors(kindSchema ?? '#/components/schemas/WebhookBody', body)) v.push(`body ${e}`);
  if (body && typeof body === 'object') {
    if (ts && String(body.timestamp) !== ts)
      v.push(`body.timestamp ${body.timestamp} differs from X-Service-Timestamp ${ts}`);
    if (eventId && body.id !== eventId) v.push(`body.id ${body.id} differs from X-Service-Event-Id ${eventId}`);
    if (eventType && body.type !== eventType)
      v.push(`body.type ${body.type} differs from X-Service-Event-Type ${eventType}`);
    if (typeof body.type === 'string' && !kindSchema)
      v.push(`event kind "${body.type}" is not in the contract's webhooks`);
  }
  return v;
}
