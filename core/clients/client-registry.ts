/** Service principals, materialized from the compacted `sluice.clients` topic. */
import type { StateRecord, StateView } from '../kafka/state-consumer.ts';
import { parseJson } from '../kafka/state-consumer.ts';
import { constantTimeEqual, hashSecret, newSecret, newId } from '../secrets.ts';
import type { CertificateAuth, CertificateAuthMethod } from './certificate-auth.ts';

export interface StoredSecret {
  /** Keyed hash of the secret; the secret itself is never stored. */
  hash: string;
  created_at: number;
  /** null: valid until replaced; otherwise the end of its grace window. */
  expires_at: number | null;
}

/**
 * A client record. One that authenticates with its TLS certificate (RFC 8705 §2) has the fields of
 * `CertificateAuth` (core/clients/certificate-auth.ts), no secrets and no `rotate_at`; a record
 * without them (every record written before they existed) authenticates with a client secret.
 */
export interface ClientRecord extends CertificateAuth {
  client_id: string;
  tenant_id: string;
  role: string;
  scopes: string[];
  region: string;
  secrets: StoredSecret[];
  status: 'active' | 'revoked';
  created_at: number;
  updated_at: number;
  /** When the current secret is due to be rotated. */
  rotate_at: number | null;
  /** Newest secret sealed for its owner to fetch once rotated by the service. */
  pending_secret_sealed?: string | null;
}

export class ClientRegistry implements StateView {
  private readonly clients = new Map<string, ClientRecord>();
  constructor(
    readonly topic: string,
    private readonly masterKey: Buffer,
  ) {}

  apply(r: StateRecord): void {
    const rec = parseJson<ClientRecord>(r.value);
    if (rec === null) this.clients.delete(r.key);
    else this.clients.set(rec.client_id, rec);
  }

  get(clientId: string): ClientRecord | undefined {
    return this.clients.get(clientId);
  }

  all(): ClientRecord[] {
    return [...this.clients.values()];
  }

  get size(): number {
    return this.clients.size;
  }

  /** The client when the secret matches one of its live secrets; every candidate is compared. */
  authenticate(clientId: string, secret: string, now: number): ClientRecord | null {
    return this.authenticateSecret(clientId, secret, now)?.client ?? null;
  }

  /**
   * The client and which of its secrets the presented one is (its `created_at`, carried in the
   * token so that a secret's successor is never handed to a token of the secret it replaced).
   */
  authenticateSecret(
    clientId: string,
    secret: string,
    now: number,
  ): { client: ClientRecord; secretCreatedAt: number } | null {
    const rec = this.clients.get(clientId);
    const presented = hashSecret(this.masterKey, secret);
    let matched: StoredSecret | null = null;
    for (const s of rec?.secrets ?? []) {
      const live = s.expires_at === null || now < s.expires_at;
      if (constantTimeEqual(s.hash, presented) && live) matched = s;
    }
    if (!rec || !matched || rec.status !== 'active') return null;
    return { client: rec, secretCreatedAt: matched.created_at };
  }
}

/** The client's current secret: the newest one without an end (null: none is current). */
export function currentSecret(rec: ClientRecord): StoredSecret | null {
  let current: StoredSecret | null = null;
  for (const s of rec.secrets)
    if (s.expires_at === null && (current === null || s.created_at > current.created_at)) current = s;
  return current;
}

/** A `created_at` for a client's next secret: later than every secret it has, so each names one secret. */
export function nextSecretCreatedAt(rec: ClientRecord, now: number): number {
  return Math.max(now, ...rec.secrets.map((s) => s.created_at + 1));
}

export interface NewClient {
  record: ClientRecord;
  secret: string;
}

export function newClient(
  masterKey: Buffer,
  fields: { tenant_id: string; role: string; scopes: string[]; region: string },
  now: number,
  rotationMs: number,
): NewClient {
  const secret = newSecret('sk');
  const record: ClientRecord = {
    client_id: newId('cl'),
    tenant_id: fields.tenant_id,
    role: fields.role,
    scopes: [...fields.scopes],
    region: fields.region,
    secrets: [{ hash: hashSecret(masterKey, secret), created_at: now, expires_at: null }],
    status: 'active',
    created_at: now,
    updated_at: now,
    rotate_at: now + rotationMs,
  };
  return { record, secret };
}

/** A client that authenticates with its TLS certificate: no secret, nothing to rotate. */
export function newCertificateClient(
  fields: { tenant_id: string; role: string; scopes: string[]; region: string },
  auth: CertificateAuth & { token_endpoint_auth_method: CertificateAuthMethod },
  now: number,
): ClientRecord {
  return {
    client_id: newId('cl'),
    tenant_id: fields.tenant_id,
    role: fields.role,
    scopes: [...fields.scopes],
    region: fields.region,
    secrets: [],
    status: 'active',
    created_at: now,
    updated_at: now,
    rotate_at: null,
    ...auth,
  };
}

/** Whether the client authenticates with its TLS certificate (tls_client_auth, self_signed_tls_client_auth). */
export function usesCertificate(rec: ClientRecord): boolean {
  return rec.token_endpoint_auth_method !== undefined;
}

export const TENANT_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;
