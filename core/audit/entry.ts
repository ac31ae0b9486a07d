/**
 * One entry of the compliance log and its hash: SHA-256 over the canonical JSON of every field but
 * `hash` (prev_hash included), so a changed, removed or reordered entry breaks the chain.
 *
 * Each tenant has a chain of its own: `seq` counts that tenant's entries (1, 2, 3, ... with no
 * gaps), and `prev_hash` is the hash of the tenant's previous entry (GENESIS_HASH for its first),
 * so a tenant proves its chain from its own entries alone (`checkTenantChain`) and learns nothing
 * of how busy the other tenants are. Logs written before the chains were per tenant hold one
 * global chain (`seq` counting every entry); `checkAppended` accepts that prefix, and a tenant's
 * chain goes on from its last entry there.
 *
 *   const e = sealEntry({ id, seq: 1, at, tenant_id, actor, action, subject, reason: null }, GENESIS_HASH);
 *   checkLink(previous, e) // null when e follows previous (the tenant's previous entry)
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

/** What an entry links to: its `seq` and `hash`. */
export type ChainLink = Pick<AuditEntry, 'seq' | 'hash'>;

/** Why `e` does not follow `prev` (null: the link holds). `prev` null means e must be the first. */
export function checkLink(prev: ChainLink | null, e: AuditEntry): string | null {
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

/** Where a log stands when the next record is read (see `checkAppended`). */
export interface ChainTails {
  /** The previous entry of the record's tenant (null: its first). */
  tenant: ChainLink | null;
  /** The previous entry of the whole log (null: the log is empty). */
  global: ChainLink | null;
  /** An entry linked only per tenant was read: the global chain of older logs has ended. */
  perTenant: boolean;
}

/**
 * Why the record `e` does not follow the log (null: it does), and whether it is the first linked
 * only per tenant. An entry must follow its tenant's previous entry; until the first entry that
 * does so and does not also follow the log's previous entry, following the log's previous entry
 * (the global chain of logs written before per-tenant chains) is accepted instead.
 */
export function checkAppended(tails: ChainTails, e: AuditEntry): { problem: string | null; opensPerTenant: boolean } {
  const tenantProblem = checkLink(tails.tenant, e);
  if (tails.perTenant) return { problem: tenantProblem, opensPerTenant: false };
  const globalProblem = checkLink(tails.global, e);
  if (tenantProblem === null) return { problem: null, opensPerTenant: globalProblem !== null };
  return { problem: globalProblem === null ? null : tenantProblem, opensPerTenant: false };
}

/**
 * Why a tenant's entries, all of them in log order as `GET /v1/audit` lists them, are not one
 * unbroken chain from its first entry (null: they are). What a tenant runs on its own pages.
 */
export function checkTenantChain(entries: readonly AuditEntry[]): { index: number; problem: string } | null {
  let prev: AuditEntry | null = null;
  for (const [index, e] of entries.entries()) {
    const problem = checkLink(prev, e);
    if (problem) return { index, problem };
    prev = e;
  }
  return null;
}
