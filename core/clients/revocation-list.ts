/** Revoked clients, materialized from the compacted `sluice.revocations` topic (a tombstone re-enables). */
import type { StateRecord, StateView } from '../kafka/state-consumer.ts';
import { parseJson } from '../kafka/state-consumer.ts';
import { HEARTBEAT_PREFIX } from '../kafka/heartbeat.ts';
import { type Clock, systemClock } from '../clock.ts';

export interface RevocationRecord {
  revocation_id: string;
  client_id: string;
  tenant_id: string;
  reason: string;
  actor: string;
  revoked_at: number;
  audit_entry_id: string;
}

/**
 * How long after `revoked_at` a token of the revoked client is still refused. Every node mints
 * tokens for the client until it reads the revocation record (tens of milliseconds later, or up to
 * SLUICE_KAFKA_STALE_MS, 10 s, before a node out of touch fails closed), and a token minted in
 * that gap carries an `iat` after `revoked_at`: without this reach it would verify everywhere for
 * its whole lifetime. No legitimate token of a revoked client is minted after the record is read,
 * and a re-enable removes the record (and this refusal) altogether.
 */
export const REVOCATION_REACH_MS = 60_000;

export class RevocationList implements StateView {
  private readonly revoked = new Map<string, RevocationRecord>();
  /** Revocations pushed by a peer (core/clients/revocation-push.ts) whose Kafka record has not arrived yet. */
  private readonly pushed = new Map<string, { revokedAt: number; until: number }>();
  /** Called on every change, so token caches can drop what a revocation touched. */
  onChange: ((clientId: string) => void) | null = null;
  /** Heartbeat records (core/kafka/heartbeat.ts) share the topic: they go here, never into the list. */
  onHeartbeat: ((key: string, value: Buffer | null) => void) | null = null;
  constructor(
    readonly topic: string,
    private readonly clock: Clock = systemClock,
  ) {}

  apply(r: StateRecord): void {
    if (r.key.startsWith(HEARTBEAT_PREFIX)) {
      this.onHeartbeat?.(r.key, r.value);
      return;
    }
    const rec = parseJson<RevocationRecord>(r.value);
    this.pushed.delete(r.key);
    if (rec === null) this.revoked.delete(r.key);
    else this.revoked.set(r.key, rec);
    this.onChange?.(r.key);
  }

  get(clientId: string): RevocationRecord | undefined {
    return this.revoked.get(clientId);
  }

  /** Holds a peer's pushed revocation until its Kafka record arrives or `until` (epoch ms). */
  provisional(clientId: string, revokedAt: number, until: number): void {
    if (this.revoked.has(clientId)) return;
    this.pushed.set(clientId, { revokedAt, until });
    this.onChange?.(clientId);
  }

  /**
   * A token issued (iat, in seconds) to a revoked client before the revocation, or up to
   * REVOCATION_REACH_MS after it, is refused. A peer's push revokes only what was issued before it.
   */
  refuses(clientId: string, issuedAtSeconds: number): boolean {
    const rec = this.revoked.get(clientId);
    if (rec !== undefined) return issuedAtSeconds * 1000 <= rec.revoked_at + REVOCATION_REACH_MS;
    const pushed = this.pushed.get(clientId);
    if (pushed === undefined) return false;
    if (this.clock.now() > pushed.until) {
      this.pushed.delete(clientId);
      return false;
    }
    return issuedAtSeconds * 1000 <= pushed.revokedAt + 999;
  }
}
