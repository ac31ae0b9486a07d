/** Revoked clients, materialized from the compacted `sluice.revocations` topic (a tombstone re-enables). */
import type { StateRecord, StateView } from '../kafka/state-consumer.ts';
import { parseJson } from '../kafka/state-consumer.ts';

export interface RevocationRecord {
  revocation_id: string;
  client_id: string;
  tenant_id: string;
  reason: string;
  actor: string;
  revoked_at: number;
  audit_entry_id: string;
}

export class RevocationList implements StateView {
  private readonly revoked = new Map<string, RevocationRecord>();
  /** Called on every change, so token caches can drop what a revocation touched. */
  onChange: ((clientId: string) => void) | null = null;
  constructor(readonly topic: string) {}

  apply(r: StateRecord): void {
    const rec = parseJson<RevocationRecord>(r.value);
    if (rec === null) this.revoked.delete(r.key);
    else this.revoked.set(r.key, rec);
    this.onChange?.(r.key);
  }

  get(clientId: string): RevocationRecord | undefined {
    return this.revoked.get(clientId);
  }

  /** A token issued (iat, in seconds) to a revoked client before the revocation is refused. */
  refuses(clientId: string, issuedAtSeconds: number): boolean {
    const rec = this.revoked.get(clientId);
    return rec !== undefined && issuedAtSeconds * 1000 <= rec.revoked_at + 999;
  }
}
