/**
 * The state of one verification run: the contract, tokens per scope set, what earlier checks
 * created (an endpoint id...), and the results. `probe` sends one request and records one check.
 */
import { SluiceBaseError } from '../../core/errors.ts';
import type { Json, Operation, ResponseSpec } from '../contract.ts';
import type { ContractSchemas } from '../schemas.ts';
import { send, type Exchange, type ExchangeRequest } from './http.ts';
import { responseFaults } from './response-check.ts';
import type { CheckResult, Outcome } from './report.ts';

export interface VerifyOptions {
  baseUrl: string;
  clientId: string;
  clientSecret: string;
  /** Where a registered endpoint points; it should answer 200 (default: an https URL that will stay PENDING). */
  webhookUrl?: string;
  /** The server's body limit; the oversize check sends one byte more. */
  maxBodyBytes?: number;
  /** Report documented operations that answer 404 (no route) as "not implemented" without failing. */
  allowUnimplemented?: boolean;
  /** A client of the same tenant the verifier may revoke, to check revocation end to end. */
  revocable?: { clientId: string; clientSecret: string };
  /** Called after each operation with its results (progress output). */
  onOperation?: (results: CheckResult[]) => void;
}

export class TokenError extends SluiceBaseError<'TOKEN_REFUSED'> {
  constructor(
    readonly status: number,
    body: string,
  ) {
    super('TOKEN_REFUSED', `the token endpoint refused the verifier's credentials: ${status} ${body.slice(0, 200)}`);
  }
}

export interface Expectation {
  /** Statuses that pass this check. */
  status: number[];
  /** The documented responses to validate against (default: the operation's). */
  documented?: Record<string, ResponseSpec>;
  /** Extra assertions; each string returned is a fault. */
  then?: (ex: Exchange) => string[] | Promise<string[]>;
  /** A 502 UPSTREAM_UNAVAILABLE means "no upstream configured": skip rather than fail. */
  upstreamMayBeAbsent?: boolean;
}

export class Session {
  readonly results: CheckResult[] = [];
  /** Filled in by scenarios for later ones (endpoint id, ...). */
  readonly state: Record<string, string | undefined> = {};
  private readonly tokens = new Map<string, string>();
  grantedScopes: string[] = [];

  constructor(
    readonly doc: Json,
    readonly schemas: ContractSchemas,
    readonly opts: VerifyOptions,
  ) {}

  get maxBodyBytes(): number {
    return this.opts.maxBodyBytes ?? 1024 * 1024;
  }

  /** A token for the verifier's client, narrowed to `scope` when given (RFC 6749 `scope` parameter). */
  async token(
    scope?: string,
    creds = { clientId: this.opts.clientId, clientSecret: this.opts.clientSecret },
  ): Promise<string> {
    const key = `${creds.clientId} ${scope ?? ''}`;
    const cached = this.tokens.get(key);
    if (cached) return cached;
    const ex = await send(this.opts.baseUrl, {
      method: 'POST',
      path: '/v1/auth/token',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        grant_type: 'client_credentials',
        client_id: creds.clientId,
        client_secret: creds.clientSecret,
        ...(scope ? { scope } : {}),
      }),
    });
    if (ex.status !== 200 || !ex.isJson) throw new TokenError(ex.status, ex.text);
    const body = ex.json as { access_token: string; scope: string };
    if (!scope && creds.clientId === this.opts.clientId) this.grantedScopes = body.scope.split(' ').filter(Boolean);
    this.tokens.set(key, body.access_token);
    return body.access_token;
  }

  record(
    op: Pick<Operation, 'operationId' | 'method' | 'path'>,
    check: string,
    outcome: Outcome,
    detail = '',
    status?: number,
    ms = 0,
  ): void {
    this.results.push({
      operationId: op.operationId,
      method: op.method,
      path: op.path,
      check,
      outcome,
      detail,
      status,
      ms,
    });
  }

  /** Sends one request, validates the response against the contract and the expectation, records the check. */
  async probe(op: Operation, check: string, req: ExchangeRequest, expect: Expectation): Promise<Exchange | null> {
    const started = Date.now();
    let ex: Exchange;
    try {
      ex = await send(this.opts.baseUrl, req);
    } catch (err) {
      this.record(op, check, 'fail', `request failed: ${(err as Error).message}`, undefined, Date.now() - started);
      return null;
    }
    const ms = Date.now() - started;
    if (
      expect.upstreamMayBeAbsent &&
      ex.status === 502 &&
      (ex.json as Json | undefined)?.code === 'UPSTREAM_UNAVAILABLE'
    ) {
      this.record(op, check, 'skip', 'no upstream is configured for this data-plane family', ex.status, ms);
      return ex;
    }
    const faults = responseFaults(this.schemas, expect.documented ?? op.responses, ex);
    if (!expect.status.includes(ex.status)) {
      const code = (ex.json as Json | undefined)?.code ?? (ex.json as Json | undefined)?.error;
      faults.unshift(`expected ${expect.status.join(' or ')}, got ${ex.status}${code ? ` ${code}` : ''}`);
    } else if (expect.then) {
      faults.push(...(await expect.then(ex)));
    }
    this.record(op, check, faults.length ? 'fail' : 'pass', faults.join('; '), ex.status, ms);
    return ex;
  }
}

/** The operation's path with its parameters filled from the session's state. */
export function concretePath(op: Operation, s: Session, overrides: Record<string, string> = {}): string {
  return op.path.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const v = overrides[name] ?? DEFAULT_PARAMS(s)[name] ?? 'contract-probe';
    return name === 'path' ? v : encodeURIComponent(v);
  });
}

function DEFAULT_PARAMS(s: Session): Record<string, string> {
  return {
    endpoint_id: s.state.endpointId ?? 'ep_contract_probe_missing',
    client_id: s.opts.clientId,
    dlq_id: 'dlq_contract_probe_missing',
    job_id: s.state.recoveryJobId ?? 'rcv_contract_probe_missing',
    path: 'contract-probe',
  };
}
