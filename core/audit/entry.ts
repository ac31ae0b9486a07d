/**
 * One entry of the compliance log and its hash: SHA-256 over the canonical JSON of every field but
 * `hash` (prev_hash included), so a changed, removed or reordered entry breaks the chain.
 *
 *   const e = sealEntry({ id, seq: 1, at, tenant_id, actor, action, subject, reason: null }, GENESIS_HASH);
 *   checkLink(previous, e) // null when e follows previous
 */
import { createHash } from 'node:crypto';

export interface AuditEntry {
  id: string;
  seq: number;
  /** ISO 8601. */
  at: string;
  tenant_id: string;
  actor: string;
  action: string;
  subject: string;
  reason: string | null;
  prev_hash: string;
  hash: string;
}

export type UnsealedEntry = Omit<AuditEntry, 'prev_hash' | 'hash'>;

export const GENESIS_HASH = '0'.repeat(64);
/** Tenant of entries that concern no tenant (signing keys). Tenant ids cannot start with "_". */
export const SYSTEM_TENANT = '_system';

const FIELDS = ['id', 'seq', 'at', 'tenant_id', 'actor', 'action', 'subject', 'reason', 'prev_hash'] as const;

export function canonical(e: Omit<AuditEntry, 'hash'>): string {
  // A fixed field order, not JSON.stringify of the object: key order must never change a hash.
  return JSON.stringify(FIELDS.map((f) => [f, e[f] ?? null]));
}

export function entryHash(e: Omit<AuditEntry, 'hash'>): string {
  return createHash('sha256').update(canonical(e)).digest('hex');
}

export function sealEntry(e: UnsealedEntry, prevHash: string): AuditEntry {
  const withPrev = { ...e, prev_hash: prevHash };
  return { ...withPrev, hash: entryHash(withPrev) };
}

/** Why `e` does not follow `prev` (null: the link holds). `prev` null means e must be the first. */
export function checkLink(prev: AuditEntry | null, e: AuditEntry): string | null {
  if (typeof e !== 'object' || e === null) return 'not an entry object';
  for (const f of ['id', 'at', 'tenant_id', 'actor', 'action', 'subject', 'prev_hash', 'hash'] as const) {
    if (typeof e[f] !== 'string') return `field ${f} missing or not a string`;
  }
  if (!Number.isInteger(e.seq)) return 'field seq missing or not an integer';
  const expectedSeq = prev ? prev.seq + 1 : 1;
  if (e.seq !== expectedSeq) return `seq is ${e.seq}, expected ${expectedSeq}`;
  const expectedPrev = prev ? prev.hash : GENESIS_HASH;
  if (e.prev_hash !== expectedPrev)
    return (
      `prev_hash ${e.prev_hash.slice(0, 16)}… does not match ` +
      `the previous entry's hash ${expectedPrev.slice(0, 16)}…`
    );
  const { hash, ...rest } = e;
  if (entryHash(rest) !== hash) return 'hash does not match the entry content';
  return null;
}

export function parseEntry(value: Buffer | null): AuditEntry | null {
  if (value === null) return null;
  try {
    return JSON.parse(value.toString('utf8')) as AuditEntry;
  } catch {
    return null;
  }
}
