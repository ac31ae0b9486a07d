/**
 * Signing cost per delivery (issue 35): nanoseconds per `signDelivery` of a 1 KB body with
 * `signing` hmac, ed25519 and both, and ed25519 during a rotation's overlap (two keys). The body
 * is made once per (event, second) and shared, so what is timed is the signing and the headers.
 * Prints one line per mode: the median of 7 runs of N signatures each.
 *
 *   node bin/run-ts.js bench/signing.ts [N]
 */
import { cpus } from 'node:os';
import type { EventRecord } from '../core/webhooks/records.ts';
import { newEndpointSecret, signDelivery, type SigningSecrets } from '../outbound/signing.ts';
import { newSigningKeyPair } from '../core/webhooks/signing-keys.ts';

const n = Number(process.argv[2] ?? 20_000);
const event: EventRecord = {
  id: 'evt_bench',
  type: 'order.created',
  tenant_id: 'acme',
  // About 1 KB as the delivered body.
  data: { note: 'x'.repeat(880), total: 120 },
  created_at: Date.now(),
};
const secret = newEndpointSecret();
const [key, previous] = [newSigningKeyPair().privateKey, newSigningKeyPair().privateKey];
const modes: Record<string, SigningSecrets> = {
  hmac: { current: secret, signing: 'hmac' },
  ed25519: { current: secret, signing: 'ed25519', keys: [key] },
  both: { current: secret, signing: 'both', keys: [key] },
  'ed25519, rotation overlap': { current: secret, signing: 'ed25519', keys: [key, previous] },
};

const now = Date.now();
const bytes = signDelivery(modes.hmac, event, 1, now).rawBody.length;
function run(secrets: SigningSecrets): number {
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) signDelivery(secrets, event, 1, now);
  return Number(process.hrtime.bigint() - start) / n;
}
console.log(
  `${n} signatures of a ${bytes}-byte body per run, median of 7; node ${process.version}, ${cpus()[0].model}`,
);
// Rounds interleave the modes, so a burst of load on a shared machine falls on every mode alike.
const times: Record<string, number[]> = {};
for (const secrets of Object.values(modes)) run(secrets); // warm-up
for (let round = 0; round < 7; round++)
  for (const [name, secrets] of Object.entries(modes)) {
    times[name] ??= [];
    times[name].push(run(secrets));
  }
for (const [name, runs] of Object.entries(times)) {
  const median = runs.sort((a, b) => a - b)[3];
  console.log(`${name.padEnd(26)} ${Math.round(median).toLocaleString('en').padStart(8)} ns per delivery`);
}
